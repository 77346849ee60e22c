"""``objects-seq``: an offline STAND-IN with OpenLORIS-Object's STRUCTURE (instances recorded as videos).

OpenLORIS-Object (She et al., ICRA 2020) films 69 object INSTANCES of 19 categories; each instance is
recorded as a short video (17 s at 30 fps, the camera gently moving around the object) under each of
12 conditions (4 factors x 3 levels), so consecutive frames are near-duplicates and the test frames
come from the same recordings as the training frames. ``objects-seq`` rebuilds that structure from the
Tiny-ImageNet objects subset (``<data_dir>/tiny-imagenet/objects/train/<folder>/``, 64x64 JPEGs):

- each OpenLORIS category is mapped to one Tiny-ImageNet folder (:data:`CATEGORIES`) and gets as many
  instances as OpenLORIS has (:data:`OPENLORIS_INSTANCES`: 69 in all, 1 to 9 per category); an instance
  is one source image, drawn per ``data_seed``;
- each instance is RECORDED once per task: a smooth camera path (crop position, zoom, in-plane
  rotation, exposure drift; sums of low-frequency sinusoids seeded by ``(data_seed, instance, task)``,
  :func:`trajectory`) rendered frame by frame (:class:`Recording`), under the task's factor and level
  (``bimu.data.nuisance.TASK_FACTORS``): occluders and clutter are placed once in the scene, so they
  move smoothly with the camera; illumination and object pixel size are fixed per recording;
- every recording of ``frames_per_recording`` frames (100) is cut into contiguous segments: the first
  80% train, the next 10% validation, the last 10% test (:func:`segments`);
- imbalance follows the paper's rule: a class is low-frequency when a task holds fewer than 700
  training frames of it, the threshold scaled by this stand-in's frames per recording against
  OpenLORIS's (:func:`rare_threshold`); low-frequency classes lose 50-80% of their training frames; the
  test (and validation) sets are balanced by subsampling every class to the smallest one;
- ``toy`` (Tiny-ImageNet ``teddy``, as in ``objects-ti``) is held out: its recordings' test segments
  form the OOD set.

docs/objects-seq.md gives every parameter with its source. This module plans and renders frames;
:func:`bimu.data.feature_benchmarks.objects_seq` extracts, caches and assembles them.

>>> sum(OPENLORIS_INSTANCES.values()), len(OPENLORIS_INSTANCES), OPENLORIS_INSTANCES["cup"]
(69, 19, 9)
>>> [len(s) for s in segments(100)]
[80, 10, 10]
>>> rare_threshold(80) > 80 and rare_threshold(80) < 160  # one instance's frames are rare, two are not
True
"""

from __future__ import annotations

import hashlib

import numpy as np

from bimu.data.imbalance import balanced_indices, low_frequency_classes, removal_fractions, subsample_classes
from bimu.data.nuisance import TASK_FACTORS, apply_nuisance, illumination, nuisance_rng, occlusion
from bimu.data import tinyimagenet
from bimu.data.tinyimagenet import OBJECTS_TI_OOD_CLASS, _files, subset_dir

OPENLORIS_INSTANCES = {
    "bottle": 4, "bowl": 5, "corkscrew": 1, "cottonswab": 2, "cup": 9, "cushion": 3, "glasses": 4,
    "knife": 1, "ladle": 4, "mask": 5, "paper_cutter": 4, "pencil": 5, "plasticbag": 3, "plug": 4,
    "pot": 1, "scissors": 3, "stapler": 3, "thermometer": 3, "toy": 5,
}
"""Instances per category of OpenLORIS-Object's 69-instance, 19-category release: the first 69
entries of the instance list (``bottle_01`` ... ``toy_05``) in the official repository's ``data.py``
(lifelong-robotic-vision/OpenLORIS-Object), which the dataset page describes as 69 instances of 19
categories."""

OOD_CATEGORY = "toy"
"""Held out as out-of-distribution, as in the paper (``toy``)."""

CATEGORIES = {
    "bottle": "beer_bottle", "bowl": "plate", "corkscrew": "pop_bottle", "cottonswab": "pill_bottle",
    "cup": "teapot", "cushion": "lampshade", "glasses": "sunglasses", "knife": "wok",
    "ladle": "wooden_spoon", "mask": "bucket", "paper_cutter": "computer_keyboard", "pencil": "candle",
    "plasticbag": "backpack", "plug": "remote_control", "pot": "frying_pan", "scissors": "ipod",
    "stapler": "water_jug", "thermometer": "stopwatch", OOD_CATEGORY: OBJECTS_TI_OOD_CLASS,
}
"""OpenLORIS category -> the Tiny-ImageNet objects folder standing in for it (nearest analogue where
one exists, e.g. glasses -> sunglasses, ladle -> wooden_spoon; arbitrary otherwise)."""

N_TASKS = len(TASK_FACTORS)
FRAMES_PER_RECORDING = 100
"""Frames rendered per instance and task: 80 training frames, against OpenLORIS's
:data:`OPENLORIS_TRAIN_FRAMES` (fewer for extraction time; docs/objects-seq.md)."""
SEGMENT_FRACTIONS = (0.8, 0.1, 0.1)
"""Train / validation / test share of each recording (OpenLORIS's sequential benchmark: 14,400
training and 1,800 test images per task, i.e. 8:1)."""
OPENLORIS_TRAIN_FRAMES = 534
"""OpenLORIS training frames per instance and task: 442,194 / (12 tasks x 69 instances)."""
OPENLORIS_RARE_THRESHOLD = 700
"""The paper: a class with fewer than 700 training examples (per task, in its code) is low-frequency."""

TRAJECTORY = {"dx": (0.0, 0.10), "dy": (0.0, 0.10), "zoom": (0.80, 0.12), "angle": (0.0, 15.0),
              "exposure": (1.0, 0.10)}
"""Camera parameter -> (centre, bound): crop-centre offsets (fraction of the side), crop side
(fraction of the side), in-plane rotation (degrees), exposure gain."""
N_SINES = 3
FREQUENCIES = (0.3, 1.5)
"""Each camera parameter is the mean of :data:`N_SINES` sinusoids of random phase and frequency in
this range (cycles per recording): a few slow sweeps per recording, none faster."""

OCCLUSION_FRACTIONS = (0.0, 0.25, 0.50)
"""OpenLORIS occlusion levels 1-3: 0%, 25%, 50% of the object."""
PIXEL_SIZE_FRACTIONS = {1: None, 2: (0.15, 1.0), 3: (0.075, 0.15)}
"""Object pixel size, levels 1-3, as a fraction of the source side (None: native). OpenLORIS: > 200,
30-200, < 30 pixels; the 64-px source stands for 200 px, so 30 px is 0.15 of it; level 3 spans one
octave below that. Drawn log-uniformly per recording."""


def segments(n_frames: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Frame indices of the train, validation and test segments of a recording (contiguous, in order)."""
    n_train = int(round(SEGMENT_FRACTIONS[0] * n_frames))
    n_val = int(round(SEGMENT_FRACTIONS[1] * n_frames))
    if n_train < 1 or n_val < 1 or n_frames - n_train - n_val < 1:
        raise ValueError(f"frames_per_recording={n_frames} leaves an empty segment; use at least 10")
    idx = np.arange(int(n_frames))
    return idx[:n_train], idx[n_train : n_train + n_val], idx[n_train + n_val :]


def rare_threshold(train_frames_per_recording: int) -> float:
    """The paper's 700-frame threshold scaled by this stand-in's training frames per recording."""
    return OPENLORIS_RARE_THRESHOLD * train_frames_per_recording / OPENLORIS_TRAIN_FRAMES


def trajectory(seed: int, instance: int, task: int, n_frames: int) -> dict[str, np.ndarray]:
    """The camera path of one recording: parameter -> values at each frame (see :data:`TRAJECTORY`).

    >>> a = trajectory(0, 3, 1, 100)
    >>> sorted(a), a["zoom"].shape
    (['angle', 'dx', 'dy', 'exposure', 'zoom'], (100,))
    >>> bool(np.abs(np.diff(a["angle"])).max() < 1.0), bool(np.abs(a["angle"]).max() <= 15.0)
    (True, True)
    >>> bool(np.array_equal(a["dx"], trajectory(0, 3, 1, 100)["dx"]))
    True
    """
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 0x7A3C, int(instance), int(task)]))
    u = np.arange(int(n_frames))[:, None] / float(n_frames)
    path = {}
    for name, (centre, bound) in TRAJECTORY.items():
        freq = rng.uniform(*FREQUENCIES, size=N_SINES)
        phase = rng.uniform(0.0, 2 * np.pi, size=N_SINES)
        path[name] = centre + bound * np.sin(2 * np.pi * freq * u + phase).mean(axis=1)
    return path


def camera(scene: np.ndarray, dx: float, dy: float, zoom: float, angle: float) -> np.ndarray:
    """One camera view of ``scene``: a rotated square window (side ``zoom`` x the scene's, centre offset
    by ``(dx, dy)`` x the side) resampled to the scene's size; the scene is mirrored beyond its border."""
    from PIL import Image

    h, w = scene.shape[:2]
    pad = max(h, w) // 4
    big = Image.fromarray(np.pad(scene, ((pad, pad), (pad, pad), (0, 0)), mode="reflect"))
    th = np.deg2rad(angle)
    a, b, d, e = zoom * np.cos(th), -zoom * np.sin(th), zoom * np.sin(th), zoom * np.cos(th)
    cx, cy = pad + (w - 1) / 2 + dx * w, pad + (h - 1) / 2 + dy * h
    ox, oy = (w - 1) / 2, (h - 1) / 2
    coeffs = (a, b, cx - a * ox - b * oy, d, e, cy - d * ox - e * oy)
    return np.asarray(big.transform((w, h), Image.AFFINE, coeffs, resample=Image.BILINEAR), dtype=np.uint8)


def object_pixel_size(frame: np.ndarray, side: int) -> np.ndarray:
    """The frame as if the object spanned only ``side`` pixels: area-averaged down, bilinear back up."""
    from PIL import Image

    h, w = frame.shape[:2]
    if side >= max(h, w):
        return frame
    small = Image.fromarray(frame).resize((max(1, side), max(1, side)), Image.BOX)
    return np.asarray(small.resize((w, h), Image.BILINEAR), dtype=np.uint8)


class Recording:
    """Transform for :class:`~bimu.data.features.FeatureCache` rendering frames of one recording.

    ``Recording(instance, task, seed, frames, n_frames, pool)(image, i)`` renders frame ``frames[i]``
    of instance ``instance``'s recording under task ``task`` from its source ``image``. Everything
    drawn at random is seeded by ``(seed, instance, task)``, so a frame never depends on which other
    frames are rendered. ``key`` names it in cache keys (``pool_key`` identifies the clutter pool).

    >>> img = np.random.default_rng(0).integers(0, 256, (16, 16, 3), dtype=np.uint8)
    >>> rec = Recording(0, 10, seed=0, frames=[0, 1, 50], n_frames=100)  # clutter, level 2
    >>> f = [rec(img, i) for i in range(3)]
    >>> f[0].shape, f[0].dtype
    ((16, 16, 3), dtype('uint8'))
    >>> bool(np.abs(f[0].astype(int) - f[1]).mean() < np.abs(f[0].astype(int) - f[2]).mean())
    True
    """

    VERSION = "objects-seq-v1"

    def __init__(self, instance: int, task: int, seed: int, frames, n_frames: int, pool=None,
                 pool_key: str = ""):
        if not 0 <= int(task) < N_TASKS:
            raise ValueError(f"task must be in [0, {N_TASKS - 1}], got {task}")
        self.instance, self.task, self.seed, self.n_frames = int(instance), int(task), int(seed), int(n_frames)
        self.frames = np.asarray(frames, dtype=np.int64)
        if self.frames.size and not (0 <= self.frames.min() and self.frames.max() < self.n_frames):
            raise ValueError(f"frame indices must be in [0, {self.n_frames - 1}]")
        self.factor, self.level = TASK_FACTORS[self.task]
        self.path = trajectory(self.seed, self.instance, self.task, self.n_frames)
        self.pool, self.pool_key = pool, pool_key

    def _rng(self, stream: int) -> np.random.Generator:
        return nuisance_rng(self.seed, self.task, self.instance, stream)

    @property
    def key(self) -> str:
        """Cache key of this transform (the source image's bytes are keyed by the cache itself)."""
        frames = hashlib.sha256(self.frames.tobytes()).hexdigest()[:16]
        return (f"{self.VERSION}/seed{self.seed}/inst{self.instance}/task{self.task}/R{self.n_frames}/"
                f"frames{frames}/{self.pool_key}")

    def scene(self, image: np.ndarray) -> np.ndarray:
        """The scene filmed: occluders or clutter placed once per recording (static in the world)."""
        if self.factor == "occlusion":
            return occlusion(image, self.level, self._rng(1), fraction=OCCLUSION_FRACTIONS[self.level - 1])
        if self.factor == "clutter":
            return apply_nuisance(image, "clutter", self.level, self._rng(1), self.pool)
        return image

    def __call__(self, image: np.ndarray, index: int) -> np.ndarray:
        """Render frame ``frames[index]`` of the recording from the source ``image``."""
        t = int(self.frames[index])
        p = {k: float(v[t]) for k, v in self.path.items()}
        frame = camera(self.scene(image), p["dx"], p["dy"], p["zoom"], p["angle"])
        sizes = PIXEL_SIZE_FRACTIONS[self.level] if self.factor == "pixel" else None
        if sizes is not None:
            lo, hi = sizes
            fraction = float(np.exp(self._rng(3).uniform(np.log(lo), np.log(hi))))
            frame = object_pixel_size(frame, int(round(fraction * max(image.shape[:2]))))
        frame = np.clip(frame.astype(np.float32) * p["exposure"] + 0.5, 0, 255).astype(np.uint8)
        if self.factor == "illumination":  # one light per recording: the same draw for every frame
            frame = illumination(frame, self.level, self._rng(2))
        return frame


def objects_seq_plan(data_dir=None, data_seed: int = 0, frames_per_recording: int = FRAMES_PER_RECORDING,
                     imbalanced: bool = True, categories: dict | None = None, clutter_pool: int = 48) -> dict:
    """Which frames of which recordings go where.

    ``categories`` maps a category name to ``(folder, n_instances)`` (default: :data:`CATEGORIES` with
    :data:`OPENLORIS_INSTANCES`); it must hold :data:`OOD_CATEGORY`. Returns ``{"classes": [ID
    category names, sorted], "instances": [{"category", "label" (-1 for OOD), "path"}],
    "train"/"validation"/"test"/"ood": [[(instance, frame indices)] per task], "rare": set,
    "remove_fraction": {class: f}, "threshold": float, "pool": ([Path], [label])}``.
    """
    cats = categories if categories is not None else {c: (CATEGORIES[c], k) for c, k in OPENLORIS_INSTANCES.items()}
    if OOD_CATEGORY not in cats:
        raise ValueError(f"categories must include the OOD category {OOD_CATEGORY!r}")
    root = subset_dir(data_dir, "objects")
    classes = sorted(c for c in cats if c != OOD_CATEGORY)
    instances, spare = [], []
    for c, name in enumerate(classes + [OOD_CATEGORY]):
        folder, k = cats[name]
        files = _files(root, "train", folder, int(k) + 1)
        order = np.random.default_rng(np.random.SeedSequence([int(data_seed), 0x1257, c])).permutation(len(files))
        label = -1 if name == OOD_CATEGORY else c
        instances += [{"category": name, "label": label, "path": files[i]} for i in sorted(order[: int(k)])]
        if label >= 0:
            spare.append([files[i] for i in sorted(order[int(k):])])
    train_idx, val_idx, test_idx = segments(frames_per_recording)
    ids = [i for i, inst in enumerate(instances) if inst["label"] >= 0]
    labels = np.array([instances[i]["label"] for i in ids])
    y = np.repeat(labels, len(train_idx))  # one task's training labels, before the imbalance
    threshold = rare_threshold(len(train_idx))
    rare = low_frequency_classes(y, threshold, len(classes)) if imbalanced else set()
    fractions = removal_fractions(rare, seed=data_seed)
    plan = {"classes": classes, "instances": instances, "rare": rare, "remove_fraction": fractions,
            "threshold": threshold, "train": [], "validation": [], "test": [], "ood": []}
    for t in range(N_TASKS):
        keep = np.zeros(len(y), dtype=bool)
        keep[subsample_classes(y, fractions, seed=int(data_seed) * N_TASKS + t)] = True
        keep = keep.reshape(len(ids), len(train_idx))
        plan["train"].append([(i, train_idx[keep[j]]) for j, i in enumerate(ids)])
        for key, seg, salt in (("validation", val_idx, 0xBA1), ("test", test_idx, 0x7E5)):
            y_seg = np.repeat(labels, len(seg))
            chosen = np.zeros(len(y_seg), dtype=bool)
            chosen[balanced_indices(y_seg, seed=(int(data_seed) * N_TASKS + t) * 4096 + salt)] = True
            chosen = chosen.reshape(len(ids), len(seg))
            plan[key].append([(i, seg[chosen[j]]) for j, i in enumerate(ids)])
        plan["ood"].append([(i, test_idx) for i, inst in enumerate(instances) if inst["label"] < 0])
    # clutter: crops of a fixed pool of ID images that are no instance (objects-ti's pool, one chunk per class)
    plan["pool"] = tinyimagenet.clutter_pool({"classes": classes, "train_chunks": [[f] for f in spare]},
                                             clutter_pool, data_seed)
    return plan

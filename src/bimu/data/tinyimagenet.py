"""Offline STAND-INS for the paper's image benchmarks, built from Tiny-ImageNet subsets.

Neither Kaggle "Animals" nor OpenLORIS-Object is available offline, so two stand-ins are built from
``<data_dir>/tiny-imagenet/{animals,objects}`` (64x64 JPEG, ``train/<class>/`` 500 and
``val/<class>/`` 50 images per class):

- ``animals-ti`` (stand-in for Animals): 20 animal classes, each subsampled to the paper's class
  count (appendix table) scaled by ``500 / 1997`` so the largest class keeps all 500 images; the
  low-frequency threshold (200 in the paper) is scaled likewise (to 50); the 50 validation images
  per class form the balanced test set. Each paper class is mapped to the nearest Tiny-ImageNet class
  where one exists (see :data:`ANIMALS_TI_CLASSES`).
- ``objects-ti`` (stand-in for OpenLORIS-Object): 19 object classes, ``teddy`` held out as OOD (like
  OpenLORIS's ``toy``), 18 in-distribution classes. 12 tasks = 4 synthetic nuisance factors x 3
  strengths (:mod:`bimu.data.nuisance`). To extract every image once, each class's 500 training images
  are split into 12 disjoint chunks of 41-42 images, chunk ``t`` seen under task ``t``'s nuisance;
  every task's test set is 25 of the 50 validation images per class (a draw per task) under that
  task's nuisance (balanced); the OOD set is 20 ``teddy`` training images per task under its nuisance. Imbalance
  follows the paper's imbalanced OpenLORIS protocol: half of the classes (every other class in
  sorted order) are low-frequency and lose 50-80% (drawn per class) of their training images.

These functions only plan WHICH files go where; :mod:`bimu.data.feature_benchmarks` extracts and
caches the features and builds the benchmark objects.

>>> round(200 * ANIMALS_TI_SCALE), sum(c < ANIMALS_TI_RARE_THRESHOLD for c in animals_ti_counts().values())
(50, 10)
>>> max(animals_ti_counts().values()), min(animals_ti_counts().values())
(500, 16)
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from bimu.data.features import list_images

ANIMALS_PAPER_COUNTS = {
    "butterfly": 1997, "lizard": 1412, "fish": 1404, "monkey": 1043, "spider": 1015, "eagle": 849,
    "frog": 617, "jellyfish": 501, "penguin": 390, "whale": 291, "zebra": 164, "crocodile": 136,
    "leopard": 132, "sheep": 125, "raccoon": 106, "raven": 91, "panda": 62, "lynx": 66, "bull": 72,
    "scorpion": 76,
}
"""Training-image counts of the paper's 20 Animals classes (appendix, class table)."""

ANIMALS_PAPER_RARE_THRESHOLD = 200
"""Paper: classes with fewer than 200 training images are low-frequency."""

ANIMALS_TI_CLASSES = {
    "butterfly": "monarch", "lizard": "european_fire_salamander", "fish": "goldfish",
    "monkey": "guinea_pig", "spider": "tarantula", "eagle": "snail", "frog": "bullfrog",
    "jellyfish": "jellyfish", "penguin": "king_penguin", "whale": "boa_constrictor",
    "zebra": "african_elephant", "crocodile": "american_alligator", "leopard": "cougar",
    "sheep": "labrador_retriever", "raccoon": "koala", "raven": "ladybug", "panda": "brown_bear",
    "lynx": "tabby", "bull": "bison", "scorpion": "lion",
}
"""Paper class -> Tiny-ImageNet folder standing in for it (nearest analogue; arbitrary where none)."""

ANIMALS_TI_SCALE = 500 / 1997
"""Scale mapping the paper's counts onto at most 500 images per class."""

ANIMALS_TI_RARE_THRESHOLD = round(ANIMALS_PAPER_RARE_THRESHOLD * ANIMALS_TI_SCALE)
"""Low-frequency threshold of ``animals-ti`` (50 = 200 x 500/1997)."""

OBJECTS_TI_OOD_CLASS = "teddy"
"""Held-out class of ``objects-ti`` (the OpenLORIS ``toy`` analogue)."""

OBJECTS_TI_N_TASKS = 12


def data_root(data_dir: str | os.PathLike | None = None) -> Path:
    """The data directory: ``data_dir`` or ``$BIMU_DATA_DIR``; clear error when neither is set."""
    if data_dir is None:
        data_dir = os.environ.get("BIMU_DATA_DIR")
        if not data_dir:
            raise ValueError("no data directory: pass data_dir or set BIMU_DATA_DIR "
                             "(the folder holding tiny-imagenet/, mnist/, ...)")
    root = Path(data_dir).expanduser()
    if not root.is_dir():
        raise FileNotFoundError(f"data directory not found: {root}")
    return root


def subset_dir(data_dir, subset: str) -> Path:
    """``<data_dir>/tiny-imagenet/<subset>`` with its ``train`` and ``val`` folders checked."""
    root = data_root(data_dir) / "tiny-imagenet" / subset
    for split in ("train", "val"):
        if not (root / split).is_dir():
            raise FileNotFoundError(f"Tiny-ImageNet subset folder not found: {root / split}")
    return root


def animals_ti_counts(max_per_class: int = 500) -> dict[str, int]:
    """Paper class -> number of training images kept in ``animals-ti`` (largest class: ``max_per_class``)."""
    scale = max_per_class / max(ANIMALS_PAPER_COUNTS.values())
    return {k: min(max_per_class, max(1, round(v * scale))) for k, v in ANIMALS_PAPER_COUNTS.items()}


def animals_ti_rare_threshold(max_per_class: int = 500) -> int:
    """The paper's low-frequency threshold (200) scaled like the counts (50 for 500 per class)."""
    return round(ANIMALS_PAPER_RARE_THRESHOLD * max_per_class / max(ANIMALS_PAPER_COUNTS.values()))


def _files(root: Path, split: str, folder: str, need: int) -> list[Path]:
    files = list_images(root / split / folder)
    if len(files) < need:
        raise ValueError(f"{root / split / folder} holds {len(files)} images, need at least {need}")
    return files


def animals_ti_plan(data_dir=None, data_seed: int = 0, max_per_class: int = 500) -> dict:
    """Files of ``animals-ti``: per paper class, all 500 train files, the kept subset and 50 test files.

    Returns ``{"classes": [paper names], "folders": [...], "train_all": [[Path]*500], "keep": [index
    arrays into train_all], "test": [[Path]*50], "rare": set of class indices}``.
    """
    root = subset_dir(data_dir, "animals")
    counts = animals_ti_counts(max_per_class)
    threshold = animals_ti_rare_threshold(max_per_class)
    classes = list(ANIMALS_PAPER_COUNTS)
    plan = {"classes": classes, "folders": [], "train_all": [], "keep": [], "test": [], "rare": set()}
    for c, name in enumerate(classes):
        folder = ANIMALS_TI_CLASSES[name]
        train = _files(root, "train", folder, counts[name])
        rng = np.random.default_rng(np.random.SeedSequence([int(data_seed), 0xA11, c]))
        keep = np.sort(rng.permutation(len(train))[: counts[name]])
        plan["folders"].append(folder)
        plan["train_all"].append(train)
        plan["keep"].append(keep)
        plan["test"].append(_files(root, "val", folder, 1))
        if counts[name] < threshold:
            plan["rare"].add(c)
    return plan


def objects_ti_plan(data_dir=None, data_seed: int = 0, n_tasks: int = OBJECTS_TI_N_TASKS,
                    test_per_task: int = 25, ood_per_task: int = 20, imbalanced: bool = True) -> dict:
    """Files of ``objects-ti``.

    Returns ``{"classes": [18 names], "train_chunks": [[ [Path] per task ] per class] (after the
    imbalance removal), "test": [[ [Path] per task ] per class], "ood_chunks": [[Path] per task],
    "rare": set, "remove_fraction": {class: f}}``. Each task's test set holds ``test_per_task`` of the
    50 validation images per class (a seeded draw per task and class) under that task's nuisance;
    the OOD set holds ``ood_per_task`` ``teddy`` images per task under that task's nuisance.
    """
    root = subset_dir(data_dir, "objects")
    all_classes = sorted(p.name for p in (root / "train").iterdir() if p.is_dir())
    if OBJECTS_TI_OOD_CLASS not in all_classes:
        raise FileNotFoundError(f"OOD class folder {OBJECTS_TI_OOD_CLASS!r} missing under {root / 'train'}")
    classes = [c for c in all_classes if c != OBJECTS_TI_OOD_CLASS]

    def rng_of(*salt):
        return np.random.default_rng(np.random.SeedSequence([int(data_seed), 0x0B7, *salt]))

    def chunks(files, salt):
        order = rng_of(salt).permutation(len(files))
        return [[files[i] for i in sorted(part)] for part in np.array_split(order, n_tasks)]

    plan = {"classes": classes, "train_chunks": [], "test": [], "rare": set(), "remove_fraction": {}}
    frac_rng = np.random.default_rng(np.random.SeedSequence([int(data_seed), 0x1B, 0]))
    if imbalanced:
        for c in range(1, len(classes), 2):
            plan["rare"].add(c)
            plan["remove_fraction"][c] = float(frac_rng.uniform(0.5, 0.8))
    for c, name in enumerate(classes):
        train_chunks = chunks(_files(root, "train", name, n_tasks), c)
        if c in plan["remove_fraction"]:
            f = plan["remove_fraction"][c]
            for t, chunk in enumerate(train_chunks):
                n_keep = len(chunk) - int(round(f * len(chunk)))
                keep = np.sort(rng_of(c, t, 0x5B5).permutation(len(chunk))[:n_keep])
                train_chunks[t] = [chunk[i] for i in keep]
        plan["train_chunks"].append(train_chunks)
        val = _files(root, "val", name, 1)
        k = min(int(test_per_task), len(val))
        plan["test"].append([[val[i] for i in np.sort(rng_of(c, t, 0x7E5).permutation(len(val))[:k])]
                             for t in range(n_tasks)])
    ood = chunks(_files(root, "train", OBJECTS_TI_OOD_CLASS, n_tasks), 999)
    plan["ood_chunks"] = [chunk[: int(ood_per_task)] for chunk in ood]
    return plan


def clutter_pool(plan: dict, size: int = 48, data_seed: int = 0) -> tuple[list[Path], list[int]]:
    """A fixed pool of ID training images (and their labels) whose crops serve as clutter."""
    rng = np.random.default_rng(np.random.SeedSequence([int(data_seed), 0xC17]))
    files, labels = [], []
    n_classes = len(plan["classes"])
    for k in range(size):
        c = k % n_classes
        task_chunk = plan["train_chunks"][c][int(rng.integers(len(plan["train_chunks"][c])))]
        files.append(task_chunk[int(rng.integers(len(task_chunk)))])
        labels.append(c)
    return files, labels

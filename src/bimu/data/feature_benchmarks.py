"""Image-feature benchmarks (frozen backbone features + online linear head) for active learning.

``BENCHMARKS`` maps a name to a factory ``f(data_dir=None, **options) -> ArrayBenchmark``:

- ``animals-ti`` - STAND-IN for the paper's imbalanced Animals (Tiny-ImageNet, one task);
- ``objects-ti`` - STAND-IN for imbalanced OpenLORIS-Object (Tiny-ImageNet + synthetic nuisances,
  12 tasks, ``teddy`` as OOD);
- ``objects-seq`` - STAND-IN with OpenLORIS-Object's structure: 69 object instances, each recorded as
  smooth frame sequences per task, train/test frames from the same recordings (:mod:`bimu.data.objects_seq`);
- ``openloris`` - the real OpenLORIS-Object, sequential-factors protocol (:mod:`bimu.data.openloris`);
- ``animals`` - the real Kaggle Animals folder, the paper's 20 classes (:mod:`bimu.data.animals`).

Common options: ``n_features`` (random subset of the backbone features, ONE subset for train, test
and OOD; None keeps all), ``feature_seed``, ``data_seed`` (which images are kept / removed, fixed
across run seeds), ``backbone`` (a name or a :class:`~bimu.data.features.Backbone`), ``resolution``,
``cache_dir``, ``split`` (``"test"``, or ``"validation"``: 20% of each task's training data held out
as the evaluation set, for tuning without touching the test set).

Benchmark objects follow docs/contracts.md: ``name, n_features, n_classes, n_tasks, is_standin,
train_task(task, seed), test_task(task), ood_set()``, plus ``rare_classes``/``frequent_classes`` and
``class_names``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from bimu.data.features import Backbone, FeatureCache, feature_subset, load_image, make_backbone
from bimu.data.imbalance import subsample_classes


class ArrayBenchmark:
    """A benchmark held in memory as per-task feature arrays.

    Args:
        name: benchmark name.
        train: per task ``(X float32 [n, D], y int64 [n])`` in a canonical order.
        test: per task ``(X, y)`` (the evaluation set of that task).
        ood: OOD inputs preprocessed like the ID data, or None.
        rare_classes: low-frequency classes (empty for balanced benchmarks).
        class_names: one name per class.
        is_standin: True for offline stand-ins of the paper's datasets.
        description: one line shown in reports.

    >>> X = np.eye(4, dtype=np.float32); y = np.array([0, 1, 0, 1])
    >>> b = ArrayBenchmark("toy", [(X, y)], [(X, y)], rare_classes={1}, class_names=["a", "b"])
    >>> b.n_tasks, b.n_features, b.n_classes, sorted(b.frequent_classes)
    (1, 4, 2, [0])
    >>> xs, ys = b.train_task(0, seed=3)
    >>> xs.dtype, ys.dtype, sorted(ys.tolist()) == [0, 0, 1, 1]
    (torch.float32, torch.int64, True)
    """

    def __init__(self, name: str, train: Sequence, test: Sequence, ood: np.ndarray | None = None,
                 rare_classes=(), class_names: Sequence[str] | None = None, is_standin: bool = False,
                 description: str = ""):
        if len(train) != len(test) or not train:
            raise ValueError(f"need as many test as train tasks (>= 1), got {len(train)} and {len(test)}")
        self.name = name
        self._train = [(np.ascontiguousarray(X, dtype=np.float32), np.asarray(y, dtype=np.int64)) for X, y in train]
        self._test = [(np.ascontiguousarray(X, dtype=np.float32), np.asarray(y, dtype=np.int64)) for X, y in test]
        self._ood = None if ood is None else np.ascontiguousarray(ood, dtype=np.float32)
        self.n_tasks = len(self._train)
        self.n_features = int(self._train[0][0].shape[1])
        labels = np.concatenate([y for _, y in self._train] + [y for _, y in self._test])
        self.n_classes = len(class_names) if class_names is not None else int(labels.max()) + 1
        self.class_names = list(class_names) if class_names is not None else [str(c) for c in range(self.n_classes)]
        self.rare_classes = frozenset(int(c) for c in rare_classes)
        self.frequent_classes = frozenset(range(self.n_classes)) - self.rare_classes
        self.is_standin = bool(is_standin)
        self.description = description

    def _check_task(self, task: int) -> int:
        if not 0 <= int(task) < self.n_tasks:
            raise ValueError(f"task must be in [0, {self.n_tasks - 1}], got {task}")
        return int(task)

    def train_task(self, task: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Training data of ``task`` in presentation order (shuffled per ``(seed, task)``)."""
        X, y = self._train[self._check_task(task)]
        order = np.random.default_rng(np.random.SeedSequence([int(seed), int(task), 0x5A])).permutation(len(y))
        return torch.from_numpy(X[order]), torch.from_numpy(y[order])

    def test_task(self, task: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Evaluation data of ``task``."""
        X, y = self._test[self._check_task(task)]
        return torch.from_numpy(X), torch.from_numpy(y)

    def ood_set(self) -> torch.Tensor | None:
        """OOD inputs (same feature subset and preprocessing as ID data), or None."""
        return None if self._ood is None else torch.from_numpy(self._ood)

    def train_counts(self) -> np.ndarray:
        """Training examples per class over the whole stream."""
        y = np.concatenate([y for _, y in self._train])
        return np.bincount(y, minlength=self.n_classes)

    def __repr__(self) -> str:
        tag = " (stand-in)" if self.is_standin else ""
        return (f"ArrayBenchmark({self.name!r}{tag}, tasks={self.n_tasks}, features={self.n_features}, "
                f"classes={self.n_classes}, rare={sorted(self.rare_classes)})")


def validation_split(train: Sequence, fraction: float = 0.2, seed: int = 0):
    """Split each task's training data into (train, validation) parts, stratified by class."""
    new_train, val = [], []
    for t, (X, y) in enumerate(train):
        rng = np.random.default_rng(np.random.SeedSequence([int(seed), t, 0x7A1]))
        held = np.zeros(len(y), dtype=bool)
        for c in np.unique(y):
            idx = rng.permutation(np.flatnonzero(y == c))
            n_hold = int(round(fraction * idx.size))
            if n_hold == 0 and idx.size >= 2:
                n_hold = 1  # every class with two or more examples appears in the validation set
            held[idx[:n_hold]] = True
        new_train.append((X[~held], y[~held]))
        val.append((X[held], y[held]))
    return new_train, val


DEFAULT_RESOLUTION = 96
"""Backbone input size: EfficientNet-Lite0 at 96 px gives 1280 x 3 x 3 = 11,520 features (about 13 ms
per image on one core, against 31 ms at 128 px; chosen so that extraction fits a shared 2-core machine)."""


class _Extractor:
    """Cached extraction of file lists with one backbone built lazily, then column subsetting."""

    def __init__(self, backbone, resolution, cache_dir, n_features, feature_seed):
        if isinstance(backbone, Backbone):
            self._net, self.key = backbone, backbone.key
        else:
            res = DEFAULT_RESOLUTION if resolution is None else int(resolution)
            self._net, self.key = None, f"{backbone}@{res}"
            self._name, self._res = backbone, res
        self.cache = FeatureCache(cache_dir)
        self.n_features, self.feature_seed = n_features, feature_seed
        self.index = None

    def _backbone(self) -> Backbone:
        if self._net is None:
            self._net = make_backbone(self._name, self._res)
        return self._net

    def __call__(self, paths, transform=None, transform_key="") -> np.ndarray:
        feats = self.cache.features(paths, self._backbone, backbone_key=self.key, transform=transform,
                                    transform_key=transform_key)
        if self.index is None:
            self.index = feature_subset(feats.shape[1], self.n_features, self.feature_seed)
        if self.index.size == feats.shape[1]:  # every feature, in order
            return feats
        return np.take(feats, self.index, axis=1)  # row-major, as the streams read it (feats[:, index] is not)


def _finish(name, train, test, ood, rare, classes, standin, description, split, data_seed, validation=None):
    if split == "validation" and validation is not None:
        test = validation  # the benchmark's own validation set (train unchanged)
    elif split == "validation":
        train, test = validation_split(train, seed=data_seed)
    elif split != "test":
        raise ValueError(f"split must be 'test' or 'validation', got {split!r}")
    return ArrayBenchmark(name + ("" if split == "test" else "[validation]"), train, test, ood, rare, classes,
                          standin, description)


def animals_ti(data_dir=None, n_features: int | None = 8192, feature_seed: int = 0, data_seed: int = 0,
               backbone="efficientnet-lite0", resolution: int | None = None, cache_dir=None,
               split: str = "test", max_per_class: int = 500) -> ArrayBenchmark:
    """STAND-IN for imbalanced Animals: see :mod:`bimu.data.tinyimagenet`. One task, 20 classes."""
    from bimu.data.tinyimagenet import animals_ti_plan

    plan = animals_ti_plan(data_dir, data_seed, max_per_class)
    ex = _Extractor(backbone, resolution, cache_dir, n_features, feature_seed)
    Xs, ys, Xt, yt = [], [], [], []
    for c in range(len(plan["classes"])):
        kept = [plan["train_all"][c][i] for i in plan["keep"][c]]  # extract only the kept images
        Xs.append(ex(kept))
        ys.append(np.full(len(kept), c))
        ft = ex(plan["test"][c])
        Xt.append(ft)
        yt.append(np.full(len(ft), c))
    train = [(np.concatenate(Xs), np.concatenate(ys))]
    test = [(np.concatenate(Xt), np.concatenate(yt))]
    return _finish("animals-ti", train, test, None, plan["rare"], plan["classes"], True,
                   "STAND-IN for Animals: Tiny-ImageNet animals at the paper's class counts x 500/1997",
                   split, data_seed)


def objects_ti(data_dir=None, n_features: int | None = 8192, feature_seed: int = 0, data_seed: int = 0,
               backbone="efficientnet-lite0", resolution: int | None = None, cache_dir=None,
               split: str = "test", imbalanced: bool = True, test_per_task: int = 25,
               ood_per_task: int = 20) -> ArrayBenchmark:
    """STAND-IN for imbalanced OpenLORIS-Object: see :mod:`bimu.data.tinyimagenet`. 12 tasks, 18 classes."""
    from bimu.data.nuisance import TaskNuisance
    from bimu.data.tinyimagenet import OBJECTS_TI_N_TASKS, clutter_pool, objects_ti_plan

    plan = objects_ti_plan(data_dir, data_seed, test_per_task=test_per_task, ood_per_task=ood_per_task,
                           imbalanced=imbalanced)
    pool_files, pool_labels = clutter_pool(plan, data_seed=data_seed)
    pool_images = [load_image(p) for p in pool_files]
    ex = _Extractor(backbone, resolution, cache_dir, n_features, feature_seed)
    n_classes = len(plan["classes"])
    train, test = [], []
    for t in range(OBJECTS_TI_N_TASKS):
        Xs, ys, Xt, yt = [], [], [], []
        for c in range(n_classes):
            pool = [im for im, lab in zip(pool_images, pool_labels) if lab != c]
            tr = TaskNuisance(t, c, data_seed, pool, pool_key=f"pool{data_seed}")
            f = ex(plan["train_chunks"][c][t], tr, tr.key)
            Xs.append(f)
            ys.append(np.full(len(f), c))
            te = TaskNuisance(t, c, data_seed, pool, pool_key=f"pool{data_seed}", salt=1)
            f = ex(plan["test"][c][t], te, te.key)
            Xt.append(f)
            yt.append(np.full(len(f), c))
        train.append((np.concatenate(Xs), np.concatenate(ys)))
        test.append((np.concatenate(Xt), np.concatenate(yt)))
    ood = []
    for t in range(OBJECTS_TI_N_TASKS):
        tr = TaskNuisance(t, n_classes, data_seed, pool_images, pool_key=f"pool{data_seed}")
        ood.append(ex(plan["ood_chunks"][t], tr, tr.key))
    rare = plan["rare"] if imbalanced else set()
    return _finish("objects-ti", train, test, np.concatenate(ood), rare, plan["classes"], True,
                   "STAND-IN for OpenLORIS-Object: Tiny-ImageNet objects under 4 synthetic nuisance factors "
                   "x 3 levels, 'teddy' held out as OOD", split, data_seed)


def objects_seq(data_dir=None, n_features: int | None = 8192, feature_seed: int = 0, data_seed: int = 0,
                backbone="efficientnet-lite0", resolution: int | None = None, cache_dir=None,
                split: str = "test", imbalanced: bool = True, frames_per_recording: int = 100,
                categories: dict | None = None, tasks: int | None = None) -> ArrayBenchmark:
    """STAND-IN with OpenLORIS-Object's structure: see :mod:`bimu.data.objects_seq`. 12 tasks, 18 classes.

    ``split="validation"`` evaluates on the recordings' validation segments (training data unchanged).
    ``tasks`` keeps only the first ``tasks`` tasks (the same examples as in the whole benchmark; only
    their frames are rendered and extracted): a cheap look at the start of the stream.
    """
    from bimu.data.objects_seq import N_TASKS, objects_seq_plan

    if split not in ("test", "validation"):
        raise ValueError(f"split must be 'test' or 'validation', got {split!r}")
    n_tasks = N_TASKS if tasks is None else int(tasks)
    if not 1 <= n_tasks <= N_TASKS:
        raise ValueError(f"tasks must be in [1, {N_TASKS}], got {tasks}")
    plan = objects_seq_plan(data_dir, data_seed, frames_per_recording, imbalanced, categories)
    ex = _Extractor(backbone, resolution, cache_dir, n_features, feature_seed)
    features = recording_features(plan, ex, data_seed, frames_per_recording)

    def extract(t, items):
        items = [(i, frames) for i, frames in items if len(frames)]
        return (np.concatenate([features(t, i, frames) for i, frames in items]),
                np.concatenate([np.full(len(frames), plan["instances"][i]["label"]) for i, frames in items]))

    train = [extract(t, plan["train"][t]) for t in range(n_tasks)]
    evaluation = [extract(t, plan[split][t]) for t in range(n_tasks)]  # test or validation segments
    ood = np.concatenate([extract(t, plan["ood"][t])[0] for t in range(n_tasks)])
    return _finish("objects-seq", train, evaluation, ood, plan["rare"], plan["classes"], True,
                   "STAND-IN with OpenLORIS-Object's structure: 69 Tiny-ImageNet object instances recorded as "
                   "smooth frame sequences under 4 factors x 3 levels, 'toy' held out as OOD", split, data_seed,
                   validation=evaluation if split == "validation" else None)


def recording_features(plan: dict, ex: _Extractor, data_seed: int, frames_per_recording: int):
    """``features(task, instance, frames) -> X [len(frames), D]`` for an ``objects-seq`` plan: the
    frames of that instance's recording in that task, rendered and extracted once (feature cache)."""
    from bimu.data.features import files_digest
    from bimu.data.objects_seq import Recording

    pool_files, pool_labels = plan["pool"]
    pool_images = [load_image(p) for p in pool_files]
    pool_key = f"pool{files_digest(pool_files)[:16]}"

    def features(task, instance, frames):
        inst = plan["instances"][instance]
        pool = [im for im, lab in zip(pool_images, pool_labels) if lab != inst["label"]]  # clutter: other classes
        rec = Recording(instance, task, data_seed, frames, frames_per_recording, pool,
                        f"{pool_key}-not{inst['label']}")
        return ex([inst["path"]] * len(frames), rec, rec.key)

    return features


def openloris(data_dir=None, n_features: int | None = 8192, feature_seed: int = 0, data_seed: int = 0,
              backbone="efficientnet-lite0", resolution: int | None = None, cache_dir=None,
              split: str = "test", imbalanced: bool = False, rare_threshold: int = 700,
              test_split: str = "test") -> ArrayBenchmark:
    """The real OpenLORIS-Object (sequential factors, 12 tasks); see :mod:`bimu.data.openloris`."""
    from bimu.data.imbalance import balanced_indices, low_frequency_classes, removal_fractions
    from bimu.data.openloris import openloris_plan

    plan = openloris_plan(data_dir, test_split=test_split)
    ex = _Extractor(backbone, resolution, cache_dir, n_features, feature_seed)

    def load(items):
        if not items:
            return np.zeros((0, 0), np.float32), np.zeros(0, np.int64)
        paths, labels = zip(*items)
        return ex(list(paths)), np.asarray(labels, dtype=np.int64)

    train = [load(items) for items in plan["train"]]
    test = [load(items) for items in plan["test"]]
    rare: set[int] = set()
    if imbalanced:
        all_y = np.concatenate([y for _, y in train])
        rare = low_frequency_classes(all_y, rare_threshold, len(plan["classes"]))
        fractions = removal_fractions(rare, seed=data_seed)
        train = [(X[k], y[k]) for X, y in train for k in [subsample_classes(y, fractions, seed=data_seed)]]
        test = [(X[k], y[k]) for X, y in test for k in [balanced_indices(y, seed=data_seed)]]
    ood = None
    if plan["ood"]:
        ood = ex([p for p, _ in plan["ood"]])
    return _finish("openloris", train, test, ood, rare, plan["classes"], False,
                   "OpenLORIS-Object, sequential factors (4 factors x 3 levels)", split, data_seed)


def animals(data_dir=None, n_features: int | None = None, feature_seed: int = 0, data_seed: int = 0,
            backbone="efficientnet-lite0", resolution: int | None = None, cache_dir=None,
            split: str = "test", rare_threshold: int = 200, test_per_class: int = 50,
            classes=None) -> ArrayBenchmark:
    """The real Kaggle Animals folder, the paper's 20 classes (or ``classes``); see :mod:`bimu.data.animals`."""
    from bimu.data.animals import animals_plan

    plan = animals_plan(data_dir, test_per_class=test_per_class, seed=data_seed, classes=classes)
    ex = _Extractor(backbone, resolution, cache_dir, n_features, feature_seed)
    Xs, ys, Xt, yt = [], [], [], []
    for c in range(len(plan["classes"])):
        Xs.append(ex(plan["train"][c]))
        ys.append(np.full(len(plan["train"][c]), c))
        Xt.append(ex(plan["test"][c]))
        yt.append(np.full(len(plan["test"][c]), c))
    train = [(np.concatenate(Xs), np.concatenate(ys))]
    rare = {c for c in range(len(plan["classes"])) if len(plan["train"][c]) < rare_threshold}
    return _finish("animals", train, [(np.concatenate(Xt), np.concatenate(yt))], None, rare, plan["classes"],
                   False, "Kaggle Animals, the paper's 20 imbalanced classes", split, data_seed)


BENCHMARKS = {"animals-ti": animals_ti, "objects-ti": objects_ti, "objects-seq": objects_seq, "openloris": openloris,
              "animals": animals}
"""Benchmark name -> factory (registered with :func:`bimu.data.registry.register_benchmark` below)."""

STANDINS = {"animals-ti": "animals", "objects-ti": "openloris", "objects-seq": "openloris"}
"""Stand-in name -> the paper benchmark it stands in for."""

PRESET_KEYS = {"animals-ti": "animals", "animals": "animals", "objects-ti": "openloris-8192-imbalanced",
               "objects-seq": "openloris-8192-imbalanced", "openloris": "openloris-8192"}
"""Benchmark name -> the method preset key (docs/contracts.md) it uses by default."""


def get_feature_benchmark(name: str, data_dir=None, **options) -> ArrayBenchmark:
    """Build a benchmark of :data:`BENCHMARKS`; ValueError listing the names otherwise."""
    if name not in BENCHMARKS:
        raise ValueError(f"unknown benchmark {name!r}; available: {sorted(BENCHMARKS)}")
    return BENCHMARKS[name](data_dir=data_dir, **options)


MEMO_SIZE = 2
"""Feature benchmarks kept in memory per process by the registered factories (the runner builds a
benchmark several times per run: checks, then each seed; reading the feature cache dominates)."""


def memoized(factory):
    """``factory`` remembering its last :data:`MEMO_SIZE` results by arguments (arguments that are not
    plain JSON values, such as a Backbone object, bypass the memo). Benchmarks are read-only, so
    sharing one object is safe."""
    import functools
    import json
    from collections import OrderedDict

    memo: OrderedDict = OrderedDict()

    @functools.wraps(factory)
    def build(data_dir=None, **options):
        try:
            key = json.dumps([str(data_dir) if data_dir is not None else None, options], sort_keys=True)
        except (TypeError, ValueError):
            return factory(data_dir=data_dir, **options)
        if key in memo:
            memo.move_to_end(key)
            return memo[key]
        bench = factory(data_dir=data_dir, **options)
        memo[key] = bench
        while len(memo) > MEMO_SIZE:
            memo.popitem(last=False)
        return bench

    return build


def _register() -> None:
    from bimu.data.registry import register_benchmark

    descriptions = {
        "animals-ti": "STAND-IN for imbalanced Animals (Tiny-ImageNet animals, EfficientNet-Lite0 features)",
        "objects-ti": "STAND-IN for imbalanced OpenLORIS-Object (Tiny-ImageNet objects x 12 nuisance tasks)",
        "objects-seq": "STAND-IN for imbalanced OpenLORIS-Object with its structure (69 instances recorded as "
                       "frame sequences, 12 tasks)",
        "openloris": "OpenLORIS-Object, sequential factors protocol (real data; needs the dataset folder)",
        "animals": "Kaggle Animals, the paper's 20 imbalanced classes (real data; needs the dataset folder)",
    }
    for name, factory in BENCHMARKS.items():
        register_benchmark(name, memoized(factory), default_hidden=(), preset=PRESET_KEYS[name],
                           description=descriptions[name])


_register()

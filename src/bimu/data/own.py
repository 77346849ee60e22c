"""Your own data as a benchmark: arrays, or a ``.npz`` file of them (``bimu run FILE.npz``).

:func:`own_benchmark` checks the arrays and splits them into tasks; :func:`load_npz` reads a ``.npz``
file (``numpy.load(..., allow_pickle=False)``: a file can never run code) and does the same. Both return
an :class:`OwnBenchmark`, a benchmark like the registered ones (docs/contracts.md), so runs, resume,
metrics and reports work unchanged. The file is registered as the benchmark ``npz`` (option ``path``);
``bimu run FILE.npz`` is short for ``bimu run npz --option path=FILE.npz``.

The arrays:

- ``x_train`` (numbers, ``[n, d]``), ``y_train`` (integer class labels in ``0..C-1``, ``[n]``);
- ``x_test`` (``[m, d]``), ``y_test`` (``[m]``);
- optional ``task_train`` (``[n]``) and ``task_test`` (``[m]``): the task index of each row, tasks
  ``0..T-1``, each with training and test rows; absent: one task;
- optional ``x_ood`` (``[k, d]``): out-of-distribution inputs for the OOD ROC-AUC;
- optional ``n_classes`` (a scalar): C, when some classes have no example (default: the largest label + 1);
- optional ``x_val`` (``[v, d]``), ``y_val`` (``[v]``) and ``task_val`` (``[v]``, needed when the file has
  tasks): a validation split for tuning (``bimu tune``, ``bimu sweep-threshold --split validation``).

**Validation split** (:meth:`OwnBenchmark.tuning_split`, option ``validation=true`` of the ``npz``
benchmark). Tuning never evaluates on the test rows: the tuning variant of a stream trains on its
training rows and is evaluated on validation rows only. Those are the file's ``x_val``/``y_val`` when
it has them (every training row is then trained on); otherwise a fraction (``validation_fraction``,
default 0.2) of *each task's* training rows is held out: ``round(fraction * n_t)`` rows of task ``t``
(at least one, and at least one left to train on), drawn uniformly at random (not stratified) by
``validation_seed`` (default 0; the same rows for every run seed and trial). The held-out rows are
never trained on; the rest keep their file order.

The training stream is the file order: task 0's rows in the order they appear, then task 1's, and so on
(the same for every seed). Every problem is a ValueError of one line naming the array, before any training:

>>> import numpy as np
>>> x = np.zeros((4, 2), np.float32); y = np.array([0, 1, 0, 1])
>>> b = own_benchmark(x, y, x, y, task_train=[0, 0, 1, 1], task_test=[0, 1, 0, 1])
>>> b.n_tasks, b.n_features, b.n_classes, b.train_task(1, seed=0)[1].tolist()
(2, 2, 2, [0, 1])
>>> own_benchmark(x, y, x, np.array([0, 1, 2, -1]))
Traceback (most recent call last):
...
ValueError: y_test: labels must be in 0..C-1 (C = 3 classes), found -1 at row 3
>>> v = b.tuning_split(fraction=0.5)   # one of the two training rows of each task held out
>>> v.name, [len(v.train_task(t, 0)[1]) for t in (0, 1)], v.held_out
('own[validation]', [1, 1], [[0], [1]])
"""

from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path

import numpy as np
import torch

from bimu.data.feature_benchmarks import ArrayBenchmark
from bimu.untrusted import check_npz, open_regular

REQUIRED = ("x_train", "y_train", "x_test", "y_test")
"""Arrays every ``.npz`` for bimu holds."""
OPTIONAL = ("task_train", "task_test", "x_ood", "n_classes", "x_val", "y_val", "task_val")
"""Arrays it may hold."""
MAX_CLASSES = 100_000
"""Most classes a stream may have (labels and ``n_classes`` are checked against it before anything is sized
by them)."""
VALIDATION_FRACTION = 0.2
"""Share of each task's training rows held out as the validation split when the file has no ``x_val``."""


class OwnBenchmark(ArrayBenchmark):
    """Per-task arrays streamed in the order given (the same order for every seed); ``source`` is
    ``{"path", "sha256"}`` of the file it was read from (``None`` for arrays). ``validation`` holds the
    per-task validation ``(X, y)`` (the file's ``x_val``/``y_val``, or the held-out rows of
    :meth:`tuning_split`; ``None``: none), ``held_out`` the held-out row numbers of each task (within the
    task's training rows, in file order) in a tuning variant that held rows out (else ``None``)."""

    source: dict | None = None
    validation: list | None = None
    held_out: list | None = None

    def train_task(self, task: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Training data of ``task`` in the order given (``seed`` does not change it)."""
        X, y = self._train[self._check_task(task)]
        return torch.from_numpy(X), torch.from_numpy(y)

    def validation_task(self, task: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Validation data of ``task``; ValueError when the stream has none (see :meth:`tuning_split`)."""
        if self.validation is None:
            raise ValueError(f"{self.name}: no validation split; use its tuning variant (tuning_split(), or the "
                             "npz benchmark option validation=true)")
        X, y = self.validation[self._check_task(task)]
        return torch.from_numpy(X), torch.from_numpy(y)

    def tuning_split(self, fraction: float | None = None, seed: int = 0) -> OwnBenchmark:
        """The tuning variant: evaluated (``test_task`` and ``validation_task``) on validation rows only.

        Without ``fraction`` and with the file's own validation arrays, those are the validation rows and
        every training row is trained on. Otherwise ``fraction`` (default :data:`VALIDATION_FRACTION`) of
        each task's training rows is held out, drawn at random by ``seed`` (module docs), and trained on
        no more. ValueError for a fraction outside (0, 1), for a fraction beside the file's ``x_val``, and
        for a task with fewer than two training rows."""
        name = f"{self.name}[validation]"
        if self.validation is not None and fraction is None:
            val, train, held = self.validation, self._train, None
        else:
            if self.validation is not None:
                raise ValueError(f"{self.name}: holds its own validation arrays (x_val, y_val); give no "
                                 "validation_fraction")
            fraction = VALIDATION_FRACTION if fraction is None else float(fraction)
            if not 0 < fraction < 1:
                raise ValueError(f"validation_fraction must lie in (0, 1), got {fraction}")
            train, val, held = [], [], []
            for t, (X, y) in enumerate(self._train):
                if len(y) < 2:
                    raise ValueError(f"{self.name}: task {t} has {len(y)} training row: too few to hold rows "
                                     "out for validation (add x_val, y_val, task_val to the file)")
                n_hold = min(max(int(round(fraction * len(y))), 1), len(y) - 1)
                rng = np.random.default_rng(np.random.SeedSequence([int(seed), t, 0x7A1D]))
                mask = np.zeros(len(y), dtype=bool)
                mask[rng.permutation(len(y))[:n_hold]] = True
                train.append((X[~mask], y[~mask]))
                val.append((X[mask], y[mask]))
                held.append(np.flatnonzero(mask).tolist())
        bench = OwnBenchmark(name, train, val, ood=self._ood, class_names=self.class_names,
                             description=f"{self.description}, validation split")
        bench.source, bench.validation, bench.held_out = self.source, val, held
        return bench


def _fail(where: str, name: str, msg: str):
    raise ValueError(f"{where}{name}: {msg}")


def _features(where, name, a, d=None) -> np.ndarray:
    a = np.asarray(a)
    if a.dtype.kind not in "fiu":
        _fail(where, name, f"must hold numbers (a float array [rows, features]), got dtype {a.dtype}")
    if a.ndim != 2 or a.shape[0] == 0 or a.shape[1] == 0:
        _fail(where, name, f"must be a non-empty 2-D array [rows, features], got shape {tuple(a.shape)}")
    if d is not None and a.shape[1] != d:
        _fail(where, name, f"has {a.shape[1]} features per row, x_train has {d}")
    a = np.ascontiguousarray(a, dtype=np.float32)
    bad = ~np.isfinite(a)
    if bad.any():
        row = int(np.argwhere(bad)[0][0])
        _fail(where, name, f"holds {int(bad.sum())} NaN/inf values (first in row {row})")
    return a


def _ints(where, name, a, n, what) -> np.ndarray:
    a = np.asarray(a)
    if a.dtype.kind not in "iu":
        _fail(where, name, f"must hold integer {what}, got dtype {a.dtype}")
    if a.ndim != 1 or len(a) != n:
        _fail(where, name, f"must be a 1-D array of {n} {what} (one per row of x_{name.split('_')[1]}), "
                           f"got shape {tuple(a.shape)}")
    return a.astype(np.int64)


def _labels(y: np.ndarray) -> str:
    """The distinct labels of ``y``, the first ten and how many if there are more."""
    u = np.unique(y).tolist()
    return ", ".join(map(str, u)) if len(u) <= 10 else ", ".join(map(str, u[:10])) + f", ... ({len(u)} labels)"


def own_benchmark(x_train, y_train, x_test, y_test, *, task_train=None, task_test=None, x_ood=None,
                  n_classes: int | None = None, name: str = "own", where: str = "", x_val=None, y_val=None,
                  task_val=None) -> OwnBenchmark:
    """An :class:`OwnBenchmark` from arrays (numpy arrays, tensors or lists; see the module docs);
    ``where`` prefixes every error message (the file name)."""
    arrays = [x_train, y_train, x_test, y_test, task_train, task_test, x_ood, x_val, y_val, task_val]
    arrays = [a.detach().cpu().numpy() if isinstance(a, torch.Tensor) else a for a in arrays]
    x_train, y_train, x_test, y_test, task_train, task_test, x_ood, x_val, y_val, task_val = arrays
    xtr = _features(where, "x_train", x_train)
    d = xtr.shape[1]
    xte = _features(where, "x_test", x_test, d)
    ytr = _ints(where, "y_train", y_train, len(xtr), "class labels")
    yte = _ints(where, "y_test", y_test, len(xte), "class labels")
    for label_name, y in (("y_train", ytr), ("y_test", yte)):
        if y.max() >= MAX_CLASSES:
            row = int(np.argmax(y))
            _fail(where, label_name, f"label {int(y[row])} at row {row} is beyond the limit of {MAX_CLASSES:,} classes")
    top = int(max(ytr.max(), yte.max()))
    if n_classes is None:
        n_classes = top + 1
    else:
        n = np.asarray(n_classes)
        if n.ndim != 0 or n.dtype.kind not in "iu":
            _fail(where, "n_classes", f"must be one integer, got {n_classes!r}")
        n_classes = int(n)
        if n_classes > MAX_CLASSES:
            _fail(where, "n_classes", f"{n_classes} is beyond the limit of {MAX_CLASSES:,} classes")
    if n_classes < 2:
        _fail(where, "y_train", f"needs at least 2 classes, found only class {top}")
    for label_name, y in (("y_train", ytr), ("y_test", yte)):
        bad = np.flatnonzero((y < 0) | (y >= n_classes))
        if len(bad):
            _fail(where, label_name, f"labels must be in 0..C-1 (C = {n_classes} classes), found {int(y[bad[0]])} "
                                     f"at row {int(bad[0])}")
    untrained = np.setdiff1d(yte, ytr)  # a class never trained on cannot be predicted: labels shifted?
    if len(untrained):
        _fail(where, "y_test", f"label(s) {_labels(untrained)} never occur in y_train (its labels: {_labels(ytr)}); "
                               "every test label must be a class the stream trains on")
    if (task_train is None) != (task_test is None):
        given, missing = ("task_train", "task_test") if task_test is None else ("task_test", "task_train")
        _fail(where, missing, f"is needed with {given} (the task of each test row)")
    if task_train is None:
        ttr, tte = np.zeros(len(ytr), np.int64), np.zeros(len(yte), np.int64)
    else:
        ttr = _ints(where, "task_train", task_train, len(xtr), "task indices")
        tte = _ints(where, "task_test", task_test, len(xte), "task indices")
    for task_name, t in (("task_train", ttr), ("task_test", tte)):
        if t.min() < 0:
            _fail(where, task_name, f"task indices must be >= 0, found {int(t.min())}")
        if t.max() >= len(t):  # each task 0..T-1 needs a row of its own, so T <= rows
            row = int(np.argmax(t))
            _fail(where, task_name, f"task index {int(t[row])} at row {row} leaves tasks without rows (tasks are "
                                    f"0..T-1, each with rows: T is at most the {len(t)} rows)")
    n_tasks = int(max(ttr.max(), tte.max())) + 1
    for task_name, t in (("task_train", ttr), ("task_test", tte)):
        counts = np.bincount(t, minlength=n_tasks)
        if (counts == 0).any():
            empty = int(np.flatnonzero(counts == 0)[0])
            _fail(where, task_name, f"task {empty} has no rows (tasks are 0..{n_tasks - 1}, each needs training "
                                    "and test rows)")
    ood = None if x_ood is None else _features(where, "x_ood", x_ood, d)
    bench = OwnBenchmark(name, [(xtr[ttr == t], ytr[ttr == t]) for t in range(n_tasks)],
                         [(xte[tte == t], yte[tte == t]) for t in range(n_tasks)], ood=ood,
                         class_names=[str(c) for c in range(n_classes)], description=f"own data ({name})")
    if x_val is not None or y_val is not None or task_val is not None:
        bench.validation = _validation_arrays(where, x_val, y_val, task_val, d, n_classes, n_tasks,
                                              task_train is not None)
    return bench


def _validation_arrays(where, x_val, y_val, task_val, d, n_classes, n_tasks, has_tasks) -> list:
    """Per-task ``(X, y)`` of the file's ``x_val``/``y_val``/``task_val``, checked like the others."""
    if x_val is None or y_val is None:
        _fail(where, "y_val" if y_val is None else "x_val", "is needed with x_val and y_val (the validation split)")
    xv = _features(where, "x_val", x_val, d)
    yv = _ints(where, "y_val", y_val, len(xv), "class labels")
    bad = np.flatnonzero((yv < 0) | (yv >= n_classes))
    if len(bad):
        _fail(where, "y_val", f"labels must be in 0..C-1 (C = {n_classes} classes), found {int(yv[bad[0]])} "
                              f"at row {int(bad[0])}")
    if task_val is None:
        if has_tasks and n_tasks > 1:
            _fail(where, "task_val", "is needed with task_train (the task of each validation row)")
        tv = np.zeros(len(yv), np.int64)
    else:
        tv = _ints(where, "task_val", task_val, len(xv), "task indices")
    counts = np.bincount(np.clip(tv, 0, None), minlength=n_tasks)
    if tv.min() < 0 or tv.max() >= n_tasks or (counts == 0).any():
        _fail(where, "task_val", f"needs rows of every task 0..{n_tasks - 1} and no other task index")
    return [(xv[tv == t], yv[tv == t]) for t in range(n_tasks)]


def file_sha256(path) -> str:
    """SHA-256 of a file's bytes (hex)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def load_npz(path, validation: bool = False, validation_fraction: float | None = None,
             validation_seed: int = 0) -> OwnBenchmark:
    """The :class:`OwnBenchmark` of a ``.npz`` file (see the module docs); ValueError of one line naming
    the file and the array for a missing, unknown, object-holding or malformed array, for anything but a
    regular file, and for arrays whose declared shapes or decompressed sizes exceed the memory budget
    (:func:`bimu.untrusted.check_npz`, checked before anything is inflated). ``validation=True``: its
    tuning variant (:meth:`OwnBenchmark.tuning_split` with ``validation_fraction`` and ``validation_seed``)."""
    p = Path(path)
    where = f"{p}: "
    if not p.exists():
        raise ValueError(f"{p}: no such file")
    with open_regular(p) as f:
        if not zipfile.is_zipfile(f):
            raise ValueError(f"{p}: not a readable .npz file (not a zip archive of .npy arrays, as numpy.savez writes)")
    check_npz(p)  # declared sizes and shapes within the memory budget, before anything is inflated
    try:
        with np.load(p, allow_pickle=False) as z:
            names = list(z.files)
            unknown = [k for k in names if k not in REQUIRED + OPTIONAL]
            if unknown:
                _fail(where, unknown[0], f"unknown array; a .npz for bimu holds {', '.join(REQUIRED)} and "
                                         f"optionally {', '.join(OPTIONAL)}")
            for k in REQUIRED:
                if k not in names:
                    _fail(where, k, f"missing (a .npz for bimu holds {', '.join(REQUIRED)})")
            arrays = {}
            for k in names:
                try:
                    arrays[k] = z[k]
                except ValueError as e:
                    if "allow_pickle" in str(e):
                        _fail(where, k, "holds Python objects (dtype object), which bimu does not load; "
                                        "store numeric arrays")
                    raise
    except (zipfile.BadZipFile, OSError, EOFError) as e:
        raise ValueError(f"{p}: not a readable .npz file ({e})") from None
    bench = own_benchmark(arrays["x_train"], arrays["y_train"], arrays["x_test"], arrays["y_test"],
                          task_train=arrays.get("task_train"), task_test=arrays.get("task_test"),
                          x_ood=arrays.get("x_ood"), n_classes=arrays.get("n_classes"), name=p.name, where=where,
                          x_val=arrays.get("x_val"), y_val=arrays.get("y_val"), task_val=arrays.get("task_val"))
    bench.source = {"path": str(p.resolve()), "sha256": file_sha256(p)}
    if validation:
        return bench.tuning_split(validation_fraction, validation_seed)
    if validation_fraction is not None:
        raise ValueError("validation_fraction is an option of the validation split (validation=true)")
    return bench


def npz_benchmark(data_dir=None, path: str | None = None, validation: bool = False,
                  validation_fraction: float | None = None, validation_seed: int = 0) -> OwnBenchmark:
    """Factory registered as ``npz``: the file ``path`` (``data_dir`` is not used); ``validation=True``
    builds its tuning variant (module docs: the file's ``x_val``, else ``validation_fraction`` of each
    task's training rows held out by ``validation_seed``), which ``bimu tune`` uses."""
    if not path:
        raise ValueError("benchmark 'npz' needs its file: bimu run FILE.npz (or --option path=FILE.npz)")
    if not isinstance(validation, bool):
        raise ValueError(f"option validation must be true or false, got {validation!r}")
    return load_npz(path, validation, validation_fraction, int(validation_seed))


def _register() -> None:
    from bimu.data.registry import register_benchmark
    from bimu.data.permuted import _pmnist_preset

    register_benchmark("npz", npz_benchmark, default_hidden=(100,), preset=_pmnist_preset,
                       description="your own data from a .npz file (bimu run FILE.npz)")


_register()

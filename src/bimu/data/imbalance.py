"""Class imbalance as in the paper: low-frequency classes, per-class subsampling, balanced test sets.

>>> y = np.repeat(np.arange(3), [10, 4, 6])
>>> sorted(low_frequency_classes(y, threshold=7))
[1, 2]
>>> keep = subsample_classes(y, {1: 0.5}, seed=0)
>>> np.bincount(y[keep]).tolist()
[10, 2, 6]
>>> np.bincount(y[balanced_indices(y, seed=0)]).tolist()
[4, 4, 4]
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np


def class_counts(y, n_classes: int | None = None) -> np.ndarray:
    """Number of examples of each class."""
    y = np.asarray(y, dtype=np.int64)
    return np.bincount(y, minlength=n_classes or (int(y.max()) + 1 if y.size else 0))


def low_frequency_classes(y, threshold: int, n_classes: int | None = None) -> set[int]:
    """Classes with fewer than ``threshold`` examples (paper: 200 for Animals, 700 for OpenLORIS)."""
    return {int(c) for c, n in enumerate(class_counts(y, n_classes)) if n < threshold}


def removal_fractions(classes: Iterable[int], low: float = 0.5, high: float = 0.8, seed: int = 0) -> dict[int, float]:
    """One fraction to remove per class, uniform in ``[low, high]`` (the paper removes 50-80%)."""
    if not 0.0 <= low <= high <= 1.0:
        raise ValueError(f"need 0 <= low <= high <= 1, got {low}, {high}")
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 0x1B]))
    return {int(c): float(rng.uniform(low, high)) for c in sorted(classes)}


def subsample_classes(y, fractions: Mapping[int, float], seed: int = 0) -> np.ndarray:
    """Sorted indices kept after removing ``round(f * n_c)`` random examples of each class ``c``."""
    y = np.asarray(y, dtype=np.int64)
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 0x5B5]))
    keep = np.ones(y.shape[0], dtype=bool)
    for c, f in sorted(fractions.items()):
        if not 0.0 <= f <= 1.0:
            raise ValueError(f"removal fraction of class {c} must be in [0, 1], got {f}")
        idx = np.flatnonzero(y == c)
        n_remove = int(round(f * idx.size))
        keep[rng.permutation(idx)[:n_remove]] = False
    return np.flatnonzero(keep)


def balanced_indices(y, per_class: int | None = None, seed: int = 0) -> np.ndarray:
    """Sorted indices of a balanced subset: ``per_class`` (default: the smallest class) per class."""
    y = np.asarray(y, dtype=np.int64)
    counts = class_counts(y)
    present = np.flatnonzero(counts)
    n = int(counts[present].min()) if per_class is None else int(per_class)
    if n > counts[present].min():
        raise ValueError(f"cannot take {n} examples per class: the smallest class has {counts[present].min()}")
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 0xBA1]))
    return np.sort(np.concatenate([rng.permutation(np.flatnonzero(y == c))[:n] for c in present]))


def split_accuracy(pred, y, rare: Iterable[int]) -> dict[str, float]:
    """Overall accuracy and the accuracies on rare and on frequent classes (NaN when a group is empty)."""
    pred, y = np.asarray(pred), np.asarray(y)
    rare_mask = np.isin(y, np.fromiter(rare, dtype=np.int64))
    correct = pred == y

    def acc(mask):
        return float(correct[mask].mean()) if mask.any() else float("nan")

    return {"accuracy": acc(np.ones_like(correct)), "rare_accuracy": acc(rare_mask),
            "frequent_accuracy": acc(~rare_mask)}

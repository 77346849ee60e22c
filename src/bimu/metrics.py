"""Continual-learning metrics as plain functions over numpy arrays.

The accuracy matrix ``R`` has ``R[i, j]`` = accuracy on task ``j`` after training on task ``i``
(0-based), NaN where not evaluated. Accuracies are fractions in [0, 1] throughout.

>>> R = np.array([[0.9, np.nan, np.nan], [0.8, 0.95, np.nan], [0.7, 0.85, 0.9]])
>>> round(bwt(R), 6)            # ((0.7 - 0.9) + (0.85 - 0.95)) / 2
-0.15
>>> round(last_k_mean(R, 2), 6)  # (0.85 + 0.9) / 2
0.875
>>> round(mmrr(R, eps=0.0), 6)   # 1 / (0.95 - 0.9)
20.0
>>> roc_auc(np.array([0.1, 0.2]), np.array([0.2, 0.9]))  # pairs: 1 + 1 + 0.5 + 1 over 4
0.875
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

MMRR_EPS = 1e-5
"""The epsilon of the reference implementation's MMRR."""
MMRR_CAP_TEXT = "1e5 (cap)"
"""How reports print an MMRR at its cap ``1 / MMRR_EPS`` (the last task ends at the best accuracy of the
matrix, where the number ranks nothing), as the reproduction tables do."""


def mmrr_at_cap(value) -> bool:
    """Whether an MMRR is at its cap ``1 / MMRR_EPS`` (to rounding).

    >>> mmrr_at_cap(1 / MMRR_EPS), mmrr_at_cap(100000.0), mmrr_at_cap(139.47), mmrr_at_cap(None)
    (True, True, False, False)
    """
    return isinstance(value, (int, float, np.floating)) and bool(np.isfinite(value)) \
        and value >= (1 / MMRR_EPS) * (1 - 1e-9)


def format_mmrr(value, digits: int = 2) -> str:
    """An MMRR as reports print it: :data:`MMRR_CAP_TEXT` at its cap, else the number.

    >>> format_mmrr(100000.0), format_mmrr(20.0), format_mmrr(float("nan"))
    ('1e5 (cap)', '20.00', 'nan')
    """
    return MMRR_CAP_TEXT if mmrr_at_cap(value) else f"{value:.{digits}f}"


def _matrix(R) -> np.ndarray:
    R = np.asarray(R, dtype=np.float64)
    if R.ndim != 2 or R.shape[0] == 0 or R.shape[0] != R.shape[1]:
        raise ValueError(f"accuracy matrix must be square [T, T] with T >= 1, got shape {R.shape}")
    return R


def new_accuracy_matrix(n_tasks: int) -> np.ndarray:
    """A ``[n_tasks, n_tasks]`` matrix of NaN (nothing evaluated yet)."""
    if int(n_tasks) < 1:
        raise ValueError(f"n_tasks must be >= 1, got {n_tasks}")
    return np.full((int(n_tasks), int(n_tasks)), np.nan)


def accuracy(predictions, labels) -> float:
    """Fraction of ``predictions`` equal to ``labels`` (same length, non-empty)."""
    p, y = np.asarray(predictions), np.asarray(labels)
    if p.shape != y.shape or p.size == 0:
        raise ValueError(f"predictions {p.shape} and labels {y.shape} must have the same non-empty shape")
    return float((p == y).mean())


def last_k_mean(R, k: int = 5) -> float:
    """Mean accuracy after the whole stream on the last ``k`` tasks (the paper's main metric).

    Raises ValueError if any of those entries was not evaluated.
    """
    R = _matrix(R)
    k = int(k)
    if not 1 <= k <= R.shape[0]:
        raise ValueError(f"k must lie in [1, {R.shape[0]}], got {k}")
    vals = R[-1, -k:]
    if np.isnan(vals).any():
        raise ValueError(f"the last {k} tasks were not all evaluated after the final task")
    return float(vals.mean())


def _bwt_pairs(R):
    """BWT's pairs: ``(R[T, j], R[j, j])`` for ``j < T`` where both entries were evaluated."""
    R = _matrix(R)
    T = R.shape[0] - 1
    final, just = R[T, :T], np.diagonal(R)[:T]
    keep = ~np.isnan(final) & ~np.isnan(just)
    return final[keep], just[keep]


def bwt(R) -> float:
    """Backward transfer (Lopez-Paz & Ranzato 2017): mean over ``j < T`` of ``R[T, j] - R[j, j]``.

    Only pairs where both entries were evaluated count; NaN if there is none (e.g. a single task).
    """
    final, just = _bwt_pairs(R)
    return float((final - just).mean()) if final.size else float("nan")


def bwt_terms(R) -> tuple[float, float, int]:
    """The two means whose difference is :func:`bwt`, over the same pairs, and how many pairs.

    ``(mean of R[T, j], mean of R[j, j], n)``: accuracy after the stream and right after training.

    >>> R = [[0.9, float("nan"), float("nan")], [0.8, 0.7, float("nan")], [0.6, 0.5, 0.4]]
    >>> final, just, n = bwt_terms(R)
    >>> round(final, 6), round(just, 6), n, round(final - just, 6) == round(bwt(R), 6)
    (0.55, 0.8, 2, True)
    """
    final, just = _bwt_pairs(R)
    if not final.size:
        return float("nan"), float("nan"), 0
    return float(final.mean()), float(just.mean()), int(final.size)


def mmrr(R, eps: float = MMRR_EPS) -> float:
    """Maximum Memory Rigidity Resilience of one run: ``1 / (a_max - a_T + eps)``.

    ``a_max`` is the best accuracy reached on any task at any time (max over evaluated entries of
    ``R``) and ``a_T`` the final accuracy on the last task ``R[T, T]`` (paper, appendix MMRR).
    """
    R = _matrix(R)
    a_t = R[-1, -1]
    if np.isnan(a_t):
        raise ValueError("the last task was not evaluated after the final task")
    return float(1.0 / (np.nanmax(R) - a_t + eps))


def mean_accuracy_matrix(matrices: Sequence) -> np.ndarray:
    """Seed-averaged accuracy matrix (NaN-aware mean over seeds; NaN where no seed evaluated)."""
    stack = np.stack([_matrix(R) for R in matrices])
    if len({R.shape for R in stack}) != 1:
        raise ValueError("matrices must share one shape")
    with np.errstate(invalid="ignore"):
        counts = (~np.isnan(stack)).sum(0)
        total = np.nansum(stack, axis=0)
        return np.where(counts > 0, total / np.maximum(counts, 1), np.nan)


def mmrr_seed_averaged(matrices: Sequence, eps: float = MMRR_EPS) -> float:
    """MMRR as the reference computed it: from the seed-averaged accuracy curves.

    ``1 / (max of the seed-averaged matrix - seed-averaged final accuracy on the last task + eps)``.
    Differs from the mean of per-seed :func:`mmrr` (a mean of reciprocals is not the reciprocal of a
    mean); report which one you use.
    """
    return mmrr(mean_accuracy_matrix(matrices), eps=eps)


def roc_auc(scores_in, scores_out) -> float:
    """Exact ROC-AUC for telling OOD (positive, higher score) from in-distribution examples.

    The Mann-Whitney statistic: ``P(s_out > s_in) + 0.5 * P(s_out == s_in)``, computed from average
    ranks so that ties count one half. Raises ValueError on empty or non-finite input.
    """
    a = np.asarray(scores_in, dtype=np.float64).ravel()
    b = np.asarray(scores_out, dtype=np.float64).ravel()
    if a.size == 0 or b.size == 0:
        raise ValueError("both score sets must be non-empty")
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        raise ValueError("scores contain NaN or infinite values")
    allv = np.concatenate([a, b])
    order = np.argsort(allv, kind="mergesort")
    sorted_v = allv[order]
    ranks = np.empty(allv.size, dtype=np.float64)
    # average rank (1-based) over each run of ties
    starts = np.flatnonzero(np.r_[True, sorted_v[1:] != sorted_v[:-1]])
    ends = np.r_[starts[1:], sorted_v.size]
    avg = (starts + ends + 1) / 2.0
    ranks[order] = np.repeat(avg, ends - starts)
    r_out = ranks[a.size:].sum()
    n_in, n_out = a.size, b.size
    return float((r_out - n_out * (n_out + 1) / 2.0) / (n_in * n_out))


def roc_auc_reference_1000_thresholds(scores_in, scores_out, n_thresholds: int = 1000) -> float:
    """The reference implementation's approximate AUC (kept for comparison; biased low).

    Thresholds ``linspace(0, max score, n_thresholds)``; at each, an example is flagged OOD iff
    ``threshold < score`` (strict); the (FPR, TPR) points are joined by the trapezoid rule without
    closing the curve at (1, 1). Mass at the lowest score (e.g. variation
    ratio 0) never enters the curve, so discrete scores are badly underestimated. Use
    :func:`roc_auc` for results.
    """
    a = np.asarray(scores_in, dtype=np.float64).ravel()
    b = np.asarray(scores_out, dtype=np.float64).ravel()
    if a.size == 0 or b.size == 0:
        raise ValueError("both score sets must be non-empty")
    top = max(a.max(), b.max())
    th = np.linspace(0.0, top, int(n_thresholds))
    tpr = (b[None, :] > th[:, None]).mean(1)
    fpr = (a[None, :] > th[:, None]).mean(1)
    order = np.lexsort((tpr, fpr))  # along increasing FPR, then TPR (a monotone curve)
    x, y = fpr[order], tpr[order]
    return float(np.sum((x[1:] - x[:-1]) * (y[1:] + y[:-1]) / 2.0))


def memory_footprint(*states) -> int:
    """Bytes of every tensor / array in (nested dicts, lists or tuples of) ``states``.

    Use it on parameters plus optimizer state, e.g. ``memory_footprint(params, optimizer.state)``.

    >>> import torch
    >>> memory_footprint([torch.zeros(10)], {"m": {"v": np.zeros(3)}, "step": 4})
    64
    """
    total = 0
    seen: set[int] = set()
    stack = list(states)
    while stack:
        s = stack.pop()
        if hasattr(s, "element_size") and hasattr(s, "numel"):  # torch.Tensor
            if id(s) not in seen:
                seen.add(id(s))
                total += int(s.numel()) * int(s.element_size())
        elif isinstance(s, np.ndarray):
            if id(s) not in seen:
                seen.add(id(s))
                total += int(s.nbytes)
        elif isinstance(s, dict):
            stack.extend(s.values())
        elif isinstance(s, (list, tuple, set, Iterator)):  # Iterator: e.g. model.parameters()
            stack.extend(list(s))
    return total

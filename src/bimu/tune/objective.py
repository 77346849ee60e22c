"""The objective of ``bimu tune``: the paper's H (appendix "Hyperparameters tuning").

After learning task ``t``,

    H_t = w1 * Acc_0 + w2 * mean(Acc_0 .. Acc_t) + w3 * Acc_t

where ``Acc_j`` is the accuracy on task ``j`` (``R[t, j]`` of the accuracy matrix, row = after which
task, column = on which task), with weights ``(w1, w2, w3) = (0.5, 0.25, 0.25)`` by default. The
**trial value is H at the final task** (``reduce="final"``); ``reduce="mean"`` takes the mean of
``H_t`` over the tasks instead.

Weights must be three finite, non-negative numbers summing to 1 (so that ``H`` stays an accuracy in
[0, 1] and studies stay comparable); anything else is a ValueError that suggests the normalised
weights.

>>> R = [[0.9, float("nan")], [0.7, 0.8]]
>>> round(objective_h(R), 4)   # 0.5*0.7 + 0.25*(0.7+0.8)/2 + 0.25*0.8
0.7375
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

DEFAULT_WEIGHTS: tuple[float, float, float] = (0.5, 0.25, 0.25)
"""Default weights (w1, w2, w3) of Acc_0, mean Acc and Acc_t: the paper defines H with these three terms
but gives no values for the weights; 0.5 / 0.25 / 0.25 is bimu's default (``--weights`` changes it)."""

REDUCTIONS = ("final", "mean")
"""How H_t over tasks becomes the trial value: H at the final task, or the mean over tasks."""


def check_weights(weights: Sequence[float]) -> tuple[float, float, float]:
    """Validate ``(w1, w2, w3)``: three finite, non-negative numbers summing to 1.

    >>> check_weights([0.5, 0.25, 0.25])
    (0.5, 0.25, 0.25)
    >>> check_weights([2, 1, 1])
    Traceback (most recent call last):
    ...
    ValueError: weights must sum to 1 (got 4); normalised they would be 0.5 0.25 0.25
    """
    try:
        w = tuple(float(v) for v in weights)
    except (TypeError, ValueError):
        raise ValueError(f"weights must be three numbers, got {weights!r}") from None
    if len(w) != 3:
        raise ValueError(f"weights must be three numbers (w1 w2 w3), got {len(w)}: {list(w)}")
    if not all(math.isfinite(v) for v in w):
        raise ValueError(f"weights must be finite, got {list(w)}")
    if any(v < 0 for v in w):
        raise ValueError(f"weights must be non-negative, got {list(w)}")
    total = sum(w)
    if total <= 0:
        raise ValueError("weights must not all be zero")
    if abs(total - 1.0) > 1e-6:
        norm = " ".join(f"{v / total:.6g}" for v in w)
        raise ValueError(f"weights must sum to 1 (got {total:.6g}); normalised they would be {norm}")
    return w


def check_accuracy_matrix(matrix) -> np.ndarray:
    """A float ``[T, T]`` array whose lower triangle (incl. diagonal) is finite and in [0, 1].

    Entries above the diagonal (tasks not learned yet) are ignored and may be NaN.
    """
    R = np.asarray(matrix, dtype=np.float64)
    if R.ndim != 2 or R.shape[0] != R.shape[1] or R.shape[0] < 1:
        raise ValueError(f"accuracy matrix must be square [T, T] with T >= 1, got shape {R.shape}")
    low = R[np.tril_indices(R.shape[0])]
    if not np.isfinite(low).all():
        raise ValueError("accuracy matrix has NaN or infinite entries on or below the diagonal")
    if (low < 0).any() or (low > 1).any():
        raise ValueError("accuracies must be fractions in [0, 1] (not percentages)")
    return R


def h_from_row(row: Sequence[float], t: int, weights: Sequence[float] = DEFAULT_WEIGHTS) -> float:
    """``H_t`` from the accuracies on tasks ``0..t`` measured after learning task ``t``.

    >>> h_from_row([0.6, 0.8, 1.0], 2)   # 0.5*0.6 + 0.25*0.8 + 0.25*1.0
    0.75
    """
    w1, w2, w3 = check_weights(weights)
    t = int(t)
    acc = np.asarray(row, dtype=np.float64)[: t + 1]
    if t < 0 or acc.shape[0] != t + 1:
        raise ValueError(f"need accuracies on tasks 0..{t}, got {acc.shape[0]}")
    return float(w1 * acc[0] + w2 * acc.mean() + w3 * acc[t])


def h_per_task(matrix, weights: Sequence[float] = DEFAULT_WEIGHTS) -> np.ndarray:
    """``[H_0, ..., H_{T-1}]`` of an accuracy matrix ``R[i, j]`` (accuracy on task j after task i)."""
    R = check_accuracy_matrix(matrix)
    w = check_weights(weights)
    return np.array([h_from_row(R[t], t, w) for t in range(R.shape[0])])


def objective_h(matrix, weights: Sequence[float] = DEFAULT_WEIGHTS, reduce: str = "final") -> float:
    """The trial value: ``H`` at the final task (``reduce="final"``) or the mean of ``H_t``."""
    if reduce not in REDUCTIONS:
        raise ValueError(f"reduce must be one of {REDUCTIONS}, got {reduce!r}")
    h = h_per_task(matrix, weights)
    return float(h[-1] if reduce == "final" else h.mean())

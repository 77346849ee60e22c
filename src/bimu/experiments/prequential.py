"""Prequential (test-then-train) accuracy: each training example predicted by the model as it is just
before learning it, the measure a river or CapyMOA user reads first.

Sampling. Predicting every example would cost a forward pass per example and cut the fused engine's
whole-task compiled calls (``learn_many``) into single steps, so a labelled run samples: the examples
whose global index ``i`` (0-based, counted over the whole stream's training examples, so ``i`` is also
the number of examples learned before it) is a multiple of ``every`` (``RunConfig.prequential_every``,
``bimu run --prequential-every``, ``fit_stream(prequential_every=...)``; 0: none). A task is learned in
blocks cut at its sampled examples (at the start of the batch holding one, for batch sizes above 1):
learn the block, predict the sampled example, go on (:func:`learn_piece`). The blocks train exactly as
the whole task does (``learn_many`` is the same as one ``learn`` per row, every rule's draws are per
example). Each prediction draws from its own generator, :func:`prequential_generator` (the run seed, the
example's index and stream id :data:`bimu.rng.PREQUENTIAL_STREAM`), never from the method's evaluation
or training generator, so the training, the accuracy matrix and every other number of the run stay as
they are, and an example gets the same prediction whatever the rate.

An active run's learner predicts every example before it decides whether to query it
(:func:`bimu.experiments.stream.learn_task`): that prediction is the test-then-train one, recorded for
every example at no extra cost (any ``every`` above 0).

Records. Each task record gets ``prequential_acc`` (its sampled examples' accuracy, ``None`` without
one) and ``prequential_n``; the summary the same over the stream (:func:`summary_fields`); the run
directory ``prequential.csv`` (:class:`Curve`): one row per prediction, ``example`` (global index),
``task`` (from 1, as the console), ``correct`` (0/1) and ``acc_last_100``, the accuracy of the last
:data:`WINDOW` predictions (fewer at the start). It is rewritten whole and atomically after each task,
after the checkpoint, which holds the last task's rows: a resumed run keeps the file's rows of the
earlier tasks and the checkpoint's of the last, so a kill at any moment loses or repeats no row. (At
the default rate a 1000-task Permuted-MNIST stream has 60,000 rows, about 1.5 MB; an active run's
curve holds every example, so a very long active stream rewrites a file of tens of MB per task.)

>>> import torch
>>> from bimu.methods import create_method
>>> m = create_method("sgd", [3, 2], seed=0)
>>> x, y = torch.randn(10, 3), torch.randint(0, 2, (10,))
>>> tested, learned = Tested(), []
>>> def learn(a, b, outcomes):  # what the stream passes: learn rows a..b, one step per example
...     learned.append((a, b))
...     for i in range(a, b):
...         m.learn(x[i:i + 1], y[i:i + 1])
...     return 0, 0
>>> learn_piece(Prequential(seed=0, every=4), m, x, y, 0, 10, 0, 1, learn, False, tested)
(0, 0)
>>> learned, tested.arrays()[0].tolist()  # examples 0, 4 and 8 predicted just before they are learned
([(0, 4), (4, 8), (8, 10)], [0, 4, 8])
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from bimu.atomic import atomic_write_bytes
from bimu.rng import GOLDEN, PREQUENTIAL_STREAM, derive_key, mix64_np
from bimu.rundir import read_prequential
from bimu.untrusted import UntrustedFileError

WINDOW = 100
"""Predictions in the windowed accuracy of ``prequential.csv`` (its column ``acc_last_100``)."""
COLUMNS = ("example", "task", "correct", f"acc_last_{WINDOW}")
"""The columns of ``prequential.csv``."""


def prequential_generator(seed: int, example: int) -> torch.Generator:
    """The generator of the test-then-train prediction of training example ``example`` (global index) of
    a run of ``seed``: seeded from :func:`~bimu.rng.derive_key` ``(seed, PREQUENTIAL_STREAM)`` and the index.

    >>> a, b = prequential_generator(0, 5), prequential_generator(0, 5)
    >>> torch.equal(torch.rand(2, generator=a), torch.rand(2, generator=b))
    True
    """
    with np.errstate(over="ignore"):
        z = mix64_np(np.uint64(derive_key(int(seed), PREQUENTIAL_STREAM)) + np.uint64(int(example)) * GOLDEN)
    return torch.Generator().manual_seed(int(z) & ((1 << 63) - 1))


def sampled_rows(first: int, lo: int, hi: int, every: int) -> np.ndarray:
    """The rows ``i`` in ``[lo, hi)`` of a task whose first example has global index ``first`` that are
    sampled: ``first + i`` a multiple of ``every``.

    >>> sampled_rows(7, 0, 10, 5).tolist(), sampled_rows(0, 2, 11, 5).tolist()
    ([3, 8], [5, 10])
    """
    start = lo + (-(first + lo)) % every
    return np.arange(start, hi, every, dtype=np.int64)


@dataclasses.dataclass(frozen=True)
class Prequential:
    """What a stream records (:func:`bimu.experiments.stream.stream_tasks`): the run ``seed``, the rate
    ``every`` (>= 1), the MC samples of each prediction (``n_samples``, ``None``: the method's default,
    as its evaluation) and ``first``, the global index of the first example streamed (a resumed run's
    examples learned before)."""

    seed: int
    every: int
    n_samples: int | None = None
    first: int = 0

    def __post_init__(self):
        if int(self.every) < 1 or int(self.first) < 0:
            raise ValueError(f"prequential every must be >= 1 and first >= 0, got {self.every}, {self.first}")


class Tested:
    """One task's test-then-train predictions: global example indices, correct (0/1), and the seconds the
    sampled predictions took (time that is not training)."""

    def __init__(self):
        self.examples: list[np.ndarray] = []
        self.correct: list[np.ndarray] = []
        self.seconds = 0.0

    def add(self, examples, correct) -> None:
        """Append predictions (arrays of global indices and of 0/1)."""
        self.examples.append(np.asarray(examples, dtype=np.int64).reshape(-1))
        self.correct.append(np.asarray(correct, dtype=np.uint8).reshape(-1))

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """``(examples int64, correct uint8)`` in stream order."""
        if not self.examples:
            return np.zeros(0, np.int64), np.zeros(0, np.uint8)
        return np.concatenate(self.examples), np.concatenate(self.correct)


def learn_piece(prequential: Prequential | None, method, x: torch.Tensor, y: torch.Tensor, lo: int, hi: int,
                first: int, batch_size: int, learn: Callable[[int, int, list | None], tuple[int, int]],
                active: bool, tested: Tested | None) -> tuple[int, int]:
    """Learn rows ``[lo, hi)`` of a task ``(x, y)`` whose first example has global index ``first`` through
    ``learn(a, b, outcomes)`` (:func:`~bimu.experiments.stream.learn_task` on rows ``a..b``), recording
    the test-then-train predictions into ``tested``; returns what ``learn`` returns, summed.

    No ``prequential``: one call. ``active``: one call with an ``outcomes`` list, which the learner fills
    with each example's 0/1 (every example recorded). Otherwise the sampled rows (:func:`sampled_rows`)
    cut the rows into blocks, each sampled example predicted (``method.predict`` with its own
    :func:`prequential_generator`) right before the block (batch) that holds it is learned.
    """
    if prequential is None:
        return learn(lo, hi, None)
    if active:
        outcomes: list = []
        out = learn(lo, hi, outcomes)
        if len(outcomes) != hi - lo:
            raise RuntimeError(f"the learner recorded {len(outcomes)} predictions for {hi - lo} examples")
        tested.add(first + np.arange(lo, hi), outcomes)
        return out
    pos, c, a = lo, 0, 0
    rows = sampled_rows(first, lo, hi, prequential.every).tolist()
    right = []
    for i in rows:
        cut = lo + (i - lo) // batch_size * batch_size  # the start of the batch holding row i
        if cut > pos:
            c1, a1 = learn(pos, cut, None)
            pos, c, a = cut, c + c1, a + a1
        t0 = time.perf_counter()
        pred = method.predict(x[i:i + 1], n_samples=prequential.n_samples,
                              generator=prequential_generator(prequential.seed, first + i))
        right.append(int(torch.as_tensor(pred).reshape(-1)[0]) == int(y[i]))
        tested.seconds += time.perf_counter() - t0
    c1, a1 = learn(pos, hi, None)
    tested.add(first + np.asarray(rows, dtype=np.int64), right)
    return c + c1, a + a1


# --------------------------------------------------------------------------------- records
def task_fields(correct: np.ndarray) -> dict[str, Any]:
    """A task record's ``prequential_acc`` (``None`` without a prediction) and ``prequential_n``.

    >>> task_fields(np.array([1, 0, 1, 1]))
    {'prequential_acc': 0.75, 'prequential_n': 4}
    """
    n = int(len(correct))
    return {"prequential_acc": float(np.sum(correct)) / n if n else None, "prequential_n": n}


def summary_fields(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The stream's ``prequential_acc`` and ``prequential_n`` from the task records that hold them (``{}``
    when none does: a run that records no prediction).

    >>> summary_fields([{"prequential_acc": 0.5, "prequential_n": 4}, {"prequential_acc": None, "prequential_n": 0}])
    {'prequential_acc': 0.5, 'prequential_n': 4}
    """
    recs = [r for r in records if isinstance(r.get("prequential_n"), int)]
    if not recs:
        return {}
    n = sum(r["prequential_n"] for r in recs)
    right = sum(round(r["prequential_acc"] * r["prequential_n"]) for r in recs if r["prequential_n"])
    return {"prequential_acc": right / n if n else None, "prequential_n": n}


# --------------------------------------------------------------------------------- the curve file
class Curve:
    """A run's prequential curve: its rows (global example index, task from 1, correct 0/1, accuracy of
    the last :data:`WINDOW` predictions) kept in memory as arrays and as the text of ``prequential.csv``."""

    def __init__(self):
        self._parts: list[tuple[np.ndarray, ...]] = []
        self._text = bytearray((",".join(COLUMNS) + "\n").encode())
        self._tail = np.zeros(0, np.int64)
        self.last: dict[str, Any] | None = None
        """The last task's rows (``task`` 0-based, ``example``, ``correct``): what a checkpoint holds."""

    def add(self, task: int, examples: np.ndarray, correct: np.ndarray) -> None:
        """Append the predictions of task ``task`` (0-based)."""
        examples = np.asarray(examples, dtype=np.int64)
        correct = np.asarray(correct, dtype=np.uint8)
        both = np.concatenate([self._tail, correct.astype(np.int64)])
        cs = np.concatenate([[0], np.cumsum(both)])
        pos = len(self._tail) + np.arange(len(correct))
        start = np.maximum(0, pos - WINDOW + 1)
        window = (cs[pos + 1] - cs[start]) / (pos + 1 - start)
        self._tail = both[-(WINDOW - 1):] if WINDOW > 1 else both[:0]
        tasks = np.full(len(correct), int(task) + 1, dtype=np.int64)
        self._parts.append((examples, tasks, correct, window))
        self._text += "".join(f"{e},{task + 1},{c},{w:.4f}\n" for e, c, w in
                              zip(examples.tolist(), correct.tolist(), window.tolist())).encode()
        self.last = {"task": int(task), "example": examples, "correct": correct}

    def arrays(self) -> dict[str, np.ndarray]:
        """The curve as arrays: ``example``, ``task`` (from 1), ``correct``, ``window_acc`` (and ``window``)."""
        cols = [np.concatenate(c) for c in zip(*self._parts)] or [np.zeros(0, np.int64)] * 3 + [np.zeros(0)]
        out = dict(zip(("example", "task", "correct", "window_acc"), cols))
        out["window"] = WINDOW
        return out

    def write(self, path: str | Path) -> None:
        """Write ``prequential.csv`` to ``path``, atomically."""
        atomic_write_bytes(path, bytes(self._text))

    @classmethod
    def resume(cls, path: str | Path, records: Sequence[Mapping[str, Any]], last: Mapping[str, Any] | None,
               log: Callable[[str], None] = lambda s: None) -> Curve:
        """The curve of a run resumed after its checkpoint: the rows ``path`` holds for the tasks before the
        checkpoint's last one (those whose row count is the task record's ``prequential_n``), then the
        checkpoint's rows of the last task (``last``; or the file's, when the checkpoint holds none and
        the counts agree). Rows of a task the checkpoint does not hold (a kill after a later write) are
        dropped; ``log`` names tasks whose rows are missing (a file removed or damaged)."""
        curve = cls()
        if not records:
            return curve
        try:
            rows = read_prequential(path)
        except (OSError, UntrustedFileError) as e:
            log(f"{e}: the curve is rebuilt from the checkpoint's last task")
            rows = {k: np.zeros(0, np.int64) for k in ("example", "task", "correct")}
        last_task = int(records[-1]["task"])
        lost = []
        for rec in records:
            t = int(rec["task"])
            n = rec.get("prequential_n")
            if t == last_task and last is not None and int(last.get("task", -1)) == t:
                curve.add(t, np.asarray(last["example"]), np.asarray(last["correct"]))
                continue
            mine = rows["task"] == t + 1
            if isinstance(n, int) and int(mine.sum()) == n:
                if n:
                    curve.add(t, rows["example"][mine], rows["correct"][mine])
            elif isinstance(n, int):
                lost.append(t + 1)
        if lost:
            log(f"{path}: rows of task(s) {lost} are missing; the curve goes on without them")
        return curve

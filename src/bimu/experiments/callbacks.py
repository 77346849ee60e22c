"""Callbacks of a stream: your code called after every step and after every task.

A callback is any object with an ``on_step(info)`` method, an ``on_task_end(info)`` method, or both;
give a list of them to :func:`bimu.fit_stream` or :func:`~bimu.experiments.stream.run_stream`
(``callbacks=[...]``). They are called in the order given:

- ``on_step(info)`` after each step (one update of ``batch_size`` examples; in active mode, each example
  seen, whether or not its label was asked), ``info`` a :class:`StepInfo`;
- ``on_task_end(info)`` after each task is learned and evaluated (and, in a run directory, saved),
  ``info`` a :class:`TaskEndInfo`.

Callbacks only read: they do not change results (the same accuracy matrix with and without them).
With an ``on_step`` the stream is learned one step per call, which is slower on the fused engine (its
compiled calls take 4096 steps at a time) but gives the same results. Task indices are 0-based, as in
``metrics.jsonl`` (the console and the plots number tasks from 1).

>>> class Count:
...     steps = 0
...     def on_step(self, info):
...         self.steps += 1
>>> hooks = Callbacks([Count()], method=None)
>>> hooks.step(0, None); hooks.step(0, None); hooks.callbacks[0].steps, hooks.global_step
(2, 2)
>>> Callbacks([print], method=None)
Traceback (most recent call last):
...
TypeError: a callback is an object with an on_step(info) and/or on_task_end(info) method; got builtin_function_or_method
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from bimu.experiments.tracking import Sink


@dataclasses.dataclass(frozen=True)
class StepInfo:
    """One step done: ``task`` (0-based), ``step`` (steps done in the task, from 1), ``global_step`` (steps
    done in the stream by this call, from 1), ``asked`` (active mode: whether the example's label was
    asked; ``None`` in labelled mode) and the ``method`` (read it, do not train it)."""

    task: int
    step: int
    global_step: int
    asked: bool | None
    method: Any


@dataclasses.dataclass(frozen=True)
class TaskEndInfo:
    """One task done: ``task`` (0-based) of ``n_tasks``, its ``record`` (the ``metrics.jsonl`` row:
    ``acc``, ``evaluated``, ``steps_per_s``...), the ``accuracy`` matrix so far (a copy, NaN where not
    evaluated) and the ``method``."""

    task: int
    n_tasks: int
    record: Mapping[str, Any]
    accuracy: np.ndarray
    method: Any


class Callbacks(Sink):
    """The callbacks of one stream: :meth:`step` for the loop (:attr:`on_step`, ``None`` when no callback
    has an ``on_step``), and a :class:`~bimu.experiments.tracking.Sink` whose ``task_end`` calls each
    ``on_task_end``. TypeError for an object with neither method."""

    def __init__(self, callbacks: Sequence, method):
        self.callbacks, self.method = list(callbacks), method
        for c in self.callbacks:
            if not (callable(getattr(c, "on_step", None)) or callable(getattr(c, "on_task_end", None))):
                raise TypeError("a callback is an object with an on_step(info) and/or on_task_end(info) method; "
                                f"got {type(c).__name__}")
        self._steps = [c.on_step for c in self.callbacks if callable(getattr(c, "on_step", None))]
        self._ends = [c.on_task_end for c in self.callbacks if callable(getattr(c, "on_task_end", None))]
        self.task, self.task_step, self.global_step = None, 0, 0

    @property
    def on_step(self):
        """:meth:`step` when a callback wants steps, else ``None`` (the loop then learns in chunks)."""
        return self.step if self._steps else None

    def step(self, task: int, asked: bool | None) -> None:
        """One step of ``task`` done (``asked``: see :class:`StepInfo`): every ``on_step``."""
        if task != self.task:
            self.task, self.task_step = task, 0
        self.task_step += 1
        self.global_step += 1
        info = StepInfo(task=int(task), step=self.task_step, global_step=self.global_step,
                        asked=None if asked is None else bool(asked), method=self.method)
        for f in self._steps:
            f(info)

    def task_end(self, record, R):
        """Every ``on_task_end`` with the task's record and the matrix so far."""
        info = TaskEndInfo(task=int(record["task"]), n_tasks=int(R.shape[0]), record=dict(record),
                           accuracy=np.array(R, copy=True), method=self.method)
        for f in self._ends:
            f(info)

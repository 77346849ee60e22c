"""When to evaluate which tasks: an explicit, cheap-by-default evaluation schedule.

After task ``t`` (0-based) the runner evaluates the current task always, plus:

- every task seen so far, after every task, when the stream has at most ``all_max`` tasks (the full
  lower triangle of the accuracy matrix; 0: never), and every ``all_every`` tasks (0: never);
- a random sample of ``sample_size`` seen tasks every ``sample_every`` tasks (drawn from
  ``(sample_seed, t)``, the same for every method and seed);
- the last ``last_m`` tasks every ``last_every`` tasks;
- after the final task: ``final="all"`` (every task), ``"last"`` (the last ``final_last``), or
  ``"auto"`` = all for short streams (``n_tasks <= final_all_max``), else the last ``final_last``.

>>> s = EvalSchedule(all_every=2)
>>> [s.tasks_after(t, 4) for t in range(4)]
[[0], [0, 1], [2], [0, 1, 2, 3]]
>>> EvalSchedule(final="last", final_last=2).tasks_after(4, 5)
[3, 4]
>>> [EvalSchedule(all_max=100).tasks_after(1, n) for n in (3, 1000)]  # the triangle only for short streams
[[0, 1], [1]]

``EvalSchedule()`` itself evaluates no triangle (``all_max=0``); a run's configuration
(:class:`~bimu.experiments.config.RunConfig`, so ``bimu run`` and :func:`bimu.fit_stream` alike) defaults
to :data:`DEFAULT_ALL_MAX`: the full lower triangle up to 100 tasks, the paper's schedule (the current
task after each task, then the final row) beyond.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

FINAL_CHOICES = ("auto", "all", "last")
_SAMPLE_TAG = 0xE7A1
DEFAULT_ALL_MAX = 100
"""Longest stream whose accuracy matrix a run fills whole by default (``RunConfig.eval_all_max``)."""
PREQUENTIAL_EVERY = 1000
"""Default rate of a run's test-then-train predictions: every this-many-th training example
(``RunConfig.prequential_every``; :mod:`bimu.experiments.prequential`). Measured on Permuted MNIST
(784-100-10, 20,000 examples), the predictions take about 1% of the fused BiMU's training time (one
prediction of 5 hard samples costs about 8 training steps) and 2-6% of the fused SGD's (whose steps
take about 40 microseconds); cutting the tasks into blocks adds no measurable CPU time."""


@dataclasses.dataclass(frozen=True)
class EvalSchedule:
    """See the module docstring."""

    all_every: int = 0
    sample_every: int = 0
    sample_size: int = 10
    last_m: int = 0
    last_every: int = 1
    final: str = "auto"
    final_last: int = 5
    final_all_max: int = 100
    sample_seed: int = 0
    all_max: int = 0

    def __post_init__(self):
        for name in ("all_every", "sample_every", "last_m", "sample_seed", "all_max"):
            if int(getattr(self, name)) < 0:
                raise ValueError(f"eval schedule {name!r} must be >= 0, got {getattr(self, name)}")
        for name in ("sample_size", "last_every", "final_last", "final_all_max"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"eval schedule {name!r} must be >= 1, got {getattr(self, name)}")
        if self.final not in FINAL_CHOICES:
            raise ValueError(f"eval schedule 'final' must be one of {FINAL_CHOICES}, got {self.final!r}")

    def final_tasks(self, n_tasks: int) -> list[int]:
        """Tasks evaluated after the final task."""
        mode = self.final
        if mode == "auto":
            mode = "all" if n_tasks <= self.final_all_max else "last"
        if mode == "all":
            return list(range(n_tasks))
        return list(range(max(0, n_tasks - self.final_last), n_tasks))

    def tasks_after(self, task: int, n_tasks: int) -> list[int]:
        """Sorted task indices to evaluate after training on ``task`` of an ``n_tasks`` stream."""
        t = int(task)
        if not 0 <= t < n_tasks:
            raise ValueError(f"task must lie in [0, {n_tasks - 1}], got {task}")
        out = {t}
        done = t + 1
        if (self.all_every and done % self.all_every == 0) or n_tasks <= self.all_max:
            out.update(range(done))
        if self.sample_every and done % self.sample_every == 0:
            rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([self.sample_seed, t, _SAMPLE_TAG])))
            out.update(int(j) for j in rng.choice(done, size=min(self.sample_size, done), replace=False))
        if self.last_m and done % self.last_every == 0:
            out.update(range(max(0, done - self.last_m), done))
        if t == n_tasks - 1:
            out.update(self.final_tasks(n_tasks))
        return sorted(out)


def check_checkpoints(checkpoints: Sequence[int]) -> tuple[int, ...]:
    """``checkpoints`` as sorted distinct integers; ValueError for one that is not a whole percent 0-99.

    >>> check_checkpoints([50, 0, 25]), check_checkpoints(())
    ((0, 25, 50), ())
    >>> check_checkpoints([100])
    Traceback (most recent call last):
    ...
    ValueError: checkpoints are whole percents of a task's examples, 0 to 99; got 100
    """
    for p in checkpoints:
        if isinstance(p, bool) or int(p) != p or not 0 <= p <= 99:
            raise ValueError(f"checkpoints are whole percents of a task's examples, 0 to 99; got {p!r}")
    return tuple(sorted({int(p) for p in checkpoints}))

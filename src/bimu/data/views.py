"""Views of a benchmark: the same tasks standardised, cut down for smoke tests, or streamed repeatedly.

:class:`StandardizedBenchmark` is the paper's offline control of the standardisation appendix: every
feature is standardised with the mean and standard deviation of the *training* data of all tasks
(test and OOD inputs use the same statistics). :class:`LimitedBenchmark` keeps the first tasks and
the first examples of each task (``--scale quick``). :class:`RepeatedStream` streams each task's
training data several times (``stream_repeats``), for a stand-in whose stream is shorter than the
paper's (``animals-ti`` x 4 has the paper's Animals stream length and class counts).

All forward ``name``, ``n_features``, ``n_classes``, ``is_standin``, ``rare_classes`` /
``frequent_classes`` / ``class_names`` (when the wrapped benchmark has them) and follow the
benchmark contract of :mod:`bimu.data.benchmarks`.

>>> import torch
>>> class B:
...     name, n_features, n_classes, n_tasks, is_standin = "toy", 2, 2, 2, True
...     def train_task(self, t, seed): return torch.tensor([[0., 10.], [2., 30.]]), torch.tensor([0, 1])
...     def test_task(self, t): return torch.tensor([[1., 20.]]), torch.tensor([1])
...     def ood_set(self): return None
>>> s = StandardizedBenchmark(B())
>>> s.test_task(0)[0].tolist(), s.name
([[0.0, 0.0]], 'toy[standardized]')
>>> LimitedBenchmark(B(), n_tasks=1, train_limit=1).train_task(0, 0)[1].tolist()
[0]
>>> r = RepeatedStream(B(), 3)
>>> r.name, r.train_task(0, seed=0)[1].shape
('toyx3', torch.Size([6]))
"""

from __future__ import annotations

import numpy as np
import torch

_FORWARDED = ("n_features", "n_classes", "is_standin", "rare_classes", "frequent_classes", "class_names",
              "description")


class _View:
    """Common forwarding of the wrapped benchmark's attributes."""

    def __init__(self, benchmark, suffix: str = ""):
        self.base = benchmark
        self.name = benchmark.name + suffix
        self.n_tasks = int(benchmark.n_tasks)
        for attr in _FORWARDED:
            if hasattr(benchmark, attr):
                setattr(self, attr, getattr(benchmark, attr))
        if not hasattr(self, "rare_classes"):
            self.rare_classes = frozenset()

    def train_task(self, task: int, seed: int):
        """Training data of ``task`` (see the wrapped benchmark)."""
        return self.base.train_task(task, seed)

    def test_task(self, task: int):
        """Test data of ``task``."""
        return self.base.test_task(task)

    def ood_set(self):
        """OOD inputs, or ``None``."""
        return self.base.ood_set()


class StandardizedBenchmark(_View):
    """Features standardised with the training data's per-feature mean and std (all tasks pooled;
    a feature with zero variance is only centred). Statistics are computed once, in float64."""

    def __init__(self, benchmark):
        super().__init__(benchmark, "[standardized]")
        n, s, ss = 0, None, None
        for t in range(self.n_tasks):
            x, _ = benchmark.train_task(t, 0)  # the order does not change the statistics
            a = x.detach().cpu().numpy().astype(np.float64)
            s = a.sum(0) if s is None else s + a.sum(0)
            ss = (a * a).sum(0) if ss is None else ss + (a * a).sum(0)
            n += a.shape[0]
        if not n:
            raise ValueError(f"benchmark {benchmark.name!r} has no training data to standardise with")
        mean = s / n
        std = np.sqrt(np.maximum(ss / n - mean * mean, 0.0))
        self.mean = torch.from_numpy(mean.astype(np.float32))
        self.std = torch.from_numpy(np.where(std > 1e-12, std, 1.0).astype(np.float32))

    def _apply(self, x: torch.Tensor) -> torch.Tensor:
        return ((x - self.mean) / self.std).contiguous()

    def train_task(self, task: int, seed: int):
        """Standardised training data of ``task``."""
        x, y = self.base.train_task(task, seed)
        return self._apply(x), y

    def test_task(self, task: int):
        """Standardised test data of ``task``."""
        x, y = self.base.test_task(task)
        return self._apply(x), y

    def ood_set(self):
        """Standardised OOD inputs (same statistics), or ``None``."""
        x = self.base.ood_set()
        return None if x is None else self._apply(x)


class LimitedBenchmark(_View):
    """The first ``n_tasks`` tasks, the first ``train_limit`` training examples of each and
    ``test_limit`` test (and OOD) examples spread evenly over each set; ``None`` keeps everything."""

    def __init__(self, benchmark, n_tasks: int | None = None, train_limit: int | None = None,
                 test_limit: int | None = None):
        super().__init__(benchmark)
        for k, v in (("n_tasks", n_tasks), ("train_limit", train_limit), ("test_limit", test_limit)):
            if v is not None and int(v) < 1:
                raise ValueError(f"{k} must be >= 1 or None, got {v}")
        if n_tasks is not None:
            self.n_tasks = min(int(n_tasks), self.n_tasks)
        self.train_limit, self.test_limit = train_limit, test_limit

    def train_task(self, task: int, seed: int):
        """The first ``train_limit`` training examples of ``task`` in presentation order."""
        x, y = self.base.train_task(task, seed)
        return x[:self.train_limit], y[:self.train_limit]

    def _spread(self, n: int) -> torch.Tensor | slice:
        if self.test_limit is None or n <= self.test_limit:
            return slice(None)
        return torch.linspace(0, n - 1, int(self.test_limit)).round().long()

    def test_task(self, task: int):
        """``test_limit`` test examples of ``task``, evenly spread over the set (test sets are often
        sorted by class, so the first ones would be a single class)."""
        x, y = self.base.test_task(task)
        i = self._spread(len(y))
        return x[i], y[i]

    def ood_set(self):
        """``test_limit`` OOD inputs, evenly spread, or ``None``."""
        x = self.base.ood_set()
        return None if x is None else x[self._spread(len(x))]


class RepeatedStream(_View):
    """Every task streams its training data ``repeats`` times, each copy in its own order (seeded by
    the run seed, the task and the copy): a longer, redundant stream of the same examples, like
    consecutive video frames. Test sets, OOD inputs and class groups are the wrapped benchmark's.

    Used to give a stand-in the stream length of the paper's data set: ``animals-ti`` has the paper's
    Animals class counts divided by 4 (Tiny-ImageNet has 500 training images per class), so
    ``stream_repeats=4`` restores the paper's counts (10,572 examples; the paper: 10,549), with
    exact duplicates in place of distinct images.
    """

    def __init__(self, benchmark, repeats: int):
        if isinstance(repeats, bool) or not isinstance(repeats, (int, np.integer)) or repeats < 1:
            raise ValueError(f"stream_repeats must be an integer >= 1, got {repeats!r}")
        super().__init__(benchmark, f"x{int(repeats)}")
        self.repeats = int(repeats)

    def train_task(self, task: int, seed: int):
        """The task's examples ``repeats`` times, each copy permuted."""
        x, y = self.base.train_task(task, seed)
        idx = torch.cat([torch.randperm(len(y), generator=torch.Generator().manual_seed(
            seed * 100_003 + task * 101 + c)) for c in range(self.repeats)])
        return x[idx], y[idx]


"""Tiny synthetic benchmarks and helpers shared by the runner, CLI and report tests (no tests here)."""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from bimu.data.registry import register_benchmark
from bimu.methods.bimu import BiMUMethod

N_FEATURES, N_CLASSES = 6, 3


class FakeBenchmark:
    """Gaussian clusters whose features are permuted per task; ``fail_seed`` raises in train_task."""

    name = "fake"
    n_features = N_FEATURES
    n_classes = N_CLASSES
    is_standin = True

    def __init__(self, data_dir=None, n_tasks=4, seed=0, n_train=24, n_test=30, fail_seed=None):
        self.n_tasks, self.seed, self.n_train, self.n_test, self.fail_seed = n_tasks, seed, n_train, n_test, fail_seed
        g = torch.Generator().manual_seed(1234)
        self.centres = 3.0 * torch.randn(N_CLASSES, N_FEATURES, generator=g)
        self.test_y = torch.arange(n_test) % N_CLASSES
        self.test_x = self.centres[self.test_y] + torch.randn(n_test, N_FEATURES, generator=g)
        self.ood = 3.0 * torch.randn(n_test, N_FEATURES, generator=g) + 8.0

    def _perm(self, task):
        return torch.from_numpy(np.random.default_rng([self.seed, task]).permutation(N_FEATURES))

    def train_task(self, task, seed):
        if self.fail_seed is not None and seed == self.fail_seed:
            raise RuntimeError(f"injected failure for seed {seed}")
        g = torch.Generator().manual_seed(seed * 1000 + task)
        y = torch.randint(0, N_CLASSES, (self.n_train,), generator=g)
        x = self.centres[y] + torch.randn(self.n_train, N_FEATURES, generator=g)
        return x[:, self._perm(task)].contiguous(), y

    def test_task(self, task):
        return self.test_x[:, self._perm(task)].contiguous(), self.test_y

    def ood_set(self):
        return self.ood


def make_fake(data_dir=None, n_tasks=4, seed=0, train_limit=None, test_limit=None):
    """Factory registered as ``fake-test`` (seed 13 fails, for the failure-isolation test)."""
    return FakeBenchmark(data_dir, n_tasks=n_tasks, seed=seed, fail_seed=13)


register_benchmark("fake-test", make_fake, default_hidden=(), description="synthetic test benchmark")


class BoundedBiMU(BiMUMethod):
    """BiMU that declares it needs task boundaries and counts ``task_end`` calls (not registered)."""

    info = dataclasses.replace(BiMUMethod.info, name="bimu-bounded-test", needs_task_boundaries=True)

    def _build(self, generator):
        super()._build(generator)
        self.task_ends = 0

    def task_end(self):
        self.task_ends += 1


def strip_timing(records):
    """Metric records without wall-clock fields (which legitimately differ between runs)."""
    drop = {"train_seconds", "steps_per_s", "eval_seconds"}
    return [{k: v for k, v in r.items() if k not in drop} for r in records]


class Crash(Exception):
    """A failure injected into a run (:func:`crash_after`)."""


def crash_after(task: int):
    """An ``on_task_end`` callback of :func:`bimu.experiments.stream.run_stream` that raises :class:`Crash`
    once ``task`` is saved."""

    def on_task_end(t):
        if t == task:
            raise Crash

    return on_task_end

"""``pmnist-imbalanced``: Permuted MNIST under the paper's class-imbalance rule, task by task (real data).

The active-learning venue on real data (docs/active-learning.md gives its construction and why):

- tasks are pixel permutations of MNIST, task ``t`` permuted by
  :func:`~bimu.data.permuted.pixel_permutation` ``(data_seed, t)`` (the permutations of ``pmnist``'s
  tasks for run seed ``data_seed``), preprocessed as ``pmnist`` (pixels / 255, standardised with the
  MNIST training set's scalar mean and sd); the data do not depend on the run seed, which sets the
  presentation order of each task (:func:`~bimu.data.permuted.training_order`);
- the paper's imbalance rule: a class is low-frequency when it has fewer training images than
  ``rare_threshold`` (default: the median class count, :func:`median_threshold`, so that half of
  MNIST's near-balanced classes are low-frequency), and each low-frequency class loses a fraction of
  its training images drawn uniformly in [0.5, 0.8] once per class
  (:func:`~bimu.data.imbalance.removal_fractions`); every task removes that many images of the class
  afresh (:func:`task_seed`), so each task holds other rare images;
- test sets are balanced, as the paper's: the MNIST test set cut to the smallest class's count per
  class (:func:`~bimu.data.imbalance.balanced_indices`), permuted by each task;
- Fashion-MNIST's test set, preprocessed like MNIST (unpermuted), is the OOD set.

>>> median_threshold([5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949])
5936.0
>>> task_seed(0, 3) == task_seed(0, 3), task_seed(0, 3) == task_seed(0, 4)
(True, False)
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from bimu.data.imbalance import (balanced_indices, class_counts, low_frequency_classes, removal_fractions,
                                 subsample_classes)
from bimu.data.mnist import load_dataset
from bimu.data.permuted import (N_PIXELS, _pmnist_preset, pixel_permutation, standardise, training_order,
                                training_statistics)
from bimu.data.registry import register_benchmark

_REMOVAL_TAG = 0x1A7B
"""Seed-stream tag of the per-task removal draws (independent of the permutation and order streams)."""


def median_threshold(counts: Sequence[int]) -> float:
    """The default low-frequency threshold: the median of the classes' training counts (classes with
    fewer images than it are low-frequency: the smaller half)."""
    return float(np.median(np.asarray(counts, dtype=np.float64)))


def task_seed(data_seed: int, task: int) -> int:
    """The seed of task ``task``'s removal draw (:func:`~bimu.data.imbalance.subsample_classes`), the
    same whatever the number of tasks."""
    ss = np.random.SeedSequence([int(data_seed), int(task), _REMOVAL_TAG])
    return int(ss.generate_state(1, dtype=np.uint32)[0])


class ImbalancedPermutedMNIST:
    """Imbalanced Permuted MNIST (see the module docstring).

    Args:
        data_dir: data directory (``None``: ``$BIMU_DATA_DIR``, then the user cache).
        n_tasks: number of tasks (permutations).
        data_seed: seed of the permutations, of the removal fractions and of each task's removal draw.
        rare_threshold: a class with fewer training images is low-frequency (``None``: the median count).
        low / high: bounds of the removal fraction of a low-frequency class (the paper: 50-80%).
        train_limit / test_limit: keep the first examples of each task's presentation order and of the
            balanced test set (``None``: all); the OOD set is cut to ``test_limit`` too.
        ood: load Fashion-MNIST as the OOD set.
    """

    name = "pmnist-imbalanced"
    n_features = N_PIXELS
    n_classes = 10
    is_standin = False
    description = "Permuted MNIST with the paper's class-imbalance rule in every task (Fashion-MNIST OOD)"

    def __init__(self, data_dir=None, n_tasks: int = 10, data_seed: int = 0, rare_threshold: float | None = None,
                 low: float = 0.5, high: float = 0.8, train_limit: int | None = None,
                 test_limit: int | None = None, ood: bool = True):
        if isinstance(n_tasks, bool) or int(n_tasks) != n_tasks or n_tasks < 1:
            raise ValueError(f"n_tasks must be an integer >= 1, got {n_tasks!r}")
        for key, v in (("train_limit", train_limit), ("test_limit", test_limit)):
            if v is not None and int(v) < 1:
                raise ValueError(f"{key} must be >= 1 or None, got {v}")
        self.n_tasks, self.data_seed = int(n_tasks), int(data_seed)
        self.train_limit = None if train_limit is None else int(train_limit)
        self.test_limit = None if test_limit is None else int(test_limit)
        x, self._train_y = load_dataset("mnist", "train", data_dir)
        self._train_x = x.reshape(len(x), -1)
        counts = class_counts(self._train_y, self.n_classes)
        self.class_counts = counts.tolist()
        self.rare_threshold = median_threshold(counts) if rare_threshold is None else float(rare_threshold)
        self.rare_classes = frozenset(low_frequency_classes(self._train_y, self.rare_threshold, self.n_classes))
        self.frequent_classes = frozenset(range(self.n_classes)) - self.rare_classes
        self.remove_fraction = removal_fractions(self.rare_classes, low, high, seed=self.data_seed)
        self.mean, self.std = training_statistics(self._train_x)
        tx, ty = load_dataset("mnist", "test", data_dir)
        keep = balanced_indices(ty, seed=self.data_seed)[: self.test_limit]
        self._test_x, self._test_y = tx.reshape(len(tx), -1)[keep], torch.from_numpy(ty[keep].astype(np.int64))
        self._ood = None
        if ood:
            fx, _ = load_dataset("fashion-mnist", "test", data_dir)
            self._ood = standardise(fx[: self.test_limit], self.mean, self.std)

    def _check_task(self, task: int) -> int:
        task = int(task)
        if not 0 <= task < self.n_tasks:
            raise ValueError(f"task must lie in [0, {self.n_tasks - 1}], got {task}")
        return task

    def permutation(self, task: int) -> np.ndarray:
        """The pixel permutation of ``task`` (int64 ``[784]``)."""
        return pixel_permutation(self.data_seed, self._check_task(task))

    def kept(self, task: int) -> np.ndarray:
        """Sorted indices of the MNIST training images that ``task`` keeps after its removal draw."""
        return subsample_classes(self._train_y, self.remove_fraction, seed=task_seed(self.data_seed,
                                                                                    self._check_task(task)))

    def train_task(self, task: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The kept training images of ``task`` (permuted, standardised) in run ``seed``'s order."""
        keep = self.kept(task)
        order = keep[training_order(seed, task, len(keep))][: self.train_limit]
        x = standardise(self._train_x[order][:, self.permutation(task)], self.mean, self.std)
        return x, torch.from_numpy(self._train_y[order].astype(np.int64))

    def test_task(self, task: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The balanced MNIST test set, permuted by ``task`` and standardised."""
        return standardise(self._test_x[:, self.permutation(task)], self.mean, self.std), self._test_y

    def ood_set(self) -> torch.Tensor | None:
        """Fashion-MNIST test images, standardised with the MNIST training statistics (unpermuted)."""
        return self._ood

    def __repr__(self) -> str:
        return (f"ImbalancedPermutedMNIST(n_tasks={self.n_tasks}, data_seed={self.data_seed}, "
                f"rare={sorted(self.rare_classes)}, threshold={self.rare_threshold:g})")


def make_imbalanced_permuted_mnist(data_dir=None, n_tasks: int = 10, data_seed: int = 0,
                                   rare_threshold: float | None = None, low: float = 0.5, high: float = 0.8,
                                   train_limit: int | None = None, test_limit: int | None = None,
                                   ood: bool = True) -> ImbalancedPermutedMNIST:
    """Factory registered as ``pmnist-imbalanced`` (its keywords are the benchmark options)."""
    return ImbalancedPermutedMNIST(data_dir=data_dir, n_tasks=n_tasks, data_seed=data_seed,
                                   rare_threshold=rare_threshold, low=low, high=high, train_limit=train_limit,
                                   test_limit=test_limit, ood=ood)


register_benchmark("pmnist-imbalanced", make_imbalanced_permuted_mnist, default_hidden=(100,), preset=_pmnist_preset,
                   description=ImbalancedPermutedMNIST.description)

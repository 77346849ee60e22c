"""Permuted MNIST with Fashion-MNIST as the out-of-distribution set.

- Task ``t`` permutes the 784 pixels with a permutation drawn lazily from ``(seed, t)``; no dataset
  object per task is stored. A task's tensors are built on demand from the uint8 images, straight into
  their one float32 array (pixels gathered in the task's order and permutation, block by block, and
  looked up in a 256-entry table of standardised values); the OOD set is built the same way.
- Pixels are divided by 255, then standardised with the MNIST *training* mean and standard deviation
  (one scalar each, so permutation-invariant); the same transform is applied to the test sets and to
  the Fashion-MNIST OOD set.
- The training order of task ``t`` for run seed ``s`` is a permutation drawn from ``(s, t)``, the same
  for every method.
- ``train_limit`` / ``test_limit`` keep the first examples of the (shuffled) training order and of
  the test sets; the OOD set is cut to ``test_limit`` too.
- Reference-run compatibility (off by default; each is a defect of the paper's code that a reported
  number may depend on, see ``../shared/notes/reference-implementation.md``): ``unshuffled_order``
  presents every task's training images in MNIST file order, ``test_own_statistics`` standardises the
  test set with its own mean and standard deviation, ``ood_unstandardised`` only divides the
  Fashion-MNIST OOD images by 255. Pass them as benchmark options (``bimu run pmnist --option
  ood_unstandardised=true``).

>>> import numpy as np
>>> p = pixel_permutation(0, 3); p.shape, sorted(p) == list(range(784))
((784,), True)
>>> bool((pixel_permutation(0, 3) == p).all()), bool((pixel_permutation(1, 3) == p).all())
(True, False)
"""

from __future__ import annotations

import numpy as np
import torch

from bimu.data.registry import register_benchmark
from bimu.data.mnist import load_dataset

N_PIXELS = 784
_PERM_TAG = 0x5E12  # stream tags keep the permutation and order streams independent
_ORDER_TAG = 0x0D3E
_VALIDATION_TAG = 0x7A11
VALIDATION_SIZE = 10000


def pixel_permutation(seed: int, task: int, n_pixels: int = N_PIXELS, validation: bool = False) -> np.ndarray:
    """The pixel permutation of ``task`` for run ``seed`` (int64 ``[n_pixels]``), platform-stable.

    ``validation=True`` draws from a separate stream (the paper tunes on other permutations).
    """
    ss = np.random.SeedSequence([int(seed), int(task), _PERM_TAG] + ([_VALIDATION_TAG] if validation else []))
    return np.random.Generator(np.random.PCG64(ss)).permutation(n_pixels)


def training_order(seed: int, task: int, n: int, epoch: int = 0) -> np.ndarray:
    """The presentation order of ``n`` training examples for ``(seed, task)`` in pass ``epoch`` (the
    first pass's order does not depend on how many passes there are)."""
    ss = np.random.SeedSequence([int(seed), int(task), _ORDER_TAG] + ([int(epoch)] if epoch else []))
    return np.random.Generator(np.random.PCG64(ss)).permutation(n)


def pixel_table(mean: float, std: float) -> np.ndarray:
    """float32 ``[256]``: ``(v / 255 - mean) / std`` for every pixel value ``v``, computed with
    :func:`standardise`'s float32 operations, so looking pixels up in it gives its bits.

    >>> pixel_table(0.5, 0.5)[[0, 255]].tolist()
    [-1.0, 1.0]
    """
    v = torch.arange(256, dtype=torch.float32)
    return ((v / 255.0 - mean) / std).numpy()


GATHER_ROWS = 4096
"""Images per block when a task's inputs are gathered (the block's uint8 copy is the only temporary)."""


def gather_standardised(images_uint8: np.ndarray, rows, columns, table: np.ndarray) -> torch.Tensor:
    """float32 ``[len(rows), len(columns)]``: ``table`` looked up at ``images[rows][:, columns]`` (images
    flattened to rows of pixels), built block by block into its one output array."""
    flat = np.asarray(images_uint8).reshape(len(images_uint8), -1)
    rows = np.arange(len(flat)) if rows is None else np.asarray(rows)
    columns = np.asarray(columns)
    out = np.empty((len(rows), len(columns)), np.float32)
    for a in range(0, len(rows), GATHER_ROWS):
        out[a:a + GATHER_ROWS] = table[flat[rows[a:a + GATHER_ROWS]][:, columns]]
    return torch.from_numpy(out)


def standardise(images_uint8: np.ndarray, mean: float, std: float) -> torch.Tensor:
    """``(x / 255 - mean) / std`` as float32 ``[n, 784]`` (the one preprocessing for train, test, OOD):
    the pixels looked up in :func:`pixel_table`, with no float copy but the result."""
    a = np.asarray(images_uint8).reshape(len(images_uint8), -1)
    return gather_standardised(a, None, np.arange(a.shape[1]), pixel_table(mean, std))


STATISTICS_BLOCK = 1 << 22
"""Pixels counted per block by :func:`training_statistics` (``np.bincount`` widens its input to int64)."""


def training_statistics(images_uint8: np.ndarray) -> tuple[float, float]:
    """Scalar mean and (population) standard deviation of ``images / 255`` over the training set.

    >>> m, s = training_statistics(np.array([[0, 255]], dtype=np.uint8)); (m, s)
    (0.5, 0.5)
    """
    flat = np.asarray(images_uint8, dtype=np.uint8).ravel()
    counts = np.zeros(256, np.int64)
    for a in range(0, len(flat), STATISTICS_BLOCK):
        counts += np.bincount(flat[a:a + STATISTICS_BLOCK], minlength=256)
    counts = counts.astype(np.float64)
    values = np.arange(256, dtype=np.float64) / 255.0
    n = counts.sum()
    mean = float((counts * values).sum() / n)
    var = float((counts * (values - mean) ** 2).sum() / n)
    return mean, var ** 0.5


class PermutedMNIST:
    """The Permuted-MNIST stream (see the module docstring).

    Args:
        data_dir: data directory (``None``: ``$BIMU_DATA_DIR``, then the user cache).
        n_tasks: number of tasks the stream declares (only a bound; tasks are built lazily).
        seed: run seed that draws the permutations.
        train_limit / test_limit: keep only this many examples per task (``None``: all).
        ood: load Fashion-MNIST as the OOD set.
        identity_first_task: make task 0 the unpermuted MNIST (off by default).
        validation: the tuning variant: other permutations, training on the first 50,000 MNIST
            training images and testing on the last 10,000 (the MNIST test set is not touched).
        unshuffled_order: reference-run compatibility: every task in MNIST file order (``train_limit``
            then keeps the first images of the file).
        test_own_statistics: reference-run compatibility: standardise the test (or validation) set with
            its own scalar mean and standard deviation instead of the training set's.
        ood_unstandardised: reference-run compatibility: the OOD images divided by 255 only.
        epochs_per_task: passes over each task's training examples (default 1, the paper's online
            protocol); later passes present the same examples (the same ``train_limit`` subset) in a
            fresh order each (file order again with ``unshuffled_order``), and the first pass is the
            one-pass stream unchanged.
    """

    name = "pmnist"
    n_features = N_PIXELS
    n_classes = 10
    is_standin = False

    def __init__(self, data_dir=None, n_tasks: int = 1000, seed: int = 0, train_limit: int | None = None,
                 test_limit: int | None = None, ood: bool = True, identity_first_task: bool = False,
                 validation: bool = False, unshuffled_order: bool = False, test_own_statistics: bool = False,
                 ood_unstandardised: bool = False, epochs_per_task: int = 1):
        if int(n_tasks) < 1:
            raise ValueError(f"n_tasks must be >= 1, got {n_tasks}")
        for key, v in (("train_limit", train_limit), ("test_limit", test_limit)):
            if v is not None and int(v) < 1:
                raise ValueError(f"{key} must be >= 1 or None, got {v}")
        if isinstance(epochs_per_task, bool) or int(epochs_per_task) != epochs_per_task or epochs_per_task < 1:
            raise ValueError(f"epochs_per_task must be an integer >= 1, got {epochs_per_task!r}")
        self.epochs_per_task = int(epochs_per_task)
        self.n_tasks = int(n_tasks)
        self.seed = int(seed)
        self.train_limit = None if train_limit is None else int(train_limit)
        self.test_limit = None if test_limit is None else int(test_limit)
        for key, v in (("unshuffled_order", unshuffled_order), ("test_own_statistics", test_own_statistics),
                       ("ood_unstandardised", ood_unstandardised)):
            if not isinstance(v, bool):
                raise ValueError(f"{key} must be true or false, got {v!r}")
        self.identity_first_task = bool(identity_first_task)
        self.validation = bool(validation)
        self.unshuffled_order = unshuffled_order
        self.test_own_statistics = test_own_statistics
        self.ood_unstandardised = ood_unstandardised
        self._train_x, self._train_y = load_dataset("mnist", "train", data_dir)
        self._test_x, self._test_y = load_dataset("mnist", "test", data_dir)
        if self.validation:
            cut = len(self._train_y) - VALIDATION_SIZE
            self._test_x, self._test_y = self._train_x[cut:], self._train_y[cut:]
            self._train_x, self._train_y = self._train_x[:cut], self._train_y[:cut]
        self.mean, self.std = training_statistics(self._train_x)
        if self.test_limit is not None:
            self._test_x, self._test_y = self._test_x[: self.test_limit], self._test_y[: self.test_limit]
        self._train_table = pixel_table(self.mean, self.std)
        self._test_table = (pixel_table(*training_statistics(self._test_x)) if test_own_statistics
                            else self._train_table)
        self._test_labels = torch.from_numpy(self._test_y.astype(np.int64))
        self._ood_images = None
        if ood:
            fx, _ = load_dataset("fashion-mnist", "test", data_dir)
            self._ood_images = fx if self.test_limit is None else fx[: self.test_limit]
            self._ood_table = pixel_table(0.0, 1.0) if ood_unstandardised else self._train_table

    def _check_task(self, task: int) -> int:
        task = int(task)
        if not 0 <= task < self.n_tasks:
            raise ValueError(f"task must lie in [0, {self.n_tasks - 1}], got {task}")
        return task

    def permutation(self, task: int) -> torch.Tensor:
        """Pixel permutation of ``task`` as an int64 tensor."""
        task = self._check_task(task)
        if task == 0 and self.identity_first_task:
            return torch.arange(N_PIXELS)
        return torch.from_numpy(pixel_permutation(self.seed, task, validation=self.validation))

    def train_task(self, task: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Training examples of ``task`` in the presentation order of run ``seed``."""
        perm = self.permutation(task)
        n = len(self._train_y)
        order = np.arange(n) if self.unshuffled_order else training_order(seed, task, n)
        if self.train_limit is not None:
            order = order[: self.train_limit]
        if self.epochs_per_task > 1:  # the same examples again, each later pass in its own order
            order = np.concatenate([order] + [order if self.unshuffled_order else
                                              order[training_order(seed, task, len(order), e)]
                                              for e in range(1, self.epochs_per_task)])
        y = torch.from_numpy(self._train_y[order].astype(np.int64))
        return gather_standardised(self._train_x, order, perm.numpy(), self._train_table), y

    def test_task(self, task: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The permuted, standardised MNIST test set of ``task``."""
        perm = self.permutation(task)
        return gather_standardised(self._test_x, None, perm.numpy(), self._test_table), self._test_labels

    def validation_task(self, task: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The held-out validation examples of ``task`` (only for ``validation=True``)."""
        if not self.validation:
            raise ValueError("this Permuted MNIST has no validation split; build it with validation=True")
        return self.test_task(task)

    def ood_set(self) -> torch.Tensor | None:
        """Fashion-MNIST test images, standardised with the MNIST training statistics (unpermuted;
        divided by 255 only with ``ood_unstandardised``), built on each call like a task's test set."""
        if self._ood_images is None:
            return None
        return gather_standardised(self._ood_images, None, np.arange(N_PIXELS), self._ood_table)

    def __repr__(self) -> str:
        return (f"PermutedMNIST(n_tasks={self.n_tasks}, seed={self.seed}, train_limit={self.train_limit}, "
                f"test_limit={self.test_limit})")


def _pmnist_preset(hidden):
    if tuple(hidden) == (100,):
        return "pmnist-100", ""
    if tuple(hidden) == (2000,):
        return "pmnist-2000", ""
    return "pmnist-100", (f"no paper preset for hidden widths {list(hidden)}; using the 100-neuron "
                          "Permuted-MNIST preset")


def make_permuted_mnist(data_dir=None, n_tasks: int = 1000, seed: int = 0, train_limit: int | None = None,
                        test_limit: int | None = None, ood: bool = True, identity_first_task: bool = False,
                        validation: bool = False, unshuffled_order: bool = False, test_own_statistics: bool = False,
                        ood_unstandardised: bool = False, epochs_per_task: int = 1) -> PermutedMNIST:
    """Factory registered as ``pmnist`` (its keywords are the benchmark options a config may set; an
    unknown one is refused by name)."""
    return PermutedMNIST(data_dir=data_dir, n_tasks=n_tasks, seed=seed, train_limit=train_limit,
                         test_limit=test_limit, ood=ood, identity_first_task=identity_first_task,
                         validation=validation, unshuffled_order=unshuffled_order,
                         test_own_statistics=test_own_statistics, ood_unstandardised=ood_unstandardised,
                         epochs_per_task=epochs_per_task)


register_benchmark("pmnist", make_permuted_mnist, default_hidden=(100,), preset=_pmnist_preset,
                   description="Permuted MNIST (Fashion-MNIST OOD)")

"""The base class of every fused method: construction, input checks, the learn / predict plumbing.

A subclass sets ``info``, ``hyperparameters`` and ``presets`` from its torch method and implements
``_build`` (arrays, drawn exactly like the torch method's initialisation), ``_run(xn, yn, n_steps,
batch)`` (one compiled call), ``_logits_np(xn, n_samples, key, draw)`` (``[S, B, C]`` logits) and the
state methods. Prediction of a Bayesian method draws its noise from counters (:mod:`bimu.rng`): the
evaluation key of the seed and a draw counter that advances by :meth:`FusedMethod._draw_advance` per
call, or a key derived from ``generator`` when one other than the method's own ``eval_generator`` is
given (as the torch methods take one).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numba
import numpy as np
import torch

from bimu.engine.notice import compile_notice
from bimu.engine.scores import scores_from_logits
from bimu.methods.base import OnlineMethod, check_labels
from bimu.rng import EVAL_STREAM, TRAIN_STREAM, derive_key
from bimu.threads import busy

DTYPES = {"float32": np.float32, "float64": np.float64}
"""Working precisions of the engine's arrays."""


def check_threads(threads: int | None) -> int:
    """``threads`` (default: numba's pool size), checked to lie in ``[1, pool size]``."""
    pool = int(numba.config.NUMBA_NUM_THREADS)
    if threads is None:
        return pool
    threads = int(threads)
    if not 1 <= threads <= pool:
        raise ValueError(f"threads must lie in [1, {pool}], got {threads}")
    return threads


_pool_started = False


def start_thread_pool() -> None:
    """Start numba's thread pool (once per process), keeping torch's intra-op thread count: starting
    numba's OpenMP layer sets the process's OpenMP thread count to the pool size, which torch takes for
    its own, so a run on one thread (``bimu run --threads 1``, the way runs share a machine side by side)
    would otherwise run its torch work on every core."""
    global _pool_started
    if not _pool_started:
        before = torch.get_num_threads()
        numba.get_num_threads()  # starts the pool
        torch.set_num_threads(before)
        _pool_started = True


FINITE_CHECK_VALUES = 1 << 20
"""Values per block of :func:`all_finite` (its one temporary: a boolean array of a block)."""


def all_finite(a: np.ndarray) -> bool:
    """Whether every value of the 2-D array ``a`` is finite, tested a block of rows at a time (a whole
    task's inputs at once would need a boolean copy of a quarter of their size).

    >>> all_finite(np.zeros((3, 2))), all_finite(np.array([[0.0, np.inf]]))
    (True, False)
    """
    rows = max(1, FINITE_CHECK_VALUES // max(1, a.shape[1]))
    return all(bool(np.isfinite(a[i:i + rows]).all()) for i in range(0, len(a), rows))


class FusedMethod(OnlineMethod):
    """Base class of the engine's methods (see the module docstring).

    Extra constructor arguments: ``threads`` (work is split over this many threads; the results do not
    depend on it) and ``dtype`` (``"float32"`` or ``"float64"``).
    """

    def __init__(self, sizes: Sequence[int], seed: int = 0, threads: int | None = None,
                 dtype: str = "float32", **hparams: Any):
        if dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {sorted(DTYPES)}, got {dtype!r}")
        self.dtype = np.dtype(DTYPES[dtype])
        self.threads = check_threads(threads)
        start_thread_pool()
        self.train_key = derive_key(int(seed), TRAIN_STREAM)
        self.eval_key = derive_key(int(seed), EVAL_STREAM)
        self.eval_counter = 0
        with compile_notice("build", "the engine's kernels"):  # building the state may compile the samplers
            super().__init__(sizes, seed=seed, **hparams)

    def _set_threads(self) -> int:
        """Set numba's thread count for this process's next compiled call and return it: ``threads``, or one
        while other work leaves fewer free cores than that (:func:`bimu.threads.busy`)."""
        threads = self.threads
        if threads > 1 and busy(threads):
            threads = 1
        numba.set_num_threads(threads)
        return threads

    # ----------------------------------------------------------------- inputs
    def check_batch(self, x: torch.Tensor, y: torch.Tensor | None = None) -> None:
        """The base class's checks and errors, with the finiteness test done by numpy for CPU float
        tensors (torch's ``isfinite(x).all()`` takes ~80 ms on a 10,000 x 784 batch on a busy machine)."""
        if not (x.dim() == 2 and x.shape[1] == self.sizes[0] and x.device.type == "cpu"
                and x.dtype in (torch.float32, torch.float64)):
            return super().check_batch(x, y)
        if not all_finite(x.detach().numpy()):
            raise ValueError("inputs contain NaN or infinite values")
        if y is not None:
            check_labels(y, x.shape[0], self.n_classes)
        return None

    def _as_inputs(self, x, y=None):
        """Tensors or arrays -> checked contiguous numpy arrays (``self.dtype`` inputs, int64 labels)."""
        x = torch.as_tensor(x)
        if y is not None:
            y = torch.as_tensor(y)
        self.check_batch(x, y)
        xn = np.ascontiguousarray(x.detach().cpu().numpy(), dtype=self.dtype)
        yn = None if y is None else np.ascontiguousarray(y.detach().cpu().numpy(), dtype=np.int64)
        return xn, yn

    # ----------------------------------------------------------------- learning
    def _run(self, xn: np.ndarray, yn: np.ndarray, n_steps: int, batch: int) -> None:
        raise NotImplementedError

    def _float_state(self) -> list[np.ndarray] | None:
        """Every floating array of :meth:`modules_state`, uncopied, or None (then :meth:`check_finite`
        walks :meth:`modules_state`)."""
        return None

    def check_finite(self, task: int | None = None) -> None:
        """:meth:`OnlineMethod.check_finite <bimu.methods.base.OnlineMethod.check_finite>`, with the
        arrays of :meth:`_float_state` tested in place by numpy first (no copies; torch's ``isfinite``
        on a copy of an 8,192 x 19 layer cost about 2 ms per step): the state is walked, and its
        non-finite entries named, only when one of them is not finite."""
        arrays = self._float_state()
        if arrays is not None and all(bool(np.isfinite(a).all()) for a in arrays):
            return
        super().check_finite(task)

    def learn(self, x: torch.Tensor, y: torch.Tensor) -> None:
        """One update from a labelled batch, in one compiled call; the state is then checked to be finite
        (:meth:`~bimu.methods.base.OnlineMethod.check_finite`)."""
        xn, yn = self._as_inputs(x, y)
        if xn.shape[0] == 0:
            raise ValueError("cannot learn from an empty batch")
        with compile_notice("train", "the training kernel"):
            self._run(xn, yn, 1, xn.shape[0])
        self.check_finite()
        self.examples_seen += int(xn.shape[0])  # as the torch methods: examples, not steps
        self.updates_applied += 1

    def learn_many(self, X, Y) -> None:
        """``len(X)`` consecutive batch-size-1 steps in one compiled call; identical to calling
        :meth:`learn` on each row in turn (counters included); the state is checked to be finite after
        the call."""
        xn, yn = self._as_inputs(X, Y)
        n = xn.shape[0]
        if n == 0:
            return
        with compile_notice("train", "the training kernel"):
            self._run(xn, yn, n, 1)
        self.check_finite()
        self.examples_seen += n
        self.updates_applied += n

    # ----------------------------------------------------------------- prediction
    def _logits_np(self, xn: np.ndarray, n_samples: int, key, draw: int) -> np.ndarray:
        raise NotImplementedError

    def _draw_advance(self, n_samples: int) -> int:
        """How far one prediction with ``n_samples`` samples moves the evaluation counter: one draw for a
        Bayesian method, none for a deterministic one."""
        return 1 if self.info.bayesian else 0

    def _logits(self, x, n_samples: int | None, generator: torch.Generator | None) -> np.ndarray:
        """Logits ``[S, B, C]`` of a batch (``S = 1`` for deterministic methods) from the counter stream,
        or from ``generator`` when one other than ``self.eval_generator`` is given."""
        n = self.default_eval_samples if n_samples is None else int(n_samples)
        if n < 1:
            raise ValueError(f"n_samples must be >= 1, got {n}")
        if not self.info.bayesian:
            n = 1
        xn, _ = self._as_inputs(x)
        if generator is None or generator is self.eval_generator:
            key, draw = self.eval_key, self.eval_counter
            self.eval_counter += self._draw_advance(n)
        else:
            key, draw = derive_key(int(torch.randint(0, 2**62, (1,), generator=generator)), EVAL_STREAM), 0
        self._set_threads()
        with compile_notice("eval", "the evaluation kernels"):
            return self._logits_np(xn, n, key, draw)

    def _predict_logits(self, x: torch.Tensor, n_samples: int, generator: torch.Generator) -> torch.Tensor:
        return torch.from_numpy(self._logits(x, n_samples, generator))

    def mc_scores(self, x, n_samples: int | None = None, generator: torch.Generator | None = None) -> dict:
        """Monte-Carlo scores of a batch in one compiled pass (no backward pass; one sample for
        deterministic methods).

        Returns a dict of torch tensors: ``votes`` (int64 ``[B, C]``, samples predicting each class),
        ``variation_ratio`` (``1 - max votes / S``), ``predictive_entropy``, ``aleatoric``,
        ``epistemic`` (bits, float64 ``[B]``), ``predictions`` (``[B]``) and ``probs`` (``[S, B, C]``).
        """
        probs, votes, pred, vr, pe, al, ep = scores_from_logits(self._logits(x, n_samples, generator))
        return {"votes": torch.from_numpy(votes), "variation_ratio": torch.from_numpy(vr),
                "predictive_entropy": torch.from_numpy(pe), "aleatoric": torch.from_numpy(al),
                "epistemic": torch.from_numpy(ep), "predictions": torch.from_numpy(pred),
                "probs": torch.from_numpy(probs.astype(np.float32, copy=False))}

    # ----------------------------------------------------------------- state helpers
    def _counters_state(self) -> dict[str, Any]:
        return {"eval_counter": self.eval_counter, "dtype": self.dtype.name, "engine": "fused"}

    def _load_counters(self, state) -> None:
        self.eval_counter = int(state["eval_counter"])


def views(flat: np.ndarray, shapes: Sequence[tuple[int, ...]]) -> list[np.ndarray]:
    """Consecutive pieces of ``flat`` with the given shapes, as views (writing into them writes ``flat``).

    >>> [v.shape for v in views(np.arange(10.0), [(2, 3), (4,)])]
    [(2, 3), (4,)]
    """
    out, start = [], 0
    for shape in shapes:
        n = int(np.prod(shape))
        out.append(flat[start:start + n].reshape(shape))
        start += n
    return out


def layer_pairs(first: list, second: list) -> list:
    """``[first[0], second[0], first[1], second[1], ...]`` (e.g. weight and bias of each layer)."""
    return [v for pair in zip(first, second) for v in pair]


def to_tensors(flat: np.ndarray, shapes: Sequence[tuple[int, ...]]) -> list[torch.Tensor]:
    """Copies of consecutive pieces of ``flat`` with the given shapes, as torch tensors."""
    return [torch.from_numpy(v.copy()) for v in views(flat, shapes)]


def from_tensors(tensors, shapes: Sequence[tuple[int, ...]], dtype, what: str) -> np.ndarray:
    """Inverse of :func:`to_tensors` (shapes checked; ValueError names ``what``)."""
    tensors = list(tensors)
    if len(tensors) != len(shapes):
        raise ValueError(f"{what}: expected {len(shapes)} tensors, got {len(tensors)}")
    for t, shape in zip(tensors, shapes):
        if tuple(t.shape) != tuple(shape):
            raise ValueError(f"{what}: expected shape {tuple(shape)}, got {tuple(t.shape)}")
    return np.concatenate([np.asarray(t, dtype=dtype).reshape(-1) for t in tensors]).astype(dtype)

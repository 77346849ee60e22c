"""What the engine's baseline methods share: construction, input checks, the learn / predict plumbing.

A subclass sets ``info``, ``hyperparameters`` and ``presets`` from its torch method and implements
``_build`` (arrays, drawn exactly like the torch method's initialisation), ``_run(xn, yn, n_steps,
batch)`` (one compiled call), ``_logits_np(xn, n_samples, key, draw)`` (``[S, B, C]`` logits) and the
state methods. Prediction of a Bayesian method draws its noise from counters: the evaluation key of
the seed and a draw counter that advances by one per call, or a key derived from ``generator`` when
one is given (as the torch methods take one).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numba
import numpy as np
import torch

from bimu.engine import kernels
from bimu.engine.fused import DTYPES, _FusedBase, check_threads
from bimu.engine.rng import EVAL_STREAM, TRAIN_STREAM, derive_key
from bimu.methods.base import OnlineMethod


class EngineMethod(OnlineMethod):
    """Base class of the engine's baseline methods (see the module docstring).

    Extra constructor arguments: ``threads`` (evaluation splits examples over this many threads; the
    results do not depend on it; training runs on one thread) and ``dtype`` (``"float32"`` or
    ``"float64"``).
    """

    def __init__(self, sizes: Sequence[int], seed: int = 0, threads: int | None = None,
                 dtype: str = "float32", **hparams: Any):
        if dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {sorted(DTYPES)}, got {dtype!r}")
        self.dtype = np.dtype(DTYPES[dtype])
        self.threads = check_threads(threads)
        self.train_key = derive_key(int(seed), TRAIN_STREAM)
        self.eval_key = derive_key(int(seed), EVAL_STREAM)
        self.eval_counter = 0
        super().__init__(sizes, seed=seed, **hparams)

    # ----------------------------------------------------------------- inputs
    check_batch = _FusedBase.check_batch  # the base class's checks, finiteness tested in numpy
    _as_inputs = _FusedBase._as_inputs  # tensors/arrays -> checked contiguous numpy (self.dtype, int64)

    # ----------------------------------------------------------------- learning
    def _run(self, xn: np.ndarray, yn: np.ndarray, n_steps: int, batch: int) -> None:
        raise NotImplementedError

    def learn(self, x: torch.Tensor, y: torch.Tensor) -> None:
        """One update from a labelled batch, in one compiled call."""
        xn, yn = self._as_inputs(x, y)
        if xn.shape[0] == 0:
            raise ValueError("cannot learn from an empty batch")
        self._run(xn, yn, 1, xn.shape[0])
        self.examples_seen += int(xn.shape[0])
        self.updates_applied += 1

    learn_many = _FusedBase.learn_many  # len(X) batch-size-1 steps in one compiled call

    # ----------------------------------------------------------------- prediction
    def _logits_np(self, xn: np.ndarray, n_samples: int, key, draw: int) -> np.ndarray:
        raise NotImplementedError

    def _logits(self, x, n_samples, generator) -> np.ndarray:
        n = self.default_eval_samples if n_samples is None else int(n_samples)
        if n < 1:
            raise ValueError(f"n_samples must be >= 1, got {n}")
        if not self.info.bayesian:
            n = 1
        xn, _ = self._as_inputs(x)
        if generator is None or generator is self.eval_generator:
            key, draw = self.eval_key, self.eval_counter
            self.eval_counter += 1 if self.info.bayesian else 0
        else:
            key, draw = derive_key(int(torch.randint(0, 2**62, (1,), generator=generator)), EVAL_STREAM), 0
        numba.set_num_threads(self.threads)
        return self._logits_np(xn, n, key, draw)

    def _predict_logits(self, x: torch.Tensor, n_samples: int, generator: torch.Generator) -> torch.Tensor:
        return torch.from_numpy(self._logits(x, n_samples, generator))

    def mc_scores(self, x, n_samples: int | None = None, generator: torch.Generator | None = None) -> dict:
        """Monte-Carlo scores of a batch in one compiled pass (one sample for deterministic methods):
        ``votes``, ``variation_ratio``, ``predictive_entropy``, ``aleatoric``, ``epistemic`` (bits),
        ``predictions`` and ``probs`` (``[S, B, C]``), as :meth:`bimu.engine.FusedBiMU.mc_scores`."""
        logits = self._logits(x, n_samples, generator)
        probs, votes, pred, vr, pe, al, ep = kernels.scores_from_logits(logits)
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

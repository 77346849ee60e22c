"""Fused online methods: the torch methods' interface and semantics, the loop in compiled kernels.

:class:`FusedBiMU` behaves like :class:`bimu.methods.bimu.BiMUMethod` (same ``info``,
hyperparameters, presets, initial lambda for a given seed, counters and update rule) but runs the
forward pass, backward pass, BiMU update and resampling of each step inside one numba call, and
draws its uniforms from counters (:mod:`bimu.engine.rng`) instead of a ``torch.Generator``: for the
same seed the two paths start from the same lambda but follow different random draws. Fed the same
uniforms (see :meth:`FusedBiMU.train_uniforms`) they compute the same steps.

Stored state: lambda (float32 by default; ``dtype="float64"`` for exact comparisons), the training
step counter (which selects the relaxed uniforms of the next step) and the evaluation counter. The
relaxed weight samples of the next step are kept between calls; they are a pure function of lambda and
the step counter and are re-drawn on :meth:`~FusedBiMU.load_state_dict`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numba
import numpy as np
import torch

from bimu.engine import fastpath, kernels
from bimu.engine.rng import EVAL_STREAM, TRAIN_STREAM, derive_key, relaxed_uniforms, uniforms_from_counters
from bimu.methods.base import SCORE_NAMES, Hyperparameter, MethodInfo, OnlineMethod, check_labels, positive
from bimu.methods.bayesbinn import BayesBiNNMethod
from bimu.methods.bimu import BiMUMethod
from bimu.nn.mlp import ACTIVATIONS, LAYER_NORM_EPS
from bimu.optim.bayesbinn import prior_sign

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

class _FusedBase(OnlineMethod):
    """Shared machinery of the fused methods (network, buffers, kernels, state)."""

    _update_kind = kernels.KIND_BIMU

    def __init__(self, sizes: Sequence[int], seed: int = 0, threads: int | None = None,
                 dtype: str = "float32", **hparams: Any):
        if dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {sorted(DTYPES)}, got {dtype!r}")
        self.dtype = np.dtype(DTYPES[dtype])
        self.threads = check_threads(threads)
        super().__init__(sizes, seed=seed, **hparams)

    # ----------------------------------------------------------------- setup
    def _initial_lambdas(self, generator: torch.Generator) -> list[np.ndarray]:
        raise NotImplementedError

    def _build(self, generator: torch.Generator) -> None:
        hp = self.hparams
        self.K = int(hp["n_samples"])
        self._sizes = np.asarray(self.sizes, dtype=np.int64)
        self._poff = np.zeros(len(self.sizes), dtype=np.int64)
        for l in range(len(self.sizes) - 1):
            self._poff[l + 1] = self._poff[l] + self.sizes[l] * self.sizes[l + 1]
        self.n_params = int(self._poff[-1])
        act = kernels.ACT_GATE if hp["activation"] == "rbg" else kernels.ACT_SIGN
        self._cfg = np.array([act, int(hp["output_norm"]), self._update_kind, 0, self.K], dtype=np.int64)
        self._hp = np.asarray(self._hp_vector(), dtype=self.dtype)
        self.lam = np.concatenate([a.reshape(-1) for a in self._initial_lambdas(generator)]).astype(self.dtype)
        self.prior = np.zeros(1, dtype=self.dtype)
        self.train_key = derive_key(self.seed, TRAIN_STREAM)
        self.eval_key = derive_key(self.seed, EVAL_STREAM)
        self.train_step = 0
        self.eval_counter = 0
        self.W = np.empty(self.K * self.n_params, dtype=self.dtype)
        self._resample()

    def _hp_vector(self) -> list[float]:
        raise NotImplementedError

    def _set_threads(self) -> None:
        numba.set_num_threads(self.threads)

    def _resample(self) -> None:
        self._set_threads()
        kernels.sample_weights(self.lam, self.W, self._sizes, self._poff, self.K, self.train_key,
                               np.uint64(self.train_step), False, self._hp[6])

    # ----------------------------------------------------------------- views
    def layer_lambdas(self) -> list[np.ndarray]:
        """Views of lambda, one ``[out, in]`` array per layer (writing into them changes the model)."""
        return [self.lam[self._poff[l]:self._poff[l + 1]].reshape(self.sizes[l + 1], self.sizes[l])
                for l in range(len(self.sizes) - 1)]

    def train_uniforms(self, step: int | None = None) -> list[np.ndarray]:
        """The relaxed-sample uniforms of training ``step`` (default: the next one), one ``[K, out, in]``
        float64 array per layer - the ``uniforms=`` to give the torch network to replay the step."""
        step = self.train_step if step is None else int(step)
        out = []
        for l in range(len(self.sizes) - 1):
            n_out, n_in = self.sizes[l + 1], self.sizes[l]
            e0 = self._poff[l] + n_in * np.arange(n_out)
            out.append(relaxed_uniforms(self.train_key, step, self.n_params, e0, n_in, self.K))
        return out

    def eval_uniforms(self, n_samples: int, counter: int | None = None) -> list[np.ndarray]:
        """The hard-sample uniforms the next evaluation with ``n_samples`` samples will use (per layer)."""
        counter = self.eval_counter if counter is None else int(counter)
        return self._uniforms(self.eval_key, counter, int(n_samples))

    def _uniforms(self, key, cbase: int, K: int) -> list[np.ndarray]:
        kh = (K + 1) // 2
        out = []
        for l in range(len(self.sizes) - 1):
            e = np.arange(self._poff[l], self._poff[l + 1], dtype=np.uint64)
            n_out, n_in = self.sizes[l + 1], self.sizes[l]
            u = np.empty((K, n_out * n_in))
            for m in range(kh):
                pair = uniforms_from_counters(key, np.uint64(cbase) + e * np.uint64(kh) + np.uint64(m))
                u[2 * m] = pair[0::2]
                if 2 * m + 1 < K:
                    u[2 * m + 1] = pair[1::2]
            out.append(u.reshape(K, n_out, n_in))
        return out

    # ----------------------------------------------------------------- input checks
    def check_batch(self, x: torch.Tensor, y: torch.Tensor | None = None) -> None:
        """The base class's checks and errors, with the finiteness test done by numpy for CPU float
        tensors (torch's ``isfinite(x).all()`` took ~80 ms on a 10,000 x 784 batch on a busy machine)."""
        if not (x.dim() == 2 and x.shape[1] == self.sizes[0] and x.device.type == "cpu"
                and x.dtype in (torch.float32, torch.float64)):
            return OnlineMethod.check_batch(self, x, y)  # explicit: EngineMethod shares this method
        if not np.isfinite(x.detach().numpy()).all():
            raise ValueError("inputs contain NaN or infinite values")
        if y is not None:
            check_labels(y, x.shape[0], self.n_classes)
        return None

    def _as_inputs(self, x, y=None):
        x = torch.as_tensor(x)
        if y is not None:
            y = torch.as_tensor(y)
            if y.dtype.is_floating_point or y.dtype == torch.bool:
                raise ValueError(f"labels must be integers, got dtype {y.dtype}")
        self.check_batch(x, y)
        xn = np.ascontiguousarray(x.detach().cpu().numpy(), dtype=self.dtype)
        yn = None if y is None else np.ascontiguousarray(y.detach().cpu().numpy(), dtype=np.int64)
        return xn, yn

    # ----------------------------------------------------------------- learning
    def _run(self, xn: np.ndarray, yn: np.ndarray, n_steps: int, batch: int) -> int:
        self._set_threads()
        if batch == 1 and self._hp[6] == 1:  # the specialised kernel: batch size 1, temperature 1
            if getattr(self, "_scratch", None) is None:
                self._scratch = fastpath.make_scratch(self.sizes, self.K, numba.config.NUMBA_NUM_THREADS,
                                                      self.dtype)
            steps_b1 = fastpath.train_steps_b1_kernel(self.K)
            applied = steps_b1(xn.reshape(n_steps, -1), yn, n_steps, self.lam, self.prior, self.W, self._sizes,
                               self._poff, self._cfg, self._hp, self.train_key, self.train_step, self.threads,
                               *self._scratch)
            self.train_step += n_steps
            return int(applied)
        applied = kernels.train_steps(xn, yn, n_steps, batch, self.lam, self.prior, self.W, self._sizes,
                                      self._poff, self._cfg, self._hp, self.train_key, self.train_step)
        self.train_step += n_steps
        return int(applied)

    def learn(self, x: torch.Tensor, y: torch.Tensor) -> None:
        """One step on a labelled batch: K relaxed samples, forward, backward, update (fused)."""
        xn, yn = self._as_inputs(x, y)
        if xn.shape[0] == 0:
            raise ValueError("cannot learn from an empty batch")
        self._run(xn, yn, 1, xn.shape[0])
        self.examples_seen += int(xn.shape[0])  # as the torch method: examples, not steps
        self.updates_applied += 1

    def learn_many(self, X, Y) -> None:
        """``len(X)`` consecutive batch-size-1 steps in one compiled call; identical to calling
        :meth:`learn` on each row in turn (counters included)."""
        xn, yn = self._as_inputs(X, Y)
        n = xn.shape[0]
        if n == 0:
            return
        self._run(xn, yn, n, 1)
        self.examples_seen += n
        self.updates_applied += n

    # ----------------------------------------------------------------- prediction
    def _eval_stream(self, n: int, generator: torch.Generator | None):
        kh = (n + 1) // 2
        if generator is None:
            cbase = self.eval_counter
            self.eval_counter += self.n_params * kh
            return self.eval_key, np.uint64(cbase)
        seed = int(torch.randint(0, 2**62, (1,), generator=generator))
        return derive_key(seed, EVAL_STREAM), np.uint64(0)

    def _hard_logits_np(self, x, n_samples, generator=None) -> np.ndarray:
        n = self.default_eval_samples if n_samples is None else int(n_samples)
        if n < 1:
            raise ValueError(f"n_samples must be >= 1, got {n}")
        xn, _ = self._as_inputs(x)
        key, cbase = self._eval_stream(n, generator)
        self._set_threads()
        W = np.empty(n * self.n_params, dtype=self.dtype)
        kernels.sample_weights(self.lam, W, self._sizes, self._poff, n, key, cbase, True, self._hp[6])
        B = xn.shape[0]
        if B % 4 == 0:
            Xp = xn
        else:  # rows padded with zeros to a multiple of 4 (each example's arithmetic stays the same)
            Xp = np.zeros(((B + 3) // 4 * 4, xn.shape[1]), dtype=self.dtype)
            Xp[:B] = xn
        out = np.empty((n, B, self.sizes[-1]), dtype=self.dtype)
        fastpath.hard_forward(Xp, B, W, self._sizes, self._poff, self._cfg, self._hp, n, self.threads,
                              numba.config.NUMBA_NUM_THREADS, out)
        return out

    def _predict_logits(self, x: torch.Tensor, n_samples: int, generator: torch.Generator) -> torch.Tensor:
        gen = None if generator is self.eval_generator else generator
        return torch.from_numpy(self._hard_logits_np(x, n_samples, gen))

    def predict_proba(self, x, n_samples: int | None = None, generator: torch.Generator | None = None):
        """Class probabilities ``[S, B, C]`` (float32 torch tensor) from S hard weight samples."""
        logits = self._hard_logits_np(x, n_samples, generator)
        probs = kernels.scores_from_logits(logits)[0]
        return torch.from_numpy(probs.astype(np.float32, copy=False))

    def predict(self, x, n_samples: int | None = None, generator: torch.Generator | None = None):
        """Argmax of the mean log-probability over hard samples (the paper's rule), ``[B]`` int64."""
        logits = self._hard_logits_np(x, n_samples, generator)
        return torch.from_numpy(kernels.scores_from_logits(logits)[2])

    def mc_scores(self, x, n_samples: int | None = None, generator: torch.Generator | None = None) -> dict:
        """Hard-sample Monte-Carlo scores of a batch in one compiled pass (no backward pass).

        Returns a dict of torch tensors: ``votes`` (int64 ``[B, C]``, samples predicting each class),
        ``variation_ratio`` (``1 - max votes / S``), ``predictive_entropy``, ``aleatoric``,
        ``epistemic`` (bits, float64 ``[B]``), ``predictions`` (``[B]``) and ``probs`` (``[S, B, C]``).
        """
        logits = self._hard_logits_np(x, n_samples, generator)
        probs, votes, pred, vr, pe, al, ep = kernels.scores_from_logits(logits)
        return {"votes": torch.from_numpy(votes), "variation_ratio": torch.from_numpy(vr),
                "predictive_entropy": torch.from_numpy(pe), "aleatoric": torch.from_numpy(al),
                "epistemic": torch.from_numpy(ep), "predictions": torch.from_numpy(pred),
                "probs": torch.from_numpy(probs.astype(np.float32, copy=False))}

    # ----------------------------------------------------------------- state
    def modules_state(self) -> dict[str, Any]:
        """Lambda (one tensor per layer), prior, and the two counters that select future draws."""
        return {"lam": [torch.from_numpy(a.copy()) for a in self.layer_lambdas()],
                "prior": torch.from_numpy(self.prior.copy()),
                "train_step": self.train_step, "eval_counter": self.eval_counter,
                "dtype": self.dtype.name, "engine": "fused"}

    def load_modules_state(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`modules_state` output and re-draw the pending weight samples."""
        lams = state["lam"]
        if len(lams) != len(self.sizes) - 1:
            raise ValueError(f"state holds {len(lams)} layers, expected {len(self.sizes) - 1}")
        for l, t in enumerate(lams):
            shape = (self.sizes[l + 1], self.sizes[l])
            if tuple(t.shape) != shape:
                raise ValueError(f"layer {l} lambda has shape {tuple(t.shape)}, expected {shape}")
        self.lam = np.concatenate([np.asarray(t, dtype=self.dtype).reshape(-1) for t in lams])
        self.prior = np.ascontiguousarray(np.asarray(state["prior"], dtype=self.dtype).reshape(-1))
        if self._cfg[3] and self.prior.shape[0] != self.n_params:
            raise ValueError(f"prior holds {self.prior.shape[0]} values, expected {self.n_params}")
        self.train_step = int(state["train_step"])
        self.eval_counter = int(state["eval_counter"])
        self._resample()

    def memory_bytes(self) -> int:
        """Lambda (plus a per-parameter prior where the method keeps one)."""
        extra = self.prior.nbytes if self._cfg[3] else 0
        return int(self.lam.nbytes + extra)


def _torch_init(sizes, generator) -> list[np.ndarray]:
    """The torch methods' initialisation: ``U(-1/sqrt(in), 1/sqrt(in))`` per layer from ``generator``."""
    out = []
    for a, b in zip(sizes[:-1], sizes[1:]):
        bound = 1.0 / math.sqrt(a)
        t = torch.empty(b, a).uniform_(-bound, bound, generator=generator)
        out.append(t.numpy())
    return out


class FusedBiMU(_FusedBase):
    """BiMU in the fused engine; same ``info``, hyperparameters and presets as the torch method.

    Extra constructor arguments: ``threads`` (rows of a layer are split over this many threads; the
    results do not depend on it) and ``dtype`` (``"float32"`` or ``"float64"``). Batch-size-1 steps at
    temperature 1 (``learn_many``, or ``learn`` on one example) run the specialised kernel of
    :mod:`bimu.engine.fastpath`. Splitting a ~100 us step over threads needs a barrier per step, which
    pays only on an otherwise idle machine; to use several cores on a shared one, run independent
    methods (seeds, tasks) with ``threads=1`` side by side - the kernels release the GIL, so Python
    threads suffice (see ``benchmarks/stream_speed.py``).
    """

    info = BiMUMethod.info
    hyperparameters = BiMUMethod.hyperparameters
    presets = BiMUMethod.presets
    _update_kind = kernels.KIND_BIMU

    def _initial_lambdas(self, generator):
        return _torch_init(self.sizes, generator)

    def _hp_vector(self):
        hp = self.hparams
        return [hp["lr"] * hp["likelihood_multiplier"], 2.0 * hp["likelihood_multiplier"], hp["kl_multiplier"],
                1.0 / hp["lr_max"], hp["kl_multiplier"] / hp["memory_window"], hp["prior"],
                1.0 / hp["temperature"], hp["gate_width"], LAYER_NORM_EPS]


class FusedBayesBiNN(_FusedBase):
    """BayesBiNN (Meng et al. 2020) in the fused engine; same ``info``, hyperparameters, presets and
    update as :class:`bimu.methods.bayesbinn.BayesBiNNMethod`.

    ``g_mu = mean_k dl(w_k)/dw_k (1 - w_k^2) / (T (1 - tanh^2 lambda))`` (``l`` the batch-mean NLL)
    and ``lambda -= lr * (g_mu + s * prior_strength * (lambda - lambda_prior))`` (``s`` from
    ``prior_direction``: :func:`bimu.optim.bayesbinn.prior_sign`); lambda starts at 0
    (``lambda_init="zero"``) or like the torch method's ``"uniform"``; ``lambda_prior`` (initially 0)
    becomes the current lambda at each task boundary (:meth:`task_end`). With ``ratio_eps`` (default 1e-10) the ratio is
    ``((1 - w^2) + eps) / ((1 - mu^2) + eps)`` on both paths; at ``ratio_eps = 0``, where ``tanh``
    saturates in float32 (``|lambda + delta| > ~9``) the engine's ratio ``(1 - w^2) / (1 - tanh^2 lambda)``
    is 0 while the torch method's log-cosh form is not.
    """

    info = BayesBiNNMethod.info
    hyperparameters = BayesBiNNMethod.hyperparameters
    presets = BayesBiNNMethod.presets
    _update_kind = kernels.KIND_BAYESBINN

    def _initial_lambdas(self, generator):
        if self.hparams["lambda_init"] == "uniform":
            return _torch_init(self.sizes, generator)
        return [np.zeros((b, a), dtype=np.float32) for a, b in zip(self.sizes[:-1], self.sizes[1:])]

    def _hp_vector(self):
        hp = self.hparams
        cpr = prior_sign(hp["prior_direction"]) * hp["lr"] * hp["prior_strength"]
        return [hp["lr"], hp["ratio_eps"], 0.0, 0.0, cpr, 0.0,
                1.0 / hp["temperature"], hp["gate_width"], LAYER_NORM_EPS]

    def _build(self, generator):
        super()._build(generator)
        self.prior = np.zeros(self.n_params, dtype=self.dtype)
        self._cfg[3] = 1

    def task_end(self) -> None:
        """Reset the prior to the current posterior (lambda_prior <- lambda)."""
        self.prior[:] = self.lam

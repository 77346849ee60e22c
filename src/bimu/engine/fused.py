"""Fused online methods: the torch methods' interface and semantics, the loop in compiled kernels.

:class:`FusedBiMU` behaves like :class:`bimu.methods.bimu.BiMUMethod` (same ``info``,
hyperparameters, presets, initial lambda for a given seed, counters and update rule) but runs the
forward pass, backward pass, BiMU update and resampling of each step inside one numba call, and
draws its uniforms from counters (:mod:`bimu.rng`) instead of a ``torch.Generator``: for the
same seed the two paths start from the same lambda but follow different random draws. Fed the same
uniforms (see :meth:`FusedBiMU.train_uniforms`) they compute the same steps.

Batch-size-1 steps at temperature 1 run the kernels of :mod:`bimu.engine.fastpath` and
:mod:`bimu.engine.rowpass`, with at most :data:`~bimu.engine.rowpass.MAX_SAMPLES` samples per step
(a larger ``n_samples`` is refused when the method is made); other steps run
:func:`bimu.engine.binary_train.train_steps`, predictions :mod:`bimu.engine.hard_eval` (or, with the
hyperparameter ``eval_sum="grouped"``, :mod:`bimu.engine.grouped_eval`: faster, rounded differently).

Stored state: lambda (float32 by default; ``dtype="float64"`` for exact comparisons), the training
step counter (which selects the relaxed uniforms of the next step) and the evaluation counter. The
relaxed weight samples of the next step are kept between calls; they are a pure function of lambda and
the step counter and are re-drawn on :meth:`~FusedBiMU.load_state_dict`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numba
import numpy as np
import torch

from bimu.engine.base import FusedMethod
from bimu.engine.binary_train import train_steps
from bimu.engine.fastpath import make_scratch
from bimu.engine.grouped_eval import grouped_forward
from bimu.engine.hard_eval import hard_forward
from bimu.engine.query import QueryPlanes
from bimu.engine.hparams import ACT_GATE, ACT_SIGN, KIND_BAYESBINN, KIND_BIMU, BinaryHP, Cfg, pack
from bimu.engine.rowpass import MAX_SAMPLES, train_steps_b1_kernel
from bimu.engine.sampling import sample_weights
from bimu.engine.scores import scores_from_logits, scores_one
from bimu.methods.bayesbinn import BayesBiNNMethod
from bimu.methods.bimu import BiMUMethod
from bimu.nn.mlp import LAYER_NORM_EPS
from bimu.optim.bayesbinn import prior_sign
from bimu.rng import relaxed_uniforms, uniforms_from_counters


class _FusedBinary(FusedMethod):
    """What BiMU and BayesBiNN share: the binary network, its kernels and its state."""

    _update_kind = KIND_BIMU
    _per_param_prior = False
    """Whether ``prior`` holds one ``lambda_prior`` per parameter (else one scalar, :attr:`BinaryHP.PRIOR`)."""

    @classmethod
    def resolve_hyperparameters(cls, overrides: Mapping[str, Any], preset: str | None = None) -> dict[str, Any]:
        """The torch method's resolution, then the engine's limit: at most
        :data:`~bimu.engine.rowpass.MAX_SAMPLES` relaxed samples per step (ValueError naming it)."""
        values = super().resolve_hyperparameters(overrides, preset)
        if values["n_samples"] > MAX_SAMPLES:
            raise ValueError(f"the fused engine runs {cls.info.name} with at most {MAX_SAMPLES} samples per step "
                             f"(n_samples={values['n_samples']})")
        return values

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
        self._cfg = pack(Cfg, {Cfg.ACT: ACT_GATE if hp["activation"] == "rbg" else ACT_SIGN,
                               Cfg.OUT_NORM: int(hp["output_norm"]), Cfg.KIND: self._update_kind,
                               Cfg.PRIOR_PER_PARAM: int(self._per_param_prior), Cfg.K: self.K}, np.int64)
        self._hp = pack(BinaryHP, self._hp_values(), self.dtype)
        self.lam = np.concatenate([a.reshape(-1) for a in self._initial_lambdas(generator)]).astype(self.dtype)
        self.prior = np.zeros(self.n_params if self._per_param_prior else 1, dtype=self.dtype)
        self.train_step = 0
        self.W = np.empty(self.K * self.n_params, dtype=self.dtype)
        self._resample()

    def _hp_values(self) -> dict[BinaryHP, float]:
        raise NotImplementedError

    def _resample(self) -> None:
        self._set_threads()
        sample_weights(self.lam, self.W, self._sizes, self._poff, self.K, self.train_key,
                       np.uint64(self.train_step), False, self._hp[BinaryHP.INV_TEMPERATURE])

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
        K = int(n_samples)
        kh = (K + 1) // 2
        out = []
        for l in range(len(self.sizes) - 1):
            e = np.arange(self._poff[l], self._poff[l + 1], dtype=np.uint64)
            n_out, n_in = self.sizes[l + 1], self.sizes[l]
            u = np.empty((K, n_out * n_in))
            for m in range(kh):
                pair = uniforms_from_counters(self.eval_key, np.uint64(counter) + e * np.uint64(kh) + np.uint64(m))
                u[2 * m] = pair[0::2]
                if 2 * m + 1 < K:
                    u[2 * m + 1] = pair[1::2]
            out.append(u.reshape(K, n_out, n_in))
        return out

    # ----------------------------------------------------------------- learning
    def _run(self, xn: np.ndarray, yn: np.ndarray, n_steps: int, batch: int) -> int:
        threads = self._set_threads()
        if batch == 1 and self._hp[BinaryHP.INV_TEMPERATURE] == 1:  # the specialised kernel
            if getattr(self, "_scratch", None) is None:
                self._scratch = make_scratch(self.sizes, self.K, numba.config.NUMBA_NUM_THREADS, self.dtype)
            applied = train_steps_b1_kernel(self.K)(
                xn.reshape(n_steps, -1), yn, n_steps, self.lam, self.prior, self.W, self._sizes, self._poff,
                self._cfg, self._hp, self.train_key, self.train_step, threads, self._b1_ready(),
                *self._scratch)
            self._b1_lam = (self.train_step + n_steps, self.lam.copy())
        else:
            applied = train_steps(xn, yn, n_steps, batch, self.lam, self.prior, self.W, self._sizes, self._poff,
                                  self._cfg, self._hp, self.train_key, self.train_step)
            self._b1_lam = None
        self.train_step += n_steps
        self._query = None
        return int(applied)

    def _b1_ready(self) -> bool:
        """Whether the last training call ran the batch-size-1 kernel and left ``W`` and its scratch for
        this step and this lambda (a lambda written since, through :meth:`layer_lambdas` or a loaded
        state, is not): the next call then keeps the first layer's samples instead of redrawing them
        (the same values, one pass over the first layer fewer: an active stream learns one example per
        call)."""
        last = getattr(self, "_b1_lam", None)
        return last is not None and last[0] == self.train_step and np.array_equal(last[1], self.lam)

    # ----------------------------------------------------------------- prediction
    def _draw_advance(self, n_samples: int) -> int:
        """The evaluation counters one prediction uses: ``ceil(S / 2)`` per parameter."""
        return self.n_params * ((n_samples + 1) // 2)

    def _logits_np(self, xn, n_samples, key, draw) -> np.ndarray:
        W = np.empty(n_samples * self.n_params, dtype=self.dtype)
        sample_weights(self.lam, W, self._sizes, self._poff, n_samples, key, np.uint64(draw), True,
                       self._hp[BinaryHP.INV_TEMPERATURE])
        B = xn.shape[0]
        if B % 4 == 0:
            Xp = xn
        else:  # rows padded with zeros to a multiple of 4 (each example's arithmetic stays the same)
            Xp = np.zeros(((B + 3) // 4 * 4, xn.shape[1]), dtype=self.dtype)
            Xp[:B] = xn
        out = np.empty((n_samples, B, self.sizes[-1]), dtype=self.dtype)
        forward = grouped_forward if self.hparams["eval_sum"] == "grouped" else hard_forward
        forward(Xp, B, W, self._sizes, self._poff, self._cfg, self._hp, n_samples, self.threads,
                     numba.config.NUMBA_NUM_THREADS, out)
        return out

    def predict_samples(self, x, n_samples: int | None = None, generator: torch.Generator | None = None):
        """Class probabilities ``[S, B, C]`` (float32 torch tensor) from S hard weight samples."""
        probs = scores_from_logits(self._logits(x, n_samples, generator))[0]
        return torch.from_numpy(probs.astype(np.float32, copy=False))

    def predict(self, x, n_samples: int | None = None, generator: torch.Generator | None = None):
        """Argmax of the mean log-probability over hard samples (the paper's rule), ``[B]`` int64."""
        return torch.from_numpy(scores_from_logits(self._logits(x, n_samples, generator))[2])

    def query_planes(self) -> QueryPlanes:
        """The query sampler's thresholds of the current lambda (:mod:`bimu.engine.query`), rebuilt
        after the method learns or loads a state (not after writes into :meth:`layer_lambdas` views)."""
        if getattr(self, "_query", None) is None:
            self._query = QueryPlanes(self)
        return self._query

    def query_samples(self, x, n_samples: int, key: int) -> tuple[torch.Tensor, int]:
        """Class probabilities ``[S, 1, C]`` (float32) of one example under S fresh hard samples drawn
        from the 62-bit integer ``key`` (:mod:`bimu.engine.query`), and its prediction (argmax of the
        mean log-softmax). The evaluation counter is not used."""
        xn, _ = self._as_inputs(x)
        probs, _, pred = scores_one(self.query_planes().logits(xn[0], key, int(n_samples)))[:3]
        return torch.from_numpy(probs.astype(np.float32, copy=False)), int(pred[0])

    # ----------------------------------------------------------------- state
    def _float_state(self) -> list[np.ndarray]:
        return [self.lam, self.prior]

    def modules_state(self) -> dict[str, Any]:
        """Lambda (one tensor per layer), prior, and the two counters that select future draws."""
        return {"lam": [torch.from_numpy(a.copy()) for a in self.layer_lambdas()],
                "prior": torch.from_numpy(self.prior.copy()), "train_step": self.train_step,
                **self._counters_state()}

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
        if self._cfg[Cfg.PRIOR_PER_PARAM] and self.prior.shape[0] != self.n_params:
            raise ValueError(f"prior holds {self.prior.shape[0]} values, expected {self.n_params}")
        self.train_step = int(state["train_step"])
        self._load_counters(state)
        self._resample()
        self._query = None
        self._b1_lam = None

    def memory_bytes(self) -> int:
        """Lambda (plus a per-parameter prior where the method keeps one)."""
        extra = self.prior.nbytes if self._cfg[Cfg.PRIOR_PER_PARAM] else 0
        return int(self.lam.nbytes + extra)


def _torch_init(sizes, generator) -> list[np.ndarray]:
    """The torch methods' initialisation: ``U(-1/sqrt(in), 1/sqrt(in))`` per layer from ``generator``."""
    out = []
    for a, b in zip(sizes[:-1], sizes[1:]):
        bound = 1.0 / math.sqrt(a)
        t = torch.empty(b, a).uniform_(-bound, bound, generator=generator)
        out.append(t.numpy())
    return out


class FusedBiMU(_FusedBinary):
    """BiMU in the fused engine; same ``info``, hyperparameters and presets as the torch method.

    Extra constructor arguments: ``threads`` (rows of a layer are split over this many threads; the
    results do not depend on it) and ``dtype`` (``"float32"`` or ``"float64"``). Batch-size-1 steps at
    temperature 1 (``learn_many``, or ``learn`` on one example) run the specialised kernels of
    :mod:`bimu.engine.fastpath`. Splitting a ~100 us step over threads needs a barrier per step, which
    pays only on an otherwise idle machine; to use several cores on a shared one, run independent
    methods (seeds, tasks) with ``threads=1`` side by side - the kernels release the GIL, so Python
    threads suffice (see ``benchmarks/stream_speed.py``).
    """

    info = BiMUMethod.info
    hyperparameters = BiMUMethod.hyperparameters
    presets = BiMUMethod.presets
    _update_kind = KIND_BIMU

    def _initial_lambdas(self, generator):
        return _torch_init(self.sizes, generator)

    def _hp_values(self):
        hp = self.hparams
        return {BinaryHP.GAMMA_BETA_L: hp["lr"] * hp["likelihood_multiplier"],
                BinaryHP.TWO_BETA_L: 2.0 * hp["likelihood_multiplier"], BinaryHP.BETA_KL: hp["kl_multiplier"],
                BinaryHP.INV_LR_MAX: 1.0 / hp["lr_max"], BinaryHP.KL_OVER_N: hp["kl_multiplier"] / hp["memory_window"],
                BinaryHP.PRIOR: hp["prior"], BinaryHP.INV_TEMPERATURE: 1.0 / hp["temperature"],
                BinaryHP.GATE: hp["gate_width"], BinaryHP.LN_EPS: LAYER_NORM_EPS}


class FusedBayesBiNN(_FusedBinary):
    """BayesBiNN (Meng et al. 2020) in the fused engine; same ``info``, hyperparameters, presets and
    update as :class:`bimu.methods.bayesbinn.BayesBiNNMethod`.

    ``g_mu = mean_k dl(w_k)/dw_k (1 - w_k^2) / (T (1 - tanh^2 lambda))`` (``l`` the batch-mean NLL)
    and ``lambda -= lr * (g_mu + s * prior_strength * (lambda - lambda_prior))`` (``s`` from
    ``prior_direction``: :func:`bimu.optim.bayesbinn.prior_sign`); lambda starts at 0
    (``lambda_init="zero"``) or like the torch method's ``"uniform"``; ``lambda_prior`` (initially 0)
    becomes the current lambda at each task boundary (:meth:`task_end`). With ``ratio_eps`` (default
    1e-10) the ratio is ``((1 - w^2) + eps) / ((1 - mu^2) + eps)`` on both paths; at ``ratio_eps = 0``,
    where ``tanh`` saturates in float32 (``|lambda + delta| > ~9``) the engine's ratio
    ``(1 - w^2) / (1 - tanh^2 lambda)`` is 0 while the torch method's log-cosh form is not.
    """

    info = BayesBiNNMethod.info
    hyperparameters = BayesBiNNMethod.hyperparameters
    presets = BayesBiNNMethod.presets
    _update_kind = KIND_BAYESBINN
    _per_param_prior = True

    def _initial_lambdas(self, generator):
        if self.hparams["lambda_init"] == "uniform":
            return _torch_init(self.sizes, generator)
        return [np.zeros((b, a), dtype=np.float32) for a, b in zip(self.sizes[:-1], self.sizes[1:])]

    def _hp_values(self):
        hp = self.hparams
        return {BinaryHP.LR: hp["lr"], BinaryHP.RATIO_EPS: hp["ratio_eps"],
                BinaryHP.PRIOR_PULL: prior_sign(hp["prior_direction"]) * hp["lr"] * hp["prior_strength"],
                BinaryHP.INV_TEMPERATURE: 1.0 / hp["temperature"], BinaryHP.GATE: hp["gate_width"],
                BinaryHP.LN_EPS: LAYER_NORM_EPS}

    def task_end(self) -> None:
        """Reset the prior to the current posterior (lambda_prior <- lambda)."""
        self.prior[:] = self.lam

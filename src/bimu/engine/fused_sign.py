"""STE and Synaptic Metaplasticity in the fused engine (sign weights and activations, latent weights).

Each class has the ``info``, hyperparameters, presets, initial latent weights (same seed), network,
update, task-end hook, counters and memory footprint of its torch method (:mod:`bimu.methods.ste`,
:mod:`bimu.methods.synaptic_metaplasticity`); a chunk of online steps runs in one call of
:func:`bimu.engine.sign.sign_train`. Both methods are deterministic.

>>> import numpy as np
>>> m = FusedSTE([4, 8, 3], seed=0)
>>> m.learn_many(np.ones((5, 4), np.float32), np.array([0, 1, 2, 0, 1]))
>>> float(np.abs(m.Wh).max()) <= 1.0, m.memory_bytes() == 3 * 4 * (4 * 8 + 8 * 3)
(True, True)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from bimu.engine.base import FusedMethod, from_tensors, to_tensors, views
from bimu.engine.dense import dense_forward, offsets
from bimu.engine.hparams import ACT_GATE, ACT_SIGN, SignHP, pack
from bimu.engine.sign import sign_train, signs_into
from bimu.methods.ste import STEMethod
from bimu.methods.synaptic_metaplasticity import SynapticMetaplasticityMethod
from bimu.nn.sign_linear import OnlineBatchNorm, SignMLP

ADAM_BETAS = (0.9, 0.999)
"""Adam's ``(beta1, beta2)`` (the torch optimizer's defaults, which the torch methods use)."""
ADAM_EPS = 1e-8
"""Adam's epsilon."""
BN_EPS = OnlineBatchNorm(1).eps
"""The norms' epsilon (that of :class:`bimu.nn.sign_linear.OnlineBatchNorm`)."""


class FusedSTE(FusedMethod):
    """STE (sign weights and activations, AdamW on latent weights, clip) in the fused engine; base of
    :class:`FusedSynapticMetaplasticity`."""

    info = STEMethod.info
    hyperparameters = STEMethod.hyperparameters
    presets = STEMethod.presets
    _norm = False

    def _build(self, generator: torch.Generator) -> None:
        net = SignMLP(self.sizes, batch_norm=False)
        net.reset_parameters(generator)
        self._sizes = np.asarray(self.sizes, dtype=np.int64)
        self.woff, self.boff = offsets(self.sizes)
        self._wshapes = [tuple(w.shape) for w in net.latent_weights()]
        self.Wh = np.concatenate([w.detach().numpy().reshape(-1) for w in net.latent_weights()]).astype(self.dtype)
        self.mW, self.vW = np.zeros_like(self.Wh), np.zeros_like(self.Wh)
        n_units = int(self.boff[-1])
        nn_ = 2 * n_units if self._norm else 0
        self._nshapes = [(b,) for b in self.sizes[1:] for _ in range(2)]
        self.NP = np.concatenate([np.ones(b) if j == 0 else np.zeros(b) for b in self.sizes[1:] for j in range(2)])
        self.NP = self.NP.astype(self.dtype)[:nn_]
        self.mN, self.vN = np.zeros(nn_, self.dtype), np.zeros(nn_, self.dtype)
        self.RM = np.zeros(n_units, self.dtype)
        self.RV = np.ones(n_units, self.dtype)
        self.bn_seen = np.zeros(1, np.int64)  # the equinox norms' first-batch flag (INIT of sign_train)
        self.adam_step = 0
        self._hp = pack(SignHP, self._hp_values(), np.float64)
        self._scratch_batch = 0

    def _hp_values(self) -> dict[SignHP, float]:
        hp = self.hparams
        return {SignHP.LR: hp["lr"], SignHP.WEIGHT_DECAY: hp["weight_decay"], SignHP.DECOUPLED: 1.0,
                SignHP.CLIP: float(hp["clip_latent"]), SignHP.BETA1: ADAM_BETAS[0], SignHP.BETA2: ADAM_BETAS[1],
                SignHP.EPS: ADAM_EPS, SignHP.BN_EPS: BN_EPS}

    def _scratch(self, batch: int) -> tuple:
        if self._scratch_batch != batch:
            n, u = batch * int(self.boff[-1]), int(self.boff[-1])
            self._scratch_arrays = (*(np.zeros(n, self.dtype) for _ in range(4)), np.zeros(u, self.dtype),
                                    np.zeros(2 * u, self.dtype), np.zeros(max(self.sizes), self.dtype),
                                    np.zeros(self.sizes[-1], self.dtype), np.zeros(u, self.dtype))
            self._scratch_batch = batch
        return self._scratch_arrays

    def _run(self, xn, yn, n_steps, batch) -> None:
        sign_train(xn, yn, n_steps, batch, self.Wh, self.NP, self.RM, self.RV, self.mW, self.vW, self.mN, self.vN,
                   self._sizes, self.woff, self.boff, self._norm, self._hp, self.adam_step, *self._scratch(batch),
                   self.bn_seen)
        self.adam_step += n_steps

    def _eval_norm(self) -> tuple[np.ndarray, np.ndarray]:
        """The norms' ``(gamma, beta)`` per unit used for prediction."""
        return self._split_norm(self.NP)

    def _split_norm(self, flat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        gam, bet = [], []
        for l in range(len(self.sizes) - 1):
            b0, n = 2 * int(self.boff[l]), self.sizes[l + 1]
            gam.append(flat[b0:b0 + n])
            bet.append(flat[b0 + n:b0 + 2 * n])
        return np.concatenate(gam), np.concatenate(bet)

    def _logits_np(self, xn, n_samples, key, draw) -> np.ndarray:
        out = np.empty((1, xn.shape[0], self.sizes[-1]), dtype=self.dtype)
        wb = getattr(self, "_wb", None)
        if wb is None or wb.shape != self.Wh.shape or wb.dtype != self.dtype:
            wb = self._wb = np.empty(self.Wh.shape, dtype=self.dtype)
        signs_into(self.Wh, wb)
        if self._norm:
            gam, bet = self._eval_norm()
            inv = (1.0 / np.sqrt(self.RV + self.dtype.type(BN_EPS))).astype(self.dtype)
        else:
            gam = inv = np.ones_like(self.RM)
            bet = np.zeros_like(self.RM)
        gate = float(self._hp[SignHP.GATE])
        dense_forward(xn, wb, self.RM, self.RM, inv, gam, bet, self._sizes, self.woff, self.boff, 1,
                      ACT_GATE if gate > 0 else ACT_SIGN, gate, self._norm, False, self.threads, out)
        return out

    # ----------------------------------------------------------------- views and state
    def _float_state(self) -> list[np.ndarray]:
        """The floating arrays of :meth:`modules_state`, uncopied (tested after every call: a walk of
        :meth:`modules_state` copies them and costs tens of ms per ``learn_many`` call)."""
        return [self.Wh, self.mW, self.vW, *((self.NP, self.mN, self.vN, self.RM, self.RV) if self._norm else ())]

    def parameters_np(self) -> list[np.ndarray]:
        """Views of the latent weights (one ``[out, in]`` array per layer), then of the norms' ``gamma``
        and ``beta`` of each layer: the torch network's ``parameters()`` order."""
        return views(self.Wh, self._wshapes) + (views(self.NP, self._nshapes) if self._norm else [])

    def modules_state(self) -> dict[str, Any]:
        """Copies of the latent weights, norms (parameters, statistics) and Adam state; counters."""
        state = {"Wh": to_tensors(self.Wh, self._wshapes), "mW": to_tensors(self.mW, self._wshapes),
                 "vW": to_tensors(self.vW, self._wshapes), "adam_step": self.adam_step, **self._counters_state()}
        if self._norm:
            for name in ("NP", "mN", "vN"):
                state[name] = to_tensors(getattr(self, name), self._nshapes)
            state["RM"] = torch.from_numpy(self.RM.copy())
            state["RV"] = torch.from_numpy(self.RV.copy())
            if self._hp[SignHP.BN_EQUINOX]:
                state["bn_seen"] = bool(self.bn_seen[0])
        return state

    def load_modules_state(self, state: Mapping[str, Any]) -> None:
        """Restore what :meth:`modules_state` returned."""
        for name in ("Wh", "mW", "vW"):
            getattr(self, name)[:] = from_tensors(state[name], self._wshapes, self.dtype, name)
        if self._norm:
            for name in ("NP", "mN", "vN"):
                getattr(self, name)[:] = from_tensors(state[name], self._nshapes, self.dtype, name)
            for name in ("RM", "RV"):
                getattr(self, name)[:] = from_tensors([state[name]], [self.RM.shape], self.dtype, name)
            self.bn_seen[0] = int(bool(state.get("bn_seen", False)))
        self.adam_step = int(state["adam_step"])
        self._load_counters(state)

    def memory_bytes(self) -> int:
        """Latent weights and Adam moments (plus the norms' parameters, statistics and moments)."""
        return int(3 * self.Wh.nbytes + 3 * self.NP.nbytes + (self.RM.nbytes + self.RV.nbytes) * self._norm)


class FusedSynapticMetaplasticity(FusedSTE):
    """Synaptic Metaplasticity (metaplastic Adam with L2 weight decay, batch norm after every layer)
    in the fused engine; ``task_affine`` stores the norms' parameters at every task end and
    :meth:`use_task` predicts with a stored task's (task identity at test time, as the torch method)."""

    info = SynapticMetaplasticityMethod.info
    hyperparameters = SynapticMetaplasticityMethod.hyperparameters
    presets = SynapticMetaplasticityMethod.presets
    _norm = True

    def _build(self, generator):
        super()._build(generator)
        self.task_affine_bank: list[np.ndarray] = []
        self._eval_task: int | None = None

    def _hp_values(self):
        hp = self.hparams
        return {SignHP.LR: hp["lr"], SignHP.METAPLASTICITY: hp["metaplasticity"],
                SignHP.WEIGHT_DECAY: hp["weight_decay"], SignHP.BETA1: ADAM_BETAS[0], SignHP.BETA2: ADAM_BETAS[1],
                SignHP.EPS: ADAM_EPS, SignHP.BN_MOMENTUM: hp["bn_momentum"], SignHP.BN_EPS: BN_EPS,
                SignHP.GATE: hp["gate_width"] if hp["activation"] == "rbg" else 0.0,
                SignHP.BN_EQUINOX: 1.0 if hp["bn_statistics"] == "equinox" else 0.0}

    def task_end(self) -> None:
        """With ``task_affine``, store a copy of the norms' affine parameters for this task."""
        if self.hparams["task_affine"]:
            self.task_affine_bank.append(self.NP.copy())

    def use_task(self, task: int | None) -> None:
        """Predict with the affine parameters stored for ``task`` (``None`` or the current task: the
        live ones); errors as :meth:`bimu.methods.synaptic_metaplasticity.SynapticMetaplasticityMethod.use_task`."""
        SynapticMetaplasticityMethod.use_task(self, task)

    def _eval_norm(self):
        task = self._eval_task
        if task is None or task >= len(self.task_affine_bank):
            return super()._eval_norm()
        return self._split_norm(self.task_affine_bank[task])

    def _float_state(self):
        """As :meth:`FusedSTE._float_state`, plus the per-task affine bank."""
        return [*super()._float_state(), *self.task_affine_bank]

    def modules_state(self):
        """As :meth:`FusedSTE.modules_state`, plus the per-task affine bank."""
        return {**super().modules_state(), "task_affine_bank": [torch.from_numpy(a.copy())
                                                                for a in self.task_affine_bank]}

    def load_modules_state(self, state):
        """Restore what :meth:`modules_state` returned."""
        super().load_modules_state(state)
        self.task_affine_bank = [np.asarray(t, dtype=self.dtype).copy() for t in state["task_affine_bank"]]

    def memory_bytes(self):
        """As the torch method: network state, Adam moments and the per-task affine bank."""
        return super().memory_bytes() + sum(a.nbytes for a in self.task_affine_bank)

"""Named slots of the vectors that configure the compiled kernels, and :func:`pack`, which fills them.

Each kernel family reads its settings from one small array: the binary networks (BiMU, BayesBiNN)
an integer configuration ``cfg`` (:class:`Cfg`) and a float vector ``hp`` in the working dtype
(:class:`BinaryHP`); MESU (:class:`MesuHP`), the sign networks (:class:`SignHP`) and the real
networks (:class:`RealHP`) a float vector each. Kernels index them by name (``hp[BinaryHP.GATE]``;
numba reads an ``IntEnum`` member as a compile-time constant) and the fused methods fill them with
:func:`pack`. Slots that one method of a family does not use stay 0; a slot with two names serves
two methods (BiMU's ``TWO_BETA_L`` is BayesBiNN's ``RATIO_EPS``).

>>> pack(RealHP, {RealHP.LR: 0.5, RealHP.COEF: 2.0}, "float32")
array([0.5, 2. , 0. ], dtype=float32)
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import IntEnum

import numpy as np

ACT_RELU = 0
"""Hidden activation ``max(z, 0)``."""
ACT_SIGN = 1
"""Hidden activation ``sign(z)`` in {-1, +1} (``sign(0) = +1``) with the hard-tanh straight-through
derivative ``1[|z| <= 1]``."""
ACT_GATE = 2
"""Hidden activation: the Reverse Binary Gate ``1[|z| > gate]`` in {0, 1} (:func:`bimu.nn.rbg`) with the
derivative :func:`bimu.engine.scalar.gate_surrogate`. One set of activation codes for every compiled
network."""
KIND_BIMU = 0
"""Update rule of the binary networks: BiMU."""
KIND_BAYESBINN = 1
"""Update rule of the binary networks: BayesBiNN."""


class Cfg(IntEnum):
    """Slots of the binary networks' integer configuration ``cfg`` (int64)."""

    ACT = 0
    """Hidden activation: :data:`ACT_GATE` or :data:`ACT_SIGN`."""
    OUT_NORM = 1
    """1: LayerNorm (no affine) on the logits too."""
    KIND = 2
    """Update rule: :data:`KIND_BIMU` or :data:`KIND_BAYESBINN`."""
    PRIOR_PER_PARAM = 3
    """1: the prior is a per-parameter array (BayesBiNN), 0: the scalar :attr:`BinaryHP.PRIOR`."""
    K = 4
    """Relaxed samples per training step."""


class BinaryHP(IntEnum):
    """Slots of the binary networks' float vector ``hp`` (BiMU name | BayesBiNN alias)."""

    GAMMA_BETA_L = 0
    """BiMU: ``gamma * beta_L``, the data term's coefficient."""
    LR = 0
    """BayesBiNN: the learning rate."""
    TWO_BETA_L = 1
    """BiMU: ``2 beta_L``, the asymmetry term's coefficient."""
    RATIO_EPS = 1
    """BayesBiNN: ``ratio_eps``, added to ``1 - w^2`` and to ``1 - tanh^2 lambda``."""
    BETA_KL = 2
    """BiMU: ``beta_KL``."""
    INV_LR_MAX = 3
    """BiMU: ``1 / alpha_max``."""
    KL_OVER_N = 4
    """BiMU: ``beta_KL / N`` (forgetting)."""
    PRIOR_PULL = 4
    """BayesBiNN: coefficient ``c`` of ``(lambda - lambda_prior)``."""
    PRIOR = 5
    """BiMU: the scalar ``lambda_prior``."""
    INV_TEMPERATURE = 6
    """``1 / T``."""
    GATE = 7
    """RBG threshold ``a``."""
    LN_EPS = 8
    """LayerNorm epsilon."""


class MesuHP(IntEnum):
    """Slots of MESU's float64 vector ``hp`` (:func:`bimu.engine.gaussian.mesu_train`)."""

    LR_MU = 0
    LR_SIGMA = 1
    SIGMA_PRIOR = 2
    MU_PRIOR = 3
    MEMORY_WINDOW = 4
    CLAMP_GRAD = 5
    GATE = 6
    """> 0: hidden activation the Reverse Binary Gate with this threshold; 0: ReLU."""


class SignHP(IntEnum):
    """Slots of the sign networks' float64 vector ``hp`` (:func:`bimu.engine.sign.sign_train`)."""

    LR = 0
    METAPLASTICITY = 1
    WEIGHT_DECAY = 2
    DECOUPLED = 3
    """!= 0: decoupled (AdamW) weight decay; 0: L2 added to the gradient."""
    CLIP = 4
    """!= 0: latent weights clipped to ``[-1, 1]``."""
    BETA1 = 5
    BETA2 = 6
    EPS = 7
    BN_MOMENTUM = 8
    BN_EPS = 9
    GATE = 10
    """> 0: hidden activation the Reverse Binary Gate with this threshold; 0: sign (hard-tanh estimator)."""
    BN_EQUINOX = 11
    """!= 0: the norms' ``equinox`` statistics of :class:`bimu.nn.sign_linear.OnlineBatchNorm`."""


class RealHP(IntEnum):
    """Slots of the real networks' float vector ``hp`` (:func:`bimu.engine.real.real_train`)."""

    LR = 0
    COEF = 1
    """Online EWC: ``importance``; SI: ``2 c``; SGD: 0."""
    BIAS = 2
    """!= 0: the biases are trained; 0: they stay at 0 (a network without biases)."""


def pack(table: type[IntEnum], values: Mapping[IntEnum, float], dtype) -> np.ndarray:
    """The vector of ``table`` in ``dtype``: ``values`` at their slots, 0 elsewhere."""
    out = np.zeros(max(table) + 1, dtype=dtype)
    for slot, value in values.items():
        out[table(slot)] = value
    return out

"""Inlined pieces of the binary networks' kernels (numba): LayerNorm with the hidden activation, its
backward pass, the activation's derivative, and one natural parameter's BiMU and BayesBiNN steps.

Each is compiled into its callers (``inline="always"``), so every training kernel computes the same
arithmetic for them.
"""

from __future__ import annotations

import math

from numba import njit

from bimu.engine.hparams import ACT_GATE, BinaryHP
from bimu.engine.scalar import KERNEL_OPTS, gate_forward, gate_surrogate
from bimu.rng import as_like


@njit(inline="always", **KERNEL_OPTS)
def layer_norm_act(Z, XH, A, r_out, base, n, eps, act, gate, hidden):
    """LayerNorm (no affine, biased variance) of ``Z[base:base+n]`` then the activation (if hidden)."""
    s = 0.0
    for o in range(n):
        s += Z[base + o]
    mu = s / n
    v = 0.0
    for o in range(n):
        d = Z[base + o] - mu
        v += d * d
    v = v / n
    r = 1.0 / math.sqrt(v + eps)
    r_out[0] = r
    one = as_like(1.0, Z[base])
    for o in range(n):
        xh = (Z[base + o] - mu) * r
        XH[base + o] = xh
        if hidden:
            if act == ACT_GATE:
                A[base + o] = gate_forward(xh, gate)
            else:
                A[base + o] = one if xh >= 0 else -one
        else:
            A[base + o] = xh


@njit(inline="always", **KERNEL_OPTS)
def ln_backward(DA, da0, XH, x0, DZ, r, n):
    """LayerNorm (no affine) backward in place: ``DZ[x0:x0+n] = r (g - mean(g) - xh mean(g xh))``
    with ``g = DA[da0:da0+n]``, ``xh = XH[x0:x0+n]`` the normalised values, ``r = 1/sqrt(var + eps)``."""
    s1 = 0.0
    s2 = 0.0
    for i in range(n):
        s1 += DA[da0 + i]
        s2 += DA[da0 + i] * XH[x0 + i]
    s1 /= n
    s2 /= n
    for i in range(n):
        DZ[x0 + i] = r * (DA[da0 + i] - s1 - XH[x0 + i] * s2)


@njit(inline="always", **KERNEL_OPTS)
def bimu_coefficients(hp):
    """BiMU's update coefficients in ``hp`` (:class:`~bimu.engine.hparams.BinaryHP`): the tuple
    ``(gamma beta_L, 2 beta_L, beta_KL, 1/alpha_max, beta_KL/N, lambda_prior)``, the last six arguments
    of :func:`bimu_lambda_step`."""
    return (hp[BinaryHP.GAMMA_BETA_L], hp[BinaryHP.TWO_BETA_L], hp[BinaryHP.BETA_KL], hp[BinaryHP.INV_LR_MAX],
            hp[BinaryHP.KL_OVER_N], hp[BinaryHP.PRIOR])


@njit(inline="always", **KERNEL_OPTS)
def bimu_lambda_step(lo, g, b, gbl, two_bl, bkl, ilm, kln, pr0):
    """One natural parameter's BiMU step in the one-division form of the fused row passes.

    With ``b = exp(-2 |lambda|)``: ``1 - tanh^2 = 4b / (1+b)^2`` and ``tanh = +-(1-b)/(1+b)``; numerator
    and denominator of ``eta * (gamma beta_L g + beta_KL/N (lambda - prior)(1 - tanh^2))`` multiplied by
    ``(1+b)^2``. ``gbl, two_bl, bkl, ilm, kln, pr0``: :func:`bimu_coefficients` (``gamma beta_L``,
    ``2 beta_L``, ``beta_KL``, ``1/alpha_max``, ``beta_KL/N``, ``lambda_prior``).

    >>> import math
    >>> lo, g = 0.3, 0.05
    >>> t = math.tanh(lo); var = 1 - t * t
    >>> eta = 1 / (2.0 * var + 2 * 10.0 * (t * g + abs(g)) + 1 / 0.01)
    >>> ref = lo - eta * (5.0 * 10.0 * g + 2.0 / 700 * (lo - 0.0) * var)
    >>> abs(bimu_lambda_step(lo, g, math.exp(-2 * lo), 50.0, 20.0, 2.0, 100.0, 2.0 / 700, 0.0) - ref) < 1e-15
    True
    """
    one = as_like(1.0, lo)
    four = as_like(4.0, lo)
    d1 = one + b
    d2 = d1 * d1
    fb = four * b
    tt = (one - b) * d1
    tt = tt if lo >= 0 else -tt
    num = gbl * g * d2 + kln * (lo - pr0) * fb
    den = bkl * fb + two_bl * (tt * g + abs(g) * d2) + ilm * d2
    return lo - num / den


@njit(inline="always", **KERNEL_OPTS)
def bayesbinn_lambda_step(lo, g, b, lr, cpr, p, eps):
    """One natural parameter's BayesBiNN step in the form of the fused row passes (``b = exp(-2|lambda|)``):
    ``lambda - lr g / (1 - tanh^2 lambda) - cpr (lambda - p)`` with ``1 / (1 - tanh^2) = (1+b)^2 / (4b)``;
    with ``eps > 0`` (``ratio_eps``; ``g`` then already carries the ``+ eps`` of each sample's
    ``1 - w^2``) the denominator is ``(1 - mu * mu) + eps``, ``|mu| = (1 - b) / (1 + b)``, computed as
    written in the type of ``lo`` (:func:`bimu.optim.bayesbinn.relaxation_jacobian_ratio`).

    >>> import math
    >>> ref = 0.3 - 0.1 * 0.05 / (1 - math.tanh(0.3) ** 2) - 1e-3 * (0.3 - 0.2)
    >>> abs(bayesbinn_lambda_step(0.3, 0.05, math.exp(-0.6), 0.1, 1e-3, 0.2, 0.0) - ref) < 1e-15
    True
    >>> ref = 0.3 - 0.1 * 0.05 / ((1 - math.tanh(0.3) ** 2) + 1e-3) - 1e-3 * (0.3 - 0.2)
    >>> abs(bayesbinn_lambda_step(0.3, 0.05, math.exp(-0.6), 0.1, 1e-3, 0.2, 1e-3) - ref) < 1e-15
    True
    """
    one = as_like(1.0, lo)
    if eps == 0:
        d1 = one + b
        return lo - lr * ((g * (d1 * d1)) / (as_like(4.0, lo) * b)) - cpr * (lo - p)
    t = (one - b) / (one + b)
    return lo - lr * (g / ((one - t * t) + eps)) - cpr * (lo - p)


@njit(inline="always", **KERNEL_OPTS)
def act_grad(xh, act, gate):
    """Derivative of the hidden activation ``act`` at ``xh``: :func:`~bimu.engine.scalar.gate_surrogate`
    for :data:`~bimu.engine.hparams.ACT_GATE`, the hard-tanh estimator ``1[|xh| <= 1]`` for
    :data:`~bimu.engine.hparams.ACT_SIGN`."""
    if act == ACT_GATE:
        return gate_surrogate(xh, gate)
    return as_like(1.0, xh) if abs(xh) <= 1.0 else as_like(0.0, xh)

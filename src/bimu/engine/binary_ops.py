"""Inlined pieces of the binary networks' kernels (numba): the configuration slots, a layer's
pre-activations, LayerNorm with the hidden activation and its backward pass, the loss gradient, the
backward pass through a hidden layer, the activation's derivative, and one natural parameter's BiMU
and BayesBiNN steps.

Each is compiled into its callers (``inline="always"``, with the caller's ``fastmath`` flags), so every
kernel computes the same arithmetic for them. Layout of the flat activation buffers (those of
:mod:`bimu.engine.binary_train`): row ``q = k * R + r`` (sample ``k``, example ``r`` of ``R``) of a
layer of width ``n`` starts at ``off + q * n``.
"""

from __future__ import annotations

import math

from numba import njit

from bimu.engine.dots import dot8
from bimu.engine.hparams import ACT_GATE, BinaryHP, Cfg
from bimu.engine.scalar import KERNEL_OPTS, gate_forward, gate_surrogate
from bimu.rng import as_like


@njit(inline="always", **KERNEL_OPTS)
def binary_config(sizes, cfg, hp):
    """``(L, K, act, out_norm, kind, gate, ln_eps)``: the number of layers and the slots of ``cfg``
    (:class:`~bimu.engine.hparams.Cfg`) and ``hp`` (:class:`~bimu.engine.hparams.BinaryHP`) that every
    binary kernel reads."""
    return (sizes.shape[0] - 1, cfg[Cfg.K], cfg[Cfg.ACT], cfg[Cfg.OUT_NORM], cfg[Cfg.KIND], hp[BinaryHP.GATE],
            hp[BinaryHP.LN_EPS])


@njit(inline="always", **KERNEL_OPTS)
def preact_row(W, wo0, kstride, X, xoff, xk, Z, zoff, o, n_in, n_out, K, R, nr):
    """Pre-activation ``o`` of rows ``q = k * R + r`` (``k < K``, ``r < nr``) of a layer: ``Z[zoff + q *
    n_out + o] = dot8`` of sample ``k``'s weight row ``o`` (``W[wo0 + k * kstride + o * n_in:]``) with the
    input at ``X[xoff + (k * xk + r) * n_in:]`` (``xk = 0``: the samples share the input)."""
    for k in range(K):
        wo = wo0 + k * kstride + o * n_in
        for r in range(nr):
            Z[zoff + (k * R + r) * n_out + o] = dot8(W, wo, X, xoff + (k * xk + r) * n_in, n_in)


@njit(inline="always", **KERNEL_OPTS)
def norm_act_rows(Z, XH, A, RS, rs0, zoff, q0, nr, n, eps, act, gate, hidden, out_norm):
    """Rows ``q0 .. q0+nr-1`` of a layer of width ``n`` (at ``zoff + q * n``): :func:`layer_norm_act`
    (``1/sqrt(var + eps)`` into ``RS[rs0 + q]``) for a hidden layer or a normalised output, else the
    logits copied to ``A`` and ``XH``."""
    for q in range(q0, q0 + nr):
        base = zoff + q * n
        if hidden or out_norm:
            layer_norm_act(Z, XH, A, RS[rs0 + q:], base, n, eps, act, gate, hidden)
        else:
            for o in range(n):
                A[base + o] = Z[base + o]
                XH[base + o] = Z[base + o]


@njit(inline="always", **KERNEL_OPTS)
def loss_backward(A, XH, DA, DZ, RS, rs0, lb, q, C, y, K, out_norm):
    """Row ``q`` of the output layer (logits at ``A[lb + q * C:]``, label ``y``): the gradient of the
    NLL averaged over ``K`` samples, ``(softmax - onehot(y)) / K``, into ``DA[q * C:]``, then through the
    output norm (if any) into ``DZ[lb + q * C:]``."""
    base = lb + q * C
    mx = A[base]
    for c in range(1, C):
        mx = max(mx, A[base + c])
    ssum = 0.0
    for c in range(C):
        ssum += math.exp(A[base + c] - mx)
    for c in range(C):
        pr = math.exp(A[base + c] - mx) / ssum
        DA[q * C + c] = (pr - (1.0 if c == y else 0.0)) / K
    if out_norm:
        ln_backward(DA, q * C, XH, base, DZ, RS[rs0 + q], C)
    else:
        for c in range(C):
            DZ[base + c] = DA[q * C + c]


@njit(inline="always", **KERNEL_OPTS)
def hidden_backward(W, DA, DZ, XH, RS, rs0, hoff_out, hoff_in, wo0, kstride, q, k, n_in, n_out, act, gate):
    """Row ``q`` (sample ``k``) back through a hidden layer: ``DA[q * n_in:] = W_k^T DZ`` (output gradients
    at ``DZ[hoff_out + q * n_out:]``, weights at ``W[wo0 + k * kstride:]``) times the activation's
    derivative, then LayerNorm's backward into ``DZ[hoff_in + q * n_in:]`` (``1/sqrt(var + eps)`` at
    ``RS[rs0 + q]``)."""
    da_ = DA[q * n_in:(q + 1) * n_in]
    for i in range(n_in):
        da_[i] = 0
    for o in range(n_out):
        cz = DZ[hoff_out + q * n_out + o]
        wo = wo0 + k * kstride + o * n_in
        w_ = W[wo:wo + n_in]
        for i in range(n_in):
            da_[i] += cz * w_[i]
    base = hoff_in + q * n_in
    for i in range(n_in):
        DA[q * n_in + i] *= act_grad(XH[base + i], act, gate)
    ln_backward(DA, q * n_in, XH, base, DZ, RS[rs0 + q], n_in)


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

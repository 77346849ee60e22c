"""Compiled online loop of MESU on the Gaussian mean-field ReLU MLP, and counter-based normals (numba).

Network: :class:`bimu.nn.gaussian.GaussianMLP` (weights and biases ``N(mu, sigma^2)``, one weight
sample per Monte-Carlo draw shared by the batch, ReLU between layers, raw logits). Loss: the NLL of
:func:`bimu.methods.bimu.mc_nll` (mean over the K samples, sum over the batch). Gradients
``g_mu = sum_k dC/dw_k`` and ``g_sigma = sum_k dC/dw_k eps_k`` (reparameterisation), then the MESU step
of :func:`bimu.optim.mesu.mesu_update_` (gradients clipped to ``+-clamp / |sigma|``, memory window ``N``,
prior ``N(mu_prior, sigma_prior^2)``).

Noise: parameter ``e`` (flat index: the weights of every layer at :func:`bimu.engine.dense.offsets`
``woff``, then the biases at ``woff[-1] + boff``), sample ``k`` of draw ``s`` takes the 23-bit uniforms
that the engine's relaxed samples use (:func:`bimu.rng.relaxed_uniforms`: a 64-bit key per row
and draw, a 32-bit hash per index ``i * K + k``, computed in 32-bit lanes) and turns each pair of them
(samples ``2j`` and ``2j + 1``) into two standard normals by :func:`box_muller` (a vectorisable float32
logarithm and sine/cosine polynomials, error below 1e-7). The uniforms lie in ``[2**-24, 1 - 2**-24]``,
so the normals lie within about ``+-5.8``. Training draws use the training key and the step number,
evaluation draws the evaluation key and a draw counter: results do not depend on threads or on how
steps are grouped.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, types

from bimu.engine.dense import ce_delta
from bimu.engine.dots import dot
from bimu.engine.hparams import MesuHP
from bimu.engine.scalar import KERNEL_OPTS, bitcast32, float32_version, gate_forward, gate_surrogate
from bimu.rng import add32, as_like, hash32, mul32, row_key, shr32, uint32_op, uniform32


# 32-bit lanes only (numba widens int32 arithmetic to 64 bits, which does not vectorise on AVX2)
_f32_bits = bitcast32("_f32_bits", types.float32, types.uint32)
_bits_f32 = bitcast32("_bits_f32", types.uint32, types.float32)
_u32_to_f32 = bitcast32("_u32_to_f32", types.uint32, types.float32, "sitofp")  # values below 2**31
_and32 = uint32_op("and_")
_or32 = uint32_op("or_")


@float32_version(math.log)
def flog(x):
    """``log(x)`` for ``x > 0``: a vectorisable float32 version (Cephes ``logf``), libm for float64."""
    ix = _f32_bits(x)
    e = _u32_to_f32(shr32(ix, np.uint32(23))) - np.float32(126.0)
    m = _bits_f32(_or32(_and32(ix, np.uint32(0x007FFFFF)), np.uint32(0x3F000000)))  # x = m 2^e, m in [.5, 1)
    small = np.float32(m < np.float32(0.70710678118654752))  # then x = (2m) 2^(e-1)
    e = e - small
    f = (m - np.float32(1.0)) + small * m  # exact either way
    z = f * f
    y = np.float32(7.0376836292e-2)
    y = y * f - np.float32(1.1514610310e-1)
    y = y * f + np.float32(1.1676998740e-1)
    y = y * f - np.float32(1.2420140846e-1)
    y = y * f + np.float32(1.4249322787e-1)
    y = y * f - np.float32(1.6668057665e-1)
    y = y * f + np.float32(2.0000714765e-1)
    y = y * f - np.float32(2.4999993993e-1)
    y = y * f + np.float32(3.3333331174e-1)
    y = y * f * z
    y = y + np.float32(-2.12194440e-4) * e
    y = y - np.float32(0.5) * z
    return (f + y) + np.float32(0.693359375) * e


_SIN = (-1.0 / 6.0, 1.0 / 120.0, -1.0 / 5040.0, 1.0 / 362880.0, -1.0 / 39916800.0)
_COS = (-0.5, 1.0 / 24.0, -1.0 / 720.0, 1.0 / 40320.0, -1.0 / 3628800.0, 1.0 / 479001600.0)


@njit(inline="always", **KERNEL_OPTS)
def box_muller(u1, u2):
    """Two independent standard normals from two uniforms in (0, 1) (Box-Muller):
    ``sqrt(-2 log u1) * (cos, sin)(2 pi u2)``, the sine and cosine by Taylor polynomials of
    ``pi (u2 - 1/2)`` in ``[-pi/2, pi/2]`` and the double-angle formulas (error < 1e-7)."""
    r = math.sqrt(as_like(-2.0, u1) * flog(u1))
    a = as_like(math.pi, u2) * (u2 - as_like(0.5, u2))
    a2 = a * a
    sp = as_like(_SIN[4], a)
    sp = as_like(_SIN[3], a) + a2 * sp
    sp = as_like(_SIN[2], a) + a2 * sp
    sp = as_like(_SIN[1], a) + a2 * sp
    sp = as_like(_SIN[0], a) + a2 * sp
    sn = a + a * (a2 * sp)
    cp = as_like(_COS[5], a)
    cp = as_like(_COS[4], a) + a2 * cp
    cp = as_like(_COS[3], a) + a2 * cp
    cp = as_like(_COS[2], a) + a2 * cp
    cp = as_like(_COS[1], a) + a2 * cp
    cp = as_like(_COS[0], a) + a2 * cp
    cs = as_like(1.0, a) + a2 * cp
    # angle 2 pi u2 = 2 a + pi: cos = sin^2 a - cos^2 a, sin = -2 sin a cos a
    return r * (sn * sn - cs * cs), r * (as_like(-2.0, a) * sn * cs)


@njit(fastmath={"contract"}, **KERNEL_OPTS)
def _noise_row(E, key, step, P, e0, n, K):
    """Normals of parameters ``e0 .. e0+n-1``, all K samples, into ``E[k * P + e]``: samples ``2j`` and
    ``2j + 1`` of column ``i`` come from the uniforms of indices ``i K + 2j`` and ``i K + 2j + 1``
    (an odd K draws the last pair's second uniform from index ``i K + K``, which belongs to no sample)."""
    rlo, rhi = row_key(key, step, P, e0)
    one = E[0]
    k32 = np.uint32(K)
    for j in range((K + 1) // 2):
        k = 2 * j
        ka = np.uint32(k)
        kb = np.uint32(k + 1)
        r1 = E[k * P + e0:k * P + e0 + n]
        # the hash index i K + k in 32-bit lanes (the same value as np.uint32(i * K + k); 64-bit vector
        # arithmetic and its truncation cost shuffles on AVX2)
        if k + 1 < K:
            r2 = E[(k + 1) * P + e0:(k + 1) * P + e0 + n]
            for i in range(n):
                base = mul32(np.uint32(i), k32)
                z1, z2 = box_muller(uniform32(hash32(rlo, rhi, add32(base, ka)), one),
                                    uniform32(hash32(rlo, rhi, add32(base, kb)), one))
                r1[i] = z1
                r2[i] = z2
        else:
            for i in range(n):
                base = mul32(np.uint32(i), k32)
                z1, z2 = box_muller(uniform32(hash32(rlo, rhi, add32(base, ka)), one),
                                    uniform32(hash32(rlo, rhi, add32(base, kb)), one))
                r1[i] = z1


@njit(fastmath=False, **KERNEL_OPTS)
def gaussian_noise(E, key, step, K, sizes, woff, boff):
    """The K standard normals of every parameter at draw ``step`` under ``key``: ``E[k * P + e]``
    (``P = woff[-1] + boff[-1]``; a weight row and a layer's biases each form one row of the hash)."""
    L = sizes.shape[0] - 1
    Pw = woff[L]
    P = Pw + boff[L]
    for l in range(L):
        for o in range(sizes[l + 1]):
            _noise_row(E, key, step, P, woff[l] + o * sizes[l], sizes[l], K)
        _noise_row(E, key, step, P, Pw + boff[l], sizes[l + 1], K)


@njit(fastmath=False, **KERNEL_OPTS)
def _mesu_row(mu, sg, gm, gs, n, hp):
    """The MESU step on one row of ``(mu, sigma)`` with data gradients ``gm, gs`` (see the module)."""
    one = mu[0]
    lr_mu = as_like(hp[MesuHP.LR_MU], one)
    half_lr_s = as_like(0.5 * hp[MesuHP.LR_SIGMA], one)
    sp2 = as_like(hp[MesuHP.SIGMA_PRIOR] * hp[MesuHP.SIGMA_PRIOR], one)
    mu_p = as_like(hp[MesuHP.MU_PRIOR], one)
    npv = as_like(hp[MesuHP.MEMORY_WINDOW] * hp[MesuHP.SIGMA_PRIOR] ** 2, one)
    clamp = as_like(hp[MesuHP.CLAMP_GRAD], one)
    for i in range(n):
        s = sg[i]
        m = mu[i]
        bound = clamp / abs(s)
        g_mu = max(min(gm[i], bound), -bound)
        g_s = max(min(gs[i], bound), -bound)
        s2 = s * s
        mu[i] = m + lr_mu * (-s2 * g_mu + s2 * (mu_p - m) / npv)
        sg[i] = s + half_lr_s * (-s2 * g_s + s * (sp2 - s2) / npv)


@njit(fastmath=False, **KERNEL_OPTS)
def mesu_train(X, Y, n_steps, B, K, mu, sg, sizes, woff, boff, hp, key, step0, E, Z, D, G, wrow, gm, gs, p):
    """``n_steps`` online MESU steps of ``B`` examples and ``K`` weight samples each (training draws
    ``step0 + s``). ``hp``: :class:`~bimu.engine.hparams.MesuHP` (float64). Scratch: ``E``
    (``K * P``), ``Z``, ``D``, ``G`` (``K * B * boff[-1]``: activations, gradients, the gate's surrogate
    derivatives), ``wrow``, ``gm``, ``gs`` (widest layer), ``p`` (classes)."""
    L = sizes.shape[0] - 1
    Pw = woff[L]
    Pu = boff[L]
    P = Pw + Pu
    C = sizes[L]
    one = mu[0]
    inv_k = as_like(1.0, one) / as_like(K, one)
    zero = as_like(0.0, one)
    gate = hp[MesuHP.GATE]
    use_gate = gate > 0
    for s in range(n_steps):
        r0 = s * B
        # ---- forward: Z[(k * B + b) * Pu + boff[l] + o], ReLU applied in place to hidden layers; each
        # row's noise (as gaussian_noise draws it) is drawn just before the row is used
        for l in range(L):
            n_in = sizes[l]
            n_out = sizes[l + 1]
            for o in range(n_out):
                e0 = woff[l] + o * n_in
                _noise_row(E, key, step0 + s, P, e0, n_in, K)
                mr = mu[e0:e0 + n_in]
                sr = sg[e0:e0 + n_in]
                if B == 1 and l == 0:  # one input for every sample: z_k = mu . x + (sigma x) . eps_k
                    x = X[r0]
                    sx = wrow[:n_in]
                    for i in range(n_in):
                        sx[i] = sr[i] * x[i]
                    mx = dot(mr, x)
                    for k in range(K):
                        Z[k * Pu + o] = mx + dot(sx, E[k * P + e0:k * P + e0 + n_in])
                    continue
                for k in range(K):
                    wr = wrow[:n_in]
                    ek = E[k * P + e0:k * P + e0 + n_in]
                    for i in range(n_in):
                        wr[i] = mr[i] + sr[i] * ek[i]
                    for b in range(B):
                        a0 = (k * B + b) * Pu
                        inp = X[r0 + b] if l == 0 else Z[a0 + boff[l - 1]:a0 + boff[l - 1] + n_in]
                        Z[a0 + boff[l] + o] = dot(wr, inp)
            _noise_row(E, key, step0 + s, P, Pw + boff[l], n_out, K)
            for k in range(K):
                for o in range(n_out):
                    e = Pw + boff[l] + o
                    bias = mu[e] + sg[e] * E[k * P + e]
                    for b in range(B):
                        u = (k * B + b) * Pu + boff[l] + o
                        Z[u] = Z[u] + bias
                        if l < L - 1:
                            if use_gate:
                                G[u] = gate_surrogate(Z[u], gate)
                                Z[u] = gate_forward(Z[u], gate)
                            else:
                                Z[u] = max(Z[u], zero)
        # ---- backward: D = dC/dz per sample and example (C = sum_b mean_k NLL)
        for k in range(K):
            for b in range(B):
                zb = (k * B + b) * Pu + boff[L - 1]
                ce_delta(Z[zb:zb + C], Y[r0 + b], p)
                for c in range(C):
                    D[zb + c] = p[c] * inv_k
        for l in range(L - 1, 0, -1):
            n_in = sizes[l]
            n_out = sizes[l + 1]
            for k in range(K):
                for b in range(B):
                    a0 = (k * B + b) * Pu + boff[l - 1]
                    dp = D[a0:a0 + n_in]
                    for i in range(n_in):
                        dp[i] = zero
                for o in range(n_out):
                    e0 = woff[l] + o * n_in
                    wr = wrow[:n_in]
                    ek = E[k * P + e0:k * P + e0 + n_in]
                    mr = mu[e0:e0 + n_in]
                    sr = sg[e0:e0 + n_in]
                    for i in range(n_in):
                        wr[i] = mr[i] + sr[i] * ek[i]
                    for b in range(B):
                        d = D[(k * B + b) * Pu + boff[l] + o]
                        a0 = (k * B + b) * Pu + boff[l - 1]
                        dp = D[a0:a0 + n_in]
                        for i in range(n_in):
                            dp[i] += wr[i] * d
                for b in range(B):
                    a0 = (k * B + b) * Pu + boff[l - 1]
                    dp = D[a0:a0 + n_in]
                    if use_gate:
                        gp = G[a0:a0 + n_in]
                        for i in range(n_in):
                            dp[i] = dp[i] * gp[i]
                    else:
                        zp = Z[a0:a0 + n_in]
                        for i in range(n_in):
                            if zp[i] <= 0:
                                dp[i] = zero
        # ---- gradients and the MESU step, row by row (weights, then the layer's biases)
        for l in range(L):
            n_in = sizes[l]
            n_out = sizes[l + 1]
            for o in range(n_out):
                e0 = woff[l] + o * n_in
                g1 = gm[:n_in]
                g2 = gs[:n_in]
                if B == 1 and l == 0:  # one input for every sample: g = x * sum_k d_k, x * sum_k d_k eps_k
                    x = X[r0]
                    dsum = zero
                    for i in range(n_in):
                        g2[i] = zero
                    for k in range(K):
                        d = D[k * Pu + o]
                        dsum += d
                        ek = E[k * P + e0:k * P + e0 + n_in]
                        for i in range(n_in):
                            g2[i] += d * ek[i]
                    for i in range(n_in):
                        g1[i] = x[i] * dsum
                        g2[i] = x[i] * g2[i]
                    _mesu_row(mu[e0:e0 + n_in], sg[e0:e0 + n_in], g1, g2, n_in, hp)
                    continue
                for i in range(n_in):
                    g1[i] = zero
                    g2[i] = zero
                for k in range(K):
                    ek = E[k * P + e0:k * P + e0 + n_in]
                    for b in range(B):
                        a0 = (k * B + b) * Pu
                        d = D[a0 + boff[l] + o]
                        inp = X[r0 + b] if l == 0 else Z[a0 + boff[l - 1]:a0 + boff[l - 1] + n_in]
                        for i in range(n_in):
                            gw = d * inp[i]
                            g1[i] += gw
                            g2[i] += gw * ek[i]
                _mesu_row(mu[e0:e0 + n_in], sg[e0:e0 + n_in], g1, g2, n_in, hp)
            e0 = Pw + boff[l]
            g1 = gm[:n_out]
            g2 = gs[:n_out]
            for o in range(n_out):
                g1[o] = zero
                g2[o] = zero
                for k in range(K):
                    for b in range(B):
                        d = D[(k * B + b) * Pu + boff[l] + o]
                        g1[o] += d
                        g2[o] += d * E[k * P + e0 + o]
            _mesu_row(mu[e0:e0 + n_out], sg[e0:e0 + n_out], g1, g2, n_out, hp)

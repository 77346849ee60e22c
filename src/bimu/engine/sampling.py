"""Weight samples of the binary networks from counters (numba).

Layout (that of every binary kernel): ``sizes = [in, hidden..., out]``; layer ``l`` has ``out_l x in_l``
natural parameters stored row-major at ``lam[poff[l]:poff[l+1]]`` (``poff`` the cumulative offsets,
``P = poff[-1]``). Weight samples live in ``W`` (``K * P`` values): layer ``l``, sample ``k``, row
``o``, column ``i`` at ``K * poff[l] + k * out_l * in_l + o * in_l + i``.

Relaxed samples (training) draw the uniforms of :func:`bimu.rng.relaxed_uniforms`; hard samples
(evaluation) take parameter ``e``'s samples ``2m`` and ``2m + 1`` from the two halves of
``hash64(key, cbase + e * ceil(K / 2) + m)``. ``exp(-2|lambda|)`` and the relaxed samples are computed
with FMA contraction, as in the training kernels, so that all of them compute those values identically.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from bimu.engine.scalar import KERNEL_OPTS, fexp
from bimu.rng import as_like, hash32, hash64, row_key, uniform32, uniform_hi, uniform_lo


@njit(inline="always", **KERNEL_OPTS)
def _hash_row(HB, e0, n, key, cbase, kh, m):
    """``HB[e0 + i] = hash64(key, cbase + (e0 + i) * kh + m)`` for ``i < n``."""
    ukh = np.uint64(kh)
    start = cbase + np.uint64(e0) * ukh + np.uint64(m)
    for i in range(n):
        HB[e0 + i] = hash64(key, start + np.uint64(i) * ukh)


@njit(inline="always", **KERNEL_OPTS)
def relaxed_row(lam, bt, W, HB, e0, wb, kstride, n, K, key, step, inv_t):
    """Relaxed samples ``w = tanh((lam + 0.5 logit u) / T)`` of one row for all K samples of training
    step ``step`` (``bt[e] = exp(-2 |lam[e]|)``; uniforms of :func:`bimu.rng.relaxed_uniforms`).

    For T = 1, ``tanh(lam + 0.5 logit u) = (u (1 + b) - p) / (p + u q)`` with ``b = exp(-2 |lam|)``,
    ``p = b, q = 1 - b`` if ``lam >= 0``, else ``p = 1, q = b - 1``: no log or tanh per sample.
    """
    one = as_like(1.0, lam[e0])
    half = as_like(0.5, one)
    P = lam.shape[0]
    rlo, rhi = row_key(key, step, P, e0)
    l_ = lam[e0:e0 + n]
    b_ = bt[e0:e0 + n]
    for k in range(K):
        w_ = W[wb + k * kstride:wb + k * kstride + n]
        if inv_t == one:
            for i in range(n):
                u = uniform32(hash32(rlo, rhi, np.uint32(i * K + k)), one)
                b = b_[i]
                pos = l_[i] >= 0
                p = b if pos else one
                q = (one - b) if pos else (b - one)
                w_[i] = (u * (one + b) - p) / (p + u * q)
        else:
            for i in range(n):
                u = uniform32(hash32(rlo, rhi, np.uint32(i * K + k)), one)
                w_[i] = math.tanh((l_[i] + half * math.log(u / (one - u))) * inv_t)


@njit(inline="always", **KERNEL_OPTS)
def _hard_from_hash(W, wo, HB, lam, bt, e0, n, high):
    """Hard samples ``w = +1 iff u < sigmoid(2 lam)``, tested as ``u (1 + b) < 1`` (lam >= 0) or
    ``u (1 + b) < b`` (lam < 0)."""
    one = as_like(1.0, lam[e0])
    if high:
        for i in range(n):
            b = bt[e0 + i]
            thr = one if lam[e0 + i] >= 0 else b
            W[wo + i] = one if uniform_hi(HB[e0 + i], one) * (one + b) < thr else -one
    else:
        for i in range(n):
            b = bt[e0 + i]
            thr = one if lam[e0 + i] >= 0 else b
            W[wo + i] = one if uniform_lo(HB[e0 + i], one) * (one + b) < thr else -one


@njit(inline="always", **KERNEL_OPTS)
def _hard_row(lam, bt, W, HB, e0, wb, kstride, n, K, key, cbase):
    """Hard samples of one row for all K samples."""
    kh = (K + 1) // 2
    for m in range(kh):
        _hash_row(HB, e0, n, key, cbase, kh, m)
        k0 = 2 * m
        _hard_from_hash(W, wb + k0 * kstride, HB, lam, bt, e0, n, True)
        if k0 + 1 < K:
            _hard_from_hash(W, wb + (k0 + 1) * kstride, HB, lam, bt, e0, n, False)


@njit(parallel=True, fastmath={"contract"}, **KERNEL_OPTS)
def sample_weights(lam, W, sizes, poff, K, key, cbase, hard, inv_t):
    """Fill ``W`` with K hard samples of every layer from evaluation counters ``cbase`` (``hard=True``)
    or with the K relaxed samples of training step ``cbase`` (``hard=False``)."""
    L = sizes.shape[0] - 1
    m2 = as_like(-2.0, lam[0])
    bt = np.empty_like(lam)
    HB = np.empty(lam.shape[0], dtype=np.uint64)
    for e in prange(lam.shape[0]):
        bt[e] = fexp(m2 * abs(lam[e]))
    for l in range(L):
        n_in = sizes[l]
        n_out = sizes[l + 1]
        kstride = n_in * n_out
        for o in prange(n_out):
            e0 = poff[l] + o * n_in
            wb = K * poff[l] + o * n_in
            if hard:
                _hard_row(lam, bt, W, HB, e0, wb, kstride, n_in, K, key, cbase)
            else:
                relaxed_row(lam, bt, W, HB, e0, wb, kstride, n_in, K, key, cbase, inv_t)

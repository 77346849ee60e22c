"""Compiled pieces shared by the engine's baseline networks (real, sign and Gaussian MLPs; numba).

Layout: a network of ``sizes = [in, hidden..., out]`` keeps the weights of layer ``l`` row-major at
``W[woff[l]:woff[l+1]]`` (``out_l x in_l``) and one value per unit of layer ``l`` (a bias, a norm
statistic, ...) at ``V[boff[l]:boff[l+1]]``; :func:`offsets` computes both. ``S`` weight sets (Monte
Carlo samples) are stored one after the other (set ``s`` at ``s * woff[-1]``).

Every dot product goes through :func:`bimu.engine.dots.dot` (one compiled function, fixed
summation order), every other reduction runs in a fixed serial order, and evaluation handles each
example on its own, so results do not depend on the thread count or on the batch an example is in.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from bimu.engine.dots import dot
from bimu.engine.hparams import ACT_GATE, ACT_RELU, ACT_SIGN
from bimu.engine.scalar import KERNEL_OPTS, gate_forward
from bimu.rng import as_like


def offsets(sizes) -> tuple[np.ndarray, np.ndarray]:
    """``(woff, boff)``: cumulative offsets of the weight matrices and of the per-unit vectors.

    >>> [a.tolist() for a in offsets([4, 3, 2])]
    [[0, 12, 18], [0, 3, 5]]
    """
    sizes = [int(s) for s in sizes]
    woff = np.zeros(len(sizes), dtype=np.int64)
    boff = np.zeros(len(sizes), dtype=np.int64)
    for l in range(len(sizes) - 1):
        woff[l + 1] = woff[l] + sizes[l] * sizes[l + 1]
        boff[l + 1] = boff[l] + sizes[l + 1]
    return woff, boff


@njit(inline="always", **KERNEL_OPTS)
def ce_delta(z, y, out):
    """``out = softmax(z) - onehot(y)`` (the cross-entropy gradient of one example's logits ``z``)."""
    C = z.shape[0]
    mx = z[0]
    for c in range(1, C):
        mx = max(mx, z[c])
    s = as_like(0.0, mx)
    for c in range(C):
        out[c] = math.exp(z[c] - mx)
        s += out[c]
    for c in range(C):
        out[c] = out[c] / s
    out[y] -= as_like(1.0, mx)


@njit(inline="always", **KERNEL_OPTS)
def backprop_rows(dp, D, d0, W, w0, n_in, n_out, signs):
    """``dp[:n_in] = sum_o D[d0 + o] * w_o`` over the rows ``w_o = W[w0 + o * n_in:][:n_in]`` of a layer
    (with ``signs``: over their signs, ``sign(0) = +1``), each sum in the order of ``o``: the gradient
    w.r.t. the layer's input of one example."""
    for i in range(n_in):
        dp[i] = 0.0
    for o in range(n_out):
        d = D[d0 + o]
        wr = W[w0 + o * n_in:w0 + (o + 1) * n_in]
        if signs:
            for i in range(n_in):
                dp[i] += d if wr[i] >= 0 else -d
        else:
            for i in range(n_in):
                dp[i] += wr[i] * d


@njit(inline="always", **KERNEL_OPTS)
def batch_grad_row(g, sq, D, d0, X, r0, A, a0, Pu, B, n_in, first, squares):
    """``g[:n_in] = sum_b D[b * Pu + d0] * x_b`` over the ``B`` examples of a batch, in order: one weight
    row's summed gradient, with ``x_b`` the layer's input (``X[r0 + b]`` for the ``first`` layer, else
    ``A[b * Pu + a0:][:n_in]``); with ``squares`` also ``sq[:n_in] = sum_b (D[b * Pu + d0] * x_b)^2``."""
    for i in range(n_in):
        g[i] = 0.0
    if squares:
        for i in range(n_in):
            sq[i] = 0.0
    for b in range(B):
        d = D[b * Pu + d0]
        inp = X[r0 + b] if first else A[b * Pu + a0:b * Pu + a0 + n_in]
        for i in range(n_in):
            g[i] += d * inp[i]
        if squares:
            for i in range(n_in):
                sq[i] += (d * inp[i]) * (d * inp[i])


@njit(inline="always", **KERNEL_OPTS)
def _unit(z, act, gate, m, inv, g, b, norm):
    """Norm (``(z - m) * inv * g + b`` when ``norm``), then nothing / ReLU / sign / the gate
    ``1[|z| > gate]`` (``act`` -1 / 0 / 1 / 2)."""
    if norm:
        z = (z - m) * inv * g + b
    if act == ACT_RELU:
        return max(z, as_like(0.0, z))
    if act == ACT_SIGN:
        return as_like(1.0, z) if z >= 0 else as_like(-1.0, z)
    if act == ACT_GATE:
        return gate_forward(z, gate)
    return z


@njit(fastmath=False, **KERNEL_OPTS)
def _forward_one(x, W, Bias, NM, NI, NG, NB, sizes, woff, boff, s, act, gate, norm, bias, cur, nxt, out, b):
    """Logits of one example under weight set ``s`` into ``out[s, b]`` (scratch ``cur``, ``nxt``)."""
    L = sizes.shape[0] - 1
    Pw = woff[L]
    Pb = boff[L]
    for l in range(L):
        n_in = sizes[l]
        n_out = sizes[l + 1]
        inp = x if l == 0 else cur[:n_in]
        a = act if l < L - 1 else -1
        for o in range(n_out):
            w0 = s * Pw + woff[l] + o * n_in
            z = dot(W[w0:w0 + n_in], inp)
            if bias:
                z += Bias[s * Pb + boff[l] + o]
            u = boff[l] + o
            nxt[o] = _unit(z, a, gate, NM[u], NI[u], NG[u], NB[u], norm)
        for o in range(n_out):
            cur[o] = nxt[o]
    for c in range(sizes[L]):
        out[s, b, c] = cur[c]


@njit(parallel=True, fastmath=False, **KERNEL_OPTS)
def dense_forward(X, W, Bias, NM, NI, NG, NB, sizes, woff, boff, S, act, gate, norm, bias, threads, out):
    """Logits ``out [S, B, C]`` of the rows of ``X`` under ``S`` weight sets (evaluation, no training).

    ``W``: ``S`` weight sets; ``Bias``: ``S`` bias sets (used when ``bias``); ``NM, NI, NG, NB``: per-unit
    norm mean, inverse standard deviation, scale and shift, applied as ``(z - m) * inv * g + b`` after
    every layer when ``norm``; ``act``: hidden activation (:data:`ACT_RELU`, :data:`ACT_SIGN` or
    :data:`ACT_GATE` with threshold ``gate``).
    ``threads > 1`` splits examples over threads (each example's arithmetic is the same).
    """
    B = X.shape[0]
    maxw = 1
    for l in range(sizes.shape[0]):
        maxw = max(maxw, sizes[l])
    if threads > 1:
        for b in prange(B):
            cur = np.empty(maxw, dtype=W.dtype)
            nxt = np.empty(maxw, dtype=W.dtype)
            for s in range(S):
                _forward_one(X[b], W, Bias, NM, NI, NG, NB, sizes, woff, boff, s, act, gate, norm, bias, cur, nxt, out, b)
    else:
        cur = np.empty(maxw, dtype=W.dtype)
        nxt = np.empty(maxw, dtype=W.dtype)
        for b in range(B):
            for s in range(S):
                _forward_one(X[b], W, Bias, NM, NI, NG, NB, sizes, woff, boff, s, act, gate, norm, bias, cur, nxt, out, b)

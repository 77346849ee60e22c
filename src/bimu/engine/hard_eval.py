"""Hard-sample evaluation of the binary networks (numba).

The K hard weight sets are drawn once per call (:func:`bimu.engine.sampling.sample_weights`).
:func:`hard_forward` evaluates blocks of :data:`EVAL_CHUNKS` x :func:`~bimu.engine.lanes.lane_block`
examples with the examples in the lanes of the vectors (:mod:`bimu.engine.lanes`): every layer's sums
run :func:`bimu.engine.dots.dot8`'s order in each lane, LayerNorm and the activation run the same
arithmetic as :func:`~bimu.engine.binary_ops.norm_act_rows` lane by lane. Its logits have the bits of
:func:`hard_forward_reference` (the previous kernel: one example at a time through
:func:`bimu.engine.dots.dot4x2` and :func:`~bimu.engine.binary_ops.preact_row`), and an example's result
does not depend on its batch, on the thread count, on the compile history or on the machine's vector
width. ``benchmarks/eval_speed.py`` times both against a reimplementation of the paper's evaluation.
:mod:`bimu.engine.grouped_eval` sums the first layer in another fixed order with fewer operations
(``eval_sum="grouped"``) and shares this module's blocks, layouts and upper layers.
"""

from __future__ import annotations

import math

import numpy as np
from numba import get_thread_id, njit, prange

from bimu.engine.binary_ops import binary_config, norm_act_rows, preact_row
from bimu.engine.dots import DOT_LANES, dot4x2
from bimu.engine.hparams import ACT_GATE
from bimu.engine.lanes import (LANE_ROWS, LANE_VECS, fma_rows, lane_block, lane_dots, lane_dots_signed,
                               lane_norm_act, lane_position, lane_transpose, row_blocks)
from bimu.engine.scalar import KERNEL_OPTS
from bimu.rng import as_like

EVAL_CHUNKS = 4
"""Lane blocks (:func:`~bimu.engine.lanes.lane_block`) per evaluation block of :func:`hard_forward`: each
block of weight rows is read from cache once per evaluation block."""

EVAL_BLOCK = 32
"""Examples per block of :func:`hard_forward_reference` (a multiple of 4)."""


@njit(fastmath=False, **KERNEL_OPTS)
def all_signs(W, n):
    """Whether ``W[:n]`` holds only +1 and -1 (hard samples): :func:`hard_forward` then sums with
    :func:`~bimu.engine.lanes.lane_dots_signed`, else with :func:`~bimu.engine.lanes.lane_dots`.

    >>> import numpy as np
    >>> all_signs(np.array([1.0, -1.0, 1.0]), 3), all_signs(np.array([1.0, 0.5]), 2)
    (True, False)
    """
    if n == 0:
        return True
    one = as_like(1.0, W[0])
    bad = 0
    for e in range(n):  # no early exit: the loop vectorises
        bad += 0 if abs(W[e]) == one else 1
    return bad == 0


@njit(fastmath=False, **KERNEL_OPTS)
def interleave_weights(W, sizes, poff, K, signed, woff):
    """The weights of ``W`` (layout of :mod:`bimu.engine.sampling`) in :mod:`bimu.engine.lanes`'s layout:
    layer ``l`` (``padded`` rows, :func:`~bimu.engine.lanes.row_blocks`), sample ``k``, register block ``g``
    (rows ``6 g ..``) at ``woff[l] + (k * padded + 6 g) * n_in``, its missing rows zero (``woff``: ``L + 1``
    entries, filled here); ``signed``: the sign rows of each block (from
    :func:`~bimu.engine.lanes.fma_rows` on) hold the sign (``w * 0``), as
    :func:`~bimu.engine.lanes.lane_dots_signed` reads them."""
    L = sizes.shape[0] - 1
    woff[0] = 0
    for l in range(L):
        woff[l + 1] = woff[l] + K * row_blocks(sizes[l + 1])[2] * sizes[l]
    Wb = np.empty(woff[L], dtype=W.dtype)
    zero = W[0] * 0
    for l in range(L):
        n_in = sizes[l]
        n_out = sizes[l + 1]
        G, last, padded = row_blocks(n_out)
        T = n_in // DOT_LANES
        m = T * DOT_LANES
        for k in range(K):
            for g in range(G):
                R = LANE_ROWS if g < G - 1 else last
                dst = woff[l] + (k * padded + g * LANE_ROWS) * n_in
                src = K * poff[l] + (k * n_out + g * LANE_ROWS) * n_in
                rows = min(R, n_out - g * LANE_ROWS)
                for p in range(n_in):
                    i = p if p >= m else (p % T) * DOT_LANES + p // T  # the term at position p
                    col = Wb[dst + p * R:dst + (p + 1) * R]
                    for r in range(R):
                        if r >= rows:
                            col[r] = zero
                        elif signed and r >= fma_rows(R):
                            col[r] = W[src + r * n_in + i] * 0
                        else:
                            col[r] = W[src + r * n_in + i]
    return Wb


@njit(fastmath=False, **KERNEL_OPTS)
def hard_forward(Xp, B, W, sizes, poff, cfg, hp, K, threads, n_pool, out):
    """Logits ``out [K, B, C]`` of the first ``B`` rows of ``Xp`` (at least ``B`` rows; callers pad to a
    multiple of 4, as :func:`hard_forward_reference` needs) under the K hard weight sets in ``W`` (layout
    of :mod:`bimu.engine.sampling`): the bits of :func:`hard_forward_reference`, computed with the
    examples in the vector lanes (see the module). ``threads > 1`` splits the blocks over threads
    (``n_pool``: the size of numba's pool); one thread runs without the parallel runtime.
    """
    L, _, act, out_norm, _, gate, eps = binary_config(sizes, cfg, hp)
    signed = all_signs(W, K * poff[L])
    woff = np.zeros(L + 1, dtype=np.int64)
    Wb = interleave_weights(W, sizes, poff, K, signed, woff)
    NB = EVAL_CHUNKS * lane_block(Xp)
    maxr, XS, ZS, HS, ST = lane_scratch(Xp, sizes, K, n_pool if threads > 1 else 1)
    nblk = (B + NB - 1) // NB
    if threads > 1:
        _parallel_blocks(Xp, B, Wb, woff, sizes, act, out_norm, gate, eps, K, nblk, signed, maxr, XS, ZS, HS, ST, out)
    else:
        for blk in range(nblk):
            lane_block_pass(Xp, B, Wb, woff, sizes, act, out_norm, gate, eps, K, blk, signed, maxr, XS[0], ZS[0],
                            HS[0], ST[0], out, 0)


@njit(fastmath=False, **KERNEL_OPTS)
def lane_scratch(Xp, sizes, K, pool):
    """``(maxr, XS, ZS, HS, ST)``: the most padded rows of a layer (:func:`~bimu.engine.lanes.row_blocks`)
    and one row per thread (``pool`` rows) of :func:`lane_block_pass`'s scratch ``X`` (followed by
    ``EVAL_CHUNKS * lane_block`` zeros), ``Z``, ``H`` and ``st`` for a network of ``sizes``, K samples and
    examples like ``Xp``."""
    L = sizes.shape[0] - 1
    NB = EVAL_CHUNKS * lane_block(Xp)
    maxr = 0
    maxh = 1
    for l in range(1, L + 1):
        maxr = max(maxr, row_blocks(sizes[l])[2])
        if l < L:
            maxh = max(maxh, sizes[l])
    XS = np.zeros((pool, (sizes[0] + 1) * NB), dtype=Xp.dtype)
    ZS = np.empty((pool, K * maxr * NB), dtype=Xp.dtype)
    HS = np.empty((pool, K * maxh * NB), dtype=Xp.dtype)
    ST = np.empty((pool, 4, NB), dtype=np.float64)
    return maxr, XS, ZS, HS, ST


@njit(parallel=True, fastmath=False, **KERNEL_OPTS)
def _parallel_blocks(Xp, B, Wb, woff, sizes, act, out_norm, gate, eps, K, nblk, signed, maxr, XS, ZS, HS, ST, out):
    """:func:`hard_forward`'s blocks over numba's threads (thread ``t`` uses row ``t`` of the scratch)."""
    for blk in prange(nblk):
        t = get_thread_id()
        lane_block_pass(Xp, B, Wb, woff, sizes, act, out_norm, gate, eps, K, blk, signed, maxr, XS[t], ZS[t], HS[t],
                        ST[t], out, 0)


@njit(fastmath=False, **KERNEL_OPTS)
def lane_block_pass(Xp, B, Wb, woff, sizes, act, out_norm, gate, eps, K, blk, signed, maxr, X, Z, H, st, out,
                    first):
    """One block of examples through the network (see :func:`hard_forward`), with scratch ``X, Z, H,
    st``, from layer ``first``: 0 loads the block's inputs and sums every layer, 1 takes the first
    layer's pre-activations already in ``Z`` (:mod:`bimu.engine.grouped_eval`). Layouts: a layer's input,
    sample ``k``, lane block ``ch`` (``CH`` examples), feature ``i``, example ``e`` at
    ``((k * EVAL_CHUNKS + ch) * n_in + lane_position(i, n_in)) * CH + e`` (the first layer's input ``X``
    is shared by the samples); pre-activations ``Z`` of sample ``k``, row ``o``, example ``j`` of the
    block at ``(k * maxr + o) * NB + j``."""
    L = sizes.shape[0] - 1
    D = sizes[0]
    CH = lane_block(Xp)
    NB = EVAL_CHUNKS * CH
    b0 = blk * NB
    nb = min(NB, B - b0)
    if first == 0:
        load_inputs(Xp, b0, nb, D, X)
    for l in range(L):
        n_in = sizes[l]
        n_out = sizes[l + 1]
        G, last, padded = row_blocks(n_out)
        for k in range(K if l >= first else 0):
            src = X if l == 0 else H
            xo = 0 if l == 0 else k * EVAL_CHUNKS * n_in * CH
            for g in range(G):
                R = LANE_ROWS if g < G - 1 else last
                wo = woff[l] + (k * padded + g * LANE_ROWS) * n_in
                zo = (k * maxr + g * LANE_ROWS) * NB
                for ch in range(EVAL_CHUNKS):
                    if signed:
                        lane_dots_signed(src, xo + ch * n_in * CH, CH, Wb, wo, n_in, Z, zo + ch * CH, NB, R)
                    else:
                        lane_dots(src, xo + ch * n_in * CH, CH, Wb, wo, n_in, Z, zo + ch * CH, NB, R)
        for k in range(K):
            if l < L - 1:
                _norm_act_lanes(Z, k * maxr * NB, n_out, NB, CH, eps, act, gate, st, H, k * EVAL_CHUNKS * n_out * CH,
                                True, out, 0, 0, 0)
            else:
                _norm_act_lanes(Z, k * maxr * NB, n_out, NB, CH, eps, act, gate, st, H, 0, out_norm, out, k, b0,
                                nb)


@njit(fastmath=False, **KERNEL_OPTS)
def load_inputs(Xp, b0, nb, D, X):
    """Rows ``b0 .. b0 + nb - 1`` of ``Xp`` into the block's input ``X`` (layout of :func:`lane_block_pass`), the
    missing rows of a last block as zeros: by 8 x 8 (float64: 4 x 8) transposes
    (:func:`~bimu.engine.lanes.lane_transpose`) where whole vectors of rows are there."""
    CH = lane_block(Xp)
    V = CH // LANE_VECS
    T = D // 8
    fast = Xp.strides[1] == Xp.itemsize
    for ch in range(EVAL_CHUNKS):
        for v in range(LANE_VECS):
            j0 = ch * CH + v * V
            if fast and j0 + V <= nb:
                for u in range(T):
                    lane_transpose(Xp, b0 + j0, 8 * u, X, (ch * D + u) * CH + v * V, T * CH)
                for i in range(8 * T, D):
                    for e in range(V):
                        X[(ch * D + i) * CH + v * V + e] = Xp[b0 + j0 + e, i]
            else:
                for i in range(D):
                    p = (ch * D + lane_position(i, D)) * CH + v * V
                    for e in range(V):
                        X[p + e] = Xp[b0 + j0 + e, i] if j0 + e < nb else 0


@njit(fastmath=False, **KERNEL_OPTS)
def _norm_act_lanes(Z, zo, n, NB, CH, eps, act, gate, st, H, ho, norm, out, k, b0, nb):
    """:func:`~bimu.engine.binary_ops.layer_norm_act` of each example (lane) of a block, the same
    arithmetic in the same order (statistics in float64): for a hidden layer (``nb == 0``) the
    activations into ``H`` (layout of :func:`lane_block_pass` from ``ho``), for the output layer the
    normalised (``norm``) or raw logits into ``out[k, b0 + j]`` for ``j < nb``."""
    if not norm:
        for j in range(nb):
            for o in range(n):
                out[k, b0 + j, o] = Z[zo + o * NB + j]
        return
    s, mu, v, r = st[0], st[1], st[2], st[3]
    for j in range(NB):
        s[j] = 0.0
        v[j] = 0.0
    for o in range(n):
        z = Z[zo + o * NB:zo + (o + 1) * NB]
        for j in range(NB):
            s[j] += z[j]
    for j in range(NB):
        mu[j] = s[j] / n
    for o in range(n):
        z = Z[zo + o * NB:zo + (o + 1) * NB]
        for j in range(NB):
            d = z[j] - mu[j]
            v[j] += d * d
    for j in range(NB):
        r[j] = 1.0 / math.sqrt(v[j] / n + eps)
    if nb == 0:
        for ch in range(NB // CH):
            for o in range(n):
                lane_norm_act(Z, zo + o * NB + ch * CH, st, ch * CH, H, ho + (ch * n + lane_position(o, n)) * CH, CH,
                              gate, act == ACT_GATE)
    else:
        for j in range(nb):
            for o in range(n):
                out[k, b0 + j, o] = (Z[zo + o * NB + j] - mu[j]) * r[j]


@njit(parallel=True, fastmath=False, **KERNEL_OPTS)
def hard_forward_reference(Xp, B, W, sizes, poff, cfg, hp, K, threads, n_pool, out):
    """The previous evaluation kernel, kept as :func:`hard_forward`'s reference (tests, benchmark): logits
    ``out [K, B, C]`` of the first ``B`` rows of ``Xp`` (rows padded to a multiple of 4 with zeros) under
    the K hard weight sets in ``W``, one example at a time: the first layer by
    :func:`bimu.engine.dots.dot4x2` on groups of four examples, each pair of weight rows loaded once per
    block of :data:`EVAL_BLOCK` examples, the upper layers by :func:`~bimu.engine.binary_ops.preact_row`
    and :func:`~bimu.engine.binary_ops.norm_act_rows`, as training does. ``threads > 1`` splits blocks
    over threads (``n_pool``: the size of numba's pool).
    """
    L, _, act, out_norm, _, gate, eps = binary_config(sizes, cfg, hp)
    D = sizes[0]
    maxw = 0
    for l in range(1, L + 1):
        maxw = max(maxw, sizes[l])
    nblk = (Xp.shape[0] + EVAL_BLOCK - 1) // EVAL_BLOCK
    S = np.zeros((n_pool, 3, K * EVAL_BLOCK * maxw), dtype=W.dtype)
    tmp = np.zeros((n_pool, 8), dtype=W.dtype)
    rs = np.zeros((n_pool, K * EVAL_BLOCK), dtype=np.float64)
    zero_row = np.zeros(D, dtype=W.dtype)
    if threads > 1:
        for blk in prange(nblk):
            t = get_thread_id()
            _hard_block(Xp, B, W, sizes, poff, act, out_norm, gate, eps, K, blk, zero_row, S[t, 0], S[t, 1],
                        S[t, 2], rs[t], tmp[t], out)
    else:
        for blk in range(nblk):
            _hard_block(Xp, B, W, sizes, poff, act, out_norm, gate, eps, K, blk, zero_row, S[0, 0], S[0, 1],
                        S[0, 2], rs[0], tmp[0], out)


@njit(fastmath=False, **KERNEL_OPTS)
def _hard_block(Xp, B, W, sizes, poff, act, out_norm, gate, eps, K, blk, zero_row, cur, nxt, xh, rs, tmp, out):
    """One block of up to :data:`EVAL_BLOCK` examples through the whole network (see
    :func:`hard_forward_reference`).

    The first layer loads each pair of weight rows once per block and runs
    :func:`bimu.engine.dots.dot4x2` on the block's groups of four examples, so the weights stream from
    memory once per block, not once per four examples."""
    L = sizes.shape[0] - 1
    D = sizes[0]
    C = sizes[L]
    n0 = sizes[1]
    NB = EVAL_BLOCK
    b0 = blk * NB
    nb = min(NB, B - b0)
    ngrp = (nb + 3) // 4
    for k in range(K):
        wk = k * D * n0
        for o in range(0, n0, 2):
            w0 = W[wk + o * D:wk + (o + 1) * D]
            w1 = W[wk + (o + 1) * D:wk + (o + 2) * D] if o + 1 < n0 else zero_row
            for g in range(ngrp):
                e = b0 + 4 * g
                dot4x2(w0, w1, Xp[e], Xp[e + 1], Xp[e + 2], Xp[e + 3], tmp)
                for r in range(4):
                    nxt[(k * NB + 4 * g + r) * n0 + o] = tmp[2 * r]
                    if o + 1 < n0:
                        nxt[(k * NB + 4 * g + r) * n0 + o + 1] = tmp[2 * r + 1]
    for l in range(L):
        if l > 0:
            for o in range(sizes[l + 1]):
                preact_row(W, K * poff[l], sizes[l] * sizes[l + 1], cur, 0, NB, nxt, 0, o, sizes[l], sizes[l + 1], K, NB,
                           nb)
        for k in range(K):
            norm_act_rows(nxt, xh, cur, rs, 0, 0, k * NB, nb, sizes[l + 1], eps, act, gate, l < L - 1, out_norm)
    for k in range(K):
        for r in range(nb):
            for c in range(C):
                out[k, b0 + r, c] = cur[(k * NB + r) * C + c]

"""Hard-sample evaluation of the binary networks (numba).

The K hard weight sets are drawn once per call (:func:`bimu.engine.sampling.sample_weights`); the first
layer is computed by a register-blocked kernel (:func:`bimu.engine.dots.dot4x2`: four examples by two
weight rows, each sum with the bits of :func:`bimu.engine.dots.dot8`) on a batch padded to a multiple of
four, each pair of weight rows loaded once per block of :data:`EVAL_BLOCK` examples; the upper layers
use :func:`bimu.engine.binary_ops.preact_row` (:func:`~bimu.engine.dots.dot8`) and
:func:`~bimu.engine.binary_ops.norm_act_rows`, as training does. An example's result does not
depend on its batch, on the compile history or on the machine's vector width.
"""

from __future__ import annotations

import numpy as np
from numba import get_thread_id, njit, prange

from bimu.engine.binary_ops import binary_config, norm_act_rows, preact_row
from bimu.engine.dots import dot4x2
from bimu.engine.scalar import KERNEL_OPTS

EVAL_BLOCK = 32
"""Examples per evaluation block (a multiple of 4): the first layer's weights are read once per block."""


@njit(parallel=True, fastmath=False, **KERNEL_OPTS)
def hard_forward(Xp, B, W, sizes, poff, cfg, hp, K, threads, n_pool, out):
    """Logits ``out [K, B, C]`` of the first ``B`` rows of ``Xp`` (rows padded to a multiple of 4 with
    zeros) under the K hard weight sets in ``W`` (layout of :mod:`bimu.engine.sampling`).

    Every example follows the same arithmetic wherever it sits in the batch (see the module).
    ``threads > 1`` splits blocks of :data:`EVAL_BLOCK` examples over threads (``n_pool``: the size of
    numba's pool).
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
    """One block of up to :data:`EVAL_BLOCK` examples through the whole network (see :func:`hard_forward`).

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

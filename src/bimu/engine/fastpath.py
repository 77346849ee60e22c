"""The binary networks' training kernels for the main case: batch size 1, temperature 1 (numba).

Same layouts, counters and update rule as :func:`bimu.engine.binary_train.train_steps` (the arithmetic
of the update is rearranged to one division, so results agree with it to rounding, not bit for bit),
organised for speed:

* every index into a big array goes through a row slice (``a[e0:e0+n][i]`` with ``i`` from
  ``range``): numba's negative-index wraparound code on ``a[e0 + i]`` keeps loops scalar (about 18x
  slower on the gradient loop);
* one pass per step over each row of the first layer (the bulk of the parameters) does everything
  that touches the row while it is in L1 cache: accumulate the gradient over the K samples, apply
  the update, draw the next step's K relaxed samples, and compute the next step's first-layer
  pre-activations (K dot products with the next input). That pass is compiled once per ``K``
  (:mod:`bimu.engine.rowpass`, which also compiles :func:`_train_steps_b1_template` for each ``K``):
  with ``K`` a compile-time constant the loops over samples unroll inside the column loop, which then
  vectorises as a whole (no gradient vector is written; each sample is loaded and stored once);
* one exp per parameter and step: ``exp(-2|lambda|)`` of the new lambda is kept (``BT``) for the next
  step's update and is what the T = 1 sampling identity needs;
* the relaxed uniforms come from a 32-bit hash keyed per row (:func:`bimu.rng.relaxed_uniforms`),
  which vectorises with 32-bit integer lanes;
* the upper layers (small) use :func:`row_step` (FMA contraction on); the serial and the threaded
  drivers call the same compiled functions, so results do not depend on the thread count or on how
  steps are grouped into calls;
* no allocation inside the step loop: scratch is allocated once per method object
  (:func:`make_scratch`).
"""

from __future__ import annotations

import numpy as np
from numba import get_thread_id, njit, prange

from bimu.engine.binary_ops import (bayesbinn_lambda_step, bimu_coefficients, bimu_lambda_step, binary_config,
                                    hidden_backward, loss_backward, norm_act_rows, preact_row)
from bimu.engine.hparams import KIND_BIMU, BinaryHP
from bimu.engine.scalar import KERNEL_OPTS, fexp
from bimu.rng import as_like, hash32, row_key, uniform32

ROWS_PER_TASK = 10
"""Rows of the first layer per parallel work item (the threaded driver splits rows in such blocks)."""


@njit(fastmath={"contract"}, **KERNEL_OPTS)
def row_step(lam, prior, W, G, e0, wb, kstride, n, K, c, inp, ioff, istride, have_g, update, sample, kind, hp,
             key, step, bt):
    """All the per-step work on one weight row ``lam[e0:e0+n]`` (samples at ``W[wb + k*kstride + i]``).

    1. unless ``have_g``: ``G[e0+i] = sum_k (c[k] * inp[ioff + k*istride + i]) * (1 - w_k^2)``
       (``istride = 0`` for the first layer, whose input is shared by the samples);
    2. if ``update``: the BiMU (``kind`` 0) or BayesBiNN (1) update of the row, reading
       ``b = exp(-2 |lambda|)`` from ``bt[e0 + i]`` and writing that of the new lambda there (``bt``
       must hold ``exp(-2 |lam|)`` for the whole row on entry: one exp per parameter and step);
    3. if ``sample``: the K relaxed samples (T = 1) of training step ``step`` (uniforms of
       :func:`bimu.rng.relaxed_uniforms`);

    ``c`` holds the K output gradients followed by scratch for ``3 n`` values.
    Compiled with FMA contraction (``fastmath={"contract"}``: fewer instructions, not less accurate);
    every caller runs this one compiled function, so results do not depend on threads or chunking.
    """
    one = as_like(1.0, lam[e0])
    m2 = as_like(-2.0, lam[e0])
    # row views: indices from range() below are non-negative, so no wraparound code blocks SIMD
    lr_ = lam[e0:e0 + n]
    g_ = G[e0:e0 + n]
    b_ = bt[e0:e0 + n]
    if not have_g:
        for i in range(n):
            g_[i] = 0
        # BayesBiNN's ratio_eps is added to each sample's 1 - w^2 (0 for BiMU: adding it leaves the same bits)
        geps = as_like(hp[BinaryHP.RATIO_EPS], one) if kind != KIND_BIMU else as_like(0.0, one)
        for k in range(K):
            ck = c[k]
            w_ = W[wb + k * kstride:wb + k * kstride + n]
            x_ = inp[ioff + k * istride:ioff + k * istride + n]
            for i in range(n):
                w = w_[i]
                g_[i] += (ck * x_[i]) * ((one - w * w) + geps)
    if update:
        if kind == KIND_BIMU:
            gbl, two_bl, bkl, ilm, kln, pr0 = bimu_coefficients(hp)
            for i in range(n):
                ln = bimu_lambda_step(lr_[i], g_[i], b_[i], gbl, two_bl, bkl, ilm, kln, pr0)
                lr_[i] = ln
                b_[i] = fexp(m2 * abs(ln))
        else:
            lr = hp[BinaryHP.LR]
            cpr = hp[BinaryHP.PRIOR_PULL]
            beps = as_like(hp[BinaryHP.RATIO_EPS], one)
            p_ = prior[e0:e0 + n]
            for i in range(n):
                ln = bayesbinn_lambda_step(lr_[i], g_[i], b_[i], lr, cpr, p_[i], beps)
                lr_[i] = ln
                b_[i] = fexp(m2 * abs(ln))
    if not sample:
        return
    # per-row constants of the sampling formula (c[K:] is scratch of at least 3 n values)
    pp = c[K:K + n]
    qq = c[K + n:K + 2 * n]
    ob = c[K + 2 * n:K + 3 * n]
    for i in range(n):
        b = b_[i]
        pos = lr_[i] >= 0
        pp[i] = b if pos else one
        qq[i] = (one - b) if pos else (b - one)
        ob[i] = one + b
    rlo, rhi = row_key(key, step, lam.shape[0], e0)
    for k in range(K):
        w_ = W[wb + k * kstride:wb + k * kstride + n]
        for i in range(n):
            u = uniform32(hash32(rlo, rhi, np.uint32(i * K + k)), one)
            p = pp[i]
            w_[i] = (u * ob[i] - p) / (p + u * qq[i])


@njit(fastmath=False, **KERNEL_OPTS)
def _rows(lam, prior, W, G, r0, r1, e_base, wbase, n_in, kstride, K, C0, coff, n_out, inp, ioff, istride, have_g,
          update, kind, hp, key, step, bt, c):
    """:func:`row_step` on rows ``r0 .. r1-1`` of one layer (``C0[coff + k * n_out + o]`` the output
    gradients; ``bt`` as in :func:`row_step`, ``c`` scratch of ``K + 3 n_in`` values)."""
    for o in range(r0, r1):
        for k in range(K):
            c[k] = C0[coff + k * n_out + o]
        row_step(lam, prior, W, G, e_base + o * n_in, wbase + o * n_in, kstride, n_in, K, c, inp, ioff, istride,
                 have_g, update, True, kind, hp, key, step, bt)


# The template of the generated ``train_steps_b1`` (plain Python here; never called directly). The
# names ``first_layer``, ``first_layer_resample`` and ``first_layer_dots`` are the generated module's
# per-K row pass, resampling and pre-activation functions (:mod:`bimu.engine.rowpass`).
def _train_steps_b1_template(X, Y, n_steps, lam, prior, W, sizes, poff, cfg, hp, key, step0, threads, ready, Z0, Z,
                             XH, A, DZ, DA, RS, G, BT, CV):
    """``n_steps`` online steps of batch size 1 at temperature 1 (rows of ``X`` / ``Y`` in order).

    Same contract as :func:`bimu.engine.binary_train.train_steps` with ``B = 1`` (results agree to
    rounding); no allocation. Scratch (see :func:`make_scratch`): ``Z0`` (``K * sizes[1]``, next
    first-layer pre-activations), ``Z, XH, A, DZ`` (``K * sum(sizes[1:])`` each), ``DA``
    (``K * max(sizes)``), ``RS`` (float64, ``K * L``), ``G`` (``P``), ``BT`` (``P``, receives
    ``exp(-2 |lam|)``), ``CV`` (``[threads, K + 3 max(sizes)]``). ``ready``: ``W`` and ``BT`` are as the
    previous call of this kernel left them for this ``lam`` and ``step0`` (its last step drew step
    ``step0``'s samples and the exponentials of the current ``lam``), so the call only sums the first
    layer's pre-activations for its first input instead of recomputing ``BT`` and redrawing the first
    layer (the same values either way). Returns the number of steps whose
    gradient was not identically zero. ``threads > 1`` splits the first
    layer's rows over threads in blocks of :data:`ROWS_PER_TASK`; results do not depend on it.
    """
    L, K, act, out_norm, kind, gate, eps = binary_config(sizes, cfg, hp)
    P = lam.shape[0]
    D = sizes[0]
    n0 = sizes[1]
    k0stride = D * n0
    hoff = np.zeros(L + 1, dtype=np.int64)
    for l in range(L):
        hoff[l + 1] = hoff[l] + K * sizes[l + 1]
    have_z0 = False
    m2 = as_like(-2.0, lam[0])
    if not ready:
        for e in range(P):
            BT[e] = fexp(m2 * abs(lam[e]))
    nblk = (n0 + ROWS_PER_TASK - 1) // ROWS_PER_TASK
    applied = 0
    for j in range(n_steps):
        s = step0 + j
        x = X[j]
        if not have_z0:
            # first step of a call: redraw this step's first-layer samples (the same values the
            # previous call drew) with the same fused pass, or keep them when ``ready``; Z0 is then
            # summed exactly as within a call
            if ready:
                first_layer_dots(W, n0, D, k0stride, x, Z0)
            else:
                first_layer_resample(lam, W, BT, n0, 0, n0, D, k0stride, x, Z0, key, s)
        for t in range(K * n0):
            Z[t] = Z0[t]
        # ---------------- forward (one example: rows q = k)
        for l in range(L):
            if l > 0:
                for o in range(sizes[l + 1]):
                    preact_row(W, K * poff[l], sizes[l] * sizes[l + 1], A, hoff[l - 1], 1, Z, hoff[l], o, sizes[l],
                               sizes[l + 1], K, 1, 1)
            norm_act_rows(Z, XH, A, RS, l * K, hoff[l], 0, K, sizes[l + 1], eps, act, gate, l < L - 1, out_norm)
        # ---------------- loss gradient, output norm, hidden layers
        for k in range(K):
            loss_backward(A, XH, DA, DZ, RS, (L - 1) * K, hoff[L - 1], k, sizes[L], Y[j], K, out_norm)
        for l in range(L - 1, 0, -1):
            for k in range(K):
                hidden_backward(W, DA, DZ, XH, RS, (l - 1) * K, hoff[l], hoff[l - 1], K * poff[l], sizes[l] * sizes[l + 1],
                                k, k, sizes[l], sizes[l + 1], act, gate)
        # ---------------- gradients of the upper layers (small); is the whole gradient zero?
        nonzero = False
        cvec = CV[0]
        for l in range(1, L):
            n_in = sizes[l]
            n_out = sizes[l + 1]
            kstride = n_in * n_out
            for o in range(n_out):
                e0 = poff[l] + o * n_in
                for k in range(K):
                    cvec[k] = DZ[hoff[l] + k * n_out + o]
                row_step(lam, prior, W, G, e0, K * poff[l] + o * n_in, kstride, n_in, K, cvec, A, hoff[l - 1], n_in,
                         False, False, False, kind, hp, key, 0, BT)
                if not nonzero:
                    for i in range(n_in):
                        if G[e0 + i] != 0:
                            nonzero = True
                            break
        if not nonzero:
            # a one-layer network, or rare: decide from the first layer's gradient, row by row
            anyc = False
            for t in range(K * n0):
                if DZ[t] != 0:
                    anyc = True
            if anyc:
                for o in range(n0):
                    for k in range(K):
                        cvec[k] = DZ[k * n0 + o]
                    row_step(lam, prior, W, G, o * D, o * D, k0stride, D, K, cvec, x, 0, 0, False, False, False,
                             kind, hp, key, 0, BT)
                    for i in range(D):
                        if G[o * D + i] != 0:
                            nonzero = True
                            break
                    if nonzero:  # one row settles it (the first layer's G is not read after this)
                        break
        if nonzero:
            applied += 1
        # ---------------- update + resample: upper layers, then the fused first-layer pass
        cbase = s + 1  # the step whose samples are drawn
        have_next = j + 1 < n_steps
        for l in range(1, L):
            n_in = sizes[l]
            n_out = sizes[l + 1]
            _rows(lam, prior, W, G, 0, n_out, poff[l], K * poff[l], n_in, n_in * n_out, K, DZ, hoff[l], n_out,
                  A, 0, 0, True, nonzero, kind, hp, key, cbase, BT, CV[0])
        xn = X[j + 1] if have_next else x
        if threads > 1:
            for blk in prange(nblk):
                tid = get_thread_id()
                r1 = min(n0, (blk + 1) * ROWS_PER_TASK)
                first_layer(lam, prior, W, BT, DZ, n0, blk * ROWS_PER_TASK, r1, D, k0stride, x, xn, Z0, hp, key,
                            cbase, nonzero, CV[tid], kind)
        else:
            first_layer(lam, prior, W, BT, DZ, n0, 0, n0, D, k0stride, x, xn, Z0, hp, key, cbase, nonzero, CV[0],
                        kind)
        have_z0 = have_next
    return applied


def make_scratch(sizes, K: int, threads: int, dtype) -> tuple:
    """Scratch arrays of the generated ``train_steps_b1`` (from ``Z0`` on), allocated once per method object."""
    L = len(sizes) - 1
    H = K * int(sum(sizes[1:]))
    maxw = int(max(sizes))
    P = int(sum(a * b for a, b in zip(sizes[:-1], sizes[1:])))
    return (np.zeros(K * int(sizes[1]), dtype), np.zeros(H, dtype), np.zeros(H, dtype), np.zeros(H, dtype),
            np.zeros(H, dtype), np.zeros(K * maxw, dtype), np.zeros(K * L, np.float64), np.zeros(P, dtype),
            np.zeros(P, dtype), np.zeros((threads, K + 3 * maxw), dtype))

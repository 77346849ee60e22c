"""The binary networks' general training kernel: any batch size, any temperature (numba).

Layouts of :mod:`bimu.engine.sampling`; activation buffers are flat too: layer ``l``'s pre-activations
of sample ``k``, example ``b`` start at ``hoff[l] + (k * B + b) * out_l``. Batch-size-1 steps at
temperature 1, the main case, run the specialised kernels of :mod:`bimu.engine.fastpath` instead.

Determinism: every dot product is computed by :func:`bimu.engine.dots.dot8`, every other reduction runs
in a fixed serial order, and all randomness comes from counters (:mod:`bimu.rng`), so results do not
depend on the number of threads or on how steps are grouped into calls. No ``fastmath`` flag is used
except FMA contraction (``fastmath={"contract"}``), as in every kernel that computes ``exp(-2|lambda|)``
or relaxed samples, so that all of them compute those values identically.

``cfg`` and ``hp``: the slots of :class:`~bimu.engine.hparams.Cfg` and
:class:`~bimu.engine.hparams.BinaryHP`.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from bimu.engine.binary_ops import (bayesbinn_lambda_step, bimu_coefficients, binary_config, hidden_backward,
                                    loss_backward, norm_act_rows, preact_row)
from bimu.engine.hparams import KIND_BIMU, BinaryHP
from bimu.engine.sampling import relaxed_row
from bimu.engine.scalar import KERNEL_OPTS, fexp
from bimu.rng import as_like


@njit(inline="always", **KERNEL_OPTS)
def _grad_row(G, T, W, DZ, A, Xf, sizes, poff, hoff, l, o, K, B, xrow, inv_t, one, geps):
    """The gradient w.r.t. row ``o`` of layer ``l``'s lambda into ``G`` (``T``: scratch of the batch sums)."""
    n_in = sizes[l]
    n_out = sizes[l + 1]
    kstride = n_in * n_out
    e0 = poff[l] + o * n_in
    for i in range(n_in):
        G[e0 + i] = 0
    for k in range(K):
        wo = K * poff[l] + k * kstride + o * n_in
        if B == 1:
            c = DZ[hoff[l] + k * n_out + o] * inv_t
            if l == 0:
                for i in range(n_in):
                    w = W[wo + i]
                    G[e0 + i] += (c * Xf[xrow + i]) * ((one - w * w) + geps)
            else:
                ab = hoff[l - 1] + k * n_in
                for i in range(n_in):
                    w = W[wo + i]
                    G[e0 + i] += (c * A[ab + i]) * ((one - w * w) + geps)
        else:
            for i in range(n_in):
                T[e0 + i] = 0
            for b in range(B):
                c = DZ[hoff[l] + (k * B + b) * n_out + o] * inv_t
                if l == 0:
                    xb = xrow + b * sizes[0]
                    for i in range(n_in):
                        T[e0 + i] += c * Xf[xb + i]
                else:
                    ab = hoff[l - 1] + (k * B + b) * n_in
                    for i in range(n_in):
                        T[e0 + i] += c * A[ab + i]
            for i in range(n_in):
                w = W[wo + i]
                G[e0 + i] += T[e0 + i] * ((one - w * w) + geps)


@njit(inline="always", **KERNEL_OPTS)
def _update_row(lam, prior, G, W, HB, sizes, poff, l, o, K, B, kind, hp, nonzero, one, geps, key, cbase, inv_t):
    """Row ``o`` of layer ``l``: the update of its lambda (when ``nonzero``), then its K relaxed samples
    of step ``cbase`` (``G`` receives ``exp(-2 |lambda|)``)."""
    n_in = sizes[l]
    e0 = poff[l] + o * n_in
    m2 = as_like(-2.0, one)
    four = as_like(4.0, one)
    if nonzero:
        if kind == KIND_BIMU:
            gbl, two_bl, bkl, ilm, kln, pr0 = bimu_coefficients(hp)
            for i in range(n_in):
                e = e0 + i
                lo = lam[e]
                g = G[e]
                b = fexp(m2 * abs(lo))
                rr = one / (one + b)
                t = (one - b) * rr
                t = t if lo >= 0 else -t
                var = (four * b) * (rr * rr)
                eta = one / (bkl * var + two_bl * (t * g + abs(g)) + ilm)
                ln = lo - eta * (gbl * g + kln * (lo - pr0) * var)
                lam[e] = ln
                G[e] = fexp(m2 * abs(ln))
        else:
            lr = as_like(hp[BinaryHP.LR] / B, one)  # g is summed over the batch; BayesBiNN uses its mean
            cpr = hp[BinaryHP.PRIOR_PULL]
            for i in range(n_in):
                e = e0 + i
                lo = lam[e]
                b = fexp(m2 * abs(lo))
                if geps == 0:
                    rr = one / (one + b)
                    var = (four * b) * (rr * rr)
                    ln = lo - lr * (G[e] / var) - cpr * (lo - prior[e])
                else:
                    ln = bayesbinn_lambda_step(lo, G[e], b, lr, cpr, prior[e], geps)
                lam[e] = ln
                G[e] = fexp(m2 * abs(ln))
    else:
        for i in range(n_in):
            G[e0 + i] = fexp(m2 * abs(lam[e0 + i]))
    relaxed_row(lam, G, W, HB, e0, K * poff[l] + o * n_in, n_in * sizes[l + 1], n_in, K, key, cbase, inv_t)


@njit(parallel=True, fastmath={"contract"}, **KERNEL_OPTS)
def train_steps(X, Y, n_steps, B, lam, prior, W, sizes, poff, cfg, hp, key, step0):
    """Run ``n_steps`` online steps of batch ``B`` (rows ``j*B..(j+1)*B`` of ``X`` / ``Y``).

    ``W`` must hold the relaxed samples of step ``step0`` (counters of :mod:`bimu.rng`); on
    return ``lam`` is updated and ``W`` holds the samples of step ``step0 + n_steps``. Returns the
    number of steps whose gradient was not identically zero (the others changed nothing).
    """
    L, K, act, out_norm, kind, gate, eps = binary_config(sizes, cfg, hp)
    P = lam.shape[0]
    D = sizes[0]
    inv_t = hp[BinaryHP.INV_TEMPERATURE]
    one = as_like(1.0, lam[0])
    # BayesBiNN's ratio_eps, added to each sample's 1 - w^2 (0 for BiMU: adding it leaves the same bits)
    geps = as_like(hp[BinaryHP.RATIO_EPS], one) if kind != KIND_BIMU else as_like(0.0, one)
    hoff = np.zeros(L + 1, dtype=np.int64)
    maxw = 0
    for l in range(L):
        hoff[l + 1] = hoff[l] + K * B * sizes[l + 1]
        maxw = max(maxw, sizes[l])
    H = hoff[L]
    Z = np.empty(H, dtype=lam.dtype)
    XH = np.empty(H, dtype=lam.dtype)
    A = np.empty(H, dtype=lam.dtype)
    DZ = np.empty(H, dtype=lam.dtype)
    RS = np.empty(L * K * B, dtype=np.float64)
    DA = np.empty(K * B * maxw, dtype=lam.dtype)
    G = np.empty(P, dtype=lam.dtype)
    T = np.empty(P, dtype=lam.dtype)
    HB = np.empty(P, dtype=np.uint64)
    Xf = X.reshape(-1)
    n0 = sizes[1]
    k0stride = D * n0
    have_z0 = False
    applied = 0
    for j in range(n_steps):
        s = step0 + j
        xrow = j * B * D
        # ---------------- forward
        if not have_z0:
            for o in prange(n0):
                preact_row(W, 0, k0stride, Xf, xrow, 0, Z, 0, o, D, n0, K, B, B)
        for l in range(L):
            if l > 0:
                for o in prange(sizes[l + 1]):
                    preact_row(W, K * poff[l], sizes[l] * sizes[l + 1], A, hoff[l - 1], B, Z, hoff[l], o, sizes[l],
                               sizes[l + 1], K, B, B)
            norm_act_rows(Z, XH, A, RS, l * K * B, hoff[l], 0, K * B, sizes[l + 1], eps, act, gate, l < L - 1,
                          out_norm)
        # ---------------- loss gradient w.r.t. the logits, through the output norm and the hidden layers
        for k in range(K):
            for b in range(B):
                loss_backward(A, XH, DA, DZ, RS, (L - 1) * K * B, hoff[L - 1], k * B + b, sizes[L], Y[j * B + b], K,
                              out_norm)
        for l in range(L - 1, 0, -1):
            for kb in range(K * B):
                hidden_backward(W, DA, DZ, XH, RS, (l - 1) * K * B, hoff[l], hoff[l - 1], K * poff[l],
                                sizes[l] * sizes[l + 1], kb, kb // B, sizes[l], sizes[l + 1], act, gate)
        # ---------------- gradient w.r.t. lambda (into G), per layer, rows in parallel
        for l in range(L):
            for o in prange(sizes[l + 1]):
                _grad_row(G, T, W, DZ, A, Xf, sizes, poff, hoff, l, o, K, B, xrow, inv_t, one, geps)
        nonzero = False
        for e in range(P):
            if G[e] != 0:
                nonzero = True
                break
        if nonzero:
            applied += 1
        # ---------------- update, resample for step s + 1, next layer-0 pre-activations
        have_next = j + 1 < n_steps
        for l in range(L):
            for o in prange(sizes[l + 1]):
                _update_row(lam, prior, G, W, HB, sizes, poff, l, o, K, B, kind, hp, nonzero, one, geps, key, s + 1,
                            inv_t)
                if l == 0 and have_next:
                    preact_row(W, 0, k0stride, Xf, (j + 1) * B * D, 0, Z, 0, o, D, n0, K, B, B)
        have_z0 = have_next
    return applied

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

import math

import numpy as np
from numba import njit, prange

from bimu.engine.binary_ops import act_grad, bayesbinn_lambda_step, bimu_coefficients, layer_norm_act, ln_backward
from bimu.engine.dots import dot8
from bimu.engine.hparams import KIND_BIMU, BinaryHP, Cfg
from bimu.engine.sampling import relaxed_row
from bimu.engine.scalar import KERNEL_OPTS, fexp
from bimu.rng import as_like


@njit(parallel=True, fastmath={"contract"}, **KERNEL_OPTS)
def train_steps(X, Y, n_steps, B, lam, prior, W, sizes, poff, cfg, hp, key, step0):
    """Run ``n_steps`` online steps of batch ``B`` (rows ``j*B..(j+1)*B`` of ``X`` / ``Y``).

    ``W`` must hold the relaxed samples of step ``step0`` (counters of :mod:`bimu.rng`); on
    return ``lam`` is updated and ``W`` holds the samples of step ``step0 + n_steps``. Returns the
    number of steps whose gradient was not identically zero (the others changed nothing).
    """
    L = sizes.shape[0] - 1
    K = cfg[Cfg.K]
    P = lam.shape[0]
    D = sizes[0]
    act = cfg[Cfg.ACT]
    out_norm = cfg[Cfg.OUT_NORM]
    kind = cfg[Cfg.KIND]
    gate = hp[BinaryHP.GATE]
    inv_t = hp[BinaryHP.INV_TEMPERATURE]
    one = as_like(1.0, lam[0])
    m2 = as_like(-2.0, lam[0])
    four = as_like(4.0, lam[0])
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
                for k in range(K):
                    for b in range(B):
                        Z[(k * B + b) * n0 + o] = dot8(W, k * k0stride + o * D, Xf, xrow + b * D, D)
        for l in range(L):
            n_in = sizes[l]
            n_out = sizes[l + 1]
            if l > 0:
                kstride = n_in * n_out
                for o in prange(n_out):
                    for k in range(K):
                        wo = K * poff[l] + k * kstride + o * n_in
                        for b in range(B):
                            Z[hoff[l] + (k * B + b) * n_out + o] = dot8(
                                W, wo, A, hoff[l - 1] + (k * B + b) * n_in, n_in
                            )
            hidden = l < L - 1
            for kb in range(K * B):
                base = hoff[l] + kb * n_out
                if hidden or out_norm:
                    layer_norm_act(Z, XH, A, RS[l * K * B + kb:], base, n_out, hp[BinaryHP.LN_EPS], act, gate, hidden)
                else:
                    for o in range(n_out):
                        A[base + o] = Z[base + o]
                        XH[base + o] = Z[base + o]
        # ---------------- loss gradient w.r.t. the logits, then the output norm
        C = sizes[L]
        lb = hoff[L - 1]
        for k in range(K):
            for b in range(B):
                base = lb + (k * B + b) * C
                mx = A[base]
                for c in range(1, C):
                    mx = max(mx, A[base + c])
                ssum = 0.0
                for c in range(C):
                    ssum += math.exp(A[base + c] - mx)
                y = Y[j * B + b]
                for c in range(C):
                    pr = math.exp(A[base + c] - mx) / ssum
                    DA[(k * B + b) * C + c] = (pr - (1.0 if c == y else 0.0)) / K
        # output-norm backward (written out to keep DA / DZ offsets explicit)
        for kb in range(K * B):
            base = lb + kb * C
            if out_norm:
                ln_backward(DA, kb * C, XH, base, DZ, RS[(L - 1) * K * B + kb], C)
            else:
                for c in range(C):
                    DZ[base + c] = DA[kb * C + c]
        # ---------------- backward through hidden layers
        for l in range(L - 1, 0, -1):
            n_in = sizes[l]
            n_out = sizes[l + 1]
            kstride = n_in * n_out
            for kb in range(K * B):
                k = kb // B
                for i in range(n_in):
                    DA[kb * n_in + i] = 0
                for o in range(n_out):
                    c = DZ[hoff[l] + kb * n_out + o]
                    wo = K * poff[l] + k * kstride + o * n_in
                    for i in range(n_in):
                        DA[kb * n_in + i] += c * W[wo + i]
                base = hoff[l - 1] + kb * n_in
                for i in range(n_in):
                    DA[kb * n_in + i] *= act_grad(XH[base + i], act, gate)
                ln_backward(DA, kb * n_in, XH, base, DZ, RS[(l - 1) * K * B + kb], n_in)
        # ---------------- gradient w.r.t. lambda (into G), per layer, rows in parallel
        for l in range(L):
            n_in = sizes[l]
            n_out = sizes[l + 1]
            kstride = n_in * n_out
            for o in prange(n_out):
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
                                xb = xrow + b * D
                                for i in range(n_in):
                                    T[e0 + i] += c * Xf[xb + i]
                            else:
                                ab = hoff[l - 1] + (k * B + b) * n_in
                                for i in range(n_in):
                                    T[e0 + i] += c * A[ab + i]
                        for i in range(n_in):
                            w = W[wo + i]
                            G[e0 + i] += T[e0 + i] * ((one - w * w) + geps)
        nonzero = False
        for e in range(P):
            if G[e] != 0:
                nonzero = True
                break
        if nonzero:
            applied += 1
        # ---------------- update, resample for step s + 1, next layer-0 pre-activations
        cbase = s + 1
        have_next = j + 1 < n_steps
        xnext = (j + 1) * B * D
        for l in range(L):
            n_in = sizes[l]
            n_out = sizes[l + 1]
            kstride = n_in * n_out
            for o in prange(n_out):
                e0 = poff[l] + o * n_in
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
                wb = K * poff[l] + o * n_in
                relaxed_row(lam, G, W, HB, e0, wb, kstride, n_in, K, key, cbase, inv_t)
                if l == 0 and have_next:
                    for k in range(K):
                        for b in range(B):
                            Z[(k * B + b) * n0 + o] = dot8(W, k * k0stride + o * D, Xf, xnext + b * D, D)
        have_z0 = have_next
    return applied

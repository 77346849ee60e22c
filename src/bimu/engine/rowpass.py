"""The first layer's fused row pass with the number of samples ``K`` fixed at compile time (numba).

:func:`row_pass_kernel` builds (and caches on disk, one compiled kernel per ``K`` and update kind) the
function that does, for each weight row of the first layer and in ONE loop over the row's columns,
everything a training step needs from that row:

1. the gradient of column ``i``: ``g = sum_k (c_k x_i) (1 - w_k^2)`` over the K current samples;
2. the update (BiMU or BayesBiNN) of ``lambda_i`` and ``b_i = exp(-2 |lambda_i|)`` (one exp);
3. the K relaxed samples of the next step (T = 1 identity, uniforms of
   :func:`bimu.engine.rng.relaxed_uniforms`), written over the current ones;
4. the next step's K pre-activations ``z_k = sum_i w_k,i xnext_i``.

With ``K`` a compile-time constant the loops over the samples unroll inside the column loop, which
then vectorises as a whole (8 float32 lanes on AVX2): each weight sample is loaded once and stored
once per step, no gradient or scratch vector is written, and the 32-bit hash runs on 32-bit lanes.
Compared with separate loops (:func:`bimu.engine.fastpath.row_step`) that is about half the
instructions per parameter. The arithmetic of the update and of the samples is that of ``row_step``
(same formulas, same uniforms); the gradient and the dot products are summed in a different order, so
results agree with it to rounding. Every caller (serial or threaded driver) runs the same compiled
function for a given ``K``, so results do not depend on threads or on how steps are grouped.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from bimu.engine.kernels import KIND_BIMU, _add32, _h32, _mul32, _row_key, _u32, as_like, fexp

_CACHE: dict = {}


@njit(cache=True, error_model="numpy", nogil=True, boundscheck=False, fastmath={"reassoc", "nsz"})
def dot(w, x):
    """``sum_i w[i] * x[i]`` (vectorised, fixed summation order; never inlined)."""
    s = as_like(0.0, w[0])
    for i in range(w.shape[0]):
        s += w[i] * x[i]
    return s


def row_pass_kernel(K: int, kind: int):
    """The compiled row pass for ``K`` samples and update ``kind`` (0 BiMU, 1 BayesBiNN), cached.

    Signature: ``kernel(lam, prior, W, BT, DZ, n_out, r0, r1, D, kstride, x, xn, Z0, hp, key, step,
    update, c)`` (``c``: scratch of at least ``K`` values): rows ``r0 .. r1-1`` of the first layer (``lam[o*D:(o+1)*D]``, samples at
    ``W[k*kstride + o*D + i]``, output gradients ``DZ[k*n_out + o]``), current input ``x``, next input
    ``xn``, next pre-activations into ``Z0[k*n_out + o]``; ``update`` False skips step 2 (a step whose
    gradient is identically zero); ``BT`` holds ``exp(-2|lambda|)`` on entry and on exit.
    """
    K = int(K)
    kind = int(kind)
    if K < 1 or K > 64:
        raise ValueError(f"the fused row pass supports 1 <= K <= 64 samples, got K={K}")
    fn = _CACHE.get((K, kind))
    if fn is None:
        fn = _CACHE[(K, kind)] = _make(K, kind == KIND_BIMU)
    return fn


def _make(K, is_bimu):
    K32 = np.uint32(K)

    @njit(inline="always", cache=True, error_model="numpy", nogil=True, boundscheck=False,
          fastmath={"contract"})
    def _sample_column(W, e, kstride, lo, b, rlo, rhi, base, one):
        """The K relaxed samples of the parameter at flat index ``e`` (``W[e + k*kstride]``)."""
        pos = lo >= 0
        pp = b if pos else one
        qq = (one - b) if pos else (b - one)
        ob = one + b
        for k in range(K):
            u = _u32(_h32(rlo, rhi, _add32(base, np.uint32(k))), one)
            W[e + np.uint64(k * kstride)] = (u * ob - pp) / (pp + u * qq)

    @njit(cache=True, error_model="numpy", nogil=True, boundscheck=False,
          fastmath={"contract"})
    def kernel(lam, prior, W, BT, DZ, n_out, r0, r1, D, kstride, x, xn, Z0, hp, key, step, update, c):
        one = as_like(1.0, lam[0])
        zero = as_like(0.0, lam[0])
        m2 = as_like(-2.0, lam[0])
        four = as_like(4.0, lam[0])
        h0 = hp[0]
        h1 = hp[1]
        h2 = hp[2]
        h3 = hp[3]
        h4 = hp[4]
        h5 = hp[5]
        P = lam.shape[0]
        x_ = x[:D]
        xn_ = xn[:D]
        for o in range(r0, r1):
            e0 = o * D
            for k in range(K):
                c[k] = DZ[k * n_out + o]
            lr_ = lam[e0:e0 + D]
            b_ = BT[e0:e0 + D]
            p_ = prior[e0:e0 + D]
            rlo, rhi = _row_key(key, step, P, e0)
            if update:
                for i in range(D):
                    xi = x_[i]
                    lo = lr_[i]
                    b = b_[i]
                    g = zero
                    for k in range(K):
                        w = W[np.uint64(k * kstride + e0) + np.uint64(i)]
                        g += (c[k] * xi) * (one - w * w)
                    d1 = one + b
                    if is_bimu:
                        d2 = d1 * d1
                        fb = four * b
                        tt = (one - b) * d1
                        tt = tt if lo >= 0 else -tt
                        num = h0 * g * d2 + h4 * (lo - h5) * fb
                        den = h2 * fb + h1 * (tt * g + abs(g) * d2) + h3 * d2
                        lo = lo - num / den
                    else:
                        lo = lo - h0 * ((g * (d1 * d1)) / (four * b)) - h4 * (lo - p_[i])
                    b = fexp(m2 * abs(lo))
                    lr_[i] = lo
                    b_[i] = b
            for i in range(D):
                _sample_column(W, np.uint64(e0) + np.uint64(i), kstride, lr_[i], b_[i], rlo, rhi,
                               _mul32(np.uint32(i), K32), one)
            for k in range(K):
                Z0[k * n_out + o] = dot(W[k * kstride + e0:k * kstride + e0 + D], xn_)

    return kernel

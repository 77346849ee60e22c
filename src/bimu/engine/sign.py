"""Compiled online loop of the sign networks: STE (AdamW) and Synaptic Metaplasticity (numba).

The network of :class:`bimu.nn.sign_linear.SignMLP`: weights ``sign(W_h)`` (``sign(0) = +1``) with the
identity straight-through estimator, no bias, sign activations with the hard-tanh estimator
(``1[|a| <= 1]``), and optionally :class:`bimu.nn.sign_linear.OnlineBatchNorm` after every layer: the
running statistics first take in the batch (momentum ``mom``), then normalise it as constants,
``y = (z - m) * rsqrt(v + eps) * gamma + beta``. Loss: cross-entropy averaged over the batch.
Update: :func:`bimu.optim.metaplastic_adam.metaplastic_adam_update_` on every latent weight (decoupled
or L2 weight decay, metaplastic attenuation ``1 - tanh^2(m |W_h|)`` of steps that shrink ``|W_h|``,
optional clip to ``[-1, 1]``) and plain Adam on the norms' ``gamma, beta``. The attenuation is
computed as ``4 q / (1 + q)^2`` with ``q = exp(-2 m |W_h|)`` (vectorisable; equal to ``1 - tanh^2`` up
to rounding, and not exactly 0 where float32 ``tanh`` rounds to 1).

Layouts: latent weights ``Wh`` at :func:`bimu.engine.dense.offsets` ``woff``; per unit ``u = boff[l] +
o``: running mean ``RM[u]``, variance ``RV[u]``; the norms' parameters ``NP`` in the torch order
(``gamma`` then ``beta`` of each layer, from ``2 boff[l]``), with Adam moments ``mN, vN`` alike.
"""

from __future__ import annotations

import math

from numba import njit

from bimu.engine.dense import backprop_rows, batch_grad_row, ce_delta
from bimu.engine.hparams import SignHP
from bimu.engine.scalar import KERNEL_OPTS, fexp, gate_forward, gate_surrogate
from bimu.rng import as_like


@njit(fastmath=False, **KERNEL_OPTS)
def signs_into(w, out):
    """``out[i] = sign(w[i])`` (``sign(0) = +1``) in ``out``'s float type: the binary weights of an
    evaluation pass."""
    one = as_like(1.0, out[0])
    for i in range(w.shape[0]):
        out[i] = one if w[i] >= 0 else -one


@njit(fastmath=False, **KERNEL_OPTS)
def sign_dot(w, x):
    """``sum_i sign(w[i]) x[i]`` (``sign(0) = +1``), in order."""
    s = as_like(0.0, x[0])
    for i in range(w.shape[0]):
        s += x[i] if w[i] >= 0 else -x[i]
    return s


@njit(fastmath=False, **KERNEL_OPTS)
def adam_row(w, m, v, g, n, lr, meta, wd, decoupled, clip, b1, b2, eps, bc1, bc2):
    """One metaplastic Adam step on ``w[:n]`` (moments ``m, v``, gradient ``g``; ``bc1, bc2`` the bias
    corrections ``1 - beta^t``), as :func:`bimu.optim.metaplastic_adam.metaplastic_adam_update_` (which
    divides by ``bc1, bc2``; here the moments are multiplied by their reciprocals, equal up to rounding)."""
    one = w[0]
    lr_ = as_like(lr, one)
    decay = as_like(1.0 - lr * wd, one)
    wd_ = as_like(wd, one)
    b1_ = as_like(b1, one)
    b2_ = as_like(b2, one)
    o1 = as_like(1.0 - b1, one)
    o2 = as_like(1.0 - b2, one)
    eps_ = as_like(eps, one)
    r1 = as_like(1.0 / bc1, one)  # bias corrections as reciprocals: one division per weight, not three
    r2 = as_like(1.0 / bc2, one)
    m2 = as_like(-2.0 * meta, one)
    four = as_like(4.0, one)
    lim = as_like(1.0, one)
    for i in range(n):
        wi = w[i]
        gi = g[i]
        if decoupled:
            wi = wi * decay
        else:
            gi = gi + wd_ * wi
        mi = m[i] * b1_ + o1 * gi
        vi = v[i] * b2_ + (o2 * gi) * gi
        m[i] = mi
        v[i] = vi
        u = (lr_ * (mi * r1)) / (math.sqrt(vi * r2) + eps_)
        if meta > 0:
            q = fexp(m2 * abs(wi))
            f = four * q / ((lim + q) * (lim + q))
            u = u * f if u * wi > 0 else u
        wi = wi - u
        if clip:
            wi = min(max(wi, -lim), lim)
        w[i] = wi


@njit(fastmath=False, **KERNEL_OPTS)
def sign_train(X, Y, n_steps, B, Wh, NP, RM, RV, mW, vW, mN, vN, sizes, woff, boff, norm, hp, step0, Z, A, H, DY,
               INV, GN, grow, p, MB, INIT):
    """``n_steps`` online steps of ``B`` examples each; Adam's step counter starts at ``step0``.

    ``hp``: :class:`~bimu.engine.hparams.SignHP` (float64; ``BN_EQUINOX``: the norms' ``equinox``
    statistics, each batch's own mean and variance folded in, the first batch's taken whole while
    ``INIT[0]`` is 0, gradient through the batch's share). Scratch: ``Z, A, H, DY`` (``B * boff[-1]``:
    pre-norm, post-norm, sign and gradient values), ``INV`` (``boff[-1]``), ``GN`` (``2 boff[-1]``),
    ``grow`` (widest layer input), ``p`` (classes), ``MB`` (``boff[-1]``: the batch means, ``bn_equinox``).
    ``INIT[0]``: whether the norms have seen a batch (``bn_equinox``; set to 1 by the first step).
    """
    L = sizes.shape[0] - 1
    Pu = boff[L]
    C = sizes[L]
    lr, meta, wd = hp[SignHP.LR], hp[SignHP.METAPLASTICITY], hp[SignHP.WEIGHT_DECAY]
    decoupled, clip = hp[SignHP.DECOUPLED] != 0, hp[SignHP.CLIP] != 0
    b1, b2, eps = hp[SignHP.BETA1], hp[SignHP.BETA2], hp[SignHP.EPS]
    one = Wh[0]
    mom = as_like(hp[SignHP.BN_MOMENTUM], one)
    keep = as_like(1.0 - hp[SignHP.BN_MOMENTUM], one)
    bn_eps = as_like(hp[SignHP.BN_EPS], one)
    gate = hp[SignHP.GATE]
    use_gate = gate > 0
    eqx = hp[SignHP.BN_EQUINOX] != 0
    fb = as_like(B, one)
    inv_b = as_like(1.0, one) / fb
    for s in range(n_steps):
        t = step0 + s + 1
        bc1 = 1.0 - math.pow(b1, t)
        bc2 = 1.0 - math.pow(b2, t)
        r0 = s * B
        # the share of this batch in the equinox statistics: the momentum, or all of it on the first batch
        share = mom if INIT[0] != 0 else as_like(1.0, one)
        rest = as_like(1.0, one) - share
        # ---- forward, layer by layer over the batch (the norm's statistics take in the whole batch first)
        for l in range(L):
            n_in = sizes[l]
            n_out = sizes[l + 1]
            for b in range(B):
                inp = X[r0 + b] if l == 0 else H[b * Pu + boff[l - 1]:b * Pu + boff[l - 1] + n_in]
                for o in range(n_out):
                    w0 = woff[l] + o * n_in
                    Z[b * Pu + boff[l] + o] = sign_dot(Wh[w0:w0 + n_in], inp)
            for o in range(n_out):
                u = boff[l] + o
                if norm:
                    total = Z[u]
                    for b in range(1, B):
                        total += Z[b * Pu + u]
                    if eqx:  # the batch's own mean and variance, folded in with its share
                        mean = total / fb
                        var = (Z[u] - mean) * (Z[u] - mean)
                        for b in range(1, B):
                            var += (Z[b * Pu + u] - mean) * (Z[b * Pu + u] - mean)
                        MB[u] = mean
                        RM[u] = RM[u] * rest + share * mean
                        RV[u] = RV[u] * rest + share * (var / fb)
                    else:  # the batch folded into the running mean, the variance taken about it
                        RM[u] = RM[u] * keep + mom * (total / fb)
                        var = (Z[u] - RM[u]) * (Z[u] - RM[u])
                        for b in range(1, B):
                            var += (Z[b * Pu + u] - RM[u]) * (Z[b * Pu + u] - RM[u])
                        RV[u] = RV[u] * keep + mom * (var / fb)
                    INV[u] = as_like(1.0, one) / math.sqrt(RV[u] + bn_eps)
                    g = NP[2 * boff[l] + o]
                    beta = NP[2 * boff[l] + n_out + o]
                    for b in range(B):
                        A[b * Pu + u] = (Z[b * Pu + u] - RM[u]) * INV[u] * g + beta
                else:
                    for b in range(B):
                        A[b * Pu + u] = Z[b * Pu + u]
                if l < L - 1:
                    if use_gate:
                        for b in range(B):
                            H[b * Pu + u] = gate_forward(A[b * Pu + u], gate)
                    else:
                        for b in range(B):
                            H[b * Pu + u] = as_like(1.0, one) if A[b * Pu + u] >= 0 else as_like(-1.0, one)
        if norm and eqx:
            INIT[0] = 1
        # ---- backward: DY holds dL/d(layer output) per example (not divided by B), turned into dL/dz
        for b in range(B):
            zb = b * Pu + boff[L - 1]
            ce_delta(A[zb:zb + C], Y[r0 + b], p)
            for c in range(C):
                DY[zb + c] = p[c]
        for l in range(L - 1, -1, -1):
            n_in = sizes[l]
            n_out = sizes[l + 1]
            if norm:
                for o in range(n_out):
                    u = boff[l] + o
                    dg = as_like(0.0, one)
                    db = as_like(0.0, one)
                    for b in range(B):
                        dy = DY[b * Pu + u]
                        dg += dy * ((Z[b * Pu + u] - RM[u]) * INV[u])
                        db += dy
                    GN[2 * boff[l] + o] = dg * inv_b
                    GN[2 * boff[l] + n_out + o] = db * inv_b
                    g = NP[2 * boff[l] + o]
                    if eqx:
                        # y_b = (z_b - m) INV g + beta with m = (1 - s) m_old + s mean_b(z), v likewise (s = share):
                        # dL/dz_b = g INV (dy_b - s/B sum dy) - g INV^3 s/B (z_b - mean) sum_b' dy_b' (z_b' - m)
                        dz = as_like(0.0, one)
                        for b in range(B):
                            dz += DY[b * Pu + u] * (Z[b * Pu + u] - RM[u])
                        k1 = share * db * inv_b
                        k2 = share * inv_b * INV[u] * INV[u] * dz
                        for b in range(B):
                            DY[b * Pu + u] = g * INV[u] * (DY[b * Pu + u] - k1 - k2 * (Z[b * Pu + u] - MB[u]))
                    else:
                        for b in range(B):
                            DY[b * Pu + u] = DY[b * Pu + u] * g * INV[u]
            if l > 0:
                for b in range(B):
                    db0 = b * Pu + boff[l - 1]
                    dp = DY[db0:db0 + n_in]
                    backprop_rows(dp, DY, b * Pu + boff[l], Wh, woff[l], n_in, n_out, True)
                    ap = A[db0:db0 + n_in]
                    if use_gate:
                        for i in range(n_in):
                            dp[i] = dp[i] * gate_surrogate(ap[i], gate)
                    else:
                        for i in range(n_in):
                            if abs(ap[i]) > 1:
                                dp[i] = 0.0
        # ---- Adam on every latent weight row (g = mean_b dL/dz[b, o] * input[b]), then on the norms
        for l in range(L):
            n_in = sizes[l]
            n_out = sizes[l + 1]
            gr = grow[:n_in]
            for o in range(n_out):
                batch_grad_row(gr, gr, DY, boff[l] + o, X, r0, H, boff[l - 1], Pu, B, n_in, l == 0, False)
                if B > 1:
                    for i in range(n_in):
                        gr[i] = gr[i] * inv_b
                w0 = woff[l] + o * n_in
                adam_row(Wh[w0:w0 + n_in], mW[w0:w0 + n_in], vW[w0:w0 + n_in], gr, n_in, lr, meta, wd, decoupled,
                         clip, b1, b2, eps, bc1, bc2)
        if norm:
            adam_row(NP, mN, vN, GN, 2 * Pu, lr, 0.0, wd, decoupled, False, b1, b2, eps, bc1, bc2)

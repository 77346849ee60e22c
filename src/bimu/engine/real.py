"""Compiled online loop of the real-valued ReLU MLP: SGD, Online EWC and Synaptic Intelligence (numba).

The network of :class:`bimu.nn.real_mlp.RealMLP` (biased linear layers, ReLU between them, raw
logits; with ``hp[RealHP.BIAS] == 0`` the biases stay at 0 and are never updated: the network without
biases), cross-entropy averaged over the batch, and the update of :class:`bimu.methods.sgd.SGDMethod`
and its two penalised variants::

    theta <- theta + delta,  delta = -lr * (g + r)
    SGD: r = 0 ;  EWC: r = importance * F * (theta - theta*) ;  SI: r = 2 c Omega * (theta - theta*)

with ``g`` the data gradient; Online EWC also adds every example's squared gradient to the running
Fisher sum (``acc``), SI integrates ``path -= g * delta`` (:mod:`bimu.regularizers.ewc`,
:mod:`bimu.regularizers.si`). The task-end folds are a few numpy lines in
:mod:`bimu.engine.fused_real`.

Experience replay (:func:`replay_train`, :class:`bimu.methods.replay.ExperienceReplayMethod`) is SGD on a
batch made of the incoming examples followed by the replayed buffer slots (:func:`bimu.rng.replay_slots`),
then the reservoir update of the buffer (:func:`bimu.rng.reservoir_slot`).

Parameter layout (flat ``theta``, and ``F`` / ``anchor`` / ``acc`` / ``path`` alike): the weights of
every layer (:func:`bimu.engine.dense.offsets` ``woff``) followed by the biases of every layer
(``woff[-1] + boff``). The step loop allocates nothing and calls no Python.
"""

from __future__ import annotations

from numba import njit

from bimu.engine.dense import backprop_rows, batch_grad_row, ce_delta
from bimu.engine.dots import dot
from bimu.engine.hparams import RealHP
from bimu.engine.scalar import KERNEL_OPTS
from bimu.rng import as_like, replay_slots, reservoir_slot

KIND_SGD = 0
"""Plain SGD (no penalty)."""
KIND_EWC = 1
"""Online EWC: penalty ``importance * F (theta - theta*)``, squared gradients accumulated."""
KIND_SI = 2
"""Synaptic Intelligence: penalty ``2 c Omega (theta - theta*)``, path integral accumulated."""


@njit(fastmath=False, **KERNEL_OPTS)
def _update_row(th, g, pen, anc, acc, path, n, kind, square, nlr, coef):
    """``th += delta`` over one row (``g`` its data gradient), with the method's penalty and trace
    (EWC adds ``g^2`` to ``acc`` when ``square``; batches add their per-example squares themselves)."""
    if kind == KIND_SGD:
        for i in range(n):
            th[i] = th[i] + nlr * g[i]
    elif kind == KIND_EWC and square:
        for i in range(n):
            acc[i] += g[i] * g[i]
            th[i] = th[i] + nlr * (g[i] + coef * pen[i] * (th[i] - anc[i]))
    elif kind == KIND_EWC:
        for i in range(n):
            th[i] = th[i] + nlr * (g[i] + coef * pen[i] * (th[i] - anc[i]))
    else:
        for i in range(n):
            d = nlr * (g[i] + coef * pen[i] * (th[i] - anc[i]))
            th[i] = th[i] + d
            path[i] = path[i] - g[i] * d


@njit(fastmath=False, **KERNEL_OPTS)
def real_train(X, Y, n_steps, B, theta, pen, anchor, acc, path, sizes, woff, boff, kind, hp, Z, A, D, grow, sq, p):
    """``n_steps`` online steps of ``B`` examples each (rows of ``X``, labels ``Y``, in order).

    ``hp``: :class:`~bimu.engine.hparams.RealHP`; ``pen`` is EWC's Fisher or SI's Omega.
    Scratch: ``Z``, ``A``, ``D`` (``B * boff[-1]`` values: pre-activations, activations, per-example
    deltas), ``grow``, ``sq`` (widest layer input) and ``p`` (classes).
    """
    L = sizes.shape[0] - 1
    Pw = woff[L]
    Pu = boff[L]
    C = sizes[L]
    nlr = -hp[RealHP.LR]
    coef = hp[RealHP.COEF]
    train_bias = hp[RealHP.BIAS] != 0
    one = theta[0]
    inv_b = as_like(1.0, one) / as_like(B, one)
    for s in range(n_steps):
        r0 = s * B
        # ---- forward, every example (a layer's pre-activations at Z[b * Pu + boff[l]:...])
        for b in range(B):
            for l in range(L):
                n_in = sizes[l]
                n_out = sizes[l + 1]
                inp = X[r0 + b] if l == 0 else A[b * Pu + boff[l - 1]:b * Pu + boff[l - 1] + n_in]
                zb = b * Pu + boff[l]
                for o in range(n_out):
                    w0 = woff[l] + o * n_in
                    z = dot(theta[w0:w0 + n_in], inp) + theta[Pw + boff[l] + o]
                    Z[zb + o] = z
                    A[zb + o] = max(z, as_like(0.0, z))
            # ---- per-example cross-entropy delta at the logits (not divided by B)
            zb = b * Pu + boff[L - 1]
            ce_delta(Z[zb:zb + C], Y[r0 + b], p)
            for c in range(C):
                D[zb + c] = p[c]
        # ---- backward through the old weights: D_{l-1} = (W_l^T D_l) * 1[z_{l-1} > 0]
        for l in range(L - 1, 0, -1):
            n_in = sizes[l]
            n_out = sizes[l + 1]
            for b in range(B):
                db = b * Pu + boff[l - 1]
                dp = D[db:db + n_in]
                backprop_rows(dp, D, b * Pu + boff[l], theta, woff[l], n_in, n_out, False)
                zp = Z[db:db + n_in]
                for i in range(n_in):
                    if zp[i] <= 0:
                        dp[i] = 0.0
        # ---- update, row by row: g = mean_b D[b, o] * input[b]
        for l in range(L):
            n_in = sizes[l]
            n_out = sizes[l + 1]
            for o in range(n_out):
                w0 = woff[l] + o * n_in
                if B == 1:
                    d = D[boff[l] + o]
                    if kind == KIND_SGD and d == 0:
                        continue  # theta + (-lr) * 0 is theta
                    inp = X[r0] if l == 0 else A[boff[l - 1]:boff[l - 1] + n_in]
                    g = grow[:n_in]
                    for i in range(n_in):
                        g[i] = d * inp[i]
                else:
                    g = grow[:n_in]
                    batch_grad_row(g, sq, D, boff[l] + o, X, r0, A, boff[l - 1], Pu, B, n_in, l == 0, kind == KIND_EWC)
                    for i in range(n_in):
                        g[i] = g[i] * inv_b
                    if kind == KIND_EWC:  # the per-example squared gradients
                        for i in range(n_in):
                            acc[w0 + i] += sq[i]
                _update_row(theta[w0:w0 + n_in], g, pen[w0:w0 + n_in], anchor[w0:w0 + n_in], acc[w0:w0 + n_in],
                            path[w0:w0 + n_in], n_in, kind, B == 1, nlr, coef)
            if not train_bias:
                continue
            # biases of the layer: g = mean_b D[b, o]
            g = grow[:n_out]
            for o in range(n_out):
                g[o] = 0.0
                for b in range(B):
                    g[o] += D[b * Pu + boff[l] + o]
                g[o] = g[o] * inv_b
                if kind == KIND_EWC and B > 1:
                    for b in range(B):
                        acc[Pw + boff[l] + o] += D[b * Pu + boff[l] + o] * D[b * Pu + boff[l] + o]
            e0 = Pw + boff[l]
            _update_row(theta[e0:e0 + n_out], g, pen[e0:e0 + n_out], anchor[e0:e0 + n_out], acc[e0:e0 + n_out],
                        path[e0:e0 + n_out], n_out, kind, B == 1, nlr, coef)


@njit(fastmath=False, **KERNEL_OPTS)
def replay_train(X, Y, n_steps, Bn, theta, sizes, woff, boff, hp, BX, BY, seen, key, k, XB, YB, slots,
                 Z, A, D, grow, sq, p):
    """``n_steps`` experience-replay steps of ``Bn`` incoming examples each (rows of ``X``, labels ``Y``).

    Each step: the replay slots of the step (:func:`bimu.rng.replay_slots` with ``n = seen[0]``, the
    number of labelled examples offered so far, and ``filled = min(n, M)``) into ``slots`` (their count
    into ``slots[k]``); the batch ``XB, YB`` = the incoming rows, then the buffer rows ``BX[slots]``,
    ``BY[slots]``; one SGD step on its mean cross-entropy (:func:`real_train`); then each incoming
    example offered to the buffer of ``M = BX.shape[0]`` slots in turn (:func:`bimu.rng.reservoir_slot`;
    ``seen[0]`` advances by one per example). ``hp``: :class:`~bimu.engine.hparams.RealHP`; ``key``:
    the replay key (uint64). Scratch: ``XB`` ``[Bn + k, in]``, ``YB`` ``[Bn + k]``, ``slots``
    ``[k + 1]`` (int64) and :func:`real_train`'s for batches of ``Bn + k``.
    """
    M = BX.shape[0]
    n_in0 = sizes[0]
    empty = theta[:0]
    for s in range(n_steps):
        r0 = s * Bn
        n = seen[0]
        filled = min(n, M)
        nrep = replay_slots(key, n, filled, k, slots)
        slots[k] = nrep
        for b in range(Bn):
            for i in range(n_in0):
                XB[b, i] = X[r0 + b, i]
            YB[b] = Y[r0 + b]
        for q in range(nrep):
            for i in range(n_in0):
                XB[Bn + q, i] = BX[slots[q], i]
            YB[Bn + q] = BY[slots[q]]
        real_train(XB, YB, 1, Bn + nrep, theta, empty, empty, empty, empty, sizes, woff, boff, KIND_SGD, hp,
                   Z, A, D, grow, sq, p)
        for b in range(Bn):
            m = seen[0]
            j = reservoir_slot(key, m, M)
            if j < M:
                for i in range(n_in0):
                    BX[j, i] = X[r0 + b, i]
                BY[j] = Y[r0 + b]
            seen[0] = m + 1

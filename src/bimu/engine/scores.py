"""Softmax probabilities and the label-free uncertainty scores of Monte-Carlo logits (numba)."""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from bimu.engine.scalar import KERNEL_OPTS


@njit(inline="always", fastmath=False, **KERNEL_OPTS)
def example_scores(logits, b, probs, votes, pred, vr, pe, al, ep, mlp, mp, ex):
    """:func:`scores_from_logits` of example ``b`` (``mlp``, ``mp``: zeroed float64 ``[C]``; ``ex``: float64
    ``[C]`` scratch); ``votes[b]`` must start at zero."""
    K = logits.shape[0]
    C = logits.shape[2]
    inv_ln2 = 1.0 / math.log(2.0)
    hsum = 0.0
    for k in range(K):
        mx = logits[k, b, 0]
        for c in range(1, C):
            mx = max(mx, logits[k, b, c])
        s = 0.0
        for c in range(C):
            ex[c] = math.exp(logits[k, b, c] - mx)
            s += ex[c]
        ls = math.log(s)
        best = 0
        h = 0.0
        for c in range(C):
            probs[k, b, c] = ex[c] / s
            pf = probs[k, b, c]
            if pf > probs[k, b, best]:
                best = c
            lp = (logits[k, b, c] - mx) - ls
            mlp[c] += lp
            mp[c] += pf
            if pf > 0:
                h -= pf * lp
        votes[b, best] += 1
        hsum += h
    bc = 0
    mv = votes[b, 0]
    for c in range(C):
        if mlp[c] > mlp[bc]:
            bc = c
        mv = max(mv, votes[b, c])
    pred[b] = bc
    vr[b] = 1.0 - mv / K
    hp_ = 0.0
    for c in range(C):
        q = mp[c] / K
        if q > 0:
            hp_ -= q * math.log(q)
    pe[b] = hp_ * inv_ln2
    al[b] = hsum / K * inv_ln2
    ep[b] = max(pe[b] - al[b], 0.0)


@njit(inline="always", **KERNEL_OPTS)
def score_outputs(logits):
    """The arrays :func:`scores_from_logits` returns, allocated for logits ``[K, B, C]`` (votes zeroed)."""
    K, B, C = logits.shape
    return (np.empty_like(logits), np.zeros((B, C), dtype=np.int64), np.empty(B, dtype=np.int64),
            np.empty(B, dtype=np.float64), np.empty(B, dtype=np.float64), np.empty(B, dtype=np.float64),
            np.empty(B, dtype=np.float64))


@njit(parallel=True, fastmath=False, **KERNEL_OPTS)
def scores_from_logits(logits):
    """Softmax probabilities and label-free scores from logits ``[K, B, C]``.

    Returns ``(probs [K,B,C], votes int64 [B,C], predictions [B], variation_ratio, predictive_entropy,
    aleatoric, epistemic)``; entropies in bits; votes from the per-sample argmax of the probabilities
    (first index on ties); predictions are the argmax of the mean log-softmax (the paper's rule).
    """
    K, B, C = logits.shape
    probs, votes, pred, vr, pe, al, ep = score_outputs(logits)
    for b in prange(B):
        example_scores(logits, b, probs, votes, pred, vr, pe, al, ep, np.zeros(C, dtype=np.float64),
                       np.zeros(C, dtype=np.float64), np.empty(C, dtype=np.float64))
    return probs, votes, pred, vr, pe, al, ep


@njit(fastmath=False, **KERNEL_OPTS)
def scores_one(logits):
    """:func:`scores_from_logits` computed in the calling thread, for one example (a query decision):
    starting the thread pool would cost more than the example, and many times more (tens of
    milliseconds) while another process holds the other cores. The same arithmetic, the same results."""
    K, B, C = logits.shape
    probs, votes, pred, vr, pe, al, ep = score_outputs(logits)
    for b in range(B):
        example_scores(logits, b, probs, votes, pred, vr, pe, al, ep, np.zeros(C, dtype=np.float64),
                       np.zeros(C, dtype=np.float64), np.empty(C, dtype=np.float64))
    return probs, votes, pred, vr, pe, al, ep

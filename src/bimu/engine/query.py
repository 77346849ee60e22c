"""Query decisions of an active stream in compiled code: K fresh hard weight samples per example (numba).

For the binary networks (BiMU, BayesBiNN), each query decision draws K fresh hard samples of every
weight from the threshold planes of the method's current lambda (:mod:`bimu.engine.planes`: exact
Bernoulli draws, about nine 32-bit hashes per 32 weights) and runs the K forward passes:

- Draw. Example ``i`` of a stream gets the key ``mix64(r_i ^ QUERY_SALT)`` (``r_i``: a 62-bit integer
  the caller draws, :func:`bimu.rng.mix64`); sample ``k`` of row ``g`` (rows numbered across layers)
  gets the row key ``hash64(example key, g K + k)`` split into two 32-bit halves (as
  :func:`bimu.rng.row_key`), from which :func:`bimu.engine.planes.sample_row_bits` draws the row.
- Forward. The K sampled rows stay bits and are summed against the layer's input four at a time by
  :func:`bimu.engine.dots.signed_dots4` (the bits of :func:`bimu.engine.dots.dot`), then go through
  the LayerNorms and activations of :mod:`bimu.engine.hard_eval`: given the same weights, the logits
  have the bits of :func:`~bimu.engine.hard_eval.hard_forward`. Scores are those of
  :func:`bimu.engine.scores.example_scores` (votes from the float probabilities, first index on ties;
  prediction the argmax of the mean log-softmax).

:class:`QueryPlanes` holds the planes of a method's lambda: :meth:`QueryPlanes.logits` gives one
example's logits ``[K, 1, C]``; :meth:`QueryPlanes.block` runs the vote rules (variation ratio, its
oracle VR-True) over consecutive examples and stops after the first queried one, since its update
changes the model for the next example.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from bimu.engine.binary_ops import layer_norm_act
from bimu.engine.dots import SIGNED_ROWS, sign_table, signed_dots4
from bimu.engine.hparams import BinaryHP, Cfg
from bimu.engine.planes import PLANES, row_words, sample_row_bits, thresholds, word_offsets
from bimu.engine.scalar import KERNEL_OPTS
from bimu.engine.scores import example_scores
from bimu.rng import hash64, mix64

QUERY_SALT = np.uint64(0x51E7C0DEA5E1EC75)
"""Mixed into each example's 62-bit integer to form its key."""
MODE_VR = 0
MODE_VR_TRUE = 1
"""Vote rules of :meth:`QueryPlanes.block`: dissent ``K - f_mode`` or ``K - votes for the label``."""


@njit(inline="always", **KERNEL_OPTS)
def _example_logits(x, key, tp, vm, sizes, woff, cfg, hp, K, cur, nxt, xh, rs, tab, lt, out):
    """Logits ``out [K, 1, C]`` of input row ``x`` under K fresh hard samples drawn with ``key``: the K
    samples of a row are drawn as bits, then summed against the layer's input four at a time
    (:func:`bimu.engine.dots.signed_dots4`, the bits of :func:`~bimu.engine.dots.dot`)."""
    L = sizes.shape[0] - 1
    act = cfg[Cfg.ACT]
    out_norm = cfg[Cfg.OUT_NORM]
    gate = hp[BinaryHP.GATE]
    eps = hp[BinaryHP.LN_EPS]
    ukey = mix64(np.uint64(key) ^ QUERY_SALT)
    g = 0
    for l in range(L):
        n_in = sizes[l]
        n_out = sizes[l + 1]
        nw = row_words(n_in)
        src = x if l == 0 else cur
        for o in range(n_out):
            for k in range(K):
                rk = hash64(ukey, np.uint64((g + o) * K + k))
                sample_row_bits(tp, vm, woff[l] + o * nw, nw, np.uint32(rk & np.uint64(0xFFFFFFFF)),
                                np.uint32(rk >> np.uint64(32)), lt, k * nw)
            for k0 in range(0, K, SIGNED_ROWS):
                b = (k0 * nw, min(k0 + 1, K - 1) * nw, min(k0 + 2, K - 1) * nw, min(k0 + 3, K - 1) * nw)
                if l == 0:
                    s = signed_dots4(src, 0, lt, b[0], b[1], b[2], b[3], n_in, tab)
                    for r in range(min(SIGNED_ROWS, K - k0)):
                        nxt[(k0 + r) * n_out + o] = s[r]
                else:
                    for r in range(min(SIGNED_ROWS, K - k0)):
                        s1 = signed_dots4(src, (k0 + r) * n_in, lt, b[r], b[r], b[r], b[r], n_in, tab)
                        nxt[(k0 + r) * n_out + o] = s1[0]
        g += n_out
        hidden = l < L - 1
        for k in range(K):
            base = k * n_out
            if hidden or out_norm:
                layer_norm_act(nxt, xh, cur, rs, base, n_out, eps, act, gate, hidden)
            else:
                for o in range(n_out):
                    cur[base + o] = nxt[base + o]
    C = sizes[L]
    for k in range(K):
        for c in range(C):
            out[k, 0, c] = cur[k * C + c]


def _scratch(sizes, K, dtype):
    maxw = int(max(sizes[1:]))
    maxin = int(max(sizes[:-1]))
    nw = row_words(maxin)
    return (np.zeros(K * maxw, dtype=dtype), np.zeros(K * maxw, dtype=dtype), np.zeros(K * maxw, dtype=dtype),
            np.zeros(1, dtype=np.float64), sign_table(dtype), np.zeros(K * nw, dtype=np.uint32))


@njit(fastmath=False, **KERNEL_OPTS)
def _logits_kernel(x, key, tp, vm, sizes, woff, cfg, hp, K, cur, nxt, xh, rs, tab, lt, out):
    _example_logits(x, key, tp, vm, sizes, woff, cfg, hp, K, cur, nxt, xh, rs, tab, lt, out)


@njit(fastmath=False, **KERNEL_OPTS)
def _block_kernel(X, Y, keys, need, mode, tp, vm, sizes, woff, cfg, hp, K, cur, nxt, xh, rs, tab, lt, pred,
                  dissent):
    C = sizes[sizes.shape[0] - 1]
    logits = np.empty((K, 1, C), dtype=X.dtype)
    probs = np.empty((K, 1, C), dtype=X.dtype)
    votes = np.zeros((1, C), dtype=np.int64)
    p1 = np.zeros(1, dtype=np.int64)
    f1 = np.zeros(4, dtype=np.float64)
    mlp = np.zeros(C, dtype=np.float64)
    mp = np.zeros(C, dtype=np.float64)
    ex = np.zeros(C, dtype=np.float64)
    for i in range(X.shape[0]):
        _example_logits(X[i], keys[i], tp, vm, sizes, woff, cfg, hp, K, cur, nxt, xh, rs, tab, lt, logits)
        for c in range(C):
            votes[0, c] = 0
            mlp[c] = 0.0
            mp[c] = 0.0
        example_scores(logits, 0, probs, votes, p1, f1[0:1], f1[1:2], f1[2:3], f1[3:4], mlp, mp, ex)
        pred[i] = p1[0]
        if mode == MODE_VR_TRUE:
            d = K - votes[0, Y[i]]
        else:
            mv = votes[0, 0]
            for c in range(C):
                mv = max(mv, votes[0, c])
            d = K - mv
        dissent[i] = d
        if d >= need[i]:
            return i + 1
    return X.shape[0]


class QueryPlanes:
    """The threshold planes of a binary fused method's current lambda, with the scratch of the kernels
    (what :meth:`bimu.engine.fused._FusedBinary.query_planes` caches between two updates)."""

    def __init__(self, method):
        self.sizes, self.cfg, self.hp = method._sizes, method._cfg, method._hp
        self.dtype = method.dtype
        self.woff = word_offsets(method.sizes)
        self.tp = np.zeros((PLANES, int(self.woff[-1])), dtype=np.uint32)
        self.vm = np.zeros(int(self.woff[-1]), dtype=np.uint32)
        thresholds(method.lam, method._sizes, method._poff, self.woff, self.tp, self.vm)
        self._scratch = {}

    def scratch(self, K: int):
        """The kernels' work buffers for K samples (made once per K)."""
        if K not in self._scratch:
            self._scratch[K] = _scratch(self.sizes, K, self.dtype)
        return self._scratch[K]

    def logits(self, x: np.ndarray, key: int, K: int) -> np.ndarray:
        """Logits ``[K, 1, C]`` of one example ``x [D]`` under K fresh hard samples drawn with the 62-bit
        integer ``key``."""
        out = np.empty((K, 1, int(self.sizes[-1])), dtype=self.dtype)
        _logits_kernel(np.ascontiguousarray(x, dtype=self.dtype), np.uint64(key), self.tp, self.vm, self.sizes, self.woff,
                       self.cfg, self.hp, K, *self.scratch(K), out)
        return out

    def block(self, X, Y, keys, need, mode: int, K: int):
        """Decide examples ``X [n, D]`` (the method's float type) in order until the first queried one:
        example ``i`` (key ``keys[i]``) is queried iff its dissent (``mode``: :data:`MODE_VR`, or
        :data:`MODE_VR_TRUE` with labels ``Y``) is at least ``need[i]``. Returns ``(examples decided,
        predictions, dissents)`` of those examples."""
        n = X.shape[0]
        pred = np.empty(n, dtype=np.int64)
        dissent = np.empty(n, dtype=np.int64)
        done = _block_kernel(X, Y, keys, need, mode, self.tp, self.vm, self.sizes, self.woff, self.cfg, self.hp, K,
                             *self.scratch(K), pred, dissent)
        return int(done), pred[:done], dissent[:done]

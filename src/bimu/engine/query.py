"""Query decisions of an active stream in compiled code: K fresh hard weight samples per example (numba).

The hard samples of the binary networks (BiMU, BayesBiNN) for query decisions are drawn bit-sliced:

- Threshold. Each parameter's hard sample is ``+1`` iff its 23-bit uniform integer ``m`` (the uniform
  ``u = (2 m + 1) / 2**24`` of :mod:`bimu.rng`) passes the method's hard-sample test
  (:mod:`bimu.engine.sampling`: ``u (1 + b) < 1`` for ``lambda >= 0``, ``u (1 + b) < b`` otherwise, ``b =
  exp(-2 |lambda|)``, in the method's float type). The test is monotone in ``m``, so it holds iff
  ``m < T`` with ``T`` the number of passing ``m`` (:func:`thresholds`, exact: no float rounding is
  lost). ``T`` (0 to ``2**23``) is stored as :data:`PLANES` bit planes of 32 parameters per word: row
  ``o`` of layer ``l`` has ``ceil(in_l / 32)`` words, plane ``j`` holding bit ``23 - j`` of each lane's ``T``.
- Draw. Example ``i`` of a stream gets the key ``mix64(r_i ^ QUERY_SALT)`` (``r_i``: a 62-bit integer
  the caller draws, :func:`bimu.rng.mix64`); sample ``k`` of row ``g`` (rows numbered across layers)
  gets the row key ``hash64(example key, g K + k)`` split into two 32-bit halves (as
  :func:`bimu.rng.row_key`), and bit ``23 - j`` of the ``m`` of lane ``i`` of word ``w`` is bit ``i`` of
  ``hash32(row key, 24 w + j)`` (:func:`bimu.rng.hash32`) for ``j >= 1`` (bit 23 of ``m`` is 0). The
  comparison ``m < T`` runs from the top plane down; :data:`FIRST_PLANES` planes are drawn for every
  word, the rest only for words with a lane still undecided. Each sample has the method's Bernoulli
  probability exactly; about 8 hashes decide 32 weights (the evaluation sampler spends 16).
- Forward. Each sampled row is expanded to ``+-1`` and goes through :func:`bimu.engine.dots.dot`, the
  LayerNorms and activations of :mod:`bimu.engine.hard_eval`: given the same weights, the logits have
  the bits of :func:`~bimu.engine.hard_eval.hard_forward`. Scores are those of
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
from bimu.engine.dots import dot
from bimu.engine.hparams import BinaryHP, Cfg
from bimu.engine.scalar import KERNEL_OPTS, fexp
from bimu.engine.scores import example_scores
from bimu.rng import as_like, hash32, hash64, mix64

PLANES = 24
"""Bit planes of a threshold ``T`` (``0 <= T <= 2**23``)."""
FIRST_PLANES = 9
"""Planes drawn for every word (plane 0 needs no draw); a word with an undecided lane after them draws on."""
QUERY_SALT = np.uint64(0x51E7C0DEA5E1EC75)
"""Mixed into each example's 62-bit integer to form its key."""
LANES = 32
"""Parameters per threshold word."""
MODE_VR = 0
MODE_VR_TRUE = 1
"""Vote rules of :meth:`QueryPlanes.block`: dissent ``K - f_mode`` or ``K - votes for the label``."""


def word_offsets(sizes) -> np.ndarray:
    """First threshold word of each layer (``ceil(in_l / 32)`` words per row), total last."""
    off = [0]
    for a, b in zip(sizes[:-1], sizes[1:]):
        off.append(off[-1] + b * ((a + LANES - 1) // LANES))
    return np.asarray(off, dtype=np.int64)


@njit(inline="always", **KERNEL_OPTS)
def _passes(m, b, thr, one):
    """The hard-sample test of :mod:`bimu.engine.sampling` for the 23-bit integer ``m``."""
    u = as_like(np.int32(2 * m + 1), one) * as_like(2.0**-24, one)
    return u * (one + b) < thr


@njit(fastmath={"contract"}, **KERNEL_OPTS)
def thresholds(lam, sizes, poff, woff, tp):
    """Fill the bit planes ``tp [PLANES, words]`` with each parameter's ``T`` (see the module)."""
    L = sizes.shape[0] - 1
    one = as_like(1.0, lam[0])
    m2 = as_like(-2.0, lam[0])
    top = np.int64(1) << 23
    tbuf = np.zeros(LANES, dtype=np.int64)
    for l in range(L):
        n_in = sizes[l]
        nw = (n_in + LANES - 1) // LANES
        for o in range(sizes[l + 1]):
            for w in range(nw):
                e0 = poff[l] + o * n_in + w * LANES
                n = min(LANES, n_in - w * LANES)
                for i in range(LANES):
                    tbuf[i] = 0
                for i in range(n):
                    lv = lam[e0 + i]
                    b = fexp(m2 * abs(lv))
                    thr = one if lv >= 0 else b
                    t = np.int64(np.float64(thr) / (1.0 + np.float64(b)) * 8388608.0)
                    t = min(max(t, 0), top)
                    while t > 0 and not _passes(t - 1, b, thr, one):
                        t -= 1
                    while t < top and _passes(t, b, thr, one):
                        t += 1
                    tbuf[i] = t
                gw = woff[l] + o * nw + w
                for j in range(PLANES):
                    sh = 23 - j
                    word = np.uint32(0)
                    for i in range(LANES):
                        word |= np.uint32(((tbuf[i] >> sh) & 1) << i)
                    tp[j, gw] = word


@njit(inline="always", **KERNEL_OPTS)
def _sample_row(tp, g0, nw, n_in, rlo, rhi, eq, lt, row, one):
    """The ``+-1`` hard sample of one row (words ``g0 .. g0 + nw`` of ``tp``) into ``row[:n_in]``."""
    for w in range(nw):
        t = tp[0, g0 + w]
        n = min(LANES, n_in - w * LANES)
        valid = np.uint32(0xFFFFFFFF) if n == LANES else np.uint32((np.uint64(1) << np.uint64(n)) - np.uint64(1))
        lt[w] = valid & t
        eq[w] = valid & ~t
    for j in range(1, FIRST_PLANES):
        for w in range(nw):
            r = hash32(rlo, rhi, np.uint32(w * PLANES + j))
            t = tp[j, g0 + w]
            lt[w] |= eq[w] & ~r & t
            eq[w] &= ~(r ^ t)
    for w in range(nw):
        if eq[w] != 0:
            for j in range(FIRST_PLANES, PLANES):
                r = hash32(rlo, rhi, np.uint32(w * PLANES + j))
                t = tp[j, g0 + w]
                lt[w] |= eq[w] & ~r & t
                eq[w] &= ~(r ^ t)
                if eq[w] == 0:
                    break
    for w in range(nw):
        bits = lt[w]
        n = min(LANES, n_in - w * LANES)
        for i in range(n):
            row[w * LANES + i] = one if (bits >> np.uint32(i)) & np.uint32(1) else -one


@njit(inline="always", **KERNEL_OPTS)
def _example_logits(x, key, tp, sizes, woff, cfg, hp, K, cur, nxt, xh, rs, row, eq, lt, out):
    """Logits ``out [K, 1, C]`` of input row ``x`` under K fresh hard samples drawn with ``key``."""
    L = sizes.shape[0] - 1
    one = as_like(1.0, hp[0])
    act = cfg[Cfg.ACT]
    out_norm = cfg[Cfg.OUT_NORM]
    gate = hp[BinaryHP.GATE]
    eps = hp[BinaryHP.LN_EPS]
    ukey = mix64(np.uint64(key) ^ QUERY_SALT)
    g = 0
    for l in range(L):
        n_in = sizes[l]
        n_out = sizes[l + 1]
        nw = (n_in + LANES - 1) // LANES
        for o in range(n_out):
            for k in range(K):
                rk = hash64(ukey, np.uint64((g + o) * K + k))
                _sample_row(tp, woff[l] + o * nw, nw, n_in, np.uint32(rk & np.uint64(0xFFFFFFFF)),
                            np.uint32(rk >> np.uint64(32)), eq, lt, row, one)
                if l == 0:
                    nxt[k * n_out + o] = dot(row[:n_in], x)
                else:
                    nxt[k * n_out + o] = dot(row[:n_in], cur[k * n_in:(k + 1) * n_in])
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
    nw = (maxin + LANES - 1) // LANES
    return (np.zeros(K * maxw, dtype=dtype), np.zeros(K * maxw, dtype=dtype), np.zeros(K * maxw, dtype=dtype),
            np.zeros(1, dtype=np.float64), np.zeros(nw * LANES, dtype=dtype), np.zeros(nw, dtype=np.uint32),
            np.zeros(nw, dtype=np.uint32))


@njit(fastmath=False, **KERNEL_OPTS)
def _logits_kernel(x, key, tp, sizes, woff, cfg, hp, K, cur, nxt, xh, rs, row, eq, lt, out):
    _example_logits(x, key, tp, sizes, woff, cfg, hp, K, cur, nxt, xh, rs, row, eq, lt, out)


@njit(fastmath=False, **KERNEL_OPTS)
def _block_kernel(X, Y, keys, need, mode, tp, sizes, woff, cfg, hp, K, cur, nxt, xh, rs, row, eq, lt, pred,
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
        _example_logits(X[i], keys[i], tp, sizes, woff, cfg, hp, K, cur, nxt, xh, rs, row, eq, lt, logits)
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
        thresholds(method.lam, method._sizes, method._poff, self.woff, self.tp)
        self._scratch = {}

    def scratch(self, K: int):
        if K not in self._scratch:
            self._scratch[K] = _scratch(self.sizes, K, self.dtype)
        return self._scratch[K]

    def logits(self, x: np.ndarray, key: int, K: int) -> np.ndarray:
        """Logits ``[K, 1, C]`` of one example ``x [D]`` under K fresh hard samples drawn with the 62-bit
        integer ``key``."""
        out = np.empty((K, 1, int(self.sizes[-1])), dtype=self.dtype)
        _logits_kernel(np.ascontiguousarray(x, dtype=self.dtype), np.uint64(key), self.tp, self.sizes, self.woff,
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
        done = _block_kernel(X, Y, keys, need, mode, self.tp, self.sizes, self.woff, self.cfg, self.hp, K,
                             *self.scratch(K), pred, dissent)
        return int(done), pred[:done], dissent[:done]

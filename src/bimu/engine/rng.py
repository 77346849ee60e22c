"""Counter-based uniforms: the n-th output of SplitMix64 is a pure function of ``(key, n)``.

Every uniform the engine uses is addressed by a 64-bit counter, so a result never depends on the
thread count or on how steps are grouped into calls, and any step can be replayed. One 64-bit hash
gives two uniforms (its high and low 32-bit halves); each keeps its top 23 bits ``m`` and becomes
``u = (2 m + 1) / 2**24`` - exactly representable in float32 and float64, strictly inside (0, 1)
(``2**-24 <= u <= 1 - 2**-24``), so the paper's clipping to ``[1e-10, 1 - 1e-10]`` never binds and
``|0.5 logit(u)| <= 8.32``.

Training (relaxed) uniforms: the row of ``n`` parameters starting at parameter ``e0`` (offset of its
layer plus ``o * in``) gets, at training step ``s``, the 64-bit row key ``R = hash(key, s * P + e0)``
(``P`` = number of parameters); sample ``k`` of its column ``i`` uses the 32-bit hash
:func:`hash32` of index ``i * K + k`` under ``R`` (vectorises with 32-bit integer lanes; a 64-bit
multiply per value would cost about four times more on AVX2). Evaluation (hard) uniforms: parameter
``e`` in evaluation draw ``d`` uses the high half of SplitMix64 hash ``d * P + e`` under the
evaluation key. Both kinds of uniform take 23 bits, ``u = (2 m + 1) / 2**24``.

>>> import numpy as np
>>> key = derive_key(0, TRAIN_STREAM)
>>> u = uniforms_from_counters(key, np.arange(4, dtype=np.uint64))
>>> u.shape, bool(((u > 0) & (u < 1)).all())
((8,), True)
"""

from __future__ import annotations

import numpy as np
from numba import njit

GOLDEN = np.uint64(0x9E3779B97F4A7C15)
TRAIN_STREAM = 1
"""Stream id of the training (relaxed) uniforms."""
EVAL_STREAM = 2
"""Stream id of the evaluation (hard-sample) uniforms."""
UNIFORM_BITS = 23
"""Bits of resolution of each uniform."""


@njit(inline="always", cache=True)
def mix64(z):
    """SplitMix64 output function (a bijection of uint64)."""
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@njit(inline="always", cache=True)
def hash_counter(key, n):
    """The ``n``-th SplitMix64 output of the stream starting at state ``key`` (both uint64)."""
    return mix64(key + n * GOLDEN)


def derive_key(seed: int, stream: int) -> np.uint64:
    """64-bit stream key from a user seed and a stream id (pure Python, no compilation)."""
    mask = (1 << 64) - 1

    def _mix(z):
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
        return z ^ (z >> 31)

    z = _mix((int(seed) * 0x9E3779B97F4A7C15 + 0x632BE59BD9B4E019) & mask)
    return np.uint64(_mix((z + int(stream) * 0xD1B54A32D192ED03) & mask))


def uniforms_from_counters(key, counters: np.ndarray) -> np.ndarray:
    """Both uniforms (high half first) of each counter, as float64 ``[2 * len(counters)]`` (numpy)."""
    key = np.uint64(key)
    with np.errstate(over="ignore"):
        z = key + counters.astype(np.uint64) * GOLDEN
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    hi = (z >> np.uint64(41)).astype(np.int64)
    lo = ((z & np.uint64(0xFFFFFFFF)) >> np.uint64(9)).astype(np.int64)
    out = np.empty(2 * len(counters), dtype=np.float64)
    out[0::2] = (2 * hi + 1) * 2.0**-24
    out[1::2] = (2 * lo + 1) * 2.0**-24
    return out


def hash32(rlo: np.ndarray, rhi: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """32-bit hash of indices ``idx`` under the row key halves ``(rlo, rhi)`` (uint32 numpy arrays;
    lowbias32 rounds with ``rhi`` mixed in between)."""
    with np.errstate(over="ignore"):
        x = (idx.astype(np.uint32) * np.uint32(0x9E3779B9) + rlo.astype(np.uint32)).astype(np.uint32)
        x ^= x >> np.uint32(16)
        x = (x * np.uint32(0x7FEB352D)).astype(np.uint32)
        x ^= x >> np.uint32(15)
        x ^= rhi.astype(np.uint32)
        x = (x * np.uint32(0x846CA68B)).astype(np.uint32)
        x ^= x >> np.uint32(16)
    return x


def relaxed_uniforms(key, step: int, n_params: int, e0: np.ndarray, n_in: int, K: int) -> np.ndarray:
    """The training uniforms ``[K, len(e0), n_in]`` (float64) of the rows starting at parameters ``e0``
    at training step ``step`` (numpy mirror of the engine's kernels)."""
    key = np.uint64(key)
    e0 = np.asarray(e0, dtype=np.uint64)
    with np.errstate(over="ignore"):
        z = key + (np.uint64(step) * np.uint64(n_params) + e0) * GOLDEN
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    rlo = (z & np.uint64(0xFFFFFFFF)).astype(np.uint32)[None, :, None]
    rhi = (z >> np.uint64(32)).astype(np.uint32)[None, :, None]
    idx = (np.arange(n_in, dtype=np.uint32)[None, None, :] * np.uint32(K)
           + np.arange(K, dtype=np.uint32)[:, None, None])
    x = hash32(rlo, rhi, idx)
    return ((x >> np.uint32(9)).astype(np.float64) * 2 + 1) * 2.0**-24

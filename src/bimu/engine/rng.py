"""Counter-based uniforms: the n-th output of SplitMix64 is a pure function of ``(key, n)``.

Every uniform the engine uses is addressed by a 64-bit counter, so a result never depends on the
thread count or on how steps are grouped into calls, and any step can be replayed. One 64-bit hash
gives two uniforms (its high and low 32-bit halves); each keeps its top 23 bits ``m`` and becomes
``u = (2 m + 1) / 2**24`` - exactly representable in float32 and float64, strictly inside (0, 1)
(``2**-24 <= u <= 1 - 2**-24``), so the paper's clipping to ``[1e-10, 1 - 1e-10]`` never binds and
``|0.5 logit(u)| <= 8.32``.

Counter layout (``P`` = number of parameters, ``Kh = ceil(K / 2)``, parameter ``e`` = offset of its
layer plus ``o * in + i``): the relaxed sample ``k`` of parameter ``e`` at training step ``s`` uses
half ``k % 2`` of hash ``s * P * Kh + e * Kh + k // 2`` under the training key; the hard sample of
parameter ``e`` in evaluation draw ``d`` uses the high half of hash ``d * P + e`` under the
evaluation key.

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

"""Counter-based random numbers: SplitMix64 and a 32-bit row hash, in numba and as a numpy mirror.

The n-th output of a SplitMix64 stream is a pure function of ``(key, n)``: :func:`hash64` returns
``mix64(key + n * GOLDEN)``. Every random number of the fused engine (:mod:`bimu.engine`) and of the
bit-packed inference path (:mod:`bimu.edge`) is addressed by such a counter, so a result never depends
on the thread count or on how steps are grouped into calls, and any draw can be replayed. (The C
reference ``bimu/edge/c/bimu_infer.c`` carries its own copy of :func:`mix64`.)

Uniforms. One 64-bit hash gives two uniforms, its high and low 32-bit halves (:func:`uniform_hi`,
:func:`uniform_lo`); each keeps its top 23 bits ``m`` and becomes ``u = (2 m + 1) / 2**24`` - exactly
representable in float32 and float64, strictly inside (0, 1) (``2**-24 <= u <= 1 - 2**-24``), so the
paper's clipping to ``[1e-10, 1 - 1e-10]`` never binds and ``|0.5 logit(u)| <= 8.32``.

Training (relaxed) uniforms: the row of ``n`` parameters starting at parameter ``e0`` gets, at
training step ``s``, the 64-bit row key ``R = hash64(key, s * P + e0)`` (``P`` = number of
parameters, :func:`row_key`); sample ``k`` of its column ``i`` uses the 32-bit hash :func:`hash32` of
index ``i * K + k`` under ``R`` and :func:`uniform32` (32-bit integer lanes vectorise; a 64-bit
multiply per value would cost about four times more on AVX2). Evaluation (hard) uniforms: parameter
``e`` in evaluation draw ``d`` uses the high half of ``hash64(eval_key, d * P + e)``.

Experience replay (:mod:`bimu.methods.replay`, :class:`bimu.engine.fused_real.FusedReplay`) draws
integers: ``hash64(key, c) mod m`` is uniform in ``[0, m)`` (to within ``m / 2**64``, below 1e-12 for any
stream that fits in memory), with counter ``c = 2 n`` for the reservoir slot of the labelled example
with 0-based stream index ``n`` and ``c = 2 (n k + i) + 1`` for draw ``i`` of the ``k``-example replay
minibatch of the step whose first incoming example has index ``n`` (:func:`reservoir_slot`,
:func:`replay_slots`; :func:`reservoir_slot_int` and :func:`replay_slots_int` are the same in Python
integers, for the PyTorch path). A draw is a pure function of the key and the number of labelled
examples offered to the buffer, which a checkpoint holds.

The numba functions (``inline="always"``) compute in the float type of their ``one`` argument
(:func:`as_like`); the numpy functions (:func:`mix64_np`, :func:`uniforms_from_counters`,
:func:`hash32_np`, :func:`relaxed_uniforms`, :func:`derive_key`) give the same bits without compiling.

>>> import numpy as np
>>> key = derive_key(0, TRAIN_STREAM)
>>> u = uniforms_from_counters(key, np.arange(4, dtype=np.uint64))
>>> u.shape, bool(((u > 0) & (u < 1)).all())
((8,), True)
>>> h = hash64(key, np.uint64(3))  # compiled; the same uniforms as the numpy mirror
>>> [float(uniform_hi(h, 1.0)), float(uniform_lo(h, 1.0))] == u[6:].tolist()
True
"""

from __future__ import annotations

import numpy as np
from numba import njit, types
from numba.extending import intrinsic, overload

GOLDEN = np.uint64(0x9E3779B97F4A7C15)
"""SplitMix64's counter increment (the golden ratio in 64 bits)."""
MIX1 = np.uint64(0xBF58476D1CE4E5B9)
MIX2 = np.uint64(0x94D049BB133111EB)
"""The two multipliers of :func:`mix64` (Stafford's variant 13)."""
TRAIN_STREAM = 1
"""Stream id of the training (relaxed) uniforms."""
EVAL_STREAM = 2
"""Stream id of the evaluation (hard-sample) uniforms."""
PREQUENTIAL_STREAM = 4
"""Stream id of the generators of a run's test-then-train predictions (:mod:`bimu.experiments.prequential`;
3 is the device's query stream, :data:`bimu.edge.learner_export.DEVICE_QUERY_STREAM`)."""
REPLAY_STREAM = 5
"""Stream id of experience replay's draws (reservoir slots and replay minibatches, :func:`reservoir_slot`,
:func:`replay_slots`; :mod:`bimu.methods.replay` and the fused engine's replay draw the same numbers)."""

_S30 = np.uint64(30)
_S27 = np.uint64(27)
_S31 = np.uint64(31)
_LOW32 = np.uint64(0xFFFFFFFF)
_OPTS = dict(cache=True, error_model="numpy", nogil=True)


# ----------------------------------------------------------------------------- numba
def as_like(v, like):
    """``v`` converted to the float type of ``like`` (a numba helper for dtype-generic kernels)."""
    return type(like)(v)


@overload(as_like, inline="always")
def _as_like_overload(v, like):
    if like == types.float32:
        return lambda v, like: np.float32(v)
    return lambda v, like: np.float64(v)


@njit(inline="always", **_OPTS)
def mix64(z):
    """SplitMix64 output function of a uint64 (a bijection)."""
    z = (z ^ (z >> _S30)) * MIX1
    z = (z ^ (z >> _S27)) * MIX2
    return z ^ (z >> _S31)


@njit(inline="always", **_OPTS)
def hash64(key, n):
    """The ``n``-th SplitMix64 output of the stream with state ``key`` (both uint64)."""
    return mix64(key + n * GOLDEN)


@njit(inline="always", **_OPTS)
def uniform_hi(h, one):
    """The uniform of the high 32 bits of hash ``h``, in the float type of ``one`` (exact)."""
    return as_like(np.int32((h >> np.uint64(41)) * np.uint64(2) + np.uint64(1)), one) * as_like(2.0**-24, one)


@njit(inline="always", **_OPTS)
def uniform_lo(h, one):
    """The uniform of the low 32 bits of hash ``h``, in the float type of ``one`` (exact)."""
    v = np.int32(((h & _LOW32) >> np.uint64(9)) * np.uint64(2) + np.uint64(1))
    return as_like(v, one) * as_like(2.0**-24, one)


def uint32_op(op: str):
    """A numba intrinsic ``(uint32, uint32) -> uint32`` applying the LLVM instruction ``op`` (``add``,
    ``mul``, ``xor``, ``lshr``, ``and_``, ``or_``): 32-bit arithmetic that stays 32-bit (numba widens
    uint32 arithmetic to 64 bits, and 64-bit vector multiplies are slow without AVX-512)."""

    @intrinsic
    def _impl(typingctx, a, b):
        sig = types.uint32(types.uint32, types.uint32)

        def codegen(context, builder, signature, args):
            return getattr(builder, op)(args[0], args[1])

        return sig, codegen

    return _impl


add32 = uint32_op("add")
mul32 = uint32_op("mul")
xor32 = uint32_op("xor")
shr32 = uint32_op("lshr")


@njit(inline="always", **_OPTS)
def row_key(key, step, P, e0):
    """The 64-bit key of the weight row starting at parameter ``e0`` at training step ``step``, as two
    uint32 halves ``(low, high)``: ``hash64(key, step * P + e0)``."""
    r = hash64(key, np.uint64(step) * np.uint64(P) + np.uint64(e0))
    return np.uint32(r & _LOW32), np.uint32(r >> np.uint64(32))


@njit(inline="always", **_OPTS)
def hash32(rlo, rhi, idx):
    """32-bit hash of index ``idx`` within a row with key ``(rlo, rhi)`` (lowbias32 rounds, ``rhi``
    mixed in between)."""
    x = add32(mul32(idx, np.uint32(0x9E3779B9)), rlo)
    x = xor32(x, shr32(x, np.uint32(16)))
    x = mul32(x, np.uint32(0x7FEB352D))
    x = xor32(x, shr32(x, np.uint32(15)))
    x = xor32(x, rhi)
    x = mul32(x, np.uint32(0x846CA68B))
    return xor32(x, shr32(x, np.uint32(16)))


@njit(inline="always", **_OPTS)
def uniform32(x, one):
    """``(2 (x >> 9) + 1) / 2**24`` of a 32-bit hash ``x`` in the float type of ``one`` (exact)."""
    return as_like(np.int32(shr32(x, np.uint32(9))), one) * as_like(2.0**-23, one) + as_like(2.0**-24, one)


# ----------------------------------------------------------------------------- numpy mirror
def mix64_np(z: np.ndarray) -> np.ndarray:
    """:func:`mix64` of a uint64 array (numpy, no compilation)."""
    z = np.asarray(z, dtype=np.uint64)
    with np.errstate(over="ignore"):
        z = (z ^ (z >> _S30)) * MIX1
        z = (z ^ (z >> _S27)) * MIX2
    return z ^ (z >> _S31)


def derive_key(seed: int, stream: int) -> np.uint64:
    """64-bit stream key from a user seed and a stream id (numpy, no compilation).

    >>> int(derive_key(0, TRAIN_STREAM)) != int(derive_key(0, EVAL_STREAM))
    True
    """
    mask = (1 << 64) - 1
    z = mix64_np(np.array([(int(seed) * int(GOLDEN) + 0x632BE59BD9B4E019) & mask], dtype=np.uint64))
    z = (int(z[0]) + int(stream) * 0xD1B54A32D192ED03) & mask
    return np.uint64(mix64_np(np.array([z], dtype=np.uint64))[0])


def uniforms_from_counters(key, counters: np.ndarray) -> np.ndarray:
    """Both uniforms (high half first) of each counter's :func:`hash64`, as float64
    ``[2 * len(counters)]`` (numpy)."""
    with np.errstate(over="ignore"):
        z = mix64_np(np.uint64(key) + counters.astype(np.uint64) * GOLDEN)
    hi = (z >> np.uint64(41)).astype(np.int64)
    lo = ((z & _LOW32) >> np.uint64(9)).astype(np.int64)
    out = np.empty(2 * len(counters), dtype=np.float64)
    out[0::2] = (2 * hi + 1) * 2.0**-24
    out[1::2] = (2 * lo + 1) * 2.0**-24
    return out


def hash32_np(rlo: np.ndarray, rhi: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """:func:`hash32` of indices ``idx`` under the row key halves ``(rlo, rhi)`` (uint32 numpy arrays)."""
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
    at training step ``step`` (numpy mirror of :func:`row_key`, :func:`hash32` and :func:`uniform32`)."""
    e0 = np.asarray(e0, dtype=np.uint64)
    with np.errstate(over="ignore"):
        z = mix64_np(np.uint64(key) + (np.uint64(step) * np.uint64(n_params) + e0) * GOLDEN)
    rlo = (z & _LOW32).astype(np.uint32)[None, :, None]
    rhi = (z >> np.uint64(32)).astype(np.uint32)[None, :, None]
    idx = (np.arange(n_in, dtype=np.uint32)[None, None, :] * np.uint32(K)
           + np.arange(K, dtype=np.uint32)[:, None, None])
    x = hash32_np(rlo, rhi, idx)
    return ((x >> np.uint32(9)).astype(np.float64) * 2 + 1) * 2.0**-24


# ----------------------------------------------------------------------------- experience replay
_MASK64 = (1 << 64) - 1


@njit(inline="always", **_OPTS)
def reservoir_slot(key, n, size):
    """The buffer slot of the labelled example with 0-based stream index ``n`` (Vitter's Algorithm R):
    ``n`` while ``n < size``, else ``hash64(key, 2 n) mod (n + 1)``, which the caller keeps only when it
    is below ``size`` (int64 in, int64 out; ``key`` uint64)."""
    if n < size:
        return n
    h = hash64(key, np.uint64(n) * np.uint64(2))
    return np.int64(h % (np.uint64(n) + np.uint64(1)))


@njit(inline="always", **_OPTS)
def replay_slots(key, n, filled, k, out):
    """The slots of the replay minibatch of the step whose first incoming example has 0-based stream
    index ``n``, into ``out``; returns how many: none while ``filled == 0``, every filled slot in order
    while ``filled <= k``, else ``k`` distinct slots drawn uniformly by Floyd's algorithm (draw ``i``:
    ``t = hash64(key, 2 (n k + i) + 1) mod (filled - k + i + 1)``, kept unless already chosen, when
    ``filled - k + i`` is taken instead)."""
    if filled <= k:
        for i in range(filled):
            out[i] = i
        return filled
    base = np.uint64(n) * np.uint64(k)
    for i in range(k):
        j = filled - k + i
        h = hash64(key, (base + np.uint64(i)) * np.uint64(2) + np.uint64(1))
        t = np.int64(h % np.uint64(j + 1))
        for q in range(i):
            if out[q] == t:
                t = j
                break
        out[i] = t
    return k


def hash64_int(key: int, n: int) -> int:
    """:func:`hash64` in Python integers (no compilation).

    >>> hash64_int(derive_key(0, TRAIN_STREAM), 3) == int(mix64_np(np.array(
    ...     [(int(derive_key(0, TRAIN_STREAM)) + 3 * int(GOLDEN)) % 2**64], dtype=np.uint64))[0])
    True
    """
    z = (int(key) + int(n) * int(GOLDEN)) & _MASK64
    z = ((z ^ (z >> 30)) * int(MIX1)) & _MASK64
    z = ((z ^ (z >> 27)) * int(MIX2)) & _MASK64
    return z ^ (z >> 31)


def reservoir_slot_int(key: int, n: int, size: int) -> int:
    """:func:`reservoir_slot` in Python integers.

    >>> reservoir_slot_int(1, 2, 5), 0 <= reservoir_slot_int(1, 7, 5) <= 7
    (2, True)
    """
    return n if n < size else hash64_int(key, 2 * n) % (n + 1)


def replay_slots_int(key: int, n: int, filled: int, k: int) -> list[int]:
    """:func:`replay_slots` in Python integers: the list of slots.

    >>> replay_slots_int(1, 0, 2, 3)
    [0, 1]
    >>> s = replay_slots_int(1, 40, 10, 4); len(set(s)) == 4 and all(0 <= t < 10 for t in s)
    True
    """
    if filled <= k:
        return list(range(filled))
    out: list[int] = []
    for i in range(k):
        j = filled - k + i
        t = hash64_int(key, 2 * (n * k + i) + 1) % (j + 1)
        out.append(j if t in out else t)
    return out

"""Numba kernels of the bit-packed inference path (private; see :mod:`bimu.edge.packed`).

Everything here is single-threaded, ``nopython`` and cached. All integer arithmetic on random
words is unsigned 64-bit and wraps modulo 2**64, exactly as in the C reference
(``bimu/edge/c/bimu_infer.c``).
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

from bimu.rng import hash64, mix64

SEED_SALT = np.uint64(0x5EEDB1A5EDB1A5ED)
_ONE = np.uint64(1)
_ZERO = np.uint64(0)
_ALL = np.uint64(0xFFFFFFFFFFFFFFFF)
ROUND_MAGIC = 6755399441055744.0  # 1.5 * 2^52: (y + M) - M rounds y half to even
PLANES = 32  # bits of a threshold / of a random integer


@intrinsic
def popcount64(typingctx, x):
    """``llvm.ctpop.i64``: the number of set bits of a uint64 (one ``popcnt`` instruction on x86)."""
    if not isinstance(x, types.Integer):
        return None
    sig = types.uint64(types.uint64)

    def codegen(context, builder, signature, args):
        fn = builder.module.declare_intrinsic("llvm.ctpop", [ir.IntType(64)])
        return builder.call(fn, [args[0]])

    return sig, codegen


@njit(cache=True, fastmath=False)
def stream_key(seed, sample, layer):
    """Key of the SplitMix64 stream that draws the weights of one MC ``sample`` of one ``layer``."""
    s = mix64(np.uint64(seed) ^ SEED_SALT)
    c = np.uint64(sample) * np.uint64(64) + np.uint64(layer) + _ONE
    return hash64(s, c)


@njit(cache=True, fastmath=False)
def sample_layer_bits(planes, valid_last, key, out_bits):
    """Draw one hard weight sample of a layer as bits (1 = weight +1), bit-sliced.

    ``planes[o, w, j]`` holds bit ``31 - j`` of the thresholds of the 64 weights of word ``w`` of row
    ``o``; the random integer ``r`` of lane ``i`` has bit ``31 - j`` equal to bit ``i`` of the random
    word ``R = hash64(key, (o * n_words + w) * 32 + j + 1)`` (:func:`bimu.rng.hash64`). The comparison
    ``r < t`` runs from the most significant plane down and stops when every lane is decided (about 7
    planes of 32).
    """
    key = np.uint64(key)
    valid_last = np.uint64(valid_last)
    n_out = planes.shape[0]
    n_words = planes.shape[1]
    for o in range(n_out):
        for w in range(n_words):
            ctr = np.uint64((o * n_words + w) * PLANES)
            eq = valid_last if w == n_words - 1 else _ALL
            lt = _ZERO
            for j in range(PLANES):
                if eq == _ZERO:
                    break
                r = hash64(key, ctr + np.uint64(j) + _ONE)
                t = planes[o, w, j]
                lt |= eq & ~r & t
                eq &= ~(r ^ t)
            out_bits[o, w] = lt


@njit(cache=True, fastmath=False)
def random_words(key, n_out, n_words):
    """All 32 random words ``R[o, w, j]`` of a layer stream (reference / tests; no early stop)."""
    key = np.uint64(key)
    out = np.empty((n_out, n_words, PLANES), dtype=np.uint64)
    for o in range(n_out):
        for w in range(n_words):
            ctr = np.uint64((o * n_words + w) * PLANES)
            for j in range(PLANES):
                out[o, w, j] = hash64(key, ctr + np.uint64(j) + _ONE)
    return out


@njit(cache=True, inline="always")
def _first_layer(x_planes, x_sum, coefs, wbits, pre):
    """``pre[o] = sum_i w_oi x_i = 2 * sum_{w_oi = +1} x_i - sum_i x_i`` over input bit planes."""
    n_out = wbits.shape[0]
    n_words = wbits.shape[1]
    n_planes = x_planes.shape[0]
    for o in range(n_out):
        s_plus = np.int64(0)
        for p in range(n_planes):
            acc = np.int64(0)
            for w in range(n_words):
                acc += np.int64(popcount64(x_planes[p, w] & wbits[o, w]))
            s_plus += coefs[p] * acc
        pre[o] = 2 * s_plus - x_sum


@njit(cache=True, inline="always")
def _binary_layer(act, act_pop, n_in, sign_input, wbits, pre):
    """Pre-activations of a layer with binary inputs packed in ``act`` (AND or XNOR + popcount)."""
    n_out = wbits.shape[0]
    n_words = wbits.shape[1]
    for o in range(n_out):
        acc = np.int64(0)
        if sign_input:
            for w in range(n_words):
                acc += np.int64(popcount64(act[w] ^ wbits[o, w]))
            pre[o] = n_in - 2 * acc  # agreements - disagreements (padding bits are 0 in both)
        else:
            for w in range(n_words):
                acc += np.int64(popcount64(act[w] & wbits[o, w]))
            pre[o] = 2 * acc - act_pop


@njit(cache=True, inline="always")
def _activate(pre, n, sign_act, a2, c_eps, act):
    """LayerNorm (no affine) then RBG or sign, decided exactly on the integer pre-activations.

    With ``S = sum h``, ``Q = sum h^2``: ``|LN(h_o)| > a`` iff
    ``(n h_o - S)^2 > a^2 (n Q - S^2) + a^2 eps n^2 / s^2``; ``sign(LN(h_o)) = +1`` iff ``n h_o >= S``.
    Returns the number of set output bits; ``act`` receives the packed bits.
    """
    s = np.int64(0)
    q = np.int64(0)
    for o in range(n):
        s += pre[o]
        q += pre[o] * pre[o]
    var_n2 = n * q - s * s
    rhs = a2 * np.float64(var_n2) + c_eps
    for w in range(act.shape[0]):
        act[w] = _ZERO
    count = np.int64(0)
    for o in range(n):
        d = n * pre[o] - s
        if sign_act:
            on = d >= 0
        elif a2 == 1.0:  # exact: an integer difference, then one comparison with the eps term
            on = np.float64(d * d - var_n2) > c_eps
        else:
            on = np.float64(d * d) > rhs
        if on:
            act[o >> 6] |= _ONE << np.uint64(o & 63)
            count += 1
    return count


@njit(cache=True, fastmath=False)
def mc_forward(x_planes, x_sum, coefs, planes_flat, plane_off, sizes, valid_last, sign_act, a2, c_eps,
               seed, sample_offset, n_samples, per_example, out):
    """Integer output pre-activations ``out[k, b, c]`` of ``n_samples`` hard MC samples.

    ``per_example=False``: sample ``k`` draws stream ``sample_offset + k`` and is shared by the whole
    batch (as :class:`bimu.nn.BinaryBayesianMLP` does); ``per_example=True``: example ``b`` draws
    its own samples ``sample_offset + b * n_samples + k`` (streaming / on-device use).
    """
    n_layers = sizes.shape[0] - 1
    batch = x_planes.shape[0]
    max_w = 1
    max_n = 1
    for l in range(n_layers):
        nw = (sizes[l] + 63) // 64
        if nw * sizes[l + 1] > max_w:
            max_w = nw * sizes[l + 1]
        if sizes[l + 1] > max_n:
            max_n = sizes[l + 1]
    wbuf = np.empty((n_layers, max_w), dtype=np.uint64)
    pre = np.empty(max_n, dtype=np.int64)
    act = np.empty((max_n + 63) // 64, dtype=np.uint64)
    n_draws = batch if per_example else 1
    act_pop = np.int64(0)
    for d in range(n_draws):
        for k in range(n_samples):
            sample = sample_offset + (d * n_samples + k if per_example else k)
            for l in range(n_layers):
                nw = (sizes[l] + 63) // 64
                no = sizes[l + 1]
                pl = planes_flat[plane_off[l]:plane_off[l] + no * nw * PLANES].reshape((no, nw, PLANES))
                wb = wbuf[l, :no * nw].reshape((no, nw))
                sample_layer_bits(pl, valid_last[l], stream_key(seed, sample, l), wb)
            b_lo = d if per_example else 0
            b_hi = d + 1 if per_example else batch
            for b in range(b_lo, b_hi):
                for l in range(n_layers):
                    nw = (sizes[l] + 63) // 64
                    no = sizes[l + 1]
                    wb = wbuf[l, :no * nw].reshape((no, nw))
                    if l == 0:
                        _first_layer(x_planes[b], x_sum[b], coefs, wb, pre)
                    else:
                        _binary_layer(act, act_pop, np.int64(sizes[l]), sign_act, wb, pre)
                    if l < n_layers - 1:
                        act_pop = _activate(pre, np.int64(no), sign_act, a2, c_eps[l], act)
                    else:
                        for c in range(no):
                            out[k, b, c] = pre[c]


@njit(cache=True, fastmath=False)
def quantize_planes(x, inv_scale, qmax, n_bits):
    """Quantise real inputs ``x [B, n]`` (``rint(x * inv_scale)`` half to even, clipped to ``+-qmax``)
    straight into two's-complement bit planes ``[B, n_bits, n_words]``; also returns the integer
    row sums and the integers themselves."""
    batch, n = x.shape
    n_words = (n + 63) // 64
    planes = np.zeros((batch, n_bits, n_words), dtype=np.uint64)
    sums = np.zeros(batch, dtype=np.int64)
    xq = np.empty((batch, n_words * 64), dtype=np.int64)
    mask = np.int64((1 << n_bits) - 1)
    for b in range(batch):
        s = np.int64(0)
        for i in range(n):
            y = np.float64(x[b, i]) * inv_scale
            y = min(max(y, -qmax), qmax)
            v = np.int64((y + ROUND_MAGIC) - ROUND_MAGIC)  # round half to even (|y| < 2^51)
            xq[b, i] = v
            s += v
        for i in range(n, n_words * 64):
            xq[b, i] = 0
        sums[b] = s
        for w in range(n_words):
            for p in range(n_bits):
                word = _ZERO
                for i in range(64):
                    word |= np.uint64((xq[b, w * 64 + i] & mask) >> p & 1) << np.uint64(i)
                planes[b, p, w] = word
    return planes, sums, xq[:, :n]

"""Threshold planes and the bit-sliced hard-sample draw of the query path (bimu.engine.planes), and the
bit-row dot products (bimu.engine.dots.signed_dots4)."""

from __future__ import annotations

import numpy as np
import pytest

from bimu.engine import planes as P
from bimu.engine.dots import dot, sign_table, signed_dots4
from bimu.engine.scalar import fexp
from bimu.rng import hash32_np

LAMS = [0.0, -0.0, 1e-9, -1e-9, 0.01, -0.01, 0.25, -0.25, 0.7, -1.3, 2.2, -2.2, 3.9, -5.05, 7.93, -8.3,
        8.4, -9.0, 12.0, -40.0, 40.0, 0.5493, -0.5493, 1.0]


def _planes(lam, n_in, dtype):
    """Planes of one layer ``n_in -> len(lam) // n_in``."""
    lam = np.asarray(lam, dtype=dtype)
    sizes = np.array([n_in, lam.size // n_in], dtype=np.int64)
    woff = P.word_offsets(sizes)
    tp = np.zeros((P.PLANES, int(woff[-1])), np.uint32)
    vm = np.zeros(int(woff[-1]), np.uint32)
    P.thresholds(lam, sizes, np.zeros(2, np.int64), woff, tp, vm)
    return tp, vm, woff


def _T(tp, n_in, row=0):
    """Each lane's threshold ``T`` read back from the planes of row ``row``."""
    rw = int(P.row_words(n_in))
    T = np.zeros(n_in, np.int64)
    for i in range(n_in):
        w, b = divmod(i, 32)
        for j in range(P.PLANES):
            T[i] |= int((tp[j, row * rw + w] >> np.uint32(b)) & np.uint32(1)) << (23 - j)
    return T


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_thresholds_count_exactly_the_passing_uniforms(dtype):
    """T is the number of 23-bit m whose uniform passes the hard-sample test, in the method's float type."""
    tp, vm, _ = _planes(LAMS, len(LAMS), dtype)
    T = _T(tp, len(LAMS))
    m = np.arange(1 << 23, dtype=np.int64)
    u = (2 * m + 1).astype(dtype) * dtype(2.0**-24)
    for lv, t in zip(np.asarray(LAMS, dtype), T):
        b = fexp(dtype(-2.0) * abs(lv))
        thr = dtype(1.0) if lv >= 0 else b
        passing = u * (dtype(1.0) + b) < thr
        assert int(passing.sum()) == t, lv
        assert passing[:t].all() and not passing[t:].any()  # monotone: the test is m < T
    assert T[LAMS.index(0.0)] == 1 << 22 and T[LAMS.index(40.0)] == 1 << 23 and T[LAMS.index(-40.0)] == 0
    assert vm[0] == (1 << len(LAMS)) - 1 and not vm[1:].any()  # one valid word, padding words empty


def test_full_and_partial_words_agree():
    """A full word of 32 parameters and partial words of one parameter give the same T."""
    rng = np.random.default_rng(3)
    lam = rng.normal(0, 3, 45).astype(np.float32)
    full = _T(_planes(lam, 45, np.float32)[0], 45)
    part = np.concatenate([_T(_planes(lam[a:a + 1], 1, np.float32)[0], 1) for a in range(45)])
    assert np.array_equal(full, part)


def _reference_row(T, n_in, rlo, rhi):
    """The documented draw, lane by lane: m from bits 22..0 of the hashes, +1 iff m < T."""
    nw = (n_in + 31) // 32
    bits = np.zeros(nw, np.uint32)
    for w in range(nw):
        h = hash32_np(np.full(P.PLANES, rlo, np.uint32), np.full(P.PLANES, rhi, np.uint32),
                      np.arange(w * P.PLANES, (w + 1) * P.PLANES, dtype=np.uint32))
        for i in range(min(32, n_in - 32 * w)):
            m = 0
            for j in range(1, P.PLANES):
                m |= int((h[j] >> np.uint32(i)) & np.uint32(1)) << (23 - j)
            if m < T[32 * w + i]:
                bits[w] |= np.uint32(1 << i)
    return bits


@pytest.mark.parametrize("n_in", [1, 37, 300])
def test_sample_row_bits_is_the_documented_draw(n_in):
    rng = np.random.default_rng(n_in)
    lam = np.concatenate([rng.normal(0, 2, n_in), rng.choice([0.0, 40.0, -40.0, 0.01], n_in)]).astype(np.float32)
    tp, vm, _ = _planes(lam, n_in, np.float32)
    rw = int(P.row_words(n_in))
    for row in range(2):
        T = _T(tp, n_in, row)
        for key in range(6):
            rlo, rhi = np.uint32(key * 2654435761 % 2**32), np.uint32(key + 17 * row)
            out = np.full(rw + 2, 0xDEADBEEF, np.uint32)
            P.sample_row_bits(tp, vm, row * rw, rw, rlo, rhi, out, 1)
            want = _reference_row(T, n_in, rlo, rhi)
            assert np.array_equal(out[1:1 + want.size], want)
            assert not out[1 + want.size:1 + rw].any() and out[0] == out[-1] == 0xDEADBEEF


def test_sample_row_bits_frequencies_match_the_probabilities():
    lam = np.array([0.0, 0.3, -0.3, 1.1, -2.0, 0.05] * 6, np.float32)  # 36 weights, two words
    tp, vm, _ = _planes(lam, 36, np.float32)
    p = _T(tp, 36) / 2.0**23
    n = 20000
    counts = np.zeros(36)
    out = np.zeros(int(P.row_words(36)), np.uint32)
    for k in range(n):
        P.sample_row_bits(tp, vm, 0, out.size, np.uint32(k), np.uint32(k * 7 + 1), out, 0)
        for i in range(36):
            counts[i] += (out[i // 32] >> np.uint32(i % 32)) & np.uint32(1)
    z = (counts / n - p) / np.sqrt(p * (1 - p) / n)
    assert np.abs(z).max() < 5
    assert np.allclose(p[:6], 1 / (1 + np.exp(-2 * lam[:6].astype(np.float64))), atol=1e-6)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [1, 7, 8, 9, 33, 257, 8192])
def test_signed_dots4_has_the_bits_of_dot(dtype, n):
    rng = np.random.default_rng(n)
    x = rng.standard_normal(n + 5).astype(dtype)
    nw = (n + 31) // 32
    bits = rng.integers(0, 2**32, 4 * nw + 3, dtype=np.uint64).astype(np.uint32)
    offs = (1, 1 + nw, 2 + 2 * nw, 2 + 3 * nw)
    got = signed_dots4(x, 5, bits, *offs, n, sign_table(dtype))
    for r, b0 in enumerate(offs):
        row = np.array([1.0 if (bits[b0 + i // 32] >> (i % 32)) & 1 else -1.0 for i in range(n)], dtype)
        assert got[r] == dot(row, x[5:5 + n])

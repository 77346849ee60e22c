"""Threshold bit planes of the binary networks' hard samples, and the bit-sliced draw from them (numba).

A hard sample ``+1`` of a parameter is the test of :mod:`bimu.engine.sampling` (``u (1 + b) < 1`` for
``lambda >= 0``, ``u (1 + b) < b`` otherwise, ``b = exp(-2 |lambda|)``, in the method's float type) on the
uniform ``u = (2 m + 1) / 2**24`` of a 23-bit integer ``m`` (:mod:`bimu.rng`). The test is monotone in
``m``, so it holds iff ``m < T``, ``T`` the number of passing ``m`` (:func:`thresholds`, exact: every
candidate is checked with the float test itself). ``T`` (0 to ``2**23``) is stored as :data:`PLANES` bit
planes of :data:`LANES` parameters per word: plane ``j`` holds bit ``23 - j`` of each lane's ``T``. Row
``o`` of layer ``l`` takes ``ceil(in_l / 32)`` words rounded up to a multiple of :data:`BLOCK`
(:func:`word_offsets`); the valid-lane mask of each word is kept beside the planes (padding words: 0).

:func:`sample_row_bits` draws one row: bit ``23 - j`` of lane ``i``'s ``m`` in word ``w`` is bit ``i`` of
``hash32(row key, 24 w + j)`` (:func:`bimu.rng.hash32`), and ``m < T`` is decided from the top plane
down. A lane is decided at the first plane where its random bit differs from ``T``'s (two planes on
average); :data:`FIRST_PLANES` planes are drawn for every word, then a block of :data:`BLOCK` words
draws on, plane by plane, while one of its lanes is undecided. Each sample has the method's Bernoulli
probability exactly. The draw runs as explicit ``<8 x i32>`` LLVM vector code, a block of eight words
per vector.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

from bimu.engine.scalar import KERNEL_OPTS, fexp
from bimu.rng import as_like

PLANES = 24
"""Bit planes of a threshold ``T`` (``0 <= T <= 2**23``)."""
FIRST_PLANES = 12
"""Planes decided for every word (plane 0 needs no draw); a block with an undecided lane after them draws on."""
LANES = 32
"""Parameters per threshold word."""
BLOCK = 8
"""Words per vector of :func:`sample_row_bits`; each row's words are padded to a multiple of it."""


@njit(inline="always", **KERNEL_OPTS)
def row_words(n_in):
    """Threshold words of a row of ``n_in`` parameters (padded to a multiple of :data:`BLOCK`)."""
    nw = (n_in + LANES - 1) // LANES
    return (nw + BLOCK - 1) // BLOCK * BLOCK


def word_offsets(sizes) -> np.ndarray:
    """First threshold word of each layer (:func:`row_words` per row), total last.

    >>> word_offsets([8192, 19, 3]).tolist()
    [0, 4864, 4888]
    """
    off = [0]
    for a, b in zip(sizes[:-1], sizes[1:]):
        off.append(off[-1] + b * row_words(int(a)))
    return np.asarray(off, dtype=np.int64)


@njit(inline="always", **KERNEL_OPTS)
def _passes(m, b, thr, one):
    """The hard-sample test of :mod:`bimu.engine.sampling` for the 23-bit integer ``m``."""
    u = as_like(np.int32(2 * m + 1), one) * as_like(2.0**-24, one)
    return u * (one + b) < thr


@njit(inline="always", **KERNEL_OPTS)
def _passes_f(mf, ob, thr, one, h):
    """:func:`_passes` with ``m`` held as a float ``mf`` (an integer below ``2**23``, so ``2 mf + 1`` is
    exact: the same ``u``) and ``ob = 1 + b``, ``h = 2**-24``."""
    return (mf * (one + one) + one) * h * ob < thr


@njit(inline="always", **KERNEL_OPTS)
def _settle(t, b, thr, one, top):
    """The exact ``T``: step from ``t`` until ``m < T`` is the float test."""
    while t > 0 and not _passes(t - 1, b, thr, one):
        t -= 1
    while t < top and _passes(t, b, thr, one):
        t += 1
    return t


@njit(fastmath={"contract"}, **KERNEL_OPTS)
def _word_thresholds(lr, n, one, tbuf, tf, ok):
    """The exact ``T`` of ``lr[:n]`` (``n <= 32``) into ``tbuf[:n]``. Branch-free and in the float type
    (vectorised): a first guess from the quotient ``thr / (1 + b)``, one step each way with the float test,
    and a check that ``m < T`` is the float test at ``T - 1`` and ``T``; a lane that fails the check
    (almost never) is settled by stepping (:func:`_settle`)."""
    m2 = as_like(-2.0, one)
    zero = as_like(0.0, one)
    topf = as_like(8388608.0, one)
    h = as_like(2.0**-24, one)
    for i in range(n):
        lv = lr[i]
        b = fexp(m2 * abs(lv))
        thr = one if lv >= 0 else b
        ob = one + b
        t = min(max(np.floor(thr / ob * topf), zero), topf)
        t = t - (one if (t > zero) & (not _passes_f(max(t - one, zero), ob, thr, one, h)) else zero)
        t = t + (one if (t < topf) & _passes_f(t, ob, thr, one, h) else zero)
        good = (((t == zero) | _passes_f(max(t - one, zero), ob, thr, one, h))
                & ((t == topf) | (not _passes_f(min(t, topf - one), ob, thr, one, h))))
        ok[i] = one if good else zero
        tf[i] = t
    for i in range(n):
        tbuf[i] = np.int32(tf[i])
    for i in range(n):
        if ok[i] == zero:
            lv = lr[i]
            b = fexp(m2 * abs(lv))
            tbuf[i] = _settle(tbuf[i], b, one if lv >= 0 else b, one, np.int32(1) << 23)


@intrinsic
def _pack_planes(typingctx, tbuf, tp, gw):
    """Write the 32 lanes' ``T`` (``tbuf``, int32) into word ``gw`` of the planes ``tp [PLANES, words]``:
    bit ``i`` of ``tp[j, gw]`` is bit ``23 - j`` of ``tbuf[i]``. Per plane, four ``<8 x i32>`` vectors are
    shifted so that bit reaches the sign and their sign masks (``vmovmskps``) make the word."""
    if not (isinstance(tbuf, types.Array) and tbuf.ndim == 1 and tbuf.dtype == types.int32 and tbuf.layout == "C"
            and isinstance(tp, types.Array) and tp.ndim == 2 and tp.dtype == types.uint32 and tp.layout == "C"):
        return None
    sig = types.void(tbuf, tp, gw)

    def codegen(context, builder, signature, args):
        from numba.core import cgutils

        i32 = ir.IntType(32)
        vty = ir.VectorType(i32, BLOCK)
        intp = context.get_value_type(types.intp)
        src = context.make_array(signature.args[0])(context, builder, args[0]).data
        tarr = context.make_array(signature.args[1])(context, builder, args[1])
        words = cgutils.unpack_tuple(builder, tarr.shape, 2)[1]
        g = context.cast(builder, args[2], signature.args[2], types.intp)
        parts = [builder.load(builder.bitcast(builder.gep(src, [ir.Constant(intp, BLOCK * q)]), vty.as_pointer()),
                              align=4) for q in range(LANES // BLOCK)]
        zero = ir.Constant(vty, [ir.Constant(i32, 0)] * BLOCK)
        for j in range(PLANES):
            shift = ir.Constant(vty, [ir.Constant(i32, LANES - PLANES + j)] * BLOCK)
            word = None
            for q, v in enumerate(parts):
                mask = builder.icmp_signed("<", builder.shl(v, shift), zero)
                bits = builder.zext(builder.bitcast(mask, ir.IntType(BLOCK)), i32)
                if q:
                    bits = builder.shl(bits, ir.Constant(i32, BLOCK * q))
                word = bits if word is None else builder.or_(word, bits)
            builder.store(word, builder.gep(tarr.data, [builder.add(builder.mul(ir.Constant(intp, j), words), g)]))
        return context.get_dummy_value()

    return sig, codegen


@njit(fastmath=False, **KERNEL_OPTS)
def thresholds(lam, sizes, poff, woff, tp, vm):
    """Fill the bit planes ``tp [PLANES, words]`` with each parameter's ``T`` and ``vm [words]`` with each
    word's valid lanes (see the module), a word of 32 parameters at a time (:func:`_word_thresholds`,
    :func:`_pack_planes`)."""
    L = sizes.shape[0] - 1
    one = as_like(1.0, lam[0])
    tbuf = np.zeros(LANES, dtype=np.int32)
    tf = np.zeros(LANES, dtype=lam.dtype)
    ok = np.zeros(LANES, dtype=lam.dtype)
    for l in range(L):
        n_in = sizes[l]
        nw = (n_in + LANES - 1) // LANES
        rw = (nw + BLOCK - 1) // BLOCK * BLOCK
        for o in range(sizes[l + 1]):
            for w in range(rw):
                gw = woff[l] + o * rw + w
                n = max(min(LANES, n_in - w * LANES), 0)
                vm[gw] = np.uint32(0xFFFFFFFF) if n == LANES else np.uint32((np.uint64(1) << np.uint64(n)) - np.uint64(1))
                for i in range(n, LANES):
                    tbuf[i] = 0
                e0 = poff[l] + o * n_in + w * LANES
                _word_thresholds(lam[e0:e0 + n], n, one, tbuf, tf, ok)
                _pack_planes(tbuf, tp, gw)


def _hash32_vec(builder, vty, idx, rlo, rhi):
    """:func:`bimu.rng.hash32` of the index vector ``idx`` under the splatted row key halves."""
    i32 = ir.IntType(32)

    def splat(v):
        return ir.Constant(vty, [ir.Constant(i32, v)] * BLOCK)

    x = builder.add(builder.mul(idx, splat(0x9E3779B9)), rlo)
    x = builder.xor(x, builder.lshr(x, splat(16)))
    x = builder.mul(x, splat(0x7FEB352D))
    x = builder.xor(x, builder.lshr(x, splat(15)))
    x = builder.xor(x, rhi)
    x = builder.mul(x, splat(0x846CA68B))
    return builder.xor(x, builder.lshr(x, splat(16)))


@intrinsic
def _sample_lanes(typingctx, tp, vm, g0, nw, rlo, rhi, out, o0):
    """IR of :func:`sample_row_bits`."""
    if not (isinstance(tp, types.Array) and tp.ndim == 2 and tp.dtype == types.uint32 and tp.layout == "C"
            and isinstance(vm, types.Array) and vm.ndim == 1 and vm.dtype == types.uint32
            and isinstance(out, types.Array) and out.ndim == 1 and out.dtype == types.uint32):
        return None
    sig = types.void(tp, vm, g0, nw, rlo, rhi, out, o0)

    def codegen(context, builder, signature, args):
        from numba.core import cgutils

        intp = context.get_value_type(types.intp)
        i32 = ir.IntType(32)
        vty = ir.VectorType(i32, BLOCK)
        tarr = context.make_array(signature.args[0])(context, builder, args[0])
        words = cgutils.unpack_tuple(builder, tarr.shape, 2)[1]
        vptr = context.make_array(signature.args[1])(context, builder, args[1]).data
        optr = context.make_array(signature.args[6])(context, builder, args[6]).data
        g0_, nw_, o0_ = (context.cast(builder, args[i], signature.args[i], types.intp) for i in (2, 3, 7))
        rlo_, rhi_ = (context.cast(builder, args[i], signature.args[i], types.uint32) for i in (4, 5))

        def splat_val(v):
            vec = ir.Constant(vty, ir.Undefined)
            vec = builder.insert_element(vec, v, ir.Constant(i32, 0))
            return builder.shuffle_vector(vec, vec, ir.Constant(vty, [ir.Constant(i32, 0)] * BLOCK))

        rlo_v, rhi_v = splat_val(rlo_), splat_val(rhi_)
        ones = ir.Constant(vty, [ir.Constant(i32, -1)] * BLOCK)
        lane_ids = ir.Constant(vty, [ir.Constant(i32, u * PLANES) for u in range(BLOCK)])

        def vload(ptr, off):
            return builder.load(builder.bitcast(builder.gep(ptr, [off]), vty.as_pointer()), align=4)

        lt = cgutils.alloca_once(builder, vty)
        eq = cgutils.alloca_once(builder, vty)
        jj = cgutils.alloca_once(builder, intp)
        blocks = builder.sdiv(nw_, ir.Constant(intp, BLOCK))
        with cgutils.for_range(builder, blocks, intp=intp) as loop:
            w0 = builder.mul(loop.index, ir.Constant(intp, BLOCK))
            g = builder.add(g0_, w0)
            base = builder.add(splat_val(builder.trunc(builder.mul(w0, ir.Constant(intp, PLANES)), i32)), lane_ids)
            t0 = vload(tarr.data, g)
            valid = vload(vptr, g)
            builder.store(builder.and_(valid, t0), lt)
            builder.store(builder.and_(valid, builder.xor(t0, ones)), eq)

            def plane(j):
                jv = splat_val(builder.trunc(j, i32))
                r = _hash32_vec(builder, vty, builder.add(base, jv), rlo_v, rhi_v)
                t = vload(builder.gep(tarr.data, [builder.mul(j, words)]), g)
                e = builder.load(eq)
                builder.store(builder.or_(builder.load(lt), builder.and_(builder.and_(e, builder.xor(r, ones)), t)), lt)
                builder.store(builder.and_(e, builder.xor(builder.xor(r, t), ones)), eq)

            for j in range(1, FIRST_PLANES):
                plane(ir.Constant(intp, j))
            builder.store(ir.Constant(intp, FIRST_PLANES), jj)
            head = builder.append_basic_block("tail.head")
            body = builder.append_basic_block("tail.body")
            done = builder.append_basic_block("tail.done")
            builder.branch(head)
            builder.position_at_end(head)
            j = builder.load(jj)
            undecided = builder.icmp_unsigned("!=", builder.bitcast(builder.load(eq), ir.IntType(32 * BLOCK)),
                                              ir.Constant(ir.IntType(32 * BLOCK), 0))
            more = builder.and_(undecided, builder.icmp_signed("<", j, ir.Constant(intp, PLANES)))
            builder.cbranch(more, body, done)
            builder.position_at_end(body)
            plane(j)
            builder.store(builder.add(j, ir.Constant(intp, 1)), jj)
            builder.branch(head)
            builder.position_at_end(done)
            builder.store(builder.load(lt), builder.bitcast(builder.gep(optr, [builder.add(o0_, w0)]), vty.as_pointer()),
                          align=4)
        return context.get_dummy_value()

    return sig, codegen


@njit(cache=True, error_model="numpy", nogil=True, boundscheck=False, fastmath=False)
def sample_row_bits(tp, vm, g0, nw, rlo, rhi, out, o0):
    """One row's hard sample as bits (1: ``+1``) into ``out[o0:o0 + nw]``: the row's ``nw`` words (a
    multiple of :data:`BLOCK`) start at word ``g0`` of the planes ``tp [PLANES, words]`` (valid lanes
    ``vm``), drawn with the row key ``(rlo, rhi)`` (uint32 halves; see the module). Invalid lanes are 0.

    >>> tp = np.zeros((PLANES, 8), np.uint32); tp[0, :] = 0xFFFF; vm = np.full(8, 0xFFFFFFFF, np.uint32)
    >>> out = np.zeros(8, np.uint32)
    >>> sample_row_bits(tp, vm, 0, 8, np.uint32(1), np.uint32(2), out, 0)
    >>> out.tolist() == [0xFFFF] * 8
    True
    """
    _sample_lanes(tp, vm, g0, nw, rlo, rhi, out, o0)

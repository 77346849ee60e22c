"""Dot products in one stated summation order (:func:`dot8`), written out as LLVM vector code (numba).

Every dot product of the engine goes through these functions, so a sum has the same bits in every
kernel, for every batch an example sits in, in every compile history and on every machine:
:func:`dot8` (one sum), :func:`dot` (a whole row), :func:`dot_rows` (up to :data:`ROWS_PER_DOT` rows
against one input) and :func:`dot4x2` (two rows against four inputs) all follow :func:`dot8`'s order.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

DOT_LANES = 8
"""Lanes of :func:`dot8`'s vector accumulator (its eight partial sums)."""


def _emit_dots(context, builder, fty, ws, xs, pairs, n):
    """LLVM IR for the dot products ``ws[j] . xs[r]`` of each ``(j, r)`` in ``pairs`` (pointers to
    ``n`` floats of type ``fty``), every one in :func:`dot8`'s order: one ``<8 x float>`` accumulator per
    pair takes the products of a block of eight per pass (each row and input block loaded once per pass,
    however many pairs use it), its lanes are added ``((0 + 4) + (2 + 6)) + ((1 + 5) + (3 + 7))``, then its
    last ``n mod 8`` terms follow in turn. Plain ``fmul`` / ``fadd`` with no fast-math flag: no
    contraction, no reordering. Returns one pointer per pair holding its sum."""
    from numba.core import cgutils

    intp = context.get_value_type(types.intp)
    vty = ir.VectorType(fty, DOT_LANES)
    align = context.get_abi_sizeof(fty)
    lanes = ir.Constant(intp, DOT_LANES)
    accs = [cgutils.alloca_once_value(builder, ir.Constant(vty, [ir.Constant(fty, 0.0)] * DOT_LANES))
            for _ in pairs]
    blocks = builder.sdiv(n, lanes)
    with cgutils.for_range(builder, blocks, intp=intp) as loop:
        off = builder.mul(loop.index, lanes)

        def block(ptr):
            return builder.load(builder.bitcast(builder.gep(ptr, [off]), vty.as_pointer()), align=align)

        wv, xv = [block(w) for w in ws], [block(x) for x in xs]
        for acc, (j, r) in zip(accs, pairs):
            builder.store(builder.fadd(builder.load(acc), builder.fmul(wv[j], xv[r])), acc)
    totals = []
    for acc in accs:
        v = builder.load(acc)
        s = [builder.extract_element(v, ir.Constant(ir.IntType(32), j)) for j in range(DOT_LANES)]
        totals.append(cgutils.alloca_once_value(
            builder, builder.fadd(builder.fadd(builder.fadd(s[0], s[4]), builder.fadd(s[2], s[6])),
                                  builder.fadd(builder.fadd(s[1], s[5]), builder.fadd(s[3], s[7])))))
    m = builder.mul(blocks, lanes)
    with cgutils.for_range(builder, builder.sub(n, m), intp=intp) as loop:
        i = builder.add(m, loop.index)
        wv = [builder.load(builder.gep(w, [i])) for w in ws]
        xv = [builder.load(builder.gep(x, [i])) for x in xs]
        for total, (j, r) in zip(totals, pairs):
            builder.store(builder.fadd(builder.load(total), builder.fmul(wv[j], xv[r])), total)
    return totals


@intrinsic
def _dot8_lanes(typingctx, w, wo, x, xo, n):
    """``sum_i w[wo + i] * x[xo + i]`` over 1-D float arrays in :func:`dot8`'s order, as explicit LLVM
    vector code (:func:`_emit_dots`). LLVM does not pack eight loop-carried scalar accumulators by itself
    unless allowed to reassociate, so the vector is written out here."""
    if not (isinstance(w, types.Array) and isinstance(x, types.Array) and w.ndim == 1 and x.ndim == 1
            and w.dtype == x.dtype and w.dtype in (types.float32, types.float64)):
        return None
    sig = w.dtype(w, wo, x, xo, n)

    def codegen(context, builder, signature, args):
        wo_, xo_, n_ = (context.cast(builder, args[i], signature.args[i], types.intp) for i in (1, 3, 4))
        wp = builder.gep(context.make_array(signature.args[0])(context, builder, args[0]).data, [wo_])
        xp = builder.gep(context.make_array(signature.args[2])(context, builder, args[2]).data, [xo_])
        fty = context.get_value_type(signature.return_type)
        (total,) = _emit_dots(context, builder, fty, [wp], [xp], [(0, 0)], n_)
        return builder.load(total)

    return sig, codegen


@njit(cache=True, error_model="numpy", nogil=True, boundscheck=False, fastmath=False)
def dot8(w, wo, x, xo, n):
    """``sum_i w[wo + i] * x[xo + i]`` in one order stated here: eight partial sums (sum ``j`` takes the
    terms ``i = j mod 8``), added as ``((s0 + s4) + (s2 + s6)) + ((s1 + s5) + (s3 + s7))``, then the last
    ``n mod 8`` terms in turn; every product rounded once (no FMA). ``fastmath=False`` is stated, so the
    function neither takes a caller's flags (numba compiles a function whose flags are unset with those of
    the first caller that needs it, and caches that code) nor lets the vectoriser reorder the sum
    (``reassoc``): every caller, in every compile history, on every machine, gets the same bits. The eight
    sums are the lanes of one vector accumulator written out in LLVM IR (:func:`_dot8_lanes`): about 3.5x
    faster than the same order as eight scalar accumulators, which LLVM left scalar
    (``benchmarks/dot_order_speed.py``).

    >>> import numpy as np
    >>> w = np.arange(1.0, 12.0); x = np.ones(11)
    >>> float(dot8(w, 1, x, 0, 10)) == float(w[1:].sum())
    True
    """
    return _dot8_lanes(w, wo, x, xo, n)


@intrinsic
def _dot4x2_lanes(typingctx, w0, w1, x0, x1, x2, x3, out):
    """``out[2 r + j] = w_j . x_r`` for two weight rows and four inputs (1-D float arrays; the rows'
    length ``n``, the inputs at least as long, ``out`` of at least 8): the eight sums of
    :func:`_emit_dots`, each block of the two rows and of the four inputs loaded once per pass, so
    ``out[2 r + j]`` has the bits of ``dot8(w_j, 0, x_r, 0, n)``."""
    arrs = (w0, w1, x0, x1, x2, x3, out)
    if not all(isinstance(a, types.Array) and a.ndim == 1 for a in arrs):
        return None
    dt = w0.dtype
    if dt not in (types.float32, types.float64) or any(a.dtype != dt for a in arrs):
        return None
    sig = types.void(*arrs)

    def codegen(context, builder, signature, args):
        from numba.core import cgutils

        arrays = [context.make_array(signature.args[i])(context, builder, args[i]) for i in range(7)]
        (n_,) = cgutils.unpack_tuple(builder, arrays[0].shape, 1)
        ptrs = [a.data for a in arrays]
        pairs = [(j, r) for r in range(4) for j in range(2)]  # out[2 r + j]
        totals = _emit_dots(context, builder, context.get_value_type(dt), ptrs[:2], ptrs[2:6], pairs, n_)
        intp = context.get_value_type(types.intp)
        for q, total in enumerate(totals):
            builder.store(builder.load(total), builder.gep(ptrs[6], [ir.Constant(intp, q)]))
        return context.get_dummy_value()

    return sig, codegen


@njit(cache=True, error_model="numpy", nogil=True, boundscheck=False, fastmath=False)
def dot4x2(w0, w1, x0, x1, x2, x3, out):
    """The eight dot products of weight rows ``w0, w1`` with inputs ``x0..x3`` into ``out[0:8]``
    (``out[2 r + j] = w_j . x_r``), each with the bits of :func:`dot8` (:func:`_dot4x2_lanes`): a
    register-blocked evaluation kernel whose result does not depend on the slot (or batch) an input
    occupies, on the compile history, or on the machine's vector width.

    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> w = rng.standard_normal((2, 21)).astype(np.float32); x = rng.standard_normal((4, 21)).astype(np.float32)
    >>> out = np.zeros(8, np.float32); dot4x2(w[0], w[1], x[0], x[1], x[2], x[3], out)
    >>> all(out[2 * r + j] == dot8(w[j], 0, x[r], 0, 21) for r in range(4) for j in range(2))
    True
    """
    if w1.shape[0] != w0.shape[0] or x0.shape[0] < w0.shape[0] or x1.shape[0] < w0.shape[0] \
            or x2.shape[0] < w0.shape[0] or x3.shape[0] < w0.shape[0] or out.shape[0] < 8:
        raise ValueError("dot4x2: rows of one length, inputs at least as long, out of at least 8")
    _dot4x2_lanes(w0, w1, x0, x1, x2, x3, out)


ROWS_PER_DOT = 8
"""Most weight rows :func:`dot_rows` sums against one input in one pass (eight vector accumulators)."""


@intrinsic
def _dot_rows_lanes(typingctx, w, offs, x, n):
    """The tuple ``(w[offs[k]:offs[k] + n] . x[:n] for k)`` for a 1-D float array ``w``, a tuple of
    offsets and an input ``x`` (:func:`_emit_dots`: each sum in :func:`dot8`'s order, each block of
    ``x`` loaded once per pass for all rows, so the independent accumulators hide the add latency that
    bounds a single ``dot8``)."""
    if not (isinstance(w, types.Array) and isinstance(x, types.Array) and w.ndim == 1 and x.ndim == 1
            and w.dtype == x.dtype and w.dtype in (types.float32, types.float64)
            and isinstance(offs, types.UniTuple) and isinstance(offs.dtype, types.Integer)
            and 1 <= offs.count <= ROWS_PER_DOT):
        return None
    rows = offs.count
    ret = types.UniTuple(w.dtype, rows)
    sig = ret(w, offs, x, n)

    def codegen(context, builder, signature, args):
        from numba.core import cgutils

        wp = context.make_array(signature.args[0])(context, builder, args[0]).data
        xp = context.make_array(signature.args[2])(context, builder, args[2]).data
        starts = [context.cast(builder, v, offs.dtype, types.intp) for v in cgutils.unpack_tuple(builder, args[1], rows)]
        n_ = context.cast(builder, args[3], signature.args[3], types.intp)
        totals = _emit_dots(context, builder, context.get_value_type(w.dtype), [builder.gep(wp, [o]) for o in starts],
                            [xp], [(k, 0) for k in range(rows)], n_)
        return context.make_tuple(builder, ret, [builder.load(t) for t in totals])

    return sig, codegen


@njit(cache=True, error_model="numpy", nogil=True, boundscheck=False, fastmath=False)
def dot_rows(w, offs, x, n):
    """``tuple(sum_i w[offs[k] + i] * x[i] for k)`` for up to :data:`ROWS_PER_DOT` rows of one flat
    array against one input, each with the bits of ``dot8(w, offs[k], x, 0, n)`` (the training row
    pass's K next pre-activations: one pass over the input for all K samples). The caller guarantees
    ``offs[k] + n <= len(w)`` and ``n <= len(x)`` (not checked: the engine's hot loop).

    >>> import numpy as np
    >>> w = np.arange(30.0).astype(np.float32) / 7; x = np.linspace(-1, 1, 13).astype(np.float32)
    >>> a, b = dot_rows(w, (0, 17), x, 13)
    >>> (a, b) == (dot8(w, 0, x, 0, 13), dot8(w, 17, x, 0, 13))
    True
    """
    return _dot_rows_lanes(w, offs, x, n)


@njit(cache=True, error_model="numpy", nogil=True, boundscheck=False, fastmath=False)
def dot(w, x):
    """``sum_i w[i] * x[i]`` in the fixed order of :func:`dot8` (the same bits)."""
    return dot8(w, 0, x, 0, w.shape[0])


SIGNED_ROWS = 4
"""Sign rows :func:`signed_dots4` sums against one input in one pass."""


def sign_table(dtype) -> np.ndarray:
    """The ``[256 * 8]`` sign masks of :func:`signed_dots4` for float type ``dtype``: entry ``8 b + l`` is
    the float's sign bit where bit ``l`` of byte ``b`` is 0 (weight ``-1``), else 0 (weight ``+1``).

    >>> sign_table(np.float32)[8 * 0b10 : 8 * 0b10 + 3].tolist() == [2**31, 0, 2**31]
    True
    """
    it = np.uint32 if np.dtype(dtype) == np.float32 else np.uint64
    sign = it(1) << it(8 * np.dtype(it).itemsize - 1)
    b, lane = np.arange(256)[:, None], np.arange(8)[None, :]
    return np.where((b >> lane) & 1, it(0), sign).astype(it).ravel()


@intrinsic
def _signed4_lanes(typingctx, x, xo, bits, b0, b1, b2, b3, n, tab):
    """The four sums ``sum_i s_i x[xo + i]`` (``s_i = +1`` iff bit ``i mod 32`` of ``bits[b_r + i // 32]``
    is set) in :func:`dot8`'s order, as LLVM vector code: each block of eight inputs is loaded once, its
    signs set by XOR with the :func:`sign_table` row of the block's byte of bits (``+-x`` is exactly the
    product ``(+-1) x``), and added to the row's ``<8 x float>`` accumulator; the tail follows in turn."""
    if not (isinstance(x, types.Array) and x.ndim == 1 and x.dtype in (types.float32, types.float64)
            and isinstance(bits, types.Array) and bits.ndim == 1 and bits.dtype == types.uint32
            and isinstance(tab, types.Array) and tab.ndim == 1
            and tab.dtype == (types.uint32 if x.dtype == types.float32 else types.uint64)):
        return None
    ret = types.UniTuple(x.dtype, SIGNED_ROWS)
    sig = ret(x, xo, bits, b0, b1, b2, b3, n, tab)

    def codegen(context, builder, signature, args):
        from numba.core import cgutils

        intp = context.get_value_type(types.intp)
        i32 = ir.IntType(32)
        fty = context.get_value_type(x.dtype)
        width = 32 if x.dtype == types.float32 else 64
        ity = ir.IntType(width)
        vf, vi = ir.VectorType(fty, DOT_LANES), ir.VectorType(ity, DOT_LANES)

        def data(i):
            return context.make_array(signature.args[i])(context, builder, args[i]).data

        def cast(i):
            return context.cast(builder, args[i], signature.args[i], types.intp)

        xp = builder.gep(data(0), [cast(1)])
        rows = [builder.gep(data(2), [cast(i)]) for i in (3, 4, 5, 6)]
        n_ = cast(7)
        xip, tip = builder.bitcast(xp, ity.as_pointer()), builder.bitcast(data(8), ity.as_pointer())
        align = width // 8
        lanes = ir.Constant(intp, DOT_LANES)
        accs = [cgutils.alloca_once_value(builder, ir.Constant(vf, [ir.Constant(fty, 0.0)] * DOT_LANES))
                for _ in rows]
        blocks = builder.sdiv(n_, lanes)
        with cgutils.for_range(builder, blocks, intp=intp) as loop:
            b = loop.index
            w = builder.lshr(b, ir.Constant(intp, 2))
            sh = builder.trunc(builder.shl(builder.and_(b, ir.Constant(intp, 3)), ir.Constant(intp, 3)), i32)
            xv = builder.load(builder.bitcast(builder.gep(xip, [builder.mul(b, lanes)]), vi.as_pointer()), align=align)
            for acc, rp in zip(accs, rows):
                byte = builder.and_(builder.lshr(builder.load(builder.gep(rp, [w])), sh), ir.Constant(i32, 255))
                tv = builder.load(builder.bitcast(builder.gep(tip, [builder.mul(builder.zext(byte, intp), lanes)]),
                                                  vi.as_pointer()), align=align)
                builder.store(builder.fadd(builder.load(acc), builder.bitcast(builder.xor(xv, tv), vf)), acc)
        m = builder.mul(blocks, lanes)
        outs = []
        for acc, rp in zip(accs, rows):
            v = builder.load(acc)
            s = [builder.extract_element(v, ir.Constant(i32, j)) for j in range(DOT_LANES)]
            total = cgutils.alloca_once_value(
                builder, builder.fadd(builder.fadd(builder.fadd(s[0], s[4]), builder.fadd(s[2], s[6])),
                                      builder.fadd(builder.fadd(s[1], s[5]), builder.fadd(s[3], s[7]))))
            with cgutils.for_range(builder, builder.sub(n_, m), intp=intp) as loop:
                i = builder.add(m, loop.index)
                word = builder.load(builder.gep(rp, [builder.lshr(i, ir.Constant(intp, 5))]))
                bit = builder.trunc(builder.lshr(word, builder.trunc(builder.and_(i, ir.Constant(intp, 31)), i32)),
                                    ir.IntType(1))
                xi = builder.load(builder.gep(xp, [i]))
                builder.store(builder.fadd(builder.load(total), builder.select(bit, xi, builder.fneg(xi))), total)
            outs.append(builder.load(total))
        return context.make_tuple(builder, ret, outs)

    return sig, codegen


@njit(cache=True, error_model="numpy", nogil=True, boundscheck=False, fastmath=False)
def signed_dots4(x, xo, bits, b0, b1, b2, b3, n, tab):
    """``(s_r . x[xo:xo + n] for r in 0..3)`` for four ``+-1`` rows held as bits (``s_r[i] = +1`` iff bit
    ``i mod 32`` of ``bits[b_r + i // 32]`` is set), each with the bits of ``dot(s_r, x[xo:xo + n])``
    (:func:`dot8`'s order) without expanding the rows: one pass over ``x`` for the four rows
    (``tab``: :func:`sign_table` of ``x``'s type). The caller guarantees the offsets are in range.

    >>> x = np.linspace(-1, 1, 37).astype(np.float32); bits = np.array([0xF0F0F0F0, 0x1F, 0, 0], np.uint32)
    >>> s = np.array([1.0 if (bits[i // 32] >> (i % 32)) & 1 else -1.0 for i in range(37)], np.float32)
    >>> signed_dots4(x, 0, bits, 0, 0, 2, 0, 37, sign_table(np.float32))[0] == dot(s, x)
    True
    """
    return _signed4_lanes(x, xo, bits, b0, b1, b2, b3, n, tab)

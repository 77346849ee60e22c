"""Dot products across examples (numba, LLVM vector code): a vector's lanes are examples, and every lane
sums its own example in :func:`bimu.engine.dots.dot8`'s order.

:func:`bimu.engine.dots.dot8` fixes the order of one sum: eight partial sums (sum ``c`` takes the terms
``i = c mod 8`` in turn), added as ``((s0 + s4) + (s2 + s6)) + ((s1 + s5) + (s3 + s7))``, then the last
``n mod 8`` terms in turn, every product rounded once. The kernels here run that recurrence for a
register block of :data:`LANE_ROWS` (or :data:`TAIL_ROWS`) weight rows and :data:`LANE_VECS` vectors of
examples at once, one example per lane: an instruction holds the same step of several examples' sums,
never two steps of one sum, so an example's sum has the bits of ``dot8`` whatever the vector width, its
lane or its batch. A block loads an input vector once for all its rows and a weight once for all its
examples, and with +-1 weights (:func:`lane_dots_signed`) it keeps both the FMA units and the adders
busy: ``benchmarks/eval_speed.py`` measures the evaluation against a dense float32 implementation.

Layouts (1-D arrays, offsets in elements), for sums of ``n`` terms: term ``i`` sits at position
``p = lane_position(i, n)``, the order in which ``dot8``'s partial sums take the terms (sum 0's terms,
then sum 1's, ..., then the last ``n mod 8`` in place), so that each partial sum reads memory in turn.
Input ``i`` of the block's examples is the run ``x[xo + p * xs :][:lane_block]`` (examples side by side);
weight ``i`` of row ``r`` of a block of ``rows`` rows is ``w[wo + p * rows + r]`` (the rows interleaved);
row ``r``'s sums go to ``out[oo + r * os :][:lane_block]``. Everything is in the arrays' own float type
(float32 or float64, one type for all three arrays).
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic, overload

from bimu.engine.dots import DOT_LANES
from bimu.engine.scalar import KERNEL_OPTS

LANE_ROWS = 6
"""Weight rows of a register block (:func:`lane_dots`)."""
TAIL_ROWS = 4
"""Weight rows of the smaller register block that ends a layer whose width leaves 1 to 4 rows over
(:func:`row_blocks`)."""
LANE_VECS = 2
"""Vectors of examples of one register block: ``LANE_VECS * 8`` float32 or ``LANE_VECS * 4`` float64 examples
(256-bit vectors; the bits do not depend on the width)."""
FMA_ROWS = 4
"""Rows of a :data:`LANE_ROWS` block that :func:`lane_dots_signed` sums with fused multiply-adds; the
others (rows 4 and 5) add the input with its sign flipped by the weight's sign bit (an XOR), which runs
on the floating-point adders beside the FMA units. Both round like ``dot8``'s multiply-then-add when
every weight is +-1."""
TAIL_FMA_ROWS = 3
""":data:`FMA_ROWS` of a :data:`TAIL_ROWS` block (its row 3 is a sign row)."""


@njit(inline="always", **KERNEL_OPTS)
def lane_position(i, n):
    """Position of term ``i`` of an ``n``-term sum in :mod:`bimu.engine.lanes`'s layouts: ``(i mod 8) *
    (n // 8) + i // 8`` for the terms of the eight partial sums, ``i`` for the last ``n mod 8``.

    >>> [lane_position(i, 18) for i in range(18)]
    [0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15, 16, 17]
    """
    T = n // DOT_LANES
    return i if i >= T * DOT_LANES else (i % DOT_LANES) * T + i // DOT_LANES


def _lanes(dt) -> int:
    """Examples per 256-bit vector of numba float type ``dt``."""
    return 8 if dt == types.float32 else 4


def lane_block(x):
    """Examples one :func:`lane_dots` block covers for float arrays like ``x``: 16 float32 or 8 float64
    (numba only; inlined as a constant)."""
    return LANE_VECS * (8 if np.asarray(x).dtype == np.float32 else 4)


@overload(lane_block, inline="always")
def _lane_block_overload(x):
    n = LANE_VECS * _lanes(x.dtype)
    return lambda x: n


def _make(signed, R):
    """The intrinsic of :func:`lane_dots` (``signed=False``: products then adds, any weights) or
    :func:`lane_dots_signed` (FMA rows and sign-flip rows, +-1 weights) for blocks of ``R`` rows."""
    J, RF = LANE_VECS, ((FMA_ROWS if R == LANE_ROWS else TAIL_FMA_ROWS) if signed else R)

    @intrinsic
    def _kernel(typingctx, x, xo, xs, w, wo, n, out, oo, os):
        arrs = (x, w, out)
        if not all(isinstance(a, types.Array) and a.ndim == 1 for a in arrs):
            return None
        dt = x.dtype
        if dt not in (types.float32, types.float64) or any(a.dtype != dt for a in arrs):
            return None
        sig = types.void(x, xo, xs, w, wo, n, out, oo, os)

        def codegen(context, builder, signature, args):
            from numba.core import cgutils

            b = builder
            intp = context.get_value_type(types.intp)
            fty = context.get_value_type(dt)
            L = _lanes(dt)
            vty = ir.VectorType(fty, L)
            ity = ir.VectorType(ir.IntType(32 if dt == types.float32 else 64), L)
            align = context.get_abi_sizeof(fty)
            fma = cgutils.get_or_insert_function(b.module, ir.FunctionType(vty, [vty] * 3),
                                                 f"llvm.fma.v{L}f{32 if dt == types.float32 else 64}")

            def C(v):
                return ir.Constant(intp, v)

            def ival(i):
                return context.cast(b, args[i], signature.args[i], types.intp)

            def ptr(i, off):
                return b.gep(context.make_array(signature.args[i])(context, b, args[i]).data, [ival(off)])

            def vload(p):
                return b.load(b.bitcast(p, vty.as_pointer()), align=align)

            def bcast(p):
                v = b.insert_element(ir.Constant(vty, ir.Undefined), b.load(p), ir.Constant(ir.IntType(32), 0))
                return b.shuffle_vector(v, ir.Constant(vty, ir.Undefined),
                                        ir.Constant(ir.VectorType(ir.IntType(32), L), [0] * L))

            xp, wp, op = ptr(0, 1), ptr(3, 4), ptr(6, 7)
            xs_, n_, os_ = ival(2), ival(5), ival(8)
            zero = ir.Constant(vty, [ir.Constant(fty, 0.0)] * L)
            accs = [[cgutils.alloca_once(b, vty) for _ in range(J)] for _ in range(R)]
            parts = cgutils.alloca_once(b, vty, size=C(DOT_LANES * R * J))
            T = b.sdiv(n_, C(DOT_LANES))
            m = b.mul(T, C(DOT_LANES))
            with cgutils.for_range(b, C(DOT_LANES), intp=intp) as cl:  # partial sum c: terms i = 8 t + c
                c = cl.index
                for row in accs:
                    for acc in row:
                        b.store(zero, acc)
                with cgutils.for_range(b, T, intp=intp) as tl:
                    i = b.add(b.mul(c, T), tl.index)  # position of term 8 t + c
                    xrow = b.gep(xp, [b.mul(i, xs_)])
                    xv = [vload(b.gep(xrow, [C(v * L)])) for v in range(J)]
                    xi = [b.bitcast(a, ity) for a in xv]
                    wrow = b.gep(wp, [b.mul(i, C(R))])
                    for r in range(R):
                        wv = bcast(b.gep(wrow, [C(r)]))
                        for v in range(J):
                            acc = b.load(accs[r][v])
                            if not signed:
                                new = b.fadd(acc, b.fmul(wv, xv[v]))
                            elif r < RF:
                                new = b.call(fma, [wv, xv[v], acc])
                            else:  # w held as its sign (+-0): w * x is x with that sign bit XORed in
                                new = b.fadd(acc, b.bitcast(b.xor(xi[v], b.bitcast(wv, ity)), vty))
                            b.store(new, accs[r][v])
                base = b.mul(c, C(R * J))
                for r in range(R):
                    for v in range(J):
                        b.store(b.load(accs[r][v]), b.gep(parts, [b.add(base, C(r * J + v))]))
            for r in range(R):
                for v in range(J):
                    s = [b.load(b.gep(parts, [C(q * R * J + r * J + v)])) for q in range(DOT_LANES)]
                    b.store(b.fadd(b.fadd(b.fadd(s[0], s[4]), b.fadd(s[2], s[6])),
                                   b.fadd(b.fadd(s[1], s[5]), b.fadd(s[3], s[7]))), accs[r][v])
            with cgutils.for_range(b, b.sub(n_, m), intp=intp) as ql:  # the last n mod 8 terms in turn
                i = b.add(m, ql.index)
                xrow = b.gep(xp, [b.mul(i, xs_)])
                xv = [vload(b.gep(xrow, [C(v * L)])) for v in range(J)]
                wrow = b.gep(wp, [b.mul(i, C(R))])
                xi = [b.bitcast(a, ity) for a in xv]
                for r in range(R):
                    wv = bcast(b.gep(wrow, [C(r)]))
                    for v in range(J):
                        term = b.fmul(wv, xv[v]) if r < RF else b.bitcast(b.xor(xi[v], b.bitcast(wv, ity)), vty)
                        b.store(b.fadd(b.load(accs[r][v]), term), accs[r][v])
            for r in range(R):
                orow = b.gep(op, [b.mul(C(r), os_)])
                for v in range(J):
                    b.store(b.load(accs[r][v]), b.bitcast(b.gep(orow, [C(v * L)]), vty.as_pointer()), align=align)
            return context.get_dummy_value()

        return sig, codegen

    return _kernel


_dots = {(signed, rows): _make(signed, rows) for signed in (False, True) for rows in (LANE_ROWS, TAIL_ROWS)}
_dots6, _dots4, _signed6, _signed4 = (_dots[False, LANE_ROWS], _dots[False, TAIL_ROWS], _dots[True, LANE_ROWS],
                                      _dots[True, TAIL_ROWS])


@njit(inline="always", **KERNEL_OPTS)
def fma_rows(rows):
    """The FMA rows of a block of ``rows`` rows in :func:`lane_dots_signed` (:data:`FMA_ROWS` or
    :data:`TAIL_FMA_ROWS`); rows from there on are sign rows.

    >>> fma_rows(6), fma_rows(4)
    (4, 3)
    """
    return FMA_ROWS if rows == LANE_ROWS else TAIL_FMA_ROWS


@njit(inline="always", **KERNEL_OPTS)
def row_blocks(n):
    """``(G, last, padded)``: a layer of ``n`` rows in ``G`` register blocks, ``G - 1`` of
    :data:`LANE_ROWS` rows and a last one of ``last`` rows (:data:`TAIL_ROWS` when 1 to 4 rows are left,
    else :data:`LANE_ROWS`; missing rows are zero), ``padded`` rows in all.

    >>> row_blocks(100), row_blocks(10), row_blocks(12), row_blocks(5)
    ((17, 4, 100), (2, 4, 10), (2, 6, 12), (1, 6, 6))
    """
    G = (n + LANE_ROWS - 1) // LANE_ROWS
    last = TAIL_ROWS if n - (G - 1) * LANE_ROWS <= TAIL_ROWS else LANE_ROWS
    return G, last, (G - 1) * LANE_ROWS + last


@njit(cache=True, error_model="numpy", nogil=True, boundscheck=False, fastmath=False)
def lane_dots(x, xo, xs, w, wo, n, out, oo, os, rows):
    """``out[oo + r * os + e] = sum_i w[wo + p_i * rows + r] * x[xo + p_i * xs + e]`` (``p_i =
    lane_position(i, n)``) for the ``rows`` rows ``r`` of a register block (:data:`LANE_ROWS` or
    :data:`TAIL_ROWS`) and the :func:`lane_block` examples ``e`` (layouts: the module), each
    sum with the bits of :func:`bimu.engine.dots.dot8` (products rounded, then added; any weights).
    The caller guarantees the offsets are in range (not checked: the evaluation's hot loop).

    >>> import numpy as np
    >>> from bimu.engine.dots import dot8
    >>> rng = np.random.default_rng(0); n = 21
    >>> X = rng.standard_normal((16, n)).astype(np.float32); Wr = rng.standard_normal((6, n)).astype(np.float32)
    >>> p = np.argsort([lane_position(i, n) for i in range(n)])  # term at each position
    >>> out = np.zeros(6 * 16, np.float32)
    >>> lane_dots(np.ascontiguousarray(X.T[p]).ravel(), 0, 16, np.ascontiguousarray(Wr.T[p]).ravel(), 0, n, out, 0, 16, 6)
    >>> all(out[r * 16 + e] == dot8(Wr[r], 0, X[e], 0, n) for r in range(6) for e in range(16))
    True
    """
    if rows == LANE_ROWS:
        _dots6(x, xo, xs, w, wo, n, out, oo, os)
    else:
        _dots4(x, xo, xs, w, wo, n, out, oo, os)


@njit(cache=True, error_model="numpy", nogil=True, boundscheck=False, fastmath=False)
def lane_dots_signed(x, xo, xs, w, wo, n, out, oo, os, rows):
    """:func:`lane_dots` for weights that are all +1 or -1, faster, with the sign rows ``r >=
    fma_rows(rows)`` holding each weight's sign as a signed zero (``w * 0``, :func:`sign_rows`): rows below
    :func:`fma_rows` are summed by fused multiply-adds (``w * x`` is exact, so the FMA's one rounding is
    that of the add), the others by adding ``x`` with the weight's sign bit XORed in (exactly ``w * x``),
    which keeps the adders busy beside the FMA units. The same bits as :func:`lane_dots` on the +-1
    weights.

    >>> import numpy as np
    >>> rng = np.random.default_rng(1); n = 37
    >>> xt = rng.standard_normal(n * 16).astype(np.float32)
    >>> w = np.where(rng.random(n * 6) < 0.5, -1.0, 1.0).astype(np.float32)
    >>> a = np.zeros(96, np.float32); b = np.zeros(96, np.float32)
    >>> lane_dots(xt, 0, 16, w, 0, n, a, 0, 16, 6); lane_dots_signed(xt, 0, 16, sign_rows(w), 0, n, b, 0, 16, 6)
    >>> np.array_equal(a, b)
    True
    """
    if rows == LANE_ROWS:
        _signed6(x, xo, xs, w, wo, n, out, oo, os)
    else:
        _signed4(x, xo, xs, w, wo, n, out, oo, os)


def sign_rows(w: np.ndarray, rows: int = LANE_ROWS) -> np.ndarray:
    """A copy of the interleaved +-1 weights of one block of ``rows`` rows (layout: the module) in
    :func:`lane_dots_signed`'s form: rows ``r >= fma_rows(rows)`` hold ``w * 0`` (the sign as a signed zero).

    >>> sign_rows(np.array([1.0, -1, 1, -1, 1, -1] * 2)).tolist()[:6]
    [1.0, -1.0, 1.0, -1.0, 0.0, -0.0]
    """
    out = np.array(w, copy=True)
    out.reshape(-1, rows)[:, fma_rows(rows):] *= 0
    return out


@intrinsic
def _transpose_lanes(typingctx, X, r0, c0, dst, do, ds):
    """LLVM vector code of :func:`lane_transpose`."""
    if not (isinstance(X, types.Array) and X.ndim == 2 and isinstance(dst, types.Array) and dst.ndim == 1
            and X.dtype == dst.dtype and X.dtype in (types.float32, types.float64)):
        return None
    sig = types.void(X, r0, c0, dst, do, ds)

    def codegen(context, builder, signature, args):
        from numba.core import cgutils

        b = builder
        dt = X.dtype
        L = _lanes(dt)
        intp = context.get_value_type(types.intp)
        fty = context.get_value_type(dt)
        align = context.get_abi_sizeof(fty)
        v8 = ir.VectorType(fty, 8)
        vl = ir.VectorType(fty, L)
        i32 = ir.IntType(32)

        def ival(i):
            return context.cast(b, args[i], signature.args[i], types.intp)

        arr = context.make_array(signature.args[0])(context, b, args[0])
        rstride = cgutils.unpack_tuple(b, arr.strides, 2)[0]  # bytes
        base = b.ptrtoint(b.gep(arr.data, [ival(2)]), intp)
        r0_ = ival(1)
        rows = [b.load(b.inttoptr(b.add(base, b.mul(b.add(r0_, ir.Constant(intp, e)), rstride)), v8.as_pointer()),
                       align=align) for e in range(L)]

        def shuf(a, c, mask):
            return b.shuffle_vector(a, c, ir.Constant(ir.VectorType(i32, len(mask)), mask))

        if L == 8:  # 8 x 8: interleave pairs of rows, then pairs of pairs, then halves
            t = []
            for k in range(4):
                t += [shuf(rows[2 * k], rows[2 * k + 1], [0, 8, 1, 9, 4, 12, 5, 13]),
                      shuf(rows[2 * k], rows[2 * k + 1], [2, 10, 3, 11, 6, 14, 7, 15])]
            u = []
            for h in (0, 4):
                u += [shuf(t[h], t[h + 2], [0, 1, 8, 9, 4, 5, 12, 13]), shuf(t[h], t[h + 2], [2, 3, 10, 11, 6, 7, 14, 15]),
                      shuf(t[h + 1], t[h + 3], [0, 1, 8, 9, 4, 5, 12, 13]),
                      shuf(t[h + 1], t[h + 3], [2, 3, 10, 11, 6, 7, 14, 15])]
            cols = [shuf(u[c], u[c + 4], [0, 1, 2, 3, 8, 9, 10, 11]) for c in range(4)] + \
                   [shuf(u[c], u[c + 4], [4, 5, 6, 7, 12, 13, 14, 15]) for c in range(4)]
        else:  # 4 rows of 8: column c of row e is element c of rows[e]
            cols = []
            for c in range(8):
                p = shuf(rows[0], rows[1], [c, 8 + c])
                q = shuf(rows[2], rows[3], [c, 8 + c])
                cols.append(shuf(p, q, [0, 1, 2, 3]))
        dp = b.gep(context.make_array(signature.args[3])(context, b, args[3]).data, [ival(4)])
        ds_ = ival(5)
        for c in range(8):
            b.store(cols[c], b.bitcast(b.gep(dp, [b.mul(ir.Constant(intp, c), ds_)]), vl.as_pointer()), align=align)
        return context.get_dummy_value()

    return sig, codegen


@njit(cache=True, error_model="numpy", nogil=True, boundscheck=False, fastmath=False)
def lane_transpose(X, r0, c0, dst, do, ds):
    """Rows ``r0 .. r0 + lanes - 1``, columns ``c0 .. c0 + 7`` of the 2-D array ``X`` (rows of contiguous
    values; ``lanes``: 8 float32 or 4 float64 examples, one vector) written transposed: column ``c0 + c``
    to ``dst[do + c * ds :][:lanes]``. Copies only (no arithmetic). The caller guarantees the ranges.

    >>> import numpy as np
    >>> X = np.arange(80, dtype=np.float32).reshape(8, 10); out = np.zeros(64, np.float32)
    >>> lane_transpose(X, 0, 2, out, 0, 8)
    >>> np.array_equal(out.reshape(8, 8), X[:, 2:10].T)
    True
    """
    _transpose_lanes(X, r0, c0, dst, do, ds)


@intrinsic
def _norm_act_vec(typingctx, z, zo, st, mo, h, ho, n, gate, use_gate):
    """LLVM vector code of :func:`lane_norm_act`."""
    if not (isinstance(z, types.Array) and z.ndim == 1 and isinstance(h, types.Array) and h.ndim == 1
            and z.dtype == h.dtype and z.dtype in (types.float32, types.float64)
            and isinstance(st, types.Array) and st.ndim == 2 and st.dtype == types.float64):
        return None
    sig = types.void(z, zo, st, mo, h, ho, n, gate, use_gate)

    def codegen(context, builder, signature, args):
        from numba.core import cgutils

        b = builder
        intp = context.get_value_type(types.intp)
        fty = context.get_value_type(z.dtype)
        dty = ir.DoubleType()
        W = 4
        vf, vd = ir.VectorType(fty, W), ir.VectorType(dty, W)
        align = context.get_abi_sizeof(fty)

        def ival(i):
            return context.cast(b, args[i], signature.args[i], types.intp)

        zp = b.gep(context.make_array(signature.args[0])(context, b, args[0]).data, [ival(1)])
        sta = context.make_array(signature.args[2])(context, b, args[2])
        rowstride = b.sdiv(cgutils.unpack_tuple(b, sta.strides, 2)[0], ir.Constant(intp, 8))
        mup = b.gep(b.gep(sta.data, [rowstride]), [ival(3)])  # row 1: means
        rp = b.gep(b.gep(sta.data, [b.mul(rowstride, ir.Constant(intp, 3))]), [ival(3)])  # row 3: 1 / sqrt
        hp = b.gep(context.make_array(signature.args[4])(context, b, args[4]).data, [ival(5)])
        g = context.cast(b, args[7], signature.args[7], types.float64)
        gvec = b.insert_element(ir.Constant(vd, ir.Undefined), g, ir.Constant(ir.IntType(32), 0))
        gvec = b.shuffle_vector(gvec, ir.Constant(vd, ir.Undefined), ir.Constant(ir.VectorType(ir.IntType(32), W), [0] * W))
        use_gate_ = context.cast(b, args[8], signature.args[8], types.boolean)
        fabs = cgutils.get_or_insert_function(b.module, ir.FunctionType(vd, [vd]), "llvm.fabs.v4f64")
        one, zero = ir.Constant(vf, [ir.Constant(fty, 1.0)] * W), ir.Constant(vf, [ir.Constant(fty, 0.0)] * W)
        mone = ir.Constant(vf, [ir.Constant(fty, -1.0)] * W)

        def vptr(p, i, t):
            return b.bitcast(b.gep(p, [i]), t.as_pointer())

        with cgutils.for_range_slice(b, ir.Constant(intp, 0), ival(6), ir.Constant(intp, W), intp=intp) as (i, _):
            zv = b.load(vptr(zp, i, vf), align=align)
            zd = b.fpext(zv, vd) if fty != dty else zv
            xh = b.fmul(b.fsub(zd, b.load(vptr(mup, i, vd), align=8)), b.load(vptr(rp, i, vd), align=8))
            gated = b.select(b.fcmp_ordered(">", b.call(fabs, [xh]), gvec), one, zero)
            signed = b.select(b.fcmp_ordered(">=", xh, ir.Constant(vd, [ir.Constant(dty, 0.0)] * W)), one, mone)
            b.store(b.select(use_gate_, gated, signed), vptr(hp, i, vf), align=align)
        return context.get_dummy_value()

    return sig, codegen


@njit(cache=True, error_model="numpy", nogil=True, boundscheck=False, fastmath=False)
def lane_norm_act(z, zo, st, mo, h, ho, n, gate, use_gate):
    """A hidden layer's normalised activations of ``n`` lanes (a multiple of 4): with ``xh = (z[zo + j] -
    st[1, mo + j]) * st[3, mo + j]`` in float64 (``st[1]``: means, ``st[3]``: ``1 / sqrt(var + eps)``),
    ``h[ho + j] = 1[|xh| > gate]`` (``use_gate``, :func:`bimu.engine.scalar.gate_forward`) else
    ``+1 if xh >= 0 else -1``, as :func:`bimu.engine.binary_ops.layer_norm_act` computes them.

    >>> import numpy as np
    >>> z = np.array([0.5, -2.0, 3.0, 0.0], np.float32); st = np.zeros((4, 4)); st[3] = 1.0
    >>> h = np.zeros(4, np.float32); lane_norm_act(z, 0, st, 0, h, 0, 4, 1.0, True); h.tolist()
    [0.0, 1.0, 1.0, 0.0]
    >>> lane_norm_act(z, 0, st, 0, h, 0, 4, 1.0, False); h.tolist()
    [1.0, -1.0, 1.0, 1.0]
    """
    _norm_act_vec(z, zo, st, mo, h, ho, n, gate, use_gate)

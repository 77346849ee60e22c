"""Hard-sample evaluation with the first layer summed by groups of four inputs (numba).

:func:`grouped_forward` computes what :func:`bimu.engine.hard_eval.hard_forward` computes (logits of K
hard weight samples, weights +-1) with far fewer operations in the first layer, in a different but fixed
order of summation. The inputs are taken in groups of four, in input order (a last partial group is
padded with zero inputs whose weights count as +1). For each group ``g`` of inputs ``x0 .. x3`` and
each of the 16 sign patterns ``p`` (bit ``i`` of ``p`` set when the weight of ``x_i`` is -1, so
``s_i = -1``, else ``s_i = +1``) the kernel builds the table entry

    ``T_g[p] = (s0 * x0 + s1 * x1) + (s2 * x2 + s3 * x3)``

each product exact (a sign change), each of the three additions rounded once in the inputs' float
type. A weight row's pre-activation is ``z = (((0 + T_0[p_0]) + T_1[p_1]) + ...) + T_{G-1}[p_{G-1}]``,
the groups added one after the other, ``p_g`` the row's pattern in group ``g``: one addition per four
weights, against one multiply-add per weight for :func:`~bimu.engine.hard_eval.hard_forward`.

The upper layers, LayerNorm, the activation and the output are those of
:func:`~bimu.engine.hard_eval.hard_forward` (their sums are of small integers, exact in any order).
Every example's sums run in their own vector lane, so an example's logits do not depend on its batch,
on the thread count or on the machine's vector width; they differ from
:func:`~bimu.engine.hard_eval.hard_forward`'s (the order of training's sums) by float rounding.
The fused BiMU and BayesBiNN methods evaluate with it under the hyperparameter ``eval_sum="grouped"``.

>>> import numpy as np
>>> x = np.array([1.0, 2.0, 4.0, 8.0, 16.0], np.float32)
>>> w = np.array([1.0, -1.0, 1.0, 1.0, -1.0], np.float32)
>>> float(grouped_sum_reference(x, w))  # ((0 + ((1 - 2) + (4 + 8))) + ((-16 + 0) + (0 + 0)))
-5.0
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import get_thread_id, njit, prange, types
from numba.extending import intrinsic

from bimu.engine.binary_ops import binary_config
from bimu.engine.hard_eval import (EVAL_CHUNKS, all_signs, interleave_weights, lane_block_pass, lane_scratch,
                                   load_inputs)
from bimu.engine.lanes import LANE_VECS, lane_block, lane_position
from bimu.engine.scalar import KERNEL_OPTS

GROUP = 4
"""Inputs per group: a table of ``2 ** GROUP`` signed sums per group."""
PATTERNS = 1 << GROUP
"""Table entries per group (sign patterns)."""
TABLE_GROUPS = 6
"""Groups whose tables are built at once for a block of examples (:data:`PATTERNS` entries of
``EVAL_CHUNKS * lane_block`` examples each: 24 KB, float32 or float64, within the first-level cache)."""


def grouped_sum_reference(x: np.ndarray, w: np.ndarray):
    """One pre-activation in :mod:`bimu.engine.grouped_eval`'s order, by plain loops (the definition, for
    tests): ``x`` the inputs, ``w`` one row of +-1 weights, both of the same float type.

    >>> x = np.array([0.1, 0.2, 0.3], np.float32); w = np.array([1.0, 1.0, -1.0], np.float32)
    >>> bool(grouped_sum_reference(x, w) == np.float32(np.float32(0.1) + np.float32(0.2)) + (-np.float32(0.3)))
    True
    """
    dt = x.dtype.type
    z = dt(0.0)
    for g in range(0, len(x), GROUP):
        s = []
        for i in range(g, g + GROUP):
            s.append(x[i] if i < len(x) and w[i] > 0 else (-x[i] if i < len(x) else dt(0.0)))
        z = dt(z + dt(dt(s[0] + s[1]) + dt(s[2] + s[3])))
    return z


class _Gen:
    """What both intrinsics' code generators use: the builder, the types of a block's lane vectors
    (256-bit, ``NB = EVAL_CHUNKS * lane_block`` examples) and the arguments as LLVM values."""

    def __init__(self, context, builder, signature, args, dt):
        self.context, self.b, self.signature, self.args = context, builder, signature, args
        self.intp = context.get_value_type(types.intp)
        self.fty = context.get_value_type(dt)
        self.L = 8 if dt == types.float32 else 4
        self.NB = EVAL_CHUNKS * LANE_VECS * self.L
        self.vty = ir.VectorType(self.fty, self.L)
        self.align = context.get_abi_sizeof(self.fty)

    def C(self, v):
        return ir.Constant(self.intp, v)

    def ival(self, i):
        return self.context.cast(self.b, self.args[i], self.signature.args[i], types.intp)

    def data(self, i):
        return self.context.make_array(self.signature.args[i])(self.context, self.b, self.args[i]).data

    def vptr(self, p, off):
        return self.b.bitcast(self.b.gep(p, [off]), self.vty.as_pointer())

    def load(self, p, off):
        return self.b.load(self.vptr(p, off), align=self.align)

    def store(self, v, p, off):
        self.b.store(v, self.vptr(p, off), align=self.align)


def _make_rows(R):
    """The intrinsic that adds the table entries of ``G`` groups to ``R`` rows' running sums."""

    @intrinsic
    def _kernel(typingctx, T, P, po, ps, G, Z, zo, zs):
        if not (isinstance(T, types.Array) and isinstance(Z, types.Array) and isinstance(P, types.Array)
                and T.ndim == Z.ndim == P.ndim == 1 and T.dtype == Z.dtype and P.dtype == types.uint8
                and T.dtype in (types.float32, types.float64)):
            return None
        sig = types.void(T, P, po, ps, G, Z, zo, zs)

        def codegen(context, builder, signature, args):
            from numba.core import cgutils

            q = _Gen(context, builder, signature, args, T.dtype)
            b, C, NB, L = builder, q.C, q.NB, q.L
            tp, pp, zp = q.data(0), b.gep(q.data(1), [q.ival(2)]), b.gep(q.data(5), [q.ival(6)])
            ps_, zs_ = q.ival(3), q.ival(7)
            accs = [[cgutils.alloca_once(b, q.vty) for _ in range(NB // L)] for _ in range(R)]
            for r in range(R):
                for v, acc in enumerate(accs[r]):
                    b.store(q.load(zp, b.add(b.mul(C(r), zs_), C(v * L))), acc)
            with cgutils.for_range(b, q.ival(4), intp=q.intp) as gl:
                g = gl.index
                for r in range(R):
                    pat = b.zext(b.load(b.gep(pp, [b.add(b.mul(C(r), ps_), g)])), q.intp)
                    row = b.gep(tp, [b.mul(b.add(b.mul(g, C(PATTERNS)), pat), C(NB))])
                    for v, acc in enumerate(accs[r]):
                        b.store(b.fadd(b.load(acc), q.load(row, C(v * L))), acc)
            for r in range(R):
                for v, acc in enumerate(accs[r]):
                    q.store(b.load(acc), zp, b.add(b.mul(C(r), zs_), C(v * L)))
            return context.get_dummy_value()

        return sig, codegen

    return _kernel


_rows2 = _make_rows(2)
_rows1 = _make_rows(1)


@njit(fastmath=False, **KERNEL_OPTS)
def table_rows(T, P, po, ps, G, Z, zo, zs, rows):
    """Add to the running sums of ``rows`` (1 or 2) weight rows the table entries of ``G`` groups: row
    ``r``'s sum of block example ``j`` is ``Z[zo + r * zs + j]``, its pattern in group ``g`` is ``P[po + r *
    ps + g]``, and entry ``p`` of group ``g`` is ``T[(g * 16 + p) * NB + j]`` (``NB = EVAL_CHUNKS *
    lane_block(T)`` examples), added one group after the other. The caller guarantees the ranges.

    >>> import numpy as np
    >>> NB = 64; T = np.arange(2 * 16 * NB, dtype=np.float32); Z = np.zeros(NB, np.float32)
    >>> table_rows(T, np.array([3, 5], np.uint8), 0, 2, 2, Z, 0, NB, 1)
    >>> bool(Z[1] == T[3 * NB + 1] + T[(16 + 5) * NB + 1])
    True
    """
    if rows == 2:
        _rows2(T, P, po, ps, G, Z, zo, zs)
    else:
        _rows1(T, P, po, ps, G, Z, zo, zs)


@njit(fastmath=False, **KERNEL_OPTS)
def weight_patterns(W, K, n_out, n_in):
    """The first layer's sign patterns of the K weight sets in ``W`` (layout of
    :mod:`bimu.engine.sampling`): ``P[(k * n_out + o) * G + g]`` has bit ``i`` set when weight ``4 g + i``
    of row ``o`` is negative (``G = ceil(n_in / 4)``; inputs past ``n_in`` count as +1).

    >>> import numpy as np
    >>> weight_patterns(np.array([-1.0, 1.0, 1.0, -1.0, -1.0]), 1, 1, 5).tolist()
    [9, 1]
    """
    G = (n_in + GROUP - 1) // GROUP
    P = np.empty(K * n_out * G, dtype=np.uint8)
    for r in range(K * n_out):
        w = W[r * n_in:(r + 1) * n_in]
        for g in range(G):
            p = 0
            for i in range(min(GROUP, n_in - g * GROUP)):
                p |= (1 if w[g * GROUP + i] < 0 else 0) << i
            P[r * G + g] = p
    return P


@intrinsic
def _tables_vec(typingctx, X, o0, o1, o2, o3, T, to):
    """LLVM vector code of one lane block's entries in :func:`build_tables`."""
    if not (isinstance(X, types.Array) and isinstance(T, types.Array) and X.ndim == T.ndim == 1
            and X.dtype == T.dtype and X.dtype in (types.float32, types.float64)):
        return None
    sig = types.void(X, o0, o1, o2, o3, T, to)

    def codegen(context, builder, signature, args):
        q = _Gen(context, builder, signature, args, X.dtype)
        b, C, NB, L = builder, q.C, q.NB, q.L
        xp, tp = q.data(0), b.gep(q.data(5), [q.ival(6)])
        for v in range(LANE_VECS):
            x = [q.load(xp, b.add(q.ival(1 + i), C(v * L))) for i in range(GROUP)]
            nx = [b.fneg(a) for a in x]
            pair01 = [b.fadd(nx[0] if p & 1 else x[0], nx[1] if p & 2 else x[1]) for p in range(4)]
            pair23 = [b.fadd(nx[2] if p & 1 else x[2], nx[3] if p & 2 else x[3]) for p in range(4)]
            for p in range(PATTERNS):
                q.store(b.fadd(pair01[p & 3], pair23[p >> 2]), tp, C(p * NB + v * L))
        return context.get_dummy_value()

    return sig, codegen


@njit(fastmath=False, **KERNEL_OPTS)
def build_tables(X, D, c0, gc, T):
    """The tables of groups ``c0 .. c0 + gc - 1`` of a block's inputs ``X`` (layout of
    :func:`bimu.engine.hard_eval.load_inputs`; ``X[D * NB:][:lane_block]`` holds zeros, the padding
    inputs): group ``c0 + q``'s entry ``p`` of block example ``j`` at ``T[(q * 16 + p) * NB + j]``, that is
    ``(s0 x0 + s1 x1) + (s2 x2 + s3 x3)`` with ``s_i = -1`` where bit ``i`` of ``p`` is set.

    >>> import numpy as np
    >>> X = np.zeros(5 * 64 + 64, np.float32)  # 4 lane blocks of 16 examples, inputs 1, 2, 4, 8, 16
    >>> X[:320] = np.repeat(np.tile([1, 2, 4, 8, 16], 4), 16)
    >>> T = np.zeros(2 * 16 * 64, np.float32); build_tables(X, 5, 0, 2, T)
    >>> [float(T[p * 64 + 63]) for p in (0, 1, 2, 15)], float(T[16 * 64]), float(T[17 * 64])
    ([15.0, 13.0, 11.0, -15.0], 16.0, -16.0)
    """
    CH = lane_block(X)
    NB = EVAL_CHUNKS * CH
    for q in range(gc):
        i0 = (c0 + q) * GROUP
        for ch in range(EVAL_CHUNKS):
            _tables_vec(X, _input_at(i0, D, ch, CH, NB), _input_at(i0 + 1, D, ch, CH, NB),
                        _input_at(i0 + 2, D, ch, CH, NB), _input_at(i0 + 3, D, ch, CH, NB), T,
                        q * PATTERNS * NB + ch * CH)


@njit(inline="always", **KERNEL_OPTS)
def _input_at(i, D, ch, CH, NB):
    """Offset of input ``i`` of lane block ``ch`` in a block's inputs (:func:`build_tables`); inputs past
    ``D`` read the zeros at ``D * NB``."""
    return (ch * D + lane_position(i, D)) * CH if i < D else D * NB


@njit(fastmath=False, **KERNEL_OPTS)
def grouped_forward(Xp, B, W, sizes, poff, cfg, hp, K, threads, n_pool, out):
    """Logits ``out [K, B, C]`` of the first ``B`` rows of ``Xp`` under the K hard (+-1) weight sets in
    ``W`` (layout of :mod:`bimu.engine.sampling`), the first layer summed by groups of four inputs (see
    the module), the rest as :func:`bimu.engine.hard_eval.hard_forward`; the same arguments.
    ``threads > 1`` splits the blocks of examples over threads (``n_pool``: numba's pool size); the
    results do not depend on it. Weights other than +-1 raise ValueError."""
    L, _, act, out_norm, _, gate, eps = binary_config(sizes, cfg, hp)
    if not all_signs(W, K * poff[L]):
        raise ValueError("grouped_forward needs hard weights (+1 or -1)")
    woff = np.zeros(L + 1, dtype=np.int64)
    Wb = interleave_weights(W, sizes, poff, K, True, woff)
    P = weight_patterns(W, K, sizes[1], sizes[0])
    NB = EVAL_CHUNKS * lane_block(Xp)
    pool = n_pool if threads > 1 else 1
    maxr, XS, ZS, HS, ST = lane_scratch(Xp, sizes, K, pool)
    TS = np.empty((pool, TABLE_GROUPS * PATTERNS * NB), dtype=Xp.dtype)
    nblk = (B + NB - 1) // NB
    if threads > 1:
        _parallel_blocks(Xp, B, Wb, woff, P, sizes, act, out_norm, gate, eps, K, nblk, maxr, XS, ZS, HS, TS, ST, out)
    else:
        for blk in range(nblk):
            _grouped_block(Xp, B, Wb, woff, P, sizes, act, out_norm, gate, eps, K, blk, maxr, XS[0], ZS[0], HS[0],
                           TS[0], ST[0], out)


@njit(parallel=True, fastmath=False, **KERNEL_OPTS)
def _parallel_blocks(Xp, B, Wb, woff, P, sizes, act, out_norm, gate, eps, K, nblk, maxr, XS, ZS, HS, TS, ST, out):
    """:func:`grouped_forward`'s blocks over numba's threads (thread ``t`` uses row ``t`` of the scratch)."""
    for blk in prange(nblk):
        t = get_thread_id()
        _grouped_block(Xp, B, Wb, woff, P, sizes, act, out_norm, gate, eps, K, blk, maxr, XS[t], ZS[t], HS[t], TS[t],
                       ST[t], out)


@njit(fastmath=False, **KERNEL_OPTS)
def _grouped_block(Xp, B, Wb, woff, P, sizes, act, out_norm, gate, eps, K, blk, maxr, X, Z, H, T, st, out):
    """One block of examples: the first layer's pre-activations by tables (:data:`TABLE_GROUPS` groups
    at a time, each row's running sum kept in ``Z`` between them), then the rest of the network by
    :func:`bimu.engine.hard_eval.lane_block_pass`."""
    D = sizes[0]
    n0 = sizes[1]
    NB = EVAL_CHUNKS * lane_block(Xp)
    b0 = blk * NB
    G = (D + GROUP - 1) // GROUP
    load_inputs(Xp, b0, min(NB, B - b0), D, X)
    for k in range(K):
        for o in range(n0):
            Z[(k * maxr + o) * NB:(k * maxr + o + 1) * NB] = 0
    for c0 in range(0, G, TABLE_GROUPS):
        gc = min(TABLE_GROUPS, G - c0)
        build_tables(X, D, c0, gc, T)
        for k in range(K):
            for o in range(0, n0, 2):
                table_rows(T, P, (k * n0 + o) * G + c0, G, gc, Z, (k * maxr + o) * NB, NB, min(2, n0 - o))
    lane_block_pass(Xp, B, Wb, woff, sizes, act, out_norm, gate, eps, K, blk, True, maxr, X, Z, H, st, out, 1)

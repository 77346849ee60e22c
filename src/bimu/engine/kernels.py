"""Compiled kernels of the fused online loop (numba, ``cache=True``).

Network layout: ``sizes = [in, hidden..., out]``; layer ``l`` has ``out_l x in_l`` natural parameters
stored row-major at ``lam[poff[l]:poff[l+1]]`` (``poff`` the cumulative offsets, ``P = poff[-1]``).
Weight samples live in ``W`` (``K * P`` values): layer ``l``, sample ``k``, row ``o``, column ``i`` at
``K * poff[l] + k * out_l * in_l + o * in_l + i``. Activation buffers are flat too: layer ``l``'s
pre-activations of sample ``k``, example ``b`` start at ``hoff[l] + (k * B + b) * out_l``.

Determinism: every dot product is computed by :func:`dot8` (one compiled function, fixed order), every
other reduction runs in a fixed serial order, and all randomness comes from counters
(:mod:`bimu.engine.rng`), so results do not depend on the number of threads, on the batch an example
is evaluated in, or on how steps are grouped into calls. No ``fastmath`` flag is used (no FMA
contraction, no reassociation) except FMA contraction (``fastmath={"contract"}``)
in every kernel that computes ``exp(-2|lambda|)`` or relaxed samples (:func:`sample_weights`,
:func:`train_steps` and :func:`bimu.engine.fastpath.row_step`), so that all of them compute those values
identically; ``error_model='numpy'`` lets divisions vectorise.

Integer configuration ``cfg``: ``[activation (:data:`ACT_GATE` or :data:`ACT_SIGN`), output_norm,
update kind (0 BiMU, 1 BayesBiNN), prior is per-parameter, K]``. Float hyperparameters ``hp`` (in the working dtype):
see :data:`HP_FIELDS`.
"""

from __future__ import annotations

import math

import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.extending import intrinsic, overload

from bimu.engine.rng import GOLDEN

HP_FIELDS = (
    "gamma_beta_l",  # BiMU: gamma * beta_L (data term)        | BayesBiNN: lr
    "two_beta_l",  # BiMU: 2 beta_L (asymmetry)                 | BayesBiNN: unused
    "beta_kl",  # BiMU: beta_KL                                 | BayesBiNN: unused
    "inv_lr_max",  # BiMU: 1 / alpha_max                        | BayesBiNN: unused
    "kl_over_n",  # BiMU: beta_KL / N (forgetting)              | BayesBiNN: coefficient c of (lam - prior)
    "prior",  # scalar lambda_prior (when the prior is not per-parameter)
    "inv_temperature",  # 1 / T
    "gate_width",  # RBG threshold a
    "ln_eps",  # LayerNorm epsilon
)
"""Order of the float hyperparameter vector ``hp`` passed to the kernels."""

ACT_RELU = 0
"""Hidden activation ``max(z, 0)``."""
ACT_SIGN = 1
"""Hidden activation ``sign(z)`` in {-1, +1} (``sign(0) = +1``) with the hard-tanh straight-through
derivative ``1[|z| <= 1]``."""
ACT_GATE = 2
"""Hidden activation: the Reverse Binary Gate ``1[|z| > gate]`` in {0, 1} (:func:`bimu.nn.rbg`) with the
derivative :func:`gate_surrogate`. One set of activation codes for every compiled network."""
KIND_BIMU = 0
KIND_BAYESBINN = 1

_OPTS = dict(cache=True, error_model="numpy", nogil=True)


# ----------------------------------------------------------------------------- scalar helpers
@intrinsic
def _i32_as_f32(typingctx, x):
    sig = types.float32(types.int32)

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.FloatType())

    return sig, codegen


def fexp(x):
    """``exp(x)`` for ``x <= 0``: a vectorisable float32 version (relative error < 1e-7), libm for float64."""
    return math.exp(x)


@overload(fexp, inline="always")
def _fexp_overload(x):
    if x == types.float32:

        def impl(x):
            x = max(x, np.float32(-87.0))
            nf = (x * np.float32(1.4426950408889634) + np.float32(12582912.0)) - np.float32(12582912.0)
            r = x - nf * np.float32(0.693145751953125) - nf * np.float32(1.428606765330187e-06)
            p = np.float32(1.0 / 5040.0)
            p = p * r + np.float32(1.0 / 720.0)
            p = p * r + np.float32(1.0 / 120.0)
            p = p * r + np.float32(1.0 / 24.0)
            p = p * r + np.float32(1.0 / 6.0)
            p = p * r + np.float32(0.5)
            p = p * r + np.float32(1.0)
            p = p * r + np.float32(1.0)
            return p * _i32_as_f32((np.int32(nf) + np.int32(127)) << np.int32(23))

        return impl

    def impl64(x):
        return math.exp(x)

    return impl64


def as_like(v, like):
    """``v`` converted to the float type of ``like`` (a numba helper for dtype-generic kernels)."""
    return type(like)(v)


@overload(as_like, inline="always")
def _as_like_overload(v, like):
    if like == types.float32:
        return lambda v, like: np.float32(v)
    return lambda v, like: np.float64(v)


@njit(inline="always", **_OPTS)
def _hash(key, n):
    z = key + n * GOLDEN
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@njit(inline="always", **_OPTS)
def _u_hi(h, one):
    return as_like(np.int32((h >> np.uint64(41)) * np.uint64(2) + np.uint64(1)), one) * as_like(2.0**-24, one)


@njit(inline="always", **_OPTS)
def _u_lo(h, one):
    v = np.int32(((h & np.uint64(0xFFFFFFFF)) >> np.uint64(9)) * np.uint64(2) + np.uint64(1))
    return as_like(v, one) * as_like(2.0**-24, one)


def _u32_binop(op):
    @intrinsic
    def _impl(typingctx, a, b):
        sig = types.uint32(types.uint32, types.uint32)

        def codegen(context, builder, signature, args):
            return getattr(builder, op)(args[0], args[1])

        return sig, codegen

    return _impl


# 32-bit unsigned arithmetic that stays 32-bit (numba widens uint32 arithmetic to 64 bits, and 64-bit
# vector multiplies are slow without AVX-512)
_add32 = _u32_binop("add")
_mul32 = _u32_binop("mul")
_xor32 = _u32_binop("xor")
_shr32 = _u32_binop("lshr")


@njit(inline="always", **_OPTS)
def _row_key(key, step, P, e0):
    """The 64-bit key of the weight row starting at parameter ``e0`` at training step ``step``, as two
    uint32 halves ``(low, high)``: ``hash(key, step * P + e0)``."""
    r = _hash(key, np.uint64(step) * np.uint64(P) + np.uint64(e0))
    return np.uint32(r & np.uint64(0xFFFFFFFF)), np.uint32(r >> np.uint64(32))


@njit(inline="always", **_OPTS)
def _h32(rlo, rhi, idx):
    """32-bit hash of index ``idx`` within a row with key ``(rlo, rhi)`` (lowbias32 rounds, ``rhi``
    mixed in between)."""
    x = _add32(_mul32(idx, np.uint32(0x9E3779B9)), rlo)
    x = _xor32(x, _shr32(x, np.uint32(16)))
    x = _mul32(x, np.uint32(0x7FEB352D))
    x = _xor32(x, _shr32(x, np.uint32(15)))
    x = _xor32(x, rhi)
    x = _mul32(x, np.uint32(0x846CA68B))
    return _xor32(x, _shr32(x, np.uint32(16)))


@njit(inline="always", **_OPTS)
def _u32(x, one):
    """``(2 (x >> 9) + 1) / 2**24`` in the float type of ``one`` (exact)."""
    return as_like(np.int32(_shr32(x, np.uint32(9))), one) * as_like(2.0**-23, one) + as_like(2.0**-24, one)


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


# ----------------------------------------------------------------------------- sampling
@njit(inline="always", **_OPTS)
def _hash_row(HB, e0, n, key, cbase, kh, m):
    """``HB[e0 + i] = hash(key, cbase + (e0 + i) * kh + m)`` for ``i < n``."""
    ukh = np.uint64(kh)
    start = cbase + np.uint64(e0) * ukh + np.uint64(m)
    for i in range(n):
        HB[e0 + i] = _hash(key, start + np.uint64(i) * ukh)


@njit(inline="always", **_OPTS)
def _relaxed_row(lam, bt, W, HB, e0, wb, kstride, n, K, key, step, inv_t):
    """Relaxed samples ``w = tanh((lam + 0.5 logit u) / T)`` of one row for all K samples of training
    step ``step`` (``bt[e] = exp(-2 |lam[e]|)``; uniforms of :func:`bimu.engine.rng.relaxed_uniforms`).

    For T = 1, ``tanh(lam + 0.5 logit u) = (u (1 + b) - p) / (p + u q)`` with ``b = exp(-2 |lam|)``,
    ``p = b, q = 1 - b`` if ``lam >= 0``, else ``p = 1, q = b - 1``: no log or tanh per sample.
    """
    one = as_like(1.0, lam[e0])
    half = as_like(0.5, one)
    P = lam.shape[0]
    rlo, rhi = _row_key(key, step, P, e0)
    l_ = lam[e0:e0 + n]
    b_ = bt[e0:e0 + n]
    for k in range(K):
        w_ = W[wb + k * kstride:wb + k * kstride + n]
        if inv_t == one:
            for i in range(n):
                u = _u32(_h32(rlo, rhi, np.uint32(i * K + k)), one)
                b = b_[i]
                pos = l_[i] >= 0
                p = b if pos else one
                q = (one - b) if pos else (b - one)
                w_[i] = (u * (one + b) - p) / (p + u * q)
        else:
            for i in range(n):
                u = _u32(_h32(rlo, rhi, np.uint32(i * K + k)), one)
                w_[i] = math.tanh((l_[i] + half * math.log(u / (one - u))) * inv_t)


@njit(inline="always", **_OPTS)
def _hard_from_hash(W, wo, HB, lam, bt, e0, n, high):
    """Hard samples ``w = +1 iff u < sigmoid(2 lam)``, tested as ``u (1 + b) < 1`` (lam >= 0) or
    ``u (1 + b) < b`` (lam < 0)."""
    one = as_like(1.0, lam[e0])
    if high:
        for i in range(n):
            b = bt[e0 + i]
            thr = one if lam[e0 + i] >= 0 else b
            W[wo + i] = one if _u_hi(HB[e0 + i], one) * (one + b) < thr else -one
    else:
        for i in range(n):
            b = bt[e0 + i]
            thr = one if lam[e0 + i] >= 0 else b
            W[wo + i] = one if _u_lo(HB[e0 + i], one) * (one + b) < thr else -one


@njit(inline="always", **_OPTS)
def _hard_row(lam, bt, W, HB, e0, wb, kstride, n, K, key, cbase):
    """Hard samples of one row for all K samples."""
    kh = (K + 1) // 2
    for m in range(kh):
        _hash_row(HB, e0, n, key, cbase, kh, m)
        k0 = 2 * m
        _hard_from_hash(W, wb + k0 * kstride, HB, lam, bt, e0, n, True)
        if k0 + 1 < K:
            _hard_from_hash(W, wb + (k0 + 1) * kstride, HB, lam, bt, e0, n, False)


@njit(parallel=True, fastmath={"contract"}, **_OPTS)
def sample_weights(lam, W, sizes, poff, K, key, cbase, hard, inv_t):
    """Fill ``W`` with K hard samples of every layer from evaluation counters ``cbase`` (``hard=True``)
    or with the K relaxed samples of training step ``cbase`` (``hard=False``)."""
    L = sizes.shape[0] - 1
    m2 = as_like(-2.0, lam[0])
    bt = np.empty_like(lam)
    HB = np.empty(lam.shape[0], dtype=np.uint64)
    for e in prange(lam.shape[0]):
        bt[e] = fexp(m2 * abs(lam[e]))
    for l in range(L):
        n_in = sizes[l]
        n_out = sizes[l + 1]
        kstride = n_in * n_out
        for o in prange(n_out):
            e0 = poff[l] + o * n_in
            wb = K * poff[l] + o * n_in
            if hard:
                _hard_row(lam, bt, W, HB, e0, wb, kstride, n_in, K, key, cbase)
            else:
                _relaxed_row(lam, bt, W, HB, e0, wb, kstride, n_in, K, key, cbase, inv_t)


# ----------------------------------------------------------------------------- network pieces
@njit(inline="always", **_OPTS)
def _layer_norm_act(Z, XH, A, r_out, base, n, eps, act, gate, hidden):
    """LayerNorm (no affine, biased variance) of ``Z[base:base+n]`` then the activation (if hidden)."""
    s = 0.0
    for o in range(n):
        s += Z[base + o]
    mu = s / n
    v = 0.0
    for o in range(n):
        d = Z[base + o] - mu
        v += d * d
    v = v / n
    r = 1.0 / math.sqrt(v + eps)
    r_out[0] = r
    one = as_like(1.0, Z[base])
    for o in range(n):
        xh = (Z[base + o] - mu) * r
        XH[base + o] = xh
        if hidden:
            if act == ACT_GATE:
                A[base + o] = gate_forward(xh, gate)
            else:
                A[base + o] = one if xh >= 0 else -one
        else:
            A[base + o] = xh


@njit(inline="always", **_OPTS)
def ln_backward(DA, da0, XH, x0, DZ, r, n):
    """LayerNorm (no affine) backward in place: ``DZ[x0:x0+n] = r (g - mean(g) - xh mean(g xh))``
    with ``g = DA[da0:da0+n]``, ``xh = XH[x0:x0+n]`` the normalised values, ``r = 1/sqrt(var + eps)``."""
    s1 = 0.0
    s2 = 0.0
    for i in range(n):
        s1 += DA[da0 + i]
        s2 += DA[da0 + i] * XH[x0 + i]
    s1 /= n
    s2 /= n
    for i in range(n):
        DZ[x0 + i] = r * (DA[da0 + i] - s1 - XH[x0 + i] * s2)


@njit(inline="always", **_OPTS)
def bimu_lambda_step(lo, g, b, gbl, two_bl, bkl, ilm, kln, pr0):
    """One natural parameter's BiMU step in the one-division form of the fused row passes.

    With ``b = exp(-2 |lambda|)``: ``1 - tanh^2 = 4b / (1+b)^2`` and ``tanh = +-(1-b)/(1+b)``; numerator
    and denominator of ``eta * (gamma beta_L g + beta_KL/N (lambda - prior)(1 - tanh^2))`` multiplied by
    ``(1+b)^2``. ``gbl, two_bl, bkl, ilm, kln, pr0``: :data:`HP_FIELDS` 0-5 (``gamma beta_L``, ``2 beta_L``,
    ``beta_KL``, ``1/alpha_max``, ``beta_KL/N``, ``lambda_prior``). Inlined, so every caller compiles the
    same arithmetic.

    >>> import math
    >>> lo, g = 0.3, 0.05
    >>> t = math.tanh(lo); var = 1 - t * t
    >>> eta = 1 / (2.0 * var + 2 * 10.0 * (t * g + abs(g)) + 1 / 0.01)
    >>> ref = lo - eta * (5.0 * 10.0 * g + 2.0 / 700 * (lo - 0.0) * var)
    >>> abs(bimu_lambda_step(lo, g, math.exp(-2 * lo), 50.0, 20.0, 2.0, 100.0, 2.0 / 700, 0.0) - ref) < 1e-15
    True
    """
    one = as_like(1.0, lo)
    four = as_like(4.0, lo)
    d1 = one + b
    d2 = d1 * d1
    fb = four * b
    tt = (one - b) * d1
    tt = tt if lo >= 0 else -tt
    num = gbl * g * d2 + kln * (lo - pr0) * fb
    den = bkl * fb + two_bl * (tt * g + abs(g) * d2) + ilm * d2
    return lo - num / den


@njit(inline="always", **_OPTS)
def bayesbinn_lambda_step(lo, g, b, lr, cpr, p, eps):
    """One natural parameter's BayesBiNN step in the form of the fused row passes (``b = exp(-2|lambda|)``):
    ``lambda - lr g / (1 - tanh^2 lambda) - cpr (lambda - p)`` with ``1 / (1 - tanh^2) = (1+b)^2 / (4b)``;
    with ``eps > 0`` (``ratio_eps``; ``g`` then already carries the ``+ eps`` of each sample's
    ``1 - w^2``) the denominator is ``(1 - mu * mu) + eps``, ``|mu| = (1 - b) / (1 + b)``, computed as
    written in the type of ``lo`` (:func:`bimu.optim.bayesbinn.relaxation_jacobian_ratio`).

    >>> import math
    >>> ref = 0.3 - 0.1 * 0.05 / (1 - math.tanh(0.3) ** 2) - 1e-3 * (0.3 - 0.2)
    >>> abs(bayesbinn_lambda_step(0.3, 0.05, math.exp(-0.6), 0.1, 1e-3, 0.2, 0.0) - ref) < 1e-15
    True
    >>> ref = 0.3 - 0.1 * 0.05 / ((1 - math.tanh(0.3) ** 2) + 1e-3) - 1e-3 * (0.3 - 0.2)
    >>> abs(bayesbinn_lambda_step(0.3, 0.05, math.exp(-0.6), 0.1, 1e-3, 0.2, 1e-3) - ref) < 1e-15
    True
    """
    one = as_like(1.0, lo)
    if eps == 0:
        d1 = one + b
        return lo - lr * ((g * (d1 * d1)) / (as_like(4.0, lo) * b)) - cpr * (lo - p)
    t = (one - b) / (one + b)
    return lo - lr * (g / ((one - t * t) + eps)) - cpr * (lo - p)


@njit(inline="always", **_OPTS)
def gate_forward(z, gate):
    """The Reverse Binary Gate ``1[|z| > gate]`` (:func:`bimu.nn.rbg`), compared and returned in the type
    of ``z``.

    >>> import numpy as np
    >>> [float(gate_forward(np.float32(v), 1.0)) for v in (-1.5, -1.0, 0.3, 1.0, 2.0)]
    [1.0, 0.0, 0.0, 0.0, 1.0]
    """
    return as_like(1.0, z) if abs(z) > as_like(gate, z) else as_like(0.0, z)


@njit(inline="always", **_OPTS)
def gate_surrogate(z, gate):
    """The Reverse Binary Gate's surrogate derivative (:func:`bimu.nn.rbg`): 1 on ``(gate/2, 3 gate/2)``,
    -1 on ``(-3 gate/2, -gate/2)``, 0 elsewhere, compared in the type of ``z`` (as torch compares a
    float32 tensor with a Python float).

    >>> import numpy as np
    >>> [gate_surrogate(np.float32(v), 1.0) for v in (0.7, -1.2, 1.5, 0.2)]
    [1.0, -1.0, 0.0, 0.0]
    """
    if as_like(0.5 * gate, z) < z < as_like(1.5 * gate, z):
        return as_like(1.0, z)
    if as_like(-1.5 * gate, z) < z < as_like(-0.5 * gate, z):
        return as_like(-1.0, z)
    return as_like(0.0, z)


@njit(inline="always", **_OPTS)
def _act_grad(xh, act, gate):
    """Derivative of the hidden activation ``act`` (:data:`ACT_GATE` or :data:`ACT_SIGN`) at ``xh``."""
    if act == ACT_GATE:
        return gate_surrogate(xh, gate)
    return as_like(1.0, xh) if abs(xh) <= 1.0 else as_like(0.0, xh)


# ----------------------------------------------------------------------------- training
@njit(parallel=True, fastmath={"contract"}, **_OPTS)
def train_steps(X, Y, n_steps, B, lam, prior, W, sizes, poff, cfg, hp, key, step0):
    """Run ``n_steps`` online steps of batch ``B`` (rows ``j*B..(j+1)*B`` of ``X`` / ``Y``).

    ``W`` must hold the relaxed samples of step ``step0`` (counters of :mod:`bimu.engine.rng`); on
    return ``lam`` is updated and ``W`` holds the samples of step ``step0 + n_steps``. Returns the
    number of steps whose gradient was not identically zero (the others changed nothing).
    """
    L = sizes.shape[0] - 1
    K = cfg[4]
    P = lam.shape[0]
    D = sizes[0]
    act = cfg[0]
    out_norm = cfg[1]
    kind = cfg[2]
    gate = hp[7]
    inv_t = hp[6]
    one = as_like(1.0, lam[0])
    m2 = as_like(-2.0, lam[0])
    four = as_like(4.0, lam[0])
    # BayesBiNN's ratio_eps, added to each sample's 1 - w^2 (0 for BiMU: adding it leaves the same bits)
    geps = as_like(hp[1], one) if kind != KIND_BIMU else as_like(0.0, one)
    hoff = np.zeros(L + 1, dtype=np.int64)
    maxw = 0
    for l in range(L):
        hoff[l + 1] = hoff[l] + K * B * sizes[l + 1]
        maxw = max(maxw, sizes[l])
    H = hoff[L]
    Z = np.empty(H, dtype=lam.dtype)
    XH = np.empty(H, dtype=lam.dtype)
    A = np.empty(H, dtype=lam.dtype)
    DZ = np.empty(H, dtype=lam.dtype)
    RS = np.empty(L * K * B, dtype=np.float64)
    DA = np.empty(K * B * maxw, dtype=lam.dtype)
    G = np.empty(P, dtype=lam.dtype)
    T = np.empty(P, dtype=lam.dtype)
    HB = np.empty(P, dtype=np.uint64)
    Xf = X.reshape(-1)
    n0 = sizes[1]
    k0stride = D * n0
    have_z0 = False
    applied = 0
    for j in range(n_steps):
        s = step0 + j
        xrow = j * B * D
        # ---------------- forward
        if not have_z0:
            for o in prange(n0):
                for k in range(K):
                    for b in range(B):
                        Z[(k * B + b) * n0 + o] = dot8(W, k * k0stride + o * D, Xf, xrow + b * D, D)
        for l in range(L):
            n_in = sizes[l]
            n_out = sizes[l + 1]
            if l > 0:
                kstride = n_in * n_out
                for o in prange(n_out):
                    for k in range(K):
                        wo = K * poff[l] + k * kstride + o * n_in
                        for b in range(B):
                            Z[hoff[l] + (k * B + b) * n_out + o] = dot8(
                                W, wo, A, hoff[l - 1] + (k * B + b) * n_in, n_in
                            )
            hidden = l < L - 1
            for kb in range(K * B):
                base = hoff[l] + kb * n_out
                if hidden or out_norm:
                    _layer_norm_act(Z, XH, A, RS[l * K * B + kb:], base, n_out, hp[8], act, gate, hidden)
                else:
                    for o in range(n_out):
                        A[base + o] = Z[base + o]
                        XH[base + o] = Z[base + o]
        # ---------------- loss gradient w.r.t. the logits, then the output norm
        C = sizes[L]
        lb = hoff[L - 1]
        for k in range(K):
            for b in range(B):
                base = lb + (k * B + b) * C
                mx = A[base]
                for c in range(1, C):
                    mx = max(mx, A[base + c])
                ssum = 0.0
                for c in range(C):
                    ssum += math.exp(A[base + c] - mx)
                y = Y[j * B + b]
                for c in range(C):
                    pr = math.exp(A[base + c] - mx) / ssum
                    DA[(k * B + b) * C + c] = (pr - (1.0 if c == y else 0.0)) / K
        # output-norm backward (written out to keep DA / DZ offsets explicit)
        for kb in range(K * B):
            base = lb + kb * C
            if out_norm:
                ln_backward(DA, kb * C, XH, base, DZ, RS[(L - 1) * K * B + kb], C)
            else:
                for c in range(C):
                    DZ[base + c] = DA[kb * C + c]
        # ---------------- backward through hidden layers
        for l in range(L - 1, 0, -1):
            n_in = sizes[l]
            n_out = sizes[l + 1]
            kstride = n_in * n_out
            for kb in range(K * B):
                k = kb // B
                for i in range(n_in):
                    DA[kb * n_in + i] = 0
                for o in range(n_out):
                    c = DZ[hoff[l] + kb * n_out + o]
                    wo = K * poff[l] + k * kstride + o * n_in
                    for i in range(n_in):
                        DA[kb * n_in + i] += c * W[wo + i]
                base = hoff[l - 1] + kb * n_in
                for i in range(n_in):
                    DA[kb * n_in + i] *= _act_grad(XH[base + i], act, gate)
                ln_backward(DA, kb * n_in, XH, base, DZ, RS[(l - 1) * K * B + kb], n_in)
        # ---------------- gradient w.r.t. lambda (into G), per layer, rows in parallel
        for l in range(L):
            n_in = sizes[l]
            n_out = sizes[l + 1]
            kstride = n_in * n_out
            for o in prange(n_out):
                e0 = poff[l] + o * n_in
                for i in range(n_in):
                    G[e0 + i] = 0
                for k in range(K):
                    wo = K * poff[l] + k * kstride + o * n_in
                    if B == 1:
                        c = DZ[hoff[l] + k * n_out + o] * inv_t
                        if l == 0:
                            for i in range(n_in):
                                w = W[wo + i]
                                G[e0 + i] += (c * Xf[xrow + i]) * ((one - w * w) + geps)
                        else:
                            ab = hoff[l - 1] + k * n_in
                            for i in range(n_in):
                                w = W[wo + i]
                                G[e0 + i] += (c * A[ab + i]) * ((one - w * w) + geps)
                    else:
                        for i in range(n_in):
                            T[e0 + i] = 0
                        for b in range(B):
                            c = DZ[hoff[l] + (k * B + b) * n_out + o] * inv_t
                            if l == 0:
                                xb = xrow + b * D
                                for i in range(n_in):
                                    T[e0 + i] += c * Xf[xb + i]
                            else:
                                ab = hoff[l - 1] + (k * B + b) * n_in
                                for i in range(n_in):
                                    T[e0 + i] += c * A[ab + i]
                        for i in range(n_in):
                            w = W[wo + i]
                            G[e0 + i] += T[e0 + i] * ((one - w * w) + geps)
        nonzero = False
        for e in range(P):
            if G[e] != 0:
                nonzero = True
                break
        if nonzero:
            applied += 1
        # ---------------- update, resample for step s + 1, next layer-0 pre-activations
        cbase = s + 1
        have_next = j + 1 < n_steps
        xnext = (j + 1) * B * D
        for l in range(L):
            n_in = sizes[l]
            n_out = sizes[l + 1]
            kstride = n_in * n_out
            for o in prange(n_out):
                e0 = poff[l] + o * n_in
                if nonzero:
                    if kind == KIND_BIMU:
                        gbl = hp[0]
                        two_bl = hp[1]
                        bkl = hp[2]
                        ilm = hp[3]
                        kln = hp[4]
                        pr0 = hp[5]
                        for i in range(n_in):
                            e = e0 + i
                            lo = lam[e]
                            g = G[e]
                            b = fexp(m2 * abs(lo))
                            rr = one / (one + b)
                            t = (one - b) * rr
                            t = t if lo >= 0 else -t
                            var = (four * b) * (rr * rr)
                            eta = one / (bkl * var + two_bl * (t * g + abs(g)) + ilm)
                            ln = lo - eta * (gbl * g + kln * (lo - pr0) * var)
                            lam[e] = ln
                            G[e] = fexp(m2 * abs(ln))
                    else:
                        lr = as_like(hp[0] / B, one)  # g is summed over the batch; BayesBiNN uses its mean
                        cpr = hp[4]
                        pr0 = hp[5]
                        for i in range(n_in):
                            e = e0 + i
                            lo = lam[e]
                            b = fexp(m2 * abs(lo))
                            if geps == 0:
                                rr = one / (one + b)
                                var = (four * b) * (rr * rr)
                                ln = lo - lr * (G[e] / var) - cpr * (lo - prior[e])
                            else:
                                ln = bayesbinn_lambda_step(lo, G[e], b, lr, cpr, prior[e], geps)
                            lam[e] = ln
                            G[e] = fexp(m2 * abs(ln))
                else:
                    for i in range(n_in):
                        G[e0 + i] = fexp(m2 * abs(lam[e0 + i]))
                wb = K * poff[l] + o * n_in
                _relaxed_row(lam, G, W, HB, e0, wb, kstride, n_in, K, key, cbase, inv_t)
                if l == 0 and have_next:
                    for k in range(K):
                        for b in range(B):
                            Z[(k * B + b) * n0 + o] = dot8(W, k * k0stride + o * D, Xf, xnext + b * D, D)
        have_z0 = have_next
    return applied


# ----------------------------------------------------------------------------- evaluation
@njit(parallel=True, fastmath=False, **_OPTS)
def hard_logits(X, lam, sizes, poff, cfg, hp, K, key, cbase):
    """Logits ``[K, B, C]`` of ``X [B, D]`` under K hard weight samples (one set per sample, shared by
    the batch), drawn from counters starting at ``cbase``; the result of an example does not depend on
    the batch it is evaluated in."""
    L = sizes.shape[0] - 1
    B = X.shape[0]
    D = sizes[0]
    P = lam.shape[0]
    C = sizes[L]
    W = np.empty(K * P, dtype=lam.dtype)
    m2 = as_like(-2.0, lam[0])
    bt = np.empty_like(lam)
    HB = np.empty(P, dtype=np.uint64)
    for e in prange(P):
        bt[e] = fexp(m2 * abs(lam[e]))
    for l in range(L):
        n_in = sizes[l]
        n_out = sizes[l + 1]
        kstride = n_in * n_out
        for o in prange(n_out):
            e0 = poff[l] + o * n_in
            _hard_row(lam, bt, W, HB, e0, K * poff[l] + o * n_in, kstride, n_in, K, key, cbase)
    out = np.empty((K, B, C), dtype=lam.dtype)
    Xf = X.reshape(-1)
    maxw = 0
    for l in range(1, L + 1):
        maxw = max(maxw, sizes[l])
    act = cfg[0]
    out_norm = cfg[1]
    gate = hp[7]
    eps = hp[8]
    nblk = (B + 3) // 4
    for blk in prange(nblk):
        b0 = blk * 4
        nb = min(4, B - b0)
        # per block: activations of up to 4 examples, all samples, current layer
        cur = np.empty(K * 4 * maxw, dtype=lam.dtype)
        nxt = np.empty(K * 4 * maxw, dtype=lam.dtype)
        xh = np.empty(K * 4 * maxw, dtype=lam.dtype)
        rs = np.empty(1, dtype=np.float64)
        for l in range(L):
            n_in = sizes[l]
            n_out = sizes[l + 1]
            kstride = n_in * n_out
            for k in range(K):
                for o in range(n_out):
                    wo = K * poff[l] + k * kstride + o * n_in
                    if l == 0:
                        for r in range(nb):
                            nxt[(k * 4 + r) * n_out + o] = dot8(W, wo, Xf, (b0 + r) * D, D)
                    else:
                        for r in range(nb):
                            nxt[(k * 4 + r) * n_out + o] = dot8(W, wo, cur, (k * 4 + r) * n_in, n_in)
            hidden = l < L - 1
            for k in range(K):
                for r in range(nb):
                    base = (k * 4 + r) * n_out
                    if hidden or out_norm:
                        _layer_norm_act(nxt, xh, cur, rs, base, n_out, eps, act, gate, hidden)
                    else:
                        for o in range(n_out):
                            cur[base + o] = nxt[base + o]
        for k in range(K):
            for r in range(nb):
                for c in range(C):
                    out[k, b0 + r, c] = cur[(k * 4 + r) * C + c]
    return out


@njit(parallel=True, fastmath=False, **_OPTS)
def scores_from_logits(logits):
    """Softmax probabilities and label-free scores from logits ``[K, B, C]``.

    Returns ``(probs [K,B,C], votes int64 [B,C], predictions [B], variation_ratio, predictive_entropy,
    aleatoric, epistemic)``; entropies in bits; votes from the per-sample argmax of the probabilities
    (first index on ties); predictions are the argmax of the mean log-softmax (the paper's rule).
    """
    K, B, C = logits.shape
    probs = np.empty_like(logits)
    votes = np.zeros((B, C), dtype=np.int64)
    pred = np.empty(B, dtype=np.int64)
    vr = np.empty(B, dtype=np.float64)
    pe = np.empty(B, dtype=np.float64)
    al = np.empty(B, dtype=np.float64)
    ep = np.empty(B, dtype=np.float64)
    inv_ln2 = 1.0 / math.log(2.0)
    for b in prange(B):
        mlp = np.zeros(C, dtype=np.float64)
        mp = np.zeros(C, dtype=np.float64)
        ex = np.empty(C, dtype=np.float64)
        hsum = 0.0
        for k in range(K):
            mx = logits[k, b, 0]
            for c in range(1, C):
                mx = max(mx, logits[k, b, c])
            s = 0.0
            for c in range(C):
                ex[c] = math.exp(logits[k, b, c] - mx)
                s += ex[c]
            ls = math.log(s)
            best = 0
            h = 0.0
            for c in range(C):
                probs[k, b, c] = ex[c] / s
                pf = probs[k, b, c]
                if pf > probs[k, b, best]:
                    best = c
                lp = (logits[k, b, c] - mx) - ls
                mlp[c] += lp
                mp[c] += pf
                if pf > 0:
                    h -= pf * lp
            votes[b, best] += 1
            hsum += h
        bc = 0
        mv = votes[b, 0]
        for c in range(C):
            if mlp[c] > mlp[bc]:
                bc = c
            mv = max(mv, votes[b, c])
        pred[b] = bc
        vr[b] = 1.0 - mv / K
        hp_ = 0.0
        for c in range(C):
            q = mp[c] / K
            if q > 0:
                hp_ -= q * math.log(q)
        pe[b] = hp_ * inv_ln2
        al[b] = hsum / K * inv_ln2
        ep[b] = max(pe[b] - al[b], 0.0)
    return probs, votes, pred, vr, pe, al, ep

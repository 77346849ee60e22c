"""Scalar numba helpers of the kernels: a vectorisable float32 ``exp`` and the Reverse Binary Gate, and
the two tools such helpers are written with (:func:`bitcast32` intrinsics and the
:func:`float32_version` decorator).

Each is inlined into its callers, so every kernel that uses one compiles the same arithmetic.
"""

from __future__ import annotations

import math

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic, overload

from bimu.rng import as_like

KERNEL_OPTS = dict(cache=True, error_model="numpy", nogil=True, boundscheck=False)
"""Options of every engine kernel: cached on disk, numpy's division semantics (divisions vectorise),
the GIL released, no bounds checks."""


def bitcast32(name, src, dst, op="bitcast"):
    """A numba intrinsic ``dst(x)`` for a 32-bit ``x`` of type ``src``: its bits reinterpreted
    (``op="bitcast"``) or converted by another LLVM cast (``"sitofp"``: a signed integer to float)."""

    @intrinsic
    def _impl(typingctx, x):
        sig = dst(src)

        def codegen(context, builder, signature, args):
            return getattr(builder, op)(args[0], ir.FloatType() if dst == types.float32 else ir.IntType(32))

        return sig, codegen

    _impl.__name__ = name
    return _impl


_i32_as_f32 = bitcast32("_i32_as_f32", types.int32, types.float32)


def float32_version(fallback):
    """Decorator of the float32 version of the scalar function ``fallback`` (a :mod:`math` function): the
    result calls ``fallback`` in Python and in compiled code on any other type, and the decorated body on
    float32, inlined into every caller."""

    def wrap(f32_impl):
        def function(x):
            return fallback(x)

        function.__name__, function.__qualname__, function.__doc__ = (f32_impl.__name__, f32_impl.__qualname__,
                                                                      f32_impl.__doc__)
        function.__module__ = f32_impl.__module__

        @overload(function, inline="always")
        def _overload(x):
            if x == types.float32:
                return f32_impl
            return lambda x: fallback(x)

        return function

    return wrap


@float32_version(math.exp)
def fexp(x):
    """``exp(x)`` for ``x <= 0``: a vectorisable float32 version (relative error < 1e-7), libm for float64."""
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


@njit(inline="always", **KERNEL_OPTS)
def gate_forward(z, gate):
    """The Reverse Binary Gate ``1[|z| > gate]`` (:func:`bimu.nn.rbg`), compared and returned in the type
    of ``z``.

    >>> import numpy as np
    >>> [float(gate_forward(np.float32(v), 1.0)) for v in (-1.5, -1.0, 0.3, 1.0, 2.0)]
    [1.0, 0.0, 0.0, 0.0, 1.0]
    """
    return as_like(1.0, z) if abs(z) > as_like(gate, z) else as_like(0.0, z)


@njit(inline="always", **KERNEL_OPTS)
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

"""Price of a fixed summation order: :func:`bimu.engine.dots.dot8` against a reassociated loop.

``dot8`` sums in one stated order (eight partial sums, a fixed tree, then the tail) with no fast-math
flag, so every machine and every compile history gets the same bits; its eight partial sums are the
lanes of one vector accumulator written out in LLVM IR. Two baselines: the same dot product compiled
with ``reassoc`` (and FMA contraction), which lets LLVM vectorise the sum in an order of its choosing
(fast, but the bits depend on the machine and the compilation), and the same order written as eight
scalar accumulators (the form before the vector one: same bits, left scalar by LLVM). This prints, for
the first layer of a BiMU step (100 rows of 784 inputs, K = 5 samples: 500 dot products), the CPU time
of each, interleaved, best of ``--repeats``, the ratios, whether each compiled to packed (``ps``) or
scalar (``ss``) float instructions, and checks that the engine's bits equal the scalar form's.

The same for evaluation's register-blocked kernel :func:`bimu.engine.dots.dot4x2` (two weight rows
by four examples, each sum in ``dot8``'s order): against the same blocking compiled with ``reassoc``
(the order LLVM's vectoriser chooses), on one evaluation block's first layer (100 rows by 32 examples
of 784 inputs), checking that every engine sum has ``dot8``'s bits.

    python benchmarks/dot_order_speed.py [--reps 100] [--repeats 7]
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import numpy as np
from numba import njit

from bimu.engine.dots import dot4x2, dot8

sys.path.insert(0, str(Path(__file__).resolve().parent))
from timing import best_cpu_seconds  # noqa: E402

_OPTS = dict(error_model="numpy", nogil=True, boundscheck=False)


@njit(fastmath={"reassoc", "nsz", "contract"}, **_OPTS)
def dot_reassoc(w, wo, x, xo, n):
    """The baseline: ``sum_i w[wo + i] x[xo + i]`` in an order the vectoriser picks."""
    s = w.dtype.type(0.0)
    a = np.uint64(wo)
    b = np.uint64(xo)
    for i in range(n):
        s += w[a + np.uint64(i)] * x[b + np.uint64(i)]
    return s


@njit(fastmath=False, **_OPTS)
def dot8_scalar(w, wo, x, xo, n):
    """Baseline: dot8's order as eight scalar accumulators (the same bits)."""
    z = w.dtype.type(0.0)
    s0 = s1 = s2 = s3 = s4 = s5 = s6 = s7 = z
    m = n - n % 8
    for i in range(0, m, 8):
        p = wo + i
        q = xo + i
        s0 += w[p] * x[q]
        s1 += w[p + 1] * x[q + 1]
        s2 += w[p + 2] * x[q + 2]
        s3 += w[p + 3] * x[q + 3]
        s4 += w[p + 4] * x[q + 4]
        s5 += w[p + 5] * x[q + 5]
        s6 += w[p + 6] * x[q + 6]
        s7 += w[p + 7] * x[q + 7]
    s = ((s0 + s4) + (s2 + s6)) + ((s1 + s5) + (s3 + s7))
    for i in range(m, n):
        s += w[wo + i] * x[xo + i]
    return s


@njit(fastmath={"reassoc", "nsz", "contract"}, **_OPTS)
def dot4x2_reassoc(w0, w1, x0, x1, x2, x3, out):
    """The baseline of the evaluation kernel: eight scalar sums that the vectoriser may reorder."""
    z = w0.dtype.type(0.0)
    s00 = s01 = s10 = s11 = s20 = s21 = s30 = s31 = z
    for i in range(w0.shape[0]):
        a = w0[i]
        b = w1[i]
        s00 += a * x0[i]
        s01 += b * x0[i]
        s10 += a * x1[i]
        s11 += b * x1[i]
        s20 += a * x2[i]
        s21 += b * x2[i]
        s30 += a * x3[i]
        s31 += b * x3[i]
    out[0] = s00
    out[1] = s01
    out[2] = s10
    out[3] = s11
    out[4] = s20
    out[5] = s21
    out[6] = s30
    out[7] = s31


def _block(kernel):
    @njit(fastmath=False, **_OPTS)
    def block(W, X, Z, tmp, reps):
        for _ in range(reps):
            for o in range(0, W.shape[0], 2):
                for g in range(0, X.shape[0], 4):
                    kernel(W[o], W[o + 1], X[g], X[g + 1], X[g + 2], X[g + 3], tmp)
                    for q in range(8):
                        Z[g + q // 2, o + q % 2] = tmp[q]
    return block


def _many(dot):
    @njit(fastmath=False, **_OPTS)
    def many(W, P, D, x, Z, reps):
        for _ in range(reps):
            for o in range(100):
                for k in range(5):
                    Z[k * 100 + o] = dot(W, k * P + o * D, x, 0, D)
    return many


def _packed(dispatcher) -> str:
    """Packed and scalar float arithmetic instructions in ``dispatcher``'s code, recompiled from its
    Python source with the same options and signature (code loaded from numba's disk cache cannot be
    inspected)."""
    opts = {k: v for k, v in dispatcher.targetoptions.items() if k not in ("cache", "nopython")}
    fresh = njit(**opts)(dispatcher.py_func)
    fresh.compile(dispatcher.signatures[0])
    asm = "\n".join(fresh.inspect_asm().values())
    ps = len(re.findall(r"\bv?(?:mul|add|fmadd\w*)p[sd]\b", asm))
    ss = len(re.findall(r"\bv?(?:mul|add|fmadd\w*)s[sd]\b", asm))
    return f"{ps} packed / {ss} scalar float ops"


def main(argv=None) -> int:
    """Time both forms on the same data and print the ratio."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=100, help="steps' worth of dot products per timing (default 100)")
    ap.add_argument("--repeats", type=int, default=7, help="timings per form, interleaved (default 7)")
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    D = 784
    P = D * 100
    W = rng.uniform(-1, 1, 5 * P).astype(np.float32)
    x = rng.standard_normal(D).astype(np.float32)
    Z = np.zeros(500, np.float32)
    forms = {"reassoc (baseline)": _many(dot_reassoc), "scalar sums (before)": _many(dot8_scalar),
             "dot8 (engine)": _many(dot8)}
    for f in forms.values():
        f(W, P, D, x, Z, 1)
    best = best_cpu_seconds({name: (lambda f=f: f(W, P, D, x, Z, args.reps)) for name, f in forms.items()},
                            args.repeats)
    rows = [(o * D, D) for o in range(100)] + [(3, 13), (5, 7), (0, 0)]
    if any(dot8(W, wo, x, 0, n) != dot8_scalar(W, wo, x, 0, n) for wo, n in rows):
        raise SystemExit("dot8 and its scalar form disagree: the benchmark's baseline no longer matches the engine")
    base = best["reassoc (baseline)"]
    print(f"500 dot products of length {D} (one BiMU step's first layer, K = 5), best of {args.repeats} (CPU time)")
    for (name, secs), disp in zip(best.items(), (dot_reassoc, dot8_scalar, dot8)):
        print(f"{name:<22} {secs / args.reps * 1e6:8.1f} us  {secs / base:5.2f}x the reassoc loop's time  "
              f"({_packed(disp)})")
    print(f"dot8 is {best['scalar sums (before)'] / best['dot8 (engine)']:.2f}x as fast as its scalar form "
          "(same bits, checked)")
    diff = max(abs(float(dot8(W, o * D, x, 0, D)) - float(dot_reassoc(W, o * D, x, 0, D))) for o in range(100))
    print(f"largest difference from the reassociated sums over 100 rows: {diff:.2e}")

    X = rng.standard_normal((32, D)).astype(np.float32)
    W2 = np.sign(rng.standard_normal((100, D))).astype(np.float32)
    Z2 = np.zeros((32, 100), np.float32)
    tmp = np.zeros(8, np.float32)
    blocks = {"dot4x2 reassoc (before)": _block(dot4x2_reassoc), "dot4x2 (engine)": _block(dot4x2)}
    for f in blocks.values():
        f(W2, X, Z2, tmp, 1)
    best2 = best_cpu_seconds({name: (lambda f=f: f(W2, X, Z2, tmp, args.reps)) for name, f in blocks.items()},
                             args.repeats)
    blocks["dot4x2 (engine)"](W2, X, Z2, tmp, 1)
    if any(Z2[r, o] != dot8(W2[o], 0, X[r], 0, D) for r in range(32) for o in range(100)):
        raise SystemExit("dot4x2 and dot8 disagree: the evaluation kernel no longer has dot8's bits")
    base2 = best2["dot4x2 reassoc (before)"]
    print(f"\nevaluation: 100 rows by 32 examples of length {D} (one block's first layer), best of {args.repeats}")
    for (name, secs), disp in zip(best2.items(), (dot4x2_reassoc, dot4x2)):
        print(f"{name:<24} {secs / args.reps * 1e6:8.1f} us  {secs / base2:5.2f}x the reassoc kernel's time  "
              f"({_packed(disp)})")
    print("dot4x2 gives dot8's bits for all 3,200 sums (checked)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

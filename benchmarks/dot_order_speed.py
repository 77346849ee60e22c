"""Price of a written-out summation order: :func:`bimu.engine.kernels.dot8` against a reassociated loop.

``dot8`` sums in one order stated in its source (eight partial sums, a fixed tree, then the tail) with
no fast-math flag, so every machine and every compile history gets the same bits. The baseline is the
same dot product compiled with ``reassoc`` (and FMA contraction), which lets LLVM vectorise the sum in an
order of its choosing. This prints, for the first layer of a BiMU step (100 rows of 784 inputs, K = 5
samples: 500 dot products), the CPU time of each, interleaved, best of ``--repeats``, the ratio, whether
each compiled to packed (``ps``) or scalar (``ss``) float instructions, and how far the two sums differ.

    python benchmarks/dot_order_speed.py [--reps 100] [--repeats 7]
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import numpy as np
from numba import njit

from bimu.engine.kernels import dot8

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
    ps = len(re.findall(r"\bv?(?:mul|add|fmadd\w*)ps\b", asm))
    ss = len(re.findall(r"\bv?(?:mul|add|fmadd\w*)ss\b", asm))
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
    forms = {"reassoc (baseline)": _many(dot_reassoc), "dot8 (engine)": _many(dot8)}
    for f in forms.values():
        f(W, P, D, x, Z, 1)
    best = best_cpu_seconds({name: (lambda f=f: f(W, P, D, x, Z, args.reps)) for name, f in forms.items()},
                            args.repeats)
    base = best["reassoc (baseline)"]
    print(f"500 dot products of length {D} (one BiMU step's first layer, K = 5), best of {args.repeats} (CPU time)")
    for (name, secs), disp in zip(best.items(), (dot_reassoc, dot8)):
        print(f"{name:<20} {secs / args.reps * 1e6:8.1f} us  {secs / base:5.2f}x the baseline's time  "
              f"({_packed(disp)})")
    diff = max(abs(float(dot8(W, o * D, x, 0, D)) - float(dot_reassoc(W, o * D, x, 0, D))) for o in range(100))
    print(f"largest difference of the two sums over 100 rows: {diff:.2e}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

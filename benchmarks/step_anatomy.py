"""What bounds a fused BiMU step: the real kernel against counterfactual kernels, in one run.

The first layer's sampling loop (:mod:`bimu.engine.rowpass`) does, per weight and sample, a 32-bit
counter hash, the T = 1 sampling identity (one division) and a dot-product term. This benchmark
generates the per-K module three more times with parts of that loop replaced by cheaper, *wrong*
arithmetic, and times each on the same workload (784-100-10, K = 5, BiMU pmnist-100 preset, real
MNIST, batch size 1, one thread, CPU time):

- ``no hash``: the uniform from ``(i K + k) * key`` (one multiply) instead of the hash;
- ``no division``: ``w = numerator * denominator`` instead of ``numerator / denominator``;
- ``neither``: both;
- ``reassoc sums``: a kernel whose K pre-activations are accumulators of the
  sampling loop vectorised with ``reassoc`` (the same arithmetic with a machine-dependent summation
  order; the real kernel sums each sample row with ``dot8`` after the loop, the same bits everywhere).

The ratios of the three probes to the real kernel bound what any cheaper generator or division could
gain; the learning is meaningless in those variants (they are timing probes only). Every variant is
measured ``--repeats`` times, interleaved, best kept.

    BIMU_DATA_DIR=../shared/data python benchmarks/step_anatomy.py [--steps 4000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from timing import best_cpu_seconds  # noqa: E402

_HASHED = re.compile(r"u = _u32\(_h32\(rlo, rhi, _add32\(base, np.uint32\((\d+)\)\)\), one\)")
_NO_HASH = r"u = _u32(_mul32(_add32(base, np.uint32(\1)), rlo), one)"
_DIVIDE = "w = (u * ob - pp) / (pp + u * qq)"
_MULTIPLY = "w = (u * ob - pp) * (pp + u * qq)"

_Z_STORE = re.compile(r"    Z0\[(\d+) \* n_out \+ o\] = z\d+\n")
_ROW_SUMS = re.compile(r"    [z\d, ]+= dot_rows\(W, \([^)]*\), xn_, D\)\n")
_SAMPLE_STORE = re.compile(r"( +)W\[e \+ np.uint64\((\d+) \* kstride\)\] = w")
_SAMPLE_DEF = '@njit(fastmath={"contract"}, **_OPTS)\ndef sample_row('
_SAMPLE_ONE = "    one = as_like(1.0, lr_[0])\n"


def reassoc_sums(src: str) -> str:
    """The sampling loop with each pre-activation a scalar accumulator of the
    loop, which only ``reassoc`` lets LLVM vectorise, in an order of its choosing (same arithmetic, other
    rounding of the sums; the real kernel sums the K fresh sample rows with ``dot_rows`` after the loop,
    in ``dot8``'s order)."""
    K = len(_Z_STORE.findall(src))
    start = src.index(_SAMPLE_DEF)
    head, body = src[:start], src[start:]
    body = body.replace('fastmath={"contract"}', 'fastmath={"contract", "reassoc", "nsz"}', 1)
    body = body.replace(_SAMPLE_ONE, _SAMPLE_ONE + "".join(f"    z{k} = one - one\n" for k in range(K)), 1)
    body = _SAMPLE_STORE.sub(lambda m: f"{m.group(0)}\n{m.group(1)}z{m.group(2)} += w * xn_[i]", body, count=K)
    return head + _ROW_SUMS.sub("", body)


VARIANTS = {
    "real kernel": lambda s: s,
    "reassoc sums": reassoc_sums,
    "no hash": lambda s: _HASHED.sub(_NO_HASH, s),
    "no division": lambda s: s.replace(_DIVIDE, _MULTIPLY),
    "neither": lambda s: _HASHED.sub(_NO_HASH, s).replace(_DIVIDE, _MULTIPLY),
}
"""Name -> rewrite of the generated module's source."""


def variant_module(name, original_source):
    """The generated per-K (K = 5) module whose sampling loop is the ``name`` variant."""
    import bimu.engine.rowpass as rowpass

    rewrite = VARIANTS[name]
    if name != "real kernel" and rewrite(original_source(5)) == original_source(5):
        raise RuntimeError(f"variant {name!r} changed nothing: the kernel template no longer matches this benchmark")
    rowpass._sample_row_source = lambda K: rewrite(original_source(K))
    rowpass._MODULES.clear()
    try:
        return rowpass.generated_module(5)
    finally:
        rowpass._sample_row_source = original_source
        rowpass._MODULES.clear()


def main(argv=None) -> int:
    """Print steps/s (CPU time) of each variant and its ratio to the real kernel."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=4000, help="steps per timing (default 4000)")
    ap.add_argument("--repeats", type=int, default=3, help="timings per variant, interleaved (default 3)")
    ap.add_argument("--data-dir", default=os.environ.get("BIMU_DATA_DIR", "/work/shared/data"))
    args = ap.parse_args(argv)

    import bimu.engine.rowpass as rowpass
    from bimu.methods.bimu import BiMUMethod
    from stream_speed import load_mnist

    xtr, ytr, _, _ = load_mnist(Path(args.data_dir))
    hp = BiMUMethod.resolve_hyperparameters({}, preset="pmnist-100")
    from bimu.engine import create_fused

    original = rowpass._sample_row_source
    modules = {name: variant_module(name, original) for name in VARIANTS}
    methods = {}
    for name in VARIANTS:  # compile (or load) every variant first; the engine looks its kernel up per call
        rowpass._MODULES[5] = modules[name]
        methods[name] = create_fused("bimu", [784, 100, 10], 0, hp, threads=1)
        methods[name].learn_many(xtr[:200], ytr[:200])
    n = min(args.steps, len(xtr))

    def steps(name):
        def call():
            rowpass._MODULES[5] = modules[name]
            methods[name].learn_many(xtr[:n], ytr[:n])
        return call

    try:
        best = {name: n / secs for name, secs in best_cpu_seconds({v: steps(v) for v in VARIANTS},
                                                                  args.repeats).items()}
    finally:
        rowpass._MODULES.clear()
    base = best["real kernel"]
    print(f"BiMU 784-100-10, K=5, one thread, {n} steps, best of {args.repeats} (CPU time)")
    print(f"{'kernel':<14} {'steps/s':>9} {'vs real':>8}")
    for name, rate in best.items():
        print(f"{name:<14} {rate:>9.0f} {rate / base:>7.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

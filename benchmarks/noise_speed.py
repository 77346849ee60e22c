"""Speed of the engine's counter-based normals (MESU's weight noise) against the 64-bit-index form.

:func:`bimu.engine.gaussian.gaussian_noise` computes the hash index ``i K + k`` in 32-bit lanes; the
earlier form computed it in 64 bits and truncated (``np.uint32(i * K + k)``), which costs vector
shuffles on AVX2. Both give the same bits (checked here); this prints the time of one training step's
first-layer noise (784-100-10 network, K = 10: 784,000 of the step's 795,100 normals) for each, interleaved, best of ``--repeats``, and the
ratio. The noise is about 80% of a fused MESU step.

    python benchmarks/noise_speed.py [--draws 100] [--repeats 6]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from numba import njit

from bimu.engine.dense import offsets
from bimu.engine.gaussian import _noise_row, box_muller
from bimu.rng import hash32 as _h32, row_key as _row_key, uniform32 as _u32

sys.path.insert(0, str(Path(__file__).resolve().parent))
from timing import best_cpu_seconds  # noqa: E402

_OPTS = dict(error_model="numpy", nogil=True, boundscheck=False)


@njit(fastmath={"contract"}, **_OPTS)
def _row_64bit_index(E, key, step, P, e0, n, K):
    """The baseline: one row's normals with the hash index computed in 64 bits (K even)."""
    rlo, rhi = _row_key(key, step, P, e0)
    one = E[0]
    for j in range(K // 2):
        k = 2 * j
        r1 = E[k * P + e0:k * P + e0 + n]
        r2 = E[(k + 1) * P + e0:(k + 1) * P + e0 + n]
        for i in range(n):
            z1, z2 = box_muller(_u32(_h32(rlo, rhi, np.uint32(i * K + k)), one),
                                _u32(_h32(rlo, rhi, np.uint32(i * K + k + 1)), one))
            r1[i] = z1
            r2[i] = z2


@njit(**_OPTS)
def first_layer_noise(E, key, step, K, n_out, D, P, engine):
    """The normals of the first layer's ``n_out`` rows of width ``D`` (99% of the network's), by the
    engine's row function (``engine``) or the baseline's."""
    for o in range(n_out):
        if engine:
            _noise_row(E, key, step, P, o * D, D, K)
        else:
            _row_64bit_index(E, key, step, P, o * D, D, K)


def main(argv=None) -> int:
    """Check the two forms agree bit for bit, then print their times and the ratio."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draws", type=int, default=100, help="draws per timing (default 100)")
    ap.add_argument("--repeats", type=int, default=6, help="timings per form, interleaved (default 6)")
    args = ap.parse_args(argv)
    widths = [784, 100, 10]
    woff, boff = offsets(widths)
    K = 10
    P = int(woff[-1] + boff[-1])
    n_normals = K * widths[0] * widths[1]
    key = np.uint64(5)
    a, b = np.zeros(K * P, np.float32), np.zeros(K * P, np.float32)  # only the first layer is drawn
    first_layer_noise(a, key, np.uint64(7), K, widths[1], widths[0], P, False)
    first_layer_noise(b, key, np.uint64(7), K, widths[1], widths[0], P, True)
    if not np.array_equal(a.view(np.uint32), b.view(np.uint32)):
        raise SystemExit("the two forms disagree: the benchmark's baseline no longer matches the engine")

    def draws(engine):
        return lambda: [first_layer_noise(a, key, np.uint64(s), K, widths[1], widths[0], P, engine)
                        for s in range(args.draws)]

    best = {name: secs / args.draws for name, secs in best_cpu_seconds(
        {"64-bit index (before)": draws(False), "32-bit lanes (engine)": draws(True)}, args.repeats).items()}
    base = best["64-bit index (before)"]
    print(f"one step's first-layer noise, 784-100-10, K={K} ({n_normals:,} normals), best of {args.repeats} "
          "(CPU time)")
    for name, secs in best.items():
        print(f"{name:<22} {secs * 1e3:7.3f} ms  {n_normals / secs / 1e6:6.0f} M normals/s  {base / secs:5.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

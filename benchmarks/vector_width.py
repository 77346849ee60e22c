"""Steps per second of each fused method with 256-bit and with 512-bit vectors, and whether the bits agree.

Workload: every method of the fused engine on a 784-100-10 network (the Permuted-MNIST tables' size), its
default hyperparameters, one thread, batch size 1, ``--steps`` steps (MESU: a quarter of them) of a
fixed random stream. Each width runs in its own process (numba fixes its compile target per process):
``BIMU_VECTOR_WIDTH=256`` (numba's default on AVX-512 processors) and ``512`` (bimu's default there,
:mod:`bimu.vectors`). The processes alternate ``--repeats`` times; the table gives the median steps/s
(CPU seconds, ``time.process_time``) of each width, the ratio of the medians, and whether the trained
state and the Monte-Carlo scores have the same SHA-256 under both. On a processor without AVX-512 both
processes compile the same code and the ratio is noise.

    PYTHONPATH=src python benchmarks/vector_width.py [--steps 4000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

WORKER = r"""
import hashlib, json, sys, time
import numpy as np, torch
from bimu.engine import FUSED_METHODS, create_fused
from numba.core import registry

def digest(o, h):
    if isinstance(o, dict):
        for k in sorted(o, key=str):
            h.update(str(k).encode()); digest(o[k], h)
    elif isinstance(o, (list, tuple)):
        for v in o: digest(v, h)
    elif isinstance(o, torch.Tensor): h.update(o.detach().contiguous().numpy().tobytes())
    elif isinstance(o, np.ndarray): h.update(np.ascontiguousarray(o).tobytes())
    else: h.update(repr(o).encode())

steps = int(sys.argv[1])
rng = np.random.default_rng(0)
X = rng.standard_normal((steps, 784)).astype(np.float32)
Y = rng.integers(0, 10, steps)
out = {}
for name in FUSED_METHODS:
    n = steps // 4 if name == "mesu" else steps
    m = create_fused(name, [784, 100, 10], seed=0, threads=1)
    m.learn_many(X[:20], Y[:20])  # compiles
    t = time.process_time()
    m.learn_many(X[:n], Y[:n])
    dt = time.process_time() - t
    h = hashlib.sha256()
    digest([m.state_dict(), m.mc_scores(X[:200])], h)
    out[name] = [n / dt, h.hexdigest()]
print(json.dumps({"features": registry.cpu_target.target_context.codegen()._tm_features, "methods": out}))
"""


def run(width: str, steps: int) -> dict:
    """One process at ``width``: ``{"features": numba's target features, "methods": {name: [steps/s,
    SHA-256 of the trained state and scores]}}``."""
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CPU_FEATURES", "NUMBA_CPU_NAME")}
    env["BIMU_VECTOR_WIDTH"] = width
    done = subprocess.run([sys.executable, "-c", WORKER, str(steps)], env=env, capture_output=True, text=True,
                          check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=4000)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    from bimu.vectors import _has_avx512

    runs: dict[str, list[dict]] = {"256": [], "512": []}
    for _ in range(args.repeats):
        for width in runs:
            runs[width].append(run(width, args.steps)["methods"])
    print(f"AVX-512: {'yes' if _has_avx512() else 'no'}; {args.steps} steps (MESU {args.steps // 4}), "
          f"median of {args.repeats} per width")
    print(f"{'method':24s} {'256-bit steps/s':>16s} {'512-bit steps/s':>16s} {'ratio':>7s}  same bits")
    for name in runs["256"][0]:
        narrow = statistics.median(r[name][0] for r in runs["256"])
        wide = statistics.median(r[name][0] for r in runs["512"])
        same = len({r[name][1] for w in runs for r in runs[w]}) == 1
        print(f"{name:24s} {narrow:16.0f} {wide:16.0f} {wide / narrow:7.2f}  {'yes' if same else 'NO'}")


if __name__ == "__main__":
    main()

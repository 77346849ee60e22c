"""Cost of the active-learning method comparison (``bimu reproduce openloris-al``) per method: CPU
seconds per 1,000 stream examples of one full-scale objects-seq task (8,192 features, 18 classes,
fused engine, one thread), with VR querying (K = 10; STE: aleatoric, K = 1) and with 100% updates.

    python scripts/al_methods_cost.py [--examples 1000] [--data-dir DIR]

Prints one line per (method, rule) and a JSON summary; trains nothing it keeps.
"""

from __future__ import annotations

import argparse
import json
import time

import torch

from bimu.data.benchmarks import get_benchmark
from bimu.data.views import LimitedBenchmark
from bimu.experiments.sweep import run_stream
from bimu.reproduce.al_methods import COMPARED


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--examples", type=int, default=1000, help="stream examples of task 1 timed (default 1000)")
    p.add_argument("--data-dir", default=None)
    p.add_argument("--benchmark", default="objects-seq")
    a = p.parse_args()
    torch.set_num_threads(1)
    t0 = time.process_time()
    full = get_benchmark(a.benchmark, data_dir=a.data_dir, n_features=8192)
    print(f"loaded {a.benchmark}: {full.n_features} features, {full.n_classes} classes "
          f"({time.process_time() - t0:.1f} CPU s)", flush=True)
    bench = LimitedBenchmark(full, n_tasks=1, train_limit=a.examples, test_limit=20)
    warm = LimitedBenchmark(full, n_tasks=1, train_limit=5, test_limit=5)
    out = {}
    for method, (rule, k) in COMPARED.items():
        for score, th in ((rule, 0.1 if rule == "vr" else 1.0), ("all", None)):
            kw = dict(method=method, strategy=score, threshold=th, mc_samples=k,
                      preset="openloris-8192-imbalanced", engine="auto")
            run_stream(warm, **kw)  # compile / load kernels outside the timing
            t = time.process_time()
            r = run_stream(bench, **kw)
            sec = time.process_time() - t
            out[f"{method}-{score}"] = {"cpu_s_per_1000": 1000 * sec / r["examples_seen"], "engine": r["engine"],
                                        "query_fraction": r["query_fraction"]}
            print(f"{method:10s} {score:10s} K={k:<3d} engine={r['engine']:6s} queried={100 * r['query_fraction']:6.2f}% "
                  f"{1000 * sec / r['examples_seen']:8.2f} CPU s per 1,000 examples", flush=True)
    print(json.dumps(out))


if __name__ == "__main__":
    main()

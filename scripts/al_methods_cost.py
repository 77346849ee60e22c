"""Cost of the active-learning method comparison per method, and the core-hours of a venue's entries.

    python scripts/al_methods_cost.py [--venue openloris|animals|pmnist] [--examples 5000] [--data-dir DIR]
                                      [--estimate]

Measures, on the first ``--examples`` stream examples of task 1 of the venue's full-scale data (its
setup: :data:`bimu.reproduce.active_learning.SETUPS`; fused engine, one thread, CPU time), each
compared method's marginal cost per 1,000 examples (the difference between streams of the first
``--examples`` and of a fifth as many, so that building and evaluating the network drop out) with
100% updates (an update, no query passes) and with its rule at a threshold that asks for few labels
(VR 0.9 with K = 10; STE: aleatoric 1.0, K = 1), and from the two the cost of the query passes alone.
``--estimate`` then prices every row of the venue's entries (``<venue>-al`` or ``openloris-al`` /
``animals-al``, its K table and its budget-controller table) and prints the core-hours of each entry:
a run costs its stream examples times the query cost (times K / 10 for another K; none for the 100%
baseline and random querying) plus its queried fraction times the update cost. The queried fraction of
a threshold rule is not known before the run, so such a row is priced at both ends, 0 and 1 (random
querying at its probability, the budget controller at its target); the evaluation and data loading
(seconds a run) are left out. Trains nothing it keeps.
"""

from __future__ import annotations

import argparse
import json
import time

import torch

ENTRIES = {"openloris": ("openloris-al", "vr-samples", "budget-controller"),
           "animals": ("animals-al", "animals-vr-samples", "animals-budget-controller"),
           "pmnist": ("pmnist-al", "pmnist-vr-samples", "pmnist-budget-controller")}
"""A venue's entries that train runs priced by ``--estimate``: method comparison, K table, controller."""


def row_seconds(params: dict, examples: int, update: float, query: float) -> tuple[float, float]:
    """``(low, high)`` seconds of one run of a row with run_stream keyword arguments ``params`` over a
    stream of ``examples``, from the per-example ``update`` and ``query`` (K = 10) seconds of its method.

    >>> row_seconds({"strategy": "all"}, 1000, 0.002, 0.001)
    (2.0, 2.0)
    >>> row_seconds({"strategy": "random", "threshold": 0.1}, 1000, 0.002, 0.001)
    (0.2, 0.2)
    >>> row_seconds({"strategy": "vr", "threshold": 0.1, "mc_samples": 5}, 1000, 0.002, 0.001)
    (0.5, 2.5)
    >>> row_seconds({"strategy": "vr", "budget": 0.03, "mc_samples": 10}, 1000, 0.002, 0.001)
    (1.06, 1.06)
    """
    strategy = params["strategy"]
    if strategy == "all":
        return examples * update, examples * update
    if strategy == "random":
        q = float(params["threshold"])
        return examples * q * update, examples * q * update
    passes = examples * query * int(params.get("mc_samples", 10)) / 10
    if params.get("budget") is not None:
        b = float(params["budget"])
        return passes + examples * b * update, passes + examples * b * update
    return passes, passes + examples * update


def measure(venue: str, n: int, data_dir) -> tuple[dict, int]:
    """Per-example CPU seconds ``{method: {"update", "query", "rule_query_fraction"}}`` of the compared
    methods on the first ``n`` examples of the venue's task 1, and the examples of its full stream."""
    from bimu.data.views import LimitedBenchmark
    from bimu.experiments.sweep import run_stream
    from bimu.reproduce import active_learning as al
    from bimu.reproduce.al_methods import COMPARED
    from bimu.reproduce.spec import Options

    setup = al.SETUPS[venue](Options(scale="full", data_dir=data_dir))
    t0 = time.process_time()
    full = al.load_benchmark(setup, Options(scale="full", data_dir=data_dir))
    stream = sum(len(full.train_task(t, 0)[1]) for t in range(full.n_tasks))
    print(f"loaded {setup.benchmark}: {full.n_features} features, {full.n_classes} classes, {full.n_tasks} tasks, "
          f"{stream} stream examples ({time.process_time() - t0:.1f} CPU s)", flush=True)
    short, bench = (LimitedBenchmark(full, n_tasks=1, train_limit=m, test_limit=20) for m in (n // 5, n))
    warm = LimitedBenchmark(full, n_tasks=1, train_limit=5, test_limit=5)
    out = {}
    for method, (rule, k) in COMPARED.items():
        sec = {}
        for score, th in ((rule, 0.9 if rule == "vr" else 1.0), ("all", None)):
            kw = dict(method=method, strategy=score, threshold=th, mc_samples=k, preset=setup.preset,
                      hidden=setup.hidden, engine="auto")
            run_stream(warm, **kw)  # compile / load kernels outside the timing
            t = time.process_time()
            s = run_stream(short, **kw)
            t1 = time.process_time()
            r = run_stream(bench, **kw)
            # the marginal cost of an example: what the longer stream costs more (building the network and
            # evaluating it cost the same in both, and would dominate a short stream's cost per example)
            per = ((time.process_time() - t1) - (t1 - t)) / (r["examples_seen"] - s["examples_seen"])
            sec[score] = (max(per, 0.0), r["query_fraction"], r["engine"])
            print(f"{method:10s} {score:10s} K={k:<3d} engine={r['engine']:6s} queried={100 * r['query_fraction']:6.2f}% "
                  f"{1000 * sec[score][0]:8.2f} CPU s per 1,000 examples", flush=True)
        update = sec["all"][0]
        rule_s, q, _ = sec[rule]
        # the rule's query passes alone, scaled to K = 10 (STE's rule has K = 1)
        query = max(rule_s - q * update, 0.0) * 10 / k
        out[method] = {"update": update, "query": query, "rule_query_fraction": q}
    return out, stream


def estimate(venue: str, costs: dict, stream: int, seeds: int = 3) -> dict:
    """Core-hours ``(low, high)`` of each of the venue's entries (:data:`ENTRIES`) over ``seeds`` seeds."""
    from bimu.reproduce import active_learning as al
    from bimu.reproduce import al_methods
    from bimu.reproduce.spec import Options

    opts = Options(scale="full")
    comparison, k_table, controller = ENTRIES[venue]
    tables = {comparison: al_methods.rows_for(opts, venue), k_table: al.rows_vr_samples(opts, venue),
              controller: al.rows_budget(opts, venue)}
    out = {}
    for name, rows in tables.items():
        low = high = 0.0
        for row in rows:
            c = costs[row.params["method"]]
            a, b = row_seconds(row.params, stream, c["update"], c["query"])
            low, high = low + a * seeds, high + b * seeds
        out[name] = {"rows": len(rows), "runs": len(rows) * seeds, "core_hours": (low / 3600, high / 3600)}
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--venue", default="openloris", choices=sorted(ENTRIES))
    p.add_argument("--examples", type=int, default=5000, help="stream examples of task 1 timed (default 5000)")
    p.add_argument("--data-dir", default=None)
    p.add_argument("--estimate", action="store_true", help="price every row of the venue's entries (3 seeds)")
    a = p.parse_args()
    torch.set_num_threads(1)
    costs, stream = measure(a.venue, a.examples, a.data_dir)
    summary = {"costs": {m: {"update_cpu_s_per_1000": 1000 * c["update"], "query_cpu_s_per_1000": 1000 * c["query"],
                             "rule_query_fraction": c["rule_query_fraction"]} for m, c in costs.items()},
               "stream_examples": stream}
    if a.estimate:
        est = estimate(a.venue, costs, stream)
        for name, e in est.items():
            lo, hi = e["core_hours"]
            print(f"{name}: {e['rows']} rows, {e['runs']} runs: {lo:.1f}-{hi:.1f} core-hours "
                  f"({3600 * lo / e['runs'] / 60:.1f}-{3600 * hi / e['runs'] / 60:.1f} min a run)", flush=True)
        total = [sum(e["core_hours"][i] for e in est.values()) for i in (0, 1)]
        print(f"total: {total[0]:.1f}-{total[1]:.1f} core-hours", flush=True)
        summary["estimate"] = est
    print(json.dumps(summary))


if __name__ == "__main__":
    main()

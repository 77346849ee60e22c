"""Command line of the active-learning room: ``bimu sweep-threshold`` and ``bimu run-active``.

``add_parser(subparsers)`` registers both (docs/contracts.md); :func:`add_active_arguments` and
:func:`acquisition_from_args` let the general runner offer the same ``--active/--threshold/--budget/
--budget-exponent/--mc-samples`` options in ``bimu run``.

>>> import argparse
>>> p = argparse.ArgumentParser(); sub = p.add_subparsers()
>>> add_parser(sub)
>>> a = p.parse_args(["run-active", "animals-ti", "--active", "vr", "--budget", "0.03"])
>>> acquisition_from_args(a).describe()
'vr budget=0.03 gamma=0.5'
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from bimu.active.learner import make_acquisition


def add_active_arguments(parser: argparse.ArgumentParser) -> None:
    """``--active S --threshold T | --budget B [--budget-exponent G] --mc-samples K``."""
    g = parser.add_argument_group("active learning")
    g.add_argument("--active", default=None, metavar="SCORE",
                   help="query rule: vr, entropy, aleatoric, epistemic, random, vr-true (ORACLE), all")
    g.add_argument("--threshold", type=float, default=None, help="fixed one-pass threshold tau")
    g.add_argument("--budget", type=float, default=None, help="target queried fraction B (budget controller)")
    g.add_argument("--budget-exponent", type=float, default=0.5, help="controller exponent gamma")
    g.add_argument("--mc-samples", type=int, default=10, help="K hard-sample forward passes per example")


def acquisition_from_args(args, seed: int = 0):
    """The :class:`~bimu.active.learner.Acquisition` described by parsed options (None if inactive)."""
    if args.active is None:
        return None
    return make_acquisition(args.active, threshold=args.threshold, budget=args.budget,
                            budget_exponent=args.budget_exponent, mc_samples=args.mc_samples, seed=seed)


def _benchmark_options(p):
    p.add_argument("benchmark", help="animals-ti, objects-ti (stand-ins), openloris, animals")
    p.add_argument("--method", default="bimu", help="registered method (default bimu)")
    p.add_argument("--preset", default=None, help="hyperparameter preset (default: the benchmark's)")
    p.add_argument("--hp", nargs="*", default=[], metavar="KEY=VALUE", help="hyperparameter overrides")
    p.add_argument("--data-dir", default=None, help="data directory (default $BIMU_DATA_DIR)")
    p.add_argument("--cache-dir", default=None, help="feature cache (default ~/.cache/bimu/features)")
    p.add_argument("--n-features", type=int, default=8192, help="random feature subset size (0 = all)")
    p.add_argument("--split", default="test", choices=("test", "validation"),
                   help="'validation' evaluates on 20%% of the training data (tuning)")
    p.add_argument("--standardize", action="store_true", help="streaming-safe per-feature standardisation")
    p.add_argument("--seeds", type=int, nargs="+", default=[0], help="seeds (default 0)")


def _load(args):
    from bimu.data.feature_benchmarks import PRESET_KEYS, get_feature_benchmark

    bench = get_feature_benchmark(args.benchmark, data_dir=args.data_dir, cache_dir=args.cache_dir,
                                  n_features=args.n_features or None, split=args.split)
    preset = args.preset or PRESET_KEYS.get(args.benchmark)
    hp = {}
    for item in args.hp:
        if "=" not in item:
            raise ValueError(f"--hp expects KEY=VALUE, got {item!r}")
        k, v = item.split("=", 1)
        hp[k] = v
    return bench, preset, hp


def _run_active(args) -> int:
    from bimu.active.sweep import run_stream

    acquisition_from_args(args)  # validate early
    bench, preset, hp = _load(args)
    if args.active is None:
        args.active = "all"
    for seed in args.seeds:
        t0 = time.time()
        r = run_stream(bench, args.method, args.active, args.threshold, args.budget, args.budget_exponent,
                       args.mc_samples, seed, preset, hp, args.standardize)
        r["seconds"] = round(time.time() - t0, 1)
        r.pop("task_quarters", None)
        print(json.dumps(r, default=float))
    return 0


def _sweep(args) -> int:
    from bimu.active.sweep import sweep, write_sweep

    bench, preset, hp = _load(args)
    grids = {}
    for item in args.grid:
        score, _, values = item.partition("=")
        grids[score] = [float(v) for v in values.split(",") if v]
    rows = sweep(bench, args.method, args.scores, args.thresholds, grids, args.seeds, args.mc_samples, preset,
                 hp, args.jobs, args.standardize, log=lambda s: print(s, flush=True),
                 baseline=not args.no_baseline)
    tag = " (STAND-IN)" if bench.is_standin else ""
    res = write_sweep(rows, args.out, title=f"{bench.name}{tag}, {args.method}, K={args.mc_samples}")
    print(json.dumps(res["savings"], default=float))
    print(f"wrote {args.out}/sweep.csv, sweep.md, sweep.json, sweep.png")
    return 0


def add_parser(subparsers) -> None:
    """Register ``sweep-threshold`` and ``run-active`` on the top-level CLI."""
    p = subparsers.add_parser("sweep-threshold", help="accuracy vs queried fraction over thresholds and scores")
    _benchmark_options(p)
    p.add_argument("--scores", nargs="+", default=["vr", "entropy", "aleatoric", "epistemic", "random"],
                   help="acquisition scores to sweep (default: vr entropy aleatoric epistemic random)")
    p.add_argument("--thresholds", type=float, nargs="*", default=None,
                   help="thresholds for every score (default: a grid per score)")
    p.add_argument("--grid", nargs="*", default=[], metavar="SCORE=V1,V2", help="per-score thresholds")
    p.add_argument("--mc-samples", type=int, default=10, help="K, hard MC samples per query decision (default 10)")
    p.add_argument("--jobs", type=int, default=1, help="parallel runs (processes)")
    p.add_argument("--no-baseline", action="store_true", help="skip the 100%%-update baseline run")
    p.add_argument("--out", required=True, help="output folder")
    p.set_defaults(func=_sweep)
    r = subparsers.add_parser("run-active", help="one active stream over a feature benchmark")
    _benchmark_options(r)
    add_active_arguments(r)
    r.set_defaults(func=_run_active)


def main(argv=None) -> int:
    """Stand-alone entry point (``python -m bimu.active.cli``) until the top-level CLI wires it."""
    parser = argparse.ArgumentParser(prog="bimu")
    add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except (ValueError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

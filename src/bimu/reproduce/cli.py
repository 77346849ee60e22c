"""The command line of ``bimu reproduce NAME`` (an entry of :data:`~bimu.reproduce.entries.ENTRIES`):
its options, and :func:`cli`, which runs the entry (or lists its runs with ``--dry-run``) and prints the
table; a run table first says what it will train and the core-hours (:func:`print_summary`).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from bimu.reproduce.entries import entry_of, reproduce
from bimu.reproduce.plan import format_plan, plan
from bimu.reproduce.options import options_parser
from bimu.reproduce.spec import Options, seeds_of


def cli(name: str, args: argparse.Namespace, extra: Sequence[str]) -> int:
    """``bimu reproduce NAME`` for an entry of :data:`~bimu.reproduce.entries.ENTRIES`: options before
    NAME are in ``args``, options after it in ``extra``; prints the markdown table and where the files
    are."""
    ns = options_parser().parse_args(list(extra), namespace=argparse.Namespace(**{
        k: getattr(args, k, None) for k in ("seeds", "scale", "out", "engine", "data_dir", "threads", "jobs",
                                            "scheduler", "benchmark", "stream_repeats", "rows", "dry_run",
                                            "from_runs", "first_seed")}))
    scale = ns.scale or "full"
    n = ns.seeds if ns.seeds is not None else (5 if scale == "full" else 1)
    try:
        from bimu.experiments.parallel import default_jobs

        opts = Options(seeds=seeds_of(n, ns.first_seed or 0), scale=scale, out=ns.out or "reproduce",
                       engine=ns.engine or "auto",
                       data_dir=ns.data_dir, threads=ns.threads or 1,
                       jobs=default_jobs() if ns.jobs is None else ns.jobs, benchmark=ns.benchmark,
                       stream_repeats=1 if ns.stream_repeats is None else ns.stream_repeats,
                       rows=None if ns.rows is None else tuple(ns.rows), scheduler=ns.scheduler,
                       from_runs=bool(ns.from_runs))
        if ns.dry_run:
            print(format_plan(name, plan(name, opts)))
            return 0
        table, paths, code = reproduce(name, opts, announce=print_summary)
    except KeyboardInterrupt:
        return 130
    except (ValueError, FileNotFoundError, RuntimeError) as e:
        print(f"bimu reproduce: error: {e}", file=sys.stderr)
        return 2
    print(table.markdown())
    print("written: " + ", ".join(str(p) for p in paths.values()))
    return code


def print_summary(name: str, opts: Options, file=None) -> None:
    """Before a run table trains anything: how many runs it trains, resumes and reuses, and the core-hours
    estimated (:func:`~bimu.reproduce.estimate.summary`), on standard error (``file``). Nothing for the
    entries that build their own runs or train nothing, nor with ``--from-runs``."""
    from bimu.reproduce.estimate import summary

    entry = entry_of(name)
    if entry.rows is None or entry.build is not None or opts.from_runs:
        return
    print(summary(name, plan(name, opts), opts.scale, None if opts.scheduler else opts.jobs),
          file=file or sys.stderr, flush=True)

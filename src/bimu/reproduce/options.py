"""The options of ``bimu reproduce NAME``, shared by the command line (:mod:`bimu.reproduce.cli`) and
``bimu report --check`` (:mod:`bimu.reproduce.check`), which reads them back from a page's commands."""

from __future__ import annotations

import argparse

from bimu.reproduce.spec import SCALES


def add_options(parser: argparse.ArgumentParser) -> None:
    """The options of ``bimu reproduce NAME`` (for the entries of :data:`~bimu.reproduce.entries.ENTRIES`)."""
    parser.add_argument("--seeds", type=int, default=None,
                        help="number of seeds: runs seeds 0..N-1 (default 5 at full scale, 1 at quick)")
    parser.add_argument("--first-seed", type=int, default=None, metavar="F",
                        help="run seeds F..F+N-1 instead (default 0), e.g. to share a table's seeds among "
                             "machines or queues: --seeds 1 --first-seed 1 runs seed 1 alone")
    parser.add_argument("--scale", choices=SCALES, default="full",
                        help="full: the paper's protocol; quick: a tiny smoke test (default full)")
    parser.add_argument("--out", default=None, help="output folder for runs and tables (default ./reproduce)")
    parser.add_argument("--engine", choices=("auto", "torch", "fused"), default="auto", help="engine (default auto)")
    parser.add_argument("--data-dir", default=None, help="data directory (default $BIMU_DATA_DIR, then the user cache)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads per run (default 1)")
    parser.add_argument("--jobs", type=int, default=None,
                        help="independent runs (seeds, configurations) side by side in separate processes "
                             "(default: the number of cores)")
    parser.add_argument("--scheduler", default=None, metavar="ADDRESS",
                        help="send every run to the Dask scheduler at ADDRESS (tcp://HOST:PORT) instead of "
                             "--jobs processes here; --out must be a folder every worker sees at the same path "
                             "(docs/distributed.md)")
    parser.add_argument("--benchmark", default=None,
                        help="feature-benchmark entries (openloris, standardisation, bwt, *-al, vr-samples, "
                             "budget-controller, query-dynamics): run on this benchmark instead of the "
                             "offline stand-in (objects-seq for OpenLORIS, animals-ti for Animals), e.g. "
                             "openloris or animals when their data are present, or objects-ti (the older "
                             "OpenLORIS stand-in)")
    parser.add_argument("--rows", nargs="+", default=None, metavar="SLUG",
                        help="run only these rows of the table (their folder names under OUT/runs/SCALE/NAME, "
                             "e.g. bimu); the other rows' completed runs are still shown")
    parser.add_argument("--dry-run", action="store_true", default=None,
                        help="run tables: list each run (row, seed) with its state, tasks done and the time "
                             "left estimated from started runs (else from the committed full-scale runs); "
                             "train nothing, write nothing")
    parser.add_argument("--from-runs", action="store_true", default=None,
                        help="run tables: train nothing; write the table and manifest from the complete runs "
                             "already under OUT (every seed found; rows without runs are left out and named)")
    parser.add_argument("--stream-repeats", type=int, default=None, metavar="R",
                        help="active-learning entries: stream each task's training data R times, each copy in "
                             "its own order (default 1; animals-ti x 4 has the paper's Animals stream length)")


def options_parser() -> argparse.ArgumentParser:
    """A parser of just the reproduce options (for options given after NAME)."""
    p = argparse.ArgumentParser(prog="bimu reproduce NAME", add_help=False)
    add_options(p)
    return p

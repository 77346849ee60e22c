"""What a ``bimu reproduce`` entry is: its options, rows, quantities and folders.

An :class:`Entry` lists a table's rows; a :class:`Row` is one configuration (a
:class:`~bimu.experiments.config.RunConfig`) run into its own folder ``OUT/runs/<scale>/<entry>/<row>/``
(one run directory per seed below it), or shares the runs of an identical row of another table
(:func:`share_runs`). Scales: ``full`` is the paper's protocol; ``quick`` is a smoke test (2 tasks, a
few hundred examples) whose numbers are not comparable with the paper's.

>>> seeds_of(3), seeds_of(2, first=3)
((0, 1, 2), (3, 4))
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bimu.experiments.config import RunConfig
from bimu.reproduce.table import Table

SCALES = ("full", "quick")

# Quantities read from each seed's summary.json: key -> (header, getter, scale, digits).
QUANTITIES: dict[str, tuple[str, Callable[[dict], Any], float, int]] = {
    "acc": ("Mean acc. last 5 tasks (%)", lambda s: s.get("last_k_acc"), 100.0, 2),
    "auc": ("OOD det. (AUC)", lambda s: ood_auc_of(s), 1.0, 2),
    "mmrr": ("MMRR", lambda s: s.get("mmrr"), 1.0, 2),
    "one_task": ("Acc. 1 task (%)", lambda s: s.get("first_task_acc"), 100.0, 2),
    "mean_acc": ("Mean acc. (%)", lambda s: s.get("final_mean_acc"), 100.0, 2),
    "auc_alea": ("Aleatoric (AUC)", lambda s: (s.get("ood_auc") or {}).get("aleatoric"), 1.0, 2),
    "auc_epi": ("Epistemic (AUC)", lambda s: (s.get("ood_auc") or {}).get("epistemic"), 1.0, 2),
    "bwt": ("BWT", lambda s: s.get("bwt"), 1.0, 4),
    "headline": ("Mean acc. (%)", lambda s: s.get("last_k_acc") if s.get("benchmark") == "pmnist"
                 else s.get("final_mean_acc"), 100.0, 2),
}
"""What the run tables report, from each seed's ``summary.json``."""


def is_standin(benchmark: str) -> bool:
    """Whether ``benchmark`` is an offline stand-in of a paper data set
    (:data:`bimu.data.feature_benchmarks.STANDINS`)."""
    from bimu.data.feature_benchmarks import STANDINS

    return benchmark in STANDINS


def data_status(benchmark: str) -> str:
    """``"real"`` or ``"stand-in for <paper data set>"`` (for reports and the results page)."""
    from bimu.data.feature_benchmarks import STANDINS

    return f"stand-in for {STANDINS[benchmark]}" if benchmark in STANDINS else "real"


def ood_auc_of(summary: dict) -> float | None:
    """The OOD ROC-AUC of one seed: the epistemic score, or the aleatoric one (predictive entropy) for a
    deterministic method that has no epistemic uncertainty; ``None`` if neither was measured."""
    auc = summary.get("ood_auc") or {}
    v = auc.get("epistemic")
    return v if isinstance(v, (int, float)) else auc.get("aleatoric")


def seeds_of(n: int, first: int = 0) -> tuple[int, ...]:
    """``--seeds N [--first-seed F]`` -> seeds ``F..F+N-1``."""
    if int(n) < 1:
        raise ValueError(f"--seeds must be >= 1, got {n}")
    if int(first) < 0:
        raise ValueError(f"--first-seed must be >= 0, got {first}")
    return tuple(range(int(first), int(first) + int(n)))


@dataclasses.dataclass
class Row:
    """One row of a run table: its label cells, its configuration (``None``: not applicable) and the
    paper's numbers by quantity key."""

    labels: list[str]
    slug: str
    config: RunConfig | None
    paper: dict[str, str]
    note: str = ""
    same_runs_as: tuple[str, str] | None = None
    """``(entry, slug)`` of another table's row with the same configuration, whose runs this row
    shares (see :func:`share_runs`); ``None``: its own runs."""


def same_configuration(a: RunConfig, b: RunConfig) -> bool:
    """Whether two rows' configurations train and evaluate the same runs: every semantic field equal
    and the same resolved hyperparameters (a preset value and an equal override are the same run)."""
    from bimu.experiments.config import NON_SEMANTIC_KEYS

    skip = (*NON_SEMANTIC_KEYS, "preset", "overrides")
    da = {k: v for k, v in a.to_dict().items() if k not in skip}
    db = {k: v for k, v in b.to_dict().items() if k not in skip}
    return da == db and a.resolve_hparams()[1] == b.resolve_hparams()[1]


def share_runs(rows: list[Row], other_entry: str, other_rows: list[Row]) -> list[Row]:
    """Point each row of ``rows`` whose configuration equals a row of table ``other_entry`` at that
    row's runs (:attr:`Row.same_runs_as`, with a note), so the same training runs once for both tables."""
    for row in rows:
        if row.config is None:
            continue
        for other in other_rows:
            if other.config is not None and same_configuration(row.config, other.config):
                row.same_runs_as = (other_entry, other.slug)
                shared = f"same runs as {other_entry} row {other.slug} (identical configuration)"
                row.note = f"{row.note}; {shared}" if row.note else shared
                break
    return rows


@dataclasses.dataclass
class Options:
    """What ``bimu reproduce`` was asked: seeds, scale, output folder, engine, data dir, threads, parallel
    jobs (or the Dask scheduler) and, for the feature-benchmark entries, the benchmark (``None``: the
    entry's default) and, for the active-learning entries, how many times each task's stream is repeated."""

    seeds: tuple[int, ...] = (0,)
    scale: str = "full"
    out: str = "reproduce"
    engine: str = "auto"
    data_dir: str | None = None
    threads: int = 1
    progress: bool | None = False
    jobs: int = 1
    benchmark: str | None = None
    stream_repeats: int = 1
    rows: tuple[str, ...] | None = None
    """Run only the rows with these slugs (``None``: all); the other rows' completed runs are reused."""
    scheduler: str | None = None
    """A Dask scheduler address: every (row, seed) run is a task of that cluster, whose workers all see
    ``out`` (:mod:`bimu.experiments.distributed`); ``None``: ``jobs`` processes on this machine."""
    from_runs: bool = False
    """Train nothing: build the table from the complete runs already under ``out`` (every seed found)."""


@dataclasses.dataclass
class Report:
    """What a custom entry builds: its table, figure paths, exit code and the benchmarks it ran on."""

    table: Table
    figures: list[Path] = dataclasses.field(default_factory=list)
    code: int = 0
    benchmarks: list[str] = dataclasses.field(default_factory=list)
    seeds: list[int] | None = None
    """The seeds its table shows (``None``: the seeds asked for)."""


@dataclasses.dataclass(frozen=True)
class Entry:
    """One reproducible table: its title, label headers, quantities and rows, or a custom
    ``build(opts, log) -> Report`` (neither: the memory-footprint table, computed without runs);
    ``figures(entry, opts, rows, summaries) -> [paths]`` adds figures to a run table."""

    name: str
    title: str
    label_headers: tuple[str, ...] = ()
    quantities: tuple[str, ...] = ()
    rows: Callable[[Options], list[Row]] | None = None
    build: Callable[..., Report] | None = None
    figures: Callable[..., list[Path]] | None = None
    repeatable_stream: bool = False
    """Whether ``--stream-repeats`` applies (the active-learning entries)."""
    computed: bool = False
    """Whether ``build`` trains nothing (a table computed directly, such as a formula's values)."""
    reads_runs: bool = False
    """Whether ``build`` honours ``--from-runs`` (builds its table from the complete runs on disk,
    training nothing)."""


def row_dir(opts: Options, entry: str, row: Row) -> Path:
    """The ``--out`` of one row's runs: ``OUT/runs/<scale>/<entry>/<row>``, or the shared row's folder
    when the row has :attr:`Row.same_runs_as`."""
    if row.same_runs_as is not None:
        entry, slug = row.same_runs_as
        return Path(opts.out) / "runs" / opts.scale / entry / slug
    return Path(opts.out) / "runs" / opts.scale / entry / row.slug


def selected_rows(opts: Options, name: str, slugs: Sequence[str]) -> set[str]:
    """The row slugs of entry ``name`` to run: all of ``slugs``, or ``opts.rows`` (ValueError naming
    an unknown slug and listing the entry's)."""
    if opts.rows is None:
        return set(slugs)
    unknown = [r for r in opts.rows if r not in slugs]
    if unknown:
        raise ValueError(f"--rows: {name} has no row {unknown[0]!r}; its rows: {', '.join(slugs)}")
    return set(opts.rows)


def rows_note(opts: Options, slugs: Sequence[str]) -> list[str]:
    """The table note saying which rows this command did not run (``--rows``).

    >>> rows_note(Options(rows=["a"]), ["a", "b"])
    ['--rows a: the row b was not run by this command (its completed runs, if any, are shown)']
    >>> rows_note(Options(rows=["a"]), ["a", "b", "c"])[0][:50]
    '--rows a: the rows b, c were not run by this comma'
    >>> rows_note(Options(rows=["a", "b"]), ["a", "b"]), rows_note(Options(), ["a"])
    ([], [])
    """
    if opts.rows is None:
        return []
    skipped = [s for s in slugs if s not in opts.rows]
    if not skipped:
        return []
    what = f"the row {skipped[0]} was" if len(skipped) == 1 else f"the rows {', '.join(skipped)} were"
    whose = "its" if len(skipped) == 1 else "their"
    return [f"--rows {' '.join(opts.rows)}: {what} not run by this command ({whose} completed runs, if any, are shown)"]

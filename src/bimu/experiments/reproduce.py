"""``bimu reproduce NAME``: regenerate one of the paper's tables (runs, then a report).

Each entry of :data:`ENTRIES` lists the table's rows; a row is one configuration (a
:class:`~bimu.experiments.config.RunConfig`) run through :func:`~bimu.experiments.runner.run_experiment`
into its own folder ``OUT/runs/<scale>/<entry>/<row>/`` (one run directory per seed below it), so a
second invocation reuses every completed run (the runner skips them) and resumes interrupted ones.
The report is written as ``OUT/<entry>.md``, ``.csv`` and ``.tex``: mean ± std over seeds of each
quantity, the paper's own number in the adjacent column; figures as ``OUT/<entry>-*.png``; and a
manifest ``OUT/<entry>.json`` (command, seeds, scale, real or stand-in data) from which
``bimu report --results-page`` builds ``docs/results.md``.

Runs are independent jobs (one per row and seed) run side by side with ``--jobs N``
(:mod:`bimu.experiments.parallel`). More entries live in :mod:`bimu.experiments.reproduce_more`
(run tables, figures) and :mod:`bimu.experiments.reproduce_active` (active learning); custom entries
give a ``build(opts, log) -> Report``.

Scales: ``full`` is the paper's protocol; ``quick`` is a smoke test (2 tasks, a few hundred examples)
whose numbers are not comparable with the paper's.

>>> seeds_of(3)
(0, 1, 2)
>>> latex_escape("acc (%) ± 1")
'acc (\\\\%) $\\\\pm$ 1'
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import io
import statistics
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bimu.atomic import atomic_write_text
from bimu.experiments.config import RunConfig

SCALES = ("full", "quick")

PAPER_METHOD_ORDER = ("bimu", "bayesbinn", "synaptic-metaplasticity", "ste", "mesu", "ewc-online", "si", "sgd")
"""The methods of Table 1, in the paper's order (registered names)."""

METHOD_NAMES = {"bimu": "BiMU", "bayesbinn": "BayesBiNN", "synaptic-metaplasticity": "Syn. Meta.", "ste": "STE",
                "mesu": "MESU", "ewc-online": "EWC O.", "si": "SI", "sgd": "SGD"}
"""Display names of the methods as the paper's tables spell them."""

# Appendix "Memory window ablation" (tab:pmnist-memory-window): N -> (acc last 5, OOD AUC, MMRR).
PAPER_MEMORY_WINDOW: dict[Any, tuple[str, str, str]] = {
    100: ("27.09 ± 0.57", "0.99 ± 0.00", "216.45"),
    400: ("73.46 ± 2.59", "1.00 ± 0.00", "574.72"),
    700: ("90.29 ± 0.24", "0.99 ± 0.01", "215.52"),
    1000: ("89.07 ± 0.28", "0.98 ± 0.01", "46.30"),
    1300: ("87.67 ± 0.33", "0.97 ± 0.02", "28.36"),
    1600: ("86.94 ± 0.29", "0.96 ± 0.02", "24.91"),
    1900: ("86.55 ± 0.24", "0.96 ± 0.02", "21.01"),
    100000: ("83.70 ± 0.30", "0.94 ± 0.05", "13.13"),
    "bayesbinn": ("67.91 ± 0.96", "0.75 ± 0.20", "5.03"),
}
"""The paper's memory-window table (100-task Permuted MNIST, 100 hidden units)."""

# Appendix "Activation function ablation" (tab:gate-ablation):
# (method, activation) -> (acc last 5, OOD AUC, MMRR, acc 1 task).
PAPER_ACTIVATION: dict[tuple[str, str], tuple[str, str, str, str]] = {
    ("bayesbinn", "sign"): ("66.40 ± 0.97", "0.54 ± 0.19", "5.85", "90.27 ± 0.32"),
    ("bayesbinn", "rbg"): ("67.41 ± 1.03", "0.76 ± 0.17", "4.99", "93.22 ± 0.09"),
    ("bimu", "sign"): ("81.78 ± 0.58", "0.76 ± 0.08", "22.25", "92.89 ± 0.22"),
    ("bimu", "rbg"): ("90.29 ± 0.24", "0.99 ± 0.01", "215.52", "94.67 ± 0.11"),
    ("mesu", "relu"): ("93.51 ± 0.18", "0.91 ± 0.03", "500.02", "96.10 ± 0.18"),
    ("mesu", "rbg"): ("92.35 ± 0.21", "0.80 ± 0.05", "943.44", "93.01 ± 0.20"),
    ("synaptic-metaplasticity", "sign"): ("10.22 ± 0.05", "-", "9.92", "71.40 ± 1.48"),
    ("synaptic-metaplasticity", "rbg"): ("11.35 ± 0.00", "-", "26.29", "13.20 ± 1.38"),
}
"""The paper's activation ablation table (100-task Permuted MNIST, 100 hidden units)."""

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


def seeds_of(n: int) -> tuple[int, ...]:
    """``--seeds N`` -> seeds ``0..N-1``."""
    if int(n) < 1:
        raise ValueError(f"--seeds must be >= 1, got {n}")
    return tuple(range(int(n)))


def latex_escape(text: str) -> str:
    """Escape a table cell for LaTeX (``%``, ``&``, ``_``, ``#``; ``±`` as ``$\\pm$``)."""
    out = str(text)
    for a, b in (("\\", "\\textbackslash{}"), ("%", "\\%"), ("&", "\\&"), ("_", "\\_"), ("#", "\\#")):
        out = out.replace(a, b)
    return out.replace("±", "$\\pm$")


@dataclasses.dataclass
class Table:
    """A report table: a title, a header and rows of cells (strings), plus notes under it."""

    title: str
    header: list[str]
    rows: list[list[str]]
    notes: list[str] = dataclasses.field(default_factory=list)

    def markdown(self) -> str:
        """The table as markdown (title, table, notes)."""
        lines = [f"## {self.title}", "", "| " + " | ".join(self.header) + " |",
                 "|" + "|".join("---" for _ in self.header) + "|"]
        lines += ["| " + " | ".join(r) + " |" for r in self.rows]
        if self.notes:
            lines += [""] + [f"- {n}" for n in self.notes]
        return "\n".join(lines) + "\n"

    def csv(self) -> str:
        """The same table as CSV (header row first)."""
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(self.header)
        w.writerows(self.rows)
        return buf.getvalue()

    def latex(self) -> str:
        """The same table as a LaTeX ``tabular`` (booktabs rules) with the title as a comment."""
        cols = "l" + "c" * (len(self.header) - 1)
        lines = [f"% {self.title}", f"\\begin{{tabular}}{{{cols}}}", "\\toprule",
                 " & ".join(latex_escape(h) for h in self.header) + " \\\\", "\\midrule"]
        lines += [" & ".join(latex_escape(c) for c in r) + " \\\\" for r in self.rows]
        lines += ["\\bottomrule", "\\end{tabular}"]
        lines += [f"% {latex_escape(n)}" for n in self.notes]
        return "\n".join(lines) + "\n"

    def write(self, out: str | Path, name: str) -> dict[str, Path]:
        """Write ``OUT/NAME.md``, ``.csv`` and ``.tex``; returns the paths by format."""
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        paths = {}
        for ext, text in (("md", self.markdown()), ("csv", self.csv()), ("tex", self.latex())):
            paths[ext] = out / f"{name}.{ext}"
            atomic_write_text(paths[ext], text)
        return paths


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
    jobs and, for the feature-benchmark entries, the benchmark (``None``: the entry's default) and, for
    the active-learning entries, how many times each task's stream is repeated."""

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


def base_config(opts: Options, *, tasks_full: int, method: str, train_limit: int = 300, test_limit: int = 300,
                **changes) -> RunConfig:
    """The Permuted-MNIST (100 hidden units, paper preset) config of a row at the requested scale."""
    quick = opts.scale == "quick"
    d: dict[str, Any] = dict(benchmark="pmnist", method=method, hidden=(100,), seeds=opts.seeds,
                             tasks=2 if quick else tasks_full, engine=opts.engine, threads=opts.threads,
                             data_dir=opts.data_dir, ood=True, ood_every=0,
                             train_limit=train_limit if quick else None, test_limit=test_limit if quick else None)
    d.update(changes)
    return RunConfig.from_dict(d)


def _fmt_n(n) -> str:
    return f"{n:,}".replace(",", " ") if isinstance(n, int) else str(n)


BAYESBINN_VARIANTS = (
    ("BayesBiNN", "bayesbinn", {}, ""),
    ("BayesBiNN, paper's prior sign", "bayesbinn-away", {"prior_direction": "away"},
     "prior_direction=away: the sign of the prior term in the paper's runs (compatibility switch)"),
    ("BayesBiNN, exact ratio", "bayesbinn-exact-ratio", {"ratio_eps": 0.0},
     "ratio_eps=0: the exact mu-gradient ratio, without Meng et al.'s eps (bimu's BayesBiNN before 0424c67)"),
)
"""The memory-window table's BayesBiNN rows: ``(label, slug, overrides, note)``; all against the paper's
BayesBiNN numbers."""


def rows_memory_window(opts: Options) -> list[Row]:
    """BiMU with each memory window N of the paper (quick: two of them), then BayesBiNN."""
    ns = [n for n in PAPER_MEMORY_WINDOW if isinstance(n, int)]
    if opts.scale == "quick":
        ns = [100, 700]
    rows = [Row([_fmt_n(n)], f"bimu-N{n}", base_config(opts, tasks_full=100, method="bimu",
                                                         overrides={"memory_window": n}),
                dict(zip(("acc", "auc", "mmrr"), PAPER_MEMORY_WINDOW[n]))) for n in ns]
    paper = dict(zip(("acc", "auc", "mmrr"), PAPER_MEMORY_WINDOW["bayesbinn"]))
    for label, slug, overrides, note in BAYESBINN_VARIANTS:
        rows.append(Row([label], slug, base_config(opts, tasks_full=100, method="bayesbinn", overrides=overrides),
                        paper, note=note))
    return rows


def rows_activation(opts: Options) -> list[Row]:
    """Sign (ReLU for MESU) vs RBG for BayesBiNN, BiMU, MESU, Syn. Meta. through each method's
    ``activation`` hyperparameter; then Syn. Meta. again with the norm of the paper's runs
    (``bn_statistics=equinox``, the compatibility switch that explains its rows' gaps)."""
    variants = [(method, act, False) for method, first in (("bayesbinn", "sign"), ("bimu", "sign"), ("mesu", "relu"),
                                                           ("synaptic-metaplasticity", "sign"))
                for act in (first, "rbg")]
    variants += [("synaptic-metaplasticity", act, True) for act in ("sign", "rbg")]
    rows = []
    for method, act, paper_norm in variants:
        paper = dict(zip(("acc", "auc", "mmrr", "one_task"), PAPER_ACTIVATION[(method, act)]))
        label = [METHOD_NAMES[method], "ReLU" if act == "relu" else act.upper() if act == "rbg" else "Sign"]
        overrides = {"activation": act}
        if paper_norm:
            label[1] += ", paper's norm"
            overrides["bn_statistics"] = "equinox"
        cfg = base_config(opts, tasks_full=100, method=method, train_limit=100, test_limit=100, overrides=overrides)
        rows.append(Row(label, f"{method}-{act}" + ("-equinox" if paper_norm else ""), cfg, paper,
                        note="\"paper's norm\": bn_statistics=equinox, the batch norm of the paper's runs "
                        "(compatibility switch)"
                        if paper_norm else ""))
    return share_runs(rows, "memory-window", rows_memory_window(opts))


def rows_pmnist_1000(opts: Options) -> list[Row]:
    """Table 1: the eight methods on 1000-task Permuted MNIST, the current task evaluated after each task
    and every task after the final one (the whole last row of the accuracy matrix, which the BWT table
    needs; about 100 s per run); quick: BiMU and SGD on 2 tasks."""
    from bimu.report.tables import paper_table1_cells

    methods = ("bimu", "sgd") if opts.scale == "quick" else PAPER_METHOD_ORDER
    rows = []
    for m in methods:
        paper = paper_table1_cells(m)
        cfg = base_config(opts, tasks_full=1000, method=m, train_limit=200, test_limit=200, eval_final="all")
        rows.append(Row([METHOD_NAMES[m]], m, cfg, paper))
    return rows


@dataclasses.dataclass
class Report:
    """What a custom entry builds: its table, figure paths, exit code and the benchmarks it ran on."""

    table: Table
    figures: list[Path] = dataclasses.field(default_factory=list)
    code: int = 0
    benchmarks: list[str] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True)
class Entry:
    """One reproducible table: its title, label headers, quantities and rows (``None``: no runs), or a
    custom ``build(opts, log) -> Report``; ``figures(entry, opts, rows, summaries) -> [paths]`` adds
    figures to a run table."""

    name: str
    title: str
    label_headers: tuple[str, ...] = ()
    quantities: tuple[str, ...] = ()
    rows: Callable[[Options], list[Row]] | None = None
    build: Callable[..., Report] | None = None
    figures: Callable[..., list[Path]] | None = None
    repeatable_stream: bool = False
    """Whether ``--stream-repeats`` applies (the active-learning entries)."""


ENTRIES: dict[str, Entry] = {
    "memory-footprint": Entry("memory-footprint", "Training-state memory overhead (784-100-10, 1000 tasks)"),
    "memory-window": Entry("memory-window", "Memory window ablation (100-task Permuted MNIST, 100 hidden units)",
                           ("Memory window N",), ("acc", "auc", "mmrr"), rows_memory_window),
    "activation": Entry("activation", "Activation function ablation (100-task Permuted MNIST, 100 hidden units)",
                        ("Method", "Activation"), ("acc", "auc", "mmrr", "one_task"), rows_activation),
    "pmnist-1000": Entry("pmnist-1000", "Table 1: 1000-task Permuted MNIST (100 hidden units)",
                         ("Method",), ("acc", "auc", "mmrr", "one_task"), rows_pmnist_1000),
}
"""``bimu reproduce`` entries built here (``compute-cost`` is forwarded to its own command)."""


def memory_footprint_report(opts: Options) -> Table:
    """The memory table from :func:`~bimu.methods.footprint.memory_footprint_table` beside the paper's
    (quick scale: 10 task boundaries instead of 1000, so per-task state is smaller)."""
    from bimu.methods.footprint import PAPER_MEMORY_MB, memory_footprint_table

    n_tasks = 10 if opts.scale == "quick" else 1000
    table = memory_footprint_table((784, 100, 10), n_tasks=n_tasks, methods=list(PAPER_MEMORY_MB))
    rows = [[METHOD_NAMES.get(m, m), f"{mb:.2f}", f"{PAPER_MEMORY_MB[m]:.2f}"] for m, mb in table.items()]
    notes = [f"regenerated after {n_tasks} task boundaries (MB = 10^6 bytes, float32)"]
    if opts.scale == "quick":
        notes.append("quick scale: not the paper's 1000 tasks; state that grows per task is smaller")
    return Table(ENTRIES["memory-footprint"].title, ["Method", "Memory (MB)", "Paper (MB)"], rows, notes)


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


def run_rows(entry: Entry, opts: Options, log=None) -> tuple[list[Row], dict[str, list[dict]], int]:
    """Run (or reuse) every applicable row, one job per (row, seed) side by side with ``opts.jobs``
    processes (:func:`~bimu.experiments.parallel.run_jobs`); returns ``(rows, summaries by row slug,
    exit code)``. Every configuration is checked first (clear errors before any training); a failing
    job leaves its ``error.txt`` and the others complete."""
    from bimu.experiments.parallel import Job, run_jobs
    from bimu.experiments.runner import preflight

    rows = entry.rows(opts)
    chosen = selected_rows(opts, entry.name, [r.slug for r in rows])
    jobs = []
    for row in rows:
        if row.config is None or row.slug not in chosen:
            continue
        cfg = row.config.replace(out=str(row_dir(opts, entry.name, row)))
        preflight(cfg)
        for seed in cfg.seeds:
            jobs.append(Job(f"{row.slug}/seed-{seed}", run_config_job,
                            (cfg.replace(seeds=[seed]).to_dict(), opts.progress, benchmark_module(cfg.benchmark))))
    if opts.jobs == 1:  # in this process: keep the caller's log
        jobs = [Job(j.key, run_config_job, (*j.args, log)) for j in jobs]
    codes = run_jobs(jobs, opts.jobs, log=log)
    summaries = {row.slug: read_summaries(row.config.replace(out=str(row_dir(opts, entry.name, row))))
                 for row in rows if row.config is not None}
    return rows, summaries, max(codes.values(), default=0)


def benchmark_module(benchmark: str) -> str:
    """The module whose import registers ``benchmark`` (a job process imports it first)."""
    from bimu.data.benchmarks import benchmark_entry

    factory = benchmark_entry(benchmark).factory
    return getattr(factory, "__module__", None) or "bimu.data.benchmarks"


def run_config_job(config: dict, progress=False, module: str | None = None, log=None) -> int:
    """One job of :func:`run_rows`: import ``module`` (registers the benchmark), then
    :func:`~bimu.experiments.runner.run_experiment` on ``config`` (a dict); returns its exit code."""
    import importlib

    from bimu.experiments.runner import run_experiment

    if module:
        importlib.import_module(module)
    return run_experiment(RunConfig.from_dict(config), progress=progress, log=log)[1]


def read_summaries(cfg: RunConfig) -> list[dict]:
    """The complete seeds' ``summary.json`` of ``cfg`` (its accuracy matrix under ``_R``), seed order."""
    from bimu.experiments.rundir import SUMMARY, RunDir, seed_dir

    out = []
    for seed in cfg.seeds:
        rd = RunDir(seed_dir(cfg.out, cfg.benchmark, cfg.method, seed))
        if rd.exists(SUMMARY):
            summ = rd.read_json(SUMMARY)
            if summ.get("complete"):
                out.append(dict(summ, _R=rd.read_matrix(), _dir=str(rd.path)))
    return out


def run_table(entry: Entry, opts: Options, rows: Sequence[Row], summaries: dict[str, list[dict]]) -> Table:
    """The table of ``entry``: label cells, then for each quantity mean ± std over seeds and the paper's."""
    from bimu.experiments.gaps import GAP_SD, explanation, gap_sd, parse_reported
    from bimu.report.tables import fmt_pm

    header = list(entry.label_headers)
    for q in entry.quantities:
        header += [QUANTITIES[q][0], "Paper"]
    header.append("Seeds")
    out_rows, notes, gap_notes = [], [], []
    for row in rows:
        cells = list(row.labels)
        summ = summaries.get(row.slug, [])
        judged = opts.scale == "full" and row.config is not None and not is_standin(row.config.benchmark)
        for q in entry.quantities:
            name, get, scale, digits = QUANTITIES[q]
            if row.config is None:
                cells.append("n/a")
            elif q == "mmrr":
                cells.append(seed_averaged_mmrr(summ))
            else:
                values = [get(s) for s in summ]
                cell = fmt_pm(values, scale, digits)
                paper = parse_reported(row.paper.get(q, "-"))
                gap = gap_sd([v * scale for v in values if isinstance(v, (int, float))], paper) if judged and paper else None
                if gap is not None and gap > GAP_SD:
                    gap_notes.append(f"† {' '.join(row.labels)}, {name}: {cell} against the paper's "
                                     f"{row.paper[q]} ({gap:.1f} sd): {explanation(entry.name, row.slug, q)}")
                    cell += " †"
                cells.append(cell)
            cells.append(row.paper.get(q, "-"))
        cells.append("n/a" if row.config is None else (",".join(str(s.get("seed")) for s in summ) or "-"))
        out_rows.append(cells)
        if row.note and row.note not in notes:  # rows that share a note (a switch's rows) state it once
            notes.append(row.note)
    standins = sorted({r.config.benchmark for r in rows if r.config is not None and is_standin(r.config.benchmark)})
    for b in standins:
        notes.append(f"STAND-IN: runs on {b} ({data_status(b)}), an offline substitute built from "
                     "Tiny-ImageNet; its numbers are not the paper's data set")
    if opts.scale == "quick":
        notes.append("quick scale: 2 tasks on a few hundred examples; numbers are a smoke test, "
                     "not comparable with the paper's")
    notes += rows_note(opts, [r.slug for r in rows if r.config is not None])
    if gap_notes:
        notes.append(f"† more than {GAP_SD:g} standard deviations from the paper (sd of the difference of "
                     "the means, from the paper's ± and our seeds'):")
        notes += gap_notes
    benches = {r.config.benchmark for r in rows if r.config is not None}
    ood = "Fashion-MNIST" if benches <= {"pmnist"} else "the held-out OOD class" if "pmnist" not in benches \
        else "Fashion-MNIST (Permuted MNIST) or the held-out OOD class (feature benchmarks)"
    notes.append(f"runs under {Path(opts.out) / 'runs' / opts.scale / entry.name}; mean ± std over seeds "
                 f"(sample std); OOD AUC is the epistemic score vs {ood} "
                 "(aleatoric for deterministic methods); MMRR (one number, as in the "
                 "paper) is computed from the seed-averaged accuracy matrices")
    title = entry.title + "".join(f" [stand-in: {b}]" for b in standins)
    return Table(title + ("" if opts.scale == "full" else " [quick]"), header, out_rows, notes)


def seed_averaged_mmrr(summaries: Sequence[dict]) -> str:
    """MMRR as the paper reports it (one number): from the seed-averaged accuracy matrices
    (:func:`~bimu.metrics.mmrr_seed_averaged`); ``-`` without complete runs."""
    import numpy as np

    from bimu.metrics import mmrr_seed_averaged

    mats = [np.asarray(s["_R"], dtype=float) for s in summaries if s.get("_R") is not None]
    if not mats or len({m.shape for m in mats}) != 1:
        return "-"
    try:
        return f"{mmrr_seed_averaged(mats):.2f}"
    except ValueError:
        return "-"


def reproduce(name: str, opts: Options, log=None) -> tuple[Table, dict[str, Path], int]:
    """Run (or reuse) the runs of entry ``name`` and write its report (tables, figures and the manifest
    ``OUT/NAME.json`` read by the results page); returns ``(table, paths, exit code)``."""
    from bimu.experiments.parallel import check_jobs

    if name not in ENTRIES:
        raise ValueError(f"unknown reproduction {name!r}; known: {sorted(ENTRIES)}")
    if opts.scale not in SCALES:
        raise ValueError(f"--scale must be one of {SCALES}, got {opts.scale!r}")
    check_jobs(opts.jobs)
    entry = ENTRIES[name]
    if opts.stream_repeats != 1 and not entry.repeatable_stream:
        raise ValueError(f"--stream-repeats applies to the active-learning entries "
                         f"({', '.join(sorted(e for e in ENTRIES if ENTRIES[e].repeatable_stream))}), not {name!r}")
    benchmarks: list[str] = []
    figures: list[Path] = []
    if entry.build is not None:
        rep = entry.build(opts, log)
        table, code, figures, benchmarks = rep.table, rep.code, list(rep.figures), list(rep.benchmarks)
    elif entry.rows is None:
        table, code = memory_footprint_report(opts), 0
    else:
        rows, summaries, code = run_rows(entry, opts, log=log)
        table = run_table(entry, opts, rows, summaries)
        benchmarks = sorted({r.config.benchmark for r in rows if r.config is not None})
        if entry.figures is not None:
            figures = list(entry.figures(entry, opts, rows, summaries))
    paths = table.write(opts.out, name)
    for f in figures:
        paths[Path(f).stem] = Path(f)
    from bimu.report.results_page import write_manifest

    paths["manifest"] = write_manifest(opts, entry, table, paths, benchmarks, code)
    return table, paths, code


def plan(name: str, opts: Options) -> list[dict]:
    """What ``bimu reproduce NAME`` would train, without training: one dict per (row, seed) of a run
    table (the rows ``opts.rows`` selects) with ``row``, ``seed``, ``path`` (the seed's run directory) and
    :func:`~bimu.experiments.status.seed_status`'s fields (``state`` ``"to run"`` for a run not started,
    its time left estimated from started runs of the same method, benchmark and hidden widths under
    ``OUT/runs`` when there are any).
    ValueError for an entry that builds its own runs (the active-learning sweeps)."""
    from bimu.experiments.rundir import CONFIG, find_run_dirs, seed_dir
    from bimu.experiments.status import seed_status

    if name not in ENTRIES:
        raise ValueError(f"unknown reproduction {name!r}; known: {sorted(ENTRIES)}")
    entry = ENTRIES[name]
    if entry.build is not None:
        raise ValueError(f"--dry-run lists the runs of the run tables; {name!r} builds its own "
                         "(run it, or look at its folder with 'bimu status')")
    if entry.rows is None:
        raise ValueError(f"--dry-run: {name!r} trains nothing (it is computed directly); run it")
    rows = entry.rows(opts)
    chosen = selected_rows(opts, name, [r.slug for r in rows])
    out = []
    for row in rows:
        if row.config is None or row.slug not in chosen:
            continue
        cfg = row.config
        for seed in cfg.seeds:
            d = seed_dir(row_dir(opts, name, row), cfg.benchmark, cfg.method, seed)
            if (d / CONFIG).is_file():
                st = seed_status(d)
            else:
                st = {"path": str(d), "benchmark": cfg.benchmark, "method": cfg.method,
                      "hidden": list(cfg.hidden_widths()), "state": "to run", "tasks_done": 0, "tasks": cfg.tasks,
                      "last_acc": None, "steps_per_s": None, "seconds_per_task": None, "seconds_spent": 0.0,
                      "seconds_left": None, "error": None}
            shared = "/".join(row.same_runs_as) if row.same_runs_as else None
            out.append(dict(st, row=row.slug, seed=seed, shared_with=shared))
    # a run without a rate of its own: the median time per task of the started runs of the same method,
    # benchmark and hidden widths anywhere under OUT/runs
    pool = []
    if (Path(opts.out) / "runs").is_dir():
        pool = [seed_status(p) for p in find_run_dirs([Path(opts.out) / "runs"])]
    for st in out:
        if st["seconds_left"] is None and st["tasks"] is not None:
            kind = (st["method"], st["benchmark"], list(st["hidden"]))
            known = [o["seconds_per_task"] for o in pool if o["seconds_per_task"] is not None
                     and (o["method"], o["benchmark"], list(o["hidden"])) == kind]
            if known:
                st["seconds_left"] = (int(st["tasks"]) - st["tasks_done"]) * statistics.median(known)
    return out


def format_plan(name: str, runs: Sequence[dict]) -> str:
    """The dry-run table of :func:`plan` and a total line (a run is estimated from the started runs of
    the same method, benchmark and hidden widths under ``OUT/runs``: "their kind").

    >>> print(format_plan("memory-window", [{"row": "bimu-N100", "seed": 0, "state": "to run", "tasks_done": 0,
    ...   "tasks": 100, "seconds_left": None}, {"row": "bimu-N100", "seed": 1, "state": "complete",
    ...   "tasks_done": 100, "tasks": 100, "seconds_left": 0.0}]))
    memory-window: 2 runs (1 complete, 1 to run)
    row        seed  state     tasks    left
    bimu-N100  0     to run    0/100       ?
    bimu-N100  1     complete  100/100   0 s
    work left: 0 s of one core (+ 1 not estimated: no started run of their kind under OUT/runs)
    """
    from bimu.experiments.status import format_duration

    table = [("row", "seed", "state", "tasks", "left")]
    for r in runs:
        row = r["row"] + (f" (= {r['shared_with']})" if r.get("shared_with") else "")
        table.append((row, str(r["seed"]), r["state"],
                      f"{r['tasks_done']}/{'?' if r['tasks'] is None else r['tasks']}", format_duration(r["seconds_left"])))
    widths = [max(len(t[i]) for t in table) for i in range(5)]
    lines = ["  ".join(c.rjust(w) if i == 4 else c.ljust(w) for i, (c, w) in enumerate(zip(t, widths))).rstrip()
             for t in table]
    states: dict[str, int] = {}
    for r in runs:
        states[r["state"]] = states.get(r["state"], 0) + 1
    head = f"{name}: {len(runs)} run{'s' if len(runs) != 1 else ''} (" + \
        ", ".join(f"{v} {k}" for k, v in sorted(states.items())) + ")"
    left = [r["seconds_left"] for r in runs]
    unknown = sum(x is None for x in left)
    total = f"work left: {format_duration(sum(x for x in left if x is not None))} of one core"
    if unknown:
        total += f" (+ {unknown} not estimated: no started run of their kind under OUT/runs)"
    return "\n".join([head, *lines, total])


def add_options(parser: argparse.ArgumentParser) -> None:
    """The options of ``bimu reproduce NAME`` (for the entries of :data:`ENTRIES`)."""
    parser.add_argument("--seeds", type=int, default=None,
                        help="number of seeds: runs seeds 0..N-1 (default 5 at full scale, 1 at quick)")
    parser.add_argument("--scale", choices=SCALES, default="full",
                        help="full: the paper's protocol; quick: a tiny smoke test (default full)")
    parser.add_argument("--out", default=None, help="output folder for runs and tables (default ./reproduce)")
    parser.add_argument("--engine", choices=("auto", "torch", "fused"), default="auto", help="engine (default auto)")
    parser.add_argument("--data-dir", default=None, help="data directory (default $BIMU_DATA_DIR, then the user cache)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads per run (default 1)")
    parser.add_argument("--jobs", type=int, default=None,
                        help="independent runs (seeds, configurations) side by side in separate processes "
                             "(default: the number of cores)")
    parser.add_argument("--benchmark", default=None,
                        help="feature-benchmark entries (openloris, standardisation, *-al, vr-samples, "
                             "budget-controller, query-dynamics): run on this benchmark instead of the "
                             "offline stand-in, e.g. openloris when its data are present")
    parser.add_argument("--rows", nargs="+", default=None, metavar="SLUG",
                        help="run only these rows of the table (their folder names under OUT/runs/SCALE/NAME, "
                             "e.g. bimu); the other rows' completed runs are still shown")
    parser.add_argument("--dry-run", action="store_true", default=None,
                        help="run tables: list each run (row, seed) with its state, tasks done and the time "
                             "left estimated from started runs; train nothing, write nothing")
    parser.add_argument("--stream-repeats", type=int, default=None, metavar="R",
                        help="active-learning entries: stream each task's training data R times, each copy in "
                             "its own order (default 1; animals-ti x 4 has the paper's Animals stream length)")


def options_parser() -> argparse.ArgumentParser:
    """A parser of just the reproduce options (for options given after NAME)."""
    p = argparse.ArgumentParser(prog="bimu reproduce NAME", add_help=False)
    add_options(p)
    return p


def cli(name: str, args: argparse.Namespace, extra: Sequence[str]) -> int:
    """``bimu reproduce NAME`` for an entry of :data:`ENTRIES`: options before NAME are in ``args``,
    options after it in ``extra``; prints the markdown table and where the files are."""
    ns = options_parser().parse_args(list(extra), namespace=argparse.Namespace(**{
        k: getattr(args, k, None) for k in ("seeds", "scale", "out", "engine", "data_dir", "threads", "jobs",
                                            "benchmark", "stream_repeats", "rows", "dry_run")}))
    scale = ns.scale or "full"
    n = ns.seeds if ns.seeds is not None else (5 if scale == "full" else 1)
    try:
        from bimu.experiments.parallel import default_jobs

        opts = Options(seeds=seeds_of(n), scale=scale, out=ns.out or "reproduce", engine=ns.engine or "auto",
                       data_dir=ns.data_dir, threads=ns.threads or 1,
                       jobs=default_jobs() if ns.jobs is None else ns.jobs, benchmark=ns.benchmark,
                       stream_repeats=1 if ns.stream_repeats is None else ns.stream_repeats,
                       rows=None if ns.rows is None else tuple(ns.rows))
        if ns.dry_run:
            print(format_plan(name, plan(name, opts)))
            return 0
        table, paths, code = reproduce(name, opts)
    except KeyboardInterrupt:
        return 130
    except (ValueError, FileNotFoundError, RuntimeError) as e:
        print(f"bimu reproduce: error: {e}", file=sys.stderr)
        return 2
    print(table.markdown())
    print("written: " + ", ".join(str(p) for p in paths.values()))
    return code


# The modules of more entries register them in ENTRIES when imported (plain imports, so that importing
# either of them first works too).
import bimu.experiments.reproduce_active  # noqa: E402,F401
import bimu.experiments.reproduce_more  # noqa: E402,F401

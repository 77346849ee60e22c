"""``bimu reproduce`` entries of the active-learning experiments: what they share (rows, run
directories, tables), and ``vr-samples`` and ``budget-controller`` (``animals-al`` and ``openloris-al``, the
method comparison: :mod:`bimu.reproduce.al_methods`; ``query-dynamics``: :mod:`bimu.reproduce.query_dynamics`).

Each row is one query rule of one method (score and threshold, or budget controller; ``all`` is the
100%-update baseline) run by :func:`bimu.experiments.sweep.run_stream` (one pass over every task, then
accuracy on every task's test set, overall / rare / frequent classes). Every (row, seed) is a job with
its own run directory ``OUT/runs/<scale>/<entry>/<row>/seed-<s>/`` holding ``config.json`` and
``result.json`` (written atomically): a second invocation reuses completed runs, a directory holding a
different configuration is an error, ``--jobs`` runs them side by side, ``--rows`` runs some of them
and ``--from-runs`` trains nothing and reads the complete runs on disk.

Data: the offline stand-ins ``animals-ti`` (Animals) and ``objects-seq`` (imbalanced OpenLORIS-Object:
its structure of object instances filmed as frame sequences, docs/objects-seq.md) unless
``--benchmark`` names the real data set (``animals`` / ``openloris``, which must be present) or the
older OpenLORIS stand-in ``objects-ti``. The paper quotes only a few points of its accuracy-vs-queried
figures in the text; those points are the paper column, the rest of the figure has no numbers to
compare with.

>>> [r.slug for r in rows_vr_samples(Options(scale="quick"))][:3]
['all', 'vr-K2-n1', 'vr-K3-n1']
>>> paper_vr_samples(10, 3), paper_vr_samples(25, 20)
(('88.70 ± 1.94', '3.10 ± 0.31'), ('5.26 ± 0.00', '0.00 ± 0.00'))
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bimu import paper
from bimu.paper import paper_points, paper_vr_samples  # noqa: F401 - part of this module's interface
from bimu.reproduce.al_setups import (AL_BASELINES, DATA_NAMES, OPENLORIS_BENCHMARKS, SETUPS,  # noqa: F401
                                      ALSetup, animals_setup, objects_setup, pmnist_setup)
from bimu.reproduce.spec import Options, Report, data_status, is_standin, rows_note, selected_rows
from bimu.reproduce.al_notes import (STALLED_LABELS, TIMING, compute_note, diverged_note,  # noqa: F401
                                     seeds_cell, seeds_shown, stalled_note, waiting_note)
from bimu.reproduce.table import Table

BUDGETS = (0.005, 0.01, 0.02, 0.03, 0.04, 0.05)
"""Target budgets B of the controller table."""
GAMMAS = (0.01, 0.10, 0.50)
"""Controller exponents gamma of the controller table."""
VR_SAMPLES = (2, 3, 5, 10, 25)
"""K of the variation-ratio ablation."""

SCORE_NAMES = {"all": "100% updates", "vr": "VR", "entropy": "Predictive entropy", "aleatoric": "Aleatoric",
               "epistemic": "Epistemic", "vr-true": "VR-True (oracle)", "random": "Random"}
"""Display names of the query rules."""


# ------------------------------------------------------------------------------------ rows and runs
@dataclasses.dataclass
class ALRow:
    """One query rule: label cells, a slug (its folder), the :func:`~bimu.experiments.sweep.run_stream`
    keyword arguments, and the paper's cells by key."""

    labels: list[str]
    slug: str
    params: dict[str, Any]
    paper: dict[str, str] = dataclasses.field(default_factory=dict)


QUICK_LIMITS = {"n_tasks": 2, "train_limit": 60, "test_limit": 100}
"""Quick scale: the first two tasks, 60 training and 100 test examples per task."""

_BENCH_CACHE: dict[str, Any] = {}


def load_benchmark(setup: ALSetup, opts: Options):
    """The entry's benchmark (cut down at quick scale); cached per process."""
    from bimu.data.benchmarks import get_benchmark
    from bimu.data.views import LimitedBenchmark, RepeatedStream

    key = json.dumps([setup.benchmark, setup.options, opts.scale, opts.data_dir], sort_keys=True)
    if key not in _BENCH_CACHE:
        options = dict(setup.options)
        repeats = options.pop("stream_repeats", 1)
        bench = get_benchmark(setup.benchmark, data_dir=opts.data_dir, **options)
        if opts.scale == "quick":
            bench = LimitedBenchmark(bench, **QUICK_LIMITS)
        if repeats != 1:
            bench = RepeatedStream(bench, repeats)
        _BENCH_CACHE[key] = bench
    return _BENCH_CACHE[key]


def rule_params(score: str, threshold=None, *, budget=None, gamma=0.5, k=10, method="bimu", preset=None,
                hidden=()) -> dict:
    """Keyword arguments of :func:`~bimu.experiments.sweep.run_stream` for one query rule (``hidden``: the
    network's hidden widths, recorded only when there are any, so a linear head's runs keep their
    configuration)."""
    network = {"hidden": [int(h) for h in hidden]} if hidden else {}
    return {"method": method, "strategy": score, "threshold": threshold, "budget": budget,
            "budget_exponent": gamma, "mc_samples": k, "preset": preset, **network}


def rows_vr_samples(opts: Options, data: str = "openloris") -> list[ALRow]:
    """VR with K in 2, 3, 5, 10, 25 at every vote threshold n/K, n = 1..K-1 (quick: n = 1), and the
    100% baseline, on ``data`` (``openloris``: the paper's table; ``animals`` and ``pmnist``: the same rows,
    which the paper does not report)."""
    setup = SETUPS[data](opts)
    rows = [ALRow(["Baseline", "-"], "all", rule_params("all", preset=setup.preset, hidden=setup.hidden),
                  paper.cells(AL_BASELINES[data]) if data in AL_BASELINES else {})]
    for k in VR_SAMPLES:
        for n in ((1,) if opts.scale == "quick" else range(1, k)):
            acc, used = paper_vr_samples(k, n) if data == "openloris" else ("-", "-")
            rows.append(ALRow([str(k), f"{n / k:.2f}"], f"vr-K{k}-n{n}",
                              rule_params("vr", n / k, k=k, preset=setup.preset, hidden=setup.hidden),
                              {"acc": acc, "used": used}))
    return rows


def rows_budget(opts: Options, data: str = "openloris") -> list[ALRow]:
    """The budget controller (VR, K = 10) for each target B and exponent gamma, and the full-stream
    baseline (quick: B = 3% with gamma 0.5 and 0.1), on ``data`` (as :func:`rows_vr_samples`)."""
    setup = SETUPS[data](opts)
    rows = [ALRow(["Random querying", "Full stream"], "all",
                  rule_params("all", preset=setup.preset, hidden=setup.hidden),
                  paper.cells(AL_BASELINES[data]) if data in AL_BASELINES else {})]
    pairs = [(0.03, 0.5), (0.03, 0.1)] if opts.scale == "quick" else [(b, g) for b in BUDGETS for g in GAMMAS]
    for b, g in pairs:
        ref = paper.cells(paper.BUDGET[(b, g)]) if data == "openloris" else {}
        rows.append(ALRow(["Budgeted VR", f"B={100 * b:.1f}%, gamma={g:.2f}"], f"vr-B{b:g}-g{g:g}",
                          rule_params("vr", budget=b, gamma=g, preset=setup.preset, hidden=setup.hidden), ref))
    return rows


def run_dir_of(opts: Options, entry: str, row: ALRow, seed: int) -> Path:
    """``OUT/runs/<scale>/<entry>/<row>/seed-<s>``."""
    return Path(opts.out) / "runs" / opts.scale / entry / row.slug / f"seed-{int(seed)}"


def _job_config(setup: ALSetup, opts: Options, row: ALRow, seed: int) -> dict:
    """What a run directory's ``config.json`` records; the engine only when one is asked for (``auto``
    runs keep the configuration they always had, so their completed runs are reused)."""
    engine = {} if opts.engine == "auto" else {"engine": opts.engine}
    return {"benchmark": setup.benchmark, "benchmark_options": setup.options, "scale": opts.scale,
            "limits": QUICK_LIMITS if opts.scale == "quick" else None, "seed": int(seed), **row.params, **engine}


def start_run_dir(setup: ALSetup, opts: Options, entry: str, row: ALRow, seed: int, environment: dict):
    """The run directory of (row, seed) with its ``config.json`` and ``environment.json`` written, or None
    when it holds the complete run already; ValueError if it holds a run of another configuration."""
    from bimu.rundir import ENVIRONMENT, RunDir, environment_info

    rd = RunDir(run_dir_of(opts, entry, row, seed))
    cfg = _stored_config(setup, opts, row, seed)
    if rd.exists("config.json"):
        if rd.read_json("config.json") != cfg:
            raise ValueError(f"{rd.path} holds a run with a different configuration; use another --out or "
                             "remove that directory")
        if rd.exists("result.json"):
            return None
    rd.write_json("config.json", cfg)
    # the processor and versions that ran it: an active stream's decisions follow the last bits of its
    # features and kernels, which differ between processor types (same seed, same machine: same run)
    rd.write_json(ENVIRONMENT, environment_info(seed, environment))
    return rd


def run_one(setup: ALSetup, opts: Options, entry: str, row: ALRow, seed: int) -> int:
    """Run (or reuse) one (row, seed) into its run directory; ValueError if the directory holds a run
    of another configuration."""
    from bimu.experiments.sweep import run_stream
    from bimu.methods.divergence import DivergenceError

    rd = start_run_dir(setup, opts, entry, row, seed, {"engine": opts.engine, "threads": opts.threads})
    if rd is None or share_identical(setup, opts, entry, row, seed):
        return 0
    data = load_benchmark(setup, opts)
    start = time.perf_counter()
    try:
        result = run_stream(data, seed=int(seed), engine=opts.engine, **row.params)
    except DivergenceError as e:  # a result of this configuration and seed (the same on every rerun)
        result = {"seed": int(seed), "diverged": str(e)}
    # wall time beside the result, which stays the same on every rerun of this configuration and seed
    rd.write_json(TIMING, {"seconds": round(time.perf_counter() - start, 3), "threads": int(opts.threads)})
    rd.write_json("result.json", result)
    return 0


SHARED = "shared_from.json"
"""A run directory whose result was copied from an identical finished run (:func:`share_identical`) says
from which, relative to ``OUT/runs/<scale>``."""


def share_identical(setup: ALSetup, opts: Options, entry: str, row: ALRow, seed: int) -> bool:
    """Complete (row, seed) with the files of a finished run of exactly its configuration under another
    entry or row of the same ``OUT`` (``config.json`` equal: the same data, method, rule, K, threshold
    and seed give the same stream, to the bit), instead of training it again: ``vr-samples``' K = 10 rows
    are ``openloris-al``'s BiMU VR rows, ``pmnist-vr-samples``' are ``pmnist-al``'s. Copies
    ``result.json``, its timing and environment, and writes :data:`SHARED`; False when there is none.

    >>> import tempfile; from bimu.reproduce.al_setups import SETUPS
    >>> opts = Options(scale="quick", out=tempfile.mkdtemp()); row = rows_vr_samples(opts)[1]
    >>> share_identical(SETUPS["openloris"](opts), opts, "vr-samples", row, 0)  # nothing finished yet
    False
    """
    import shutil

    from bimu.rundir import ENVIRONMENT, RunDir

    want = _stored_config(setup, opts, row, seed)
    mine = run_dir_of(opts, entry, row, seed)
    base = Path(opts.out) / "runs" / opts.scale
    for cfg_file in sorted(base.glob(f"*/*/seed-{int(seed)}/config.json")):
        src = cfg_file.parent
        if src == mine or not (src / "result.json").is_file():
            continue
        try:
            same = json.loads(cfg_file.read_text()) == want
        except ValueError:
            continue
        if same:
            for name in (ENVIRONMENT, TIMING):
                if (src / name).is_file():
                    shutil.copyfile(src / name, mine / name)
            rd = RunDir(mine)
            rd.write_json(SHARED, {"from": src.relative_to(base).as_posix()})
            rd.write_json("result.json", json.loads((src / "result.json").read_text()))
            return True
    return False


def run_al_rows(name: str, setup: ALSetup, rows: Sequence[ALRow], opts: Options, log=None, runner=None):
    """Run every (row, seed) job (``opts.jobs`` side by side; with ``opts.from_runs`` none) with ``runner``
    (default :func:`run_one`, same arguments); returns ``(results by slug, exit code)`` (:func:`read_results`)."""
    import torch

    from bimu.experiments.parallel import Job, run_jobs

    chosen = selected_rows(opts, name, [r.slug for r in rows])
    code = 0
    todo = [(row, s) for row in rows for s in opts.seeds
            if row.slug in chosen and not is_complete(setup, opts, name, row, s)]
    if todo and not opts.from_runs:  # every run complete: the table is read from them, no data loaded
        torch.set_num_threads(int(opts.threads))
        load_benchmark(setup, opts)  # a missing data set fails here, before any job starts
        jobs = [Job(f"{row.slug}/seed-{s}", runner or run_one, (setup, opts, name, row, s),
                    label=f"{name} {row.slug} seed {s}") for row, s in todo]
        codes = run_jobs(jobs, opts.jobs, log=log, scheduler=opts.scheduler, shared=opts.out)
        code = max(codes.values(), default=0)
    return read_rows(setup, opts, name, rows), code


def is_complete(setup: ALSetup, opts: Options, name: str, row: ALRow, seed: int) -> bool:
    """Whether (row, seed) has a finished run of exactly this configuration (:func:`run_one` reuses it)."""
    d = run_dir_of(opts, name, row, seed)
    if not ((d / "result.json").is_file() and (d / "config.json").is_file()):
        return False
    try:
        return json.loads((d / "config.json").read_text()) == _stored_config(setup, opts, row, seed)
    except ValueError:  # an unreadable config.json: run_one names the problem
        return False


def _stored_config(setup: ALSetup, opts: Options, row: ALRow, seed: int) -> dict:
    """:func:`_job_config` as its ``config.json`` reads back (what :func:`run_one` compares and writes)."""
    from bimu.rundir import dumps

    return json.loads(dumps(_job_config(setup, opts, row, seed)))


def read_rows(setup: ALSetup, opts: Options, name: str, rows: Sequence[ALRow]) -> dict[str, list[dict]]:
    """:func:`read_results` of every row, by slug."""
    return {row.slug: read_results(setup, opts, name, row) for row in rows}


def read_results(setup: ALSetup, opts: Options, name: str, row: ALRow) -> list[dict]:
    """The complete runs of ``row`` (seed order): of the seeds ``opts.seeds``, or with
    ``opts.from_runs`` of every ``seed-<s>`` folder on disk; a run counts when its ``config.json`` is
    this row's configuration (whatever engine ran it) and its ``result.json`` is written."""
    folder = run_dir_of(opts, name, row, 0).parent
    if opts.from_runs:
        found = folder.glob("seed-*") if folder.is_dir() else []
        seeds = sorted(int(p.name[5:]) for p in found if p.name[5:].isdigit())
    else:
        seeds = list(opts.seeds)
    out = []
    for s in seeds:
        d = run_dir_of(opts, name, row, s)
        if (d / "result.json").is_file() and (d / "config.json").is_file():
            cfg = json.loads((d / "config.json").read_text())
            want = _job_config(setup, opts, row, s)
            cfg.pop("engine", None)
            want.pop("engine", None)
            if cfg == json.loads(json.dumps(want)):
                res = json.loads((d / "result.json").read_text())
                if (d / TIMING).is_file():
                    res["_seconds"] = json.loads((d / TIMING).read_text()).get("seconds")
                out.append(res)
    return out


# ------------------------------------------------------------------------------------ tables
def pm(vals, scale=100.0, digits=2) -> str:
    """Mean ± sample sd of the numbers among ``vals`` (times ``scale``); ``-`` without any."""
    from bimu.report.tables import fmt_pm

    return fmt_pm([v for v in vals if v is not None], scale, digits)


def table_notes(setup: ALSetup, opts: Options, name: str, method: str = "bimu", rows: Sequence[ALRow] = ()) -> list[str]:
    """The notes every active-learning table carries: data, method, runs, stand-in, scale, ``--rows``."""
    out = [f"data: {setup.benchmark} ({data_status(setup.benchmark)}), options {setup.options}; "
           f"method {paper.METHOD_NAMES.get(method, method)} (preset {setup.preset}); "
           + (f"hidden layers {list(setup.hidden)}; " if setup.hidden else "") + "runs under "
           f"{Path(opts.out) / 'runs' / opts.scale / name}; mean ± std over seeds (sample std)"]
    if is_standin(setup.benchmark):
        out.append(f"STAND-IN: {setup.benchmark} is an offline substitute built from Tiny-ImageNet "
                   "(EfficientNet-Lite0 features), not the paper's data set"
                   + ("; it has OpenLORIS-Object's structure (object instances filmed as frame sequences, test "
                      "frames from the same recordings; docs/objects-seq.md)" if setup.benchmark == "objects-seq"
                      else ""))
    if opts.scale == "quick":
        out.append("quick scale: 2 tasks (1 for Animals) of 60 examples and 1 024 features (784 pixels on Permuted "
                   "MNIST); a smoke test, not comparable with the paper's numbers")
    if opts.from_runs:
        out.append("built from the complete runs on disk (--from-runs): every seed found")
    return out + rows_note(opts, [r.slug for r in rows])


def table_title(base: str, setup: ALSetup, opts: Options) -> str:
    """``base`` with the stand-in, stream repeats and quick scale marked."""
    return (base + (f" [stand-in: {setup.benchmark}]" if is_standin(setup.benchmark) else "")
            + (f" [stream x{opts.stream_repeats}]" if opts.stream_repeats != 1 else "")
            + ("" if opts.scale == "full" else " [quick]"))


def bimu_figure(path: Path, rows: Sequence[ALRow], results: dict, title: str) -> None:
    """Accuracy (overall, frequent, rare) vs queried fraction of ``rows``, one curve per query rule
    (seed means), the 100%-update row as the horizontal line (the paper's BiMU figures)."""
    from bimu.report.plots import plot_accuracy_vs_queried

    curves, base = {}, None
    for row in rows:
        res = [r for r in results.get(row.slug) or [] if not r.get("diverged")]
        if not res:
            continue
        point = {k: float(np.mean([r[k] for r in res])) for k in ("accuracy", "rare_accuracy", "frequent_accuracy",
                                                                   "query_fraction")}
        if row.params["strategy"] == "all":
            base = point
        else:
            curves.setdefault(SCORE_NAMES[row.params["strategy"]], []).append(point)
    plot_accuracy_vs_queried(curves, path, baseline=base, title=title)


def paired_table(name: str, title: str, setup: ALSetup, rows: Sequence[ALRow], opts: Options, log,
                 label_headers: Sequence[str], quantities: Sequence[tuple[str, str, str]], note: str) -> Report:
    """Run ``rows`` and tabulate, after their labels, each quantity ``(header, result key, paper key)``
    as mean ± std over seeds (%) beside the paper's cell, then the seeds."""
    results, code = run_al_rows(name, setup, rows, opts, log)
    header = list(label_headers)
    for h, _, _ in quantities:
        header += [h, "Paper"]
    out = []
    for row in rows:
        res = results.get(row.slug) or []
        if not res:
            continue
        cells = list(row.labels)
        for _, key, paper_key in quantities:
            cells += [pm([r.get(key) for r in res]), row.paper.get(paper_key, "-")]
        out.append(cells + [seeds_cell(res)])
    notes = (table_notes(setup, opts, name, rows=rows) + [note] + waiting_note(rows, results) + diverged_note(results)
             + stalled_note(rows, results) + compute_note(rows, results))
    return Report(Table(table_title(title, setup, opts), header + ["Seeds"], out, notes), [], code, [setup.benchmark],
                  seeds_shown(results))


def vr_samples_entry(data: str, name: str):
    """A ``build(opts, log)`` of the K ablation table on ``data``: samples, threshold, accuracy and data
    used, each beside the paper's (OpenLORIS; the paper has no such table on Animals)."""
    note = ("the paper merges thresholds with identical results into one row; its numbers are repeated here on "
            "each threshold of a merged row ('-': a threshold the paper does not list)" if data == "openloris" else
            "the paper reports the K ablation on OpenLORIS-Object only: its column holds the Animals 100% baseline"
            if data == "animals" else "the paper reports the K ablation on OpenLORIS-Object only")

    def build(opts: Options, log=None) -> Report:
        """The K ablation table on this entry's data: run (or reuse) its rows and tabulate them."""
        return paired_table(name, f"Number of VR predictors K ({DATA_NAMES[data]})", SETUPS[data](opts),
                            rows_vr_samples(opts, data), opts, log, ("Samples", "Threshold"),
                            (("Accuracy (%)", "accuracy", "acc"), ("Data used (%)", "query_fraction", "used")), note)
    return build


def budget_entry(data: str, name: str):
    """A ``build(opts, log)`` of the budget-controller table on ``data``: setting, data used and accuracy,
    each beside the paper's (OpenLORIS)."""
    note = ("the paper's baseline row is labelled 'Random querying, full stream': every example is learned (the "
            "100%-update baseline, strategy 'all')")
    if data != "openloris":
        note += "; the paper reports the controller on OpenLORIS-Object only"

    def build(opts: Options, log=None) -> Report:
        """The budget-controller table on this entry's data: run (or reuse) its rows and tabulate them."""
        return paired_table(name, f"Budget-driven adaptive VR thresholding (K = 10, {DATA_NAMES[data]})",
                            SETUPS[data](opts), rows_budget(opts, data), opts, log, ("Method", "Controller setting"),
                            (("Data used (%)", "query_fraction", "used"), ("Accuracy (%)", "accuracy", "acc")), note)
    return build


build_vr_samples = vr_samples_entry("openloris", "vr-samples")
build_budget = budget_entry("openloris", "budget-controller")

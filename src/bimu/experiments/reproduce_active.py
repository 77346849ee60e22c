"""``bimu reproduce`` entries of the active-learning experiments: ``animals-al``, ``openloris-al``,
``vr-samples``, ``budget-controller`` and ``query-dynamics``.

Each row is one query rule (score and threshold, or budget controller; ``all`` is the 100%-update
baseline) run by :func:`bimu.active.sweep.run_stream` (one pass over every task, then accuracy on
every task's test set, overall / rare / frequent classes). Every (row, seed) is a job with its own run
directory ``OUT/runs/<scale>/<entry>/<row>/seed-<s>/`` holding ``config.json`` and ``result.json``
(written atomically): a second invocation reuses completed runs, a directory holding a different
configuration is an error, and ``--jobs`` runs them side by side.

Data: the offline stand-ins ``animals-ti`` (Animals) and ``objects-ti`` (imbalanced OpenLORIS-Object)
unless ``--benchmark animals`` / ``--benchmark openloris`` names the real data set (which must be
present). The paper quotes only a few points of its accuracy-vs-queried figures in the text; those
points are the paper column, the rest of the figure has no numbers to compare with.

>>> [r.slug for r in rows_vr_samples(Options(scale="quick"))][:3]
['all', 'vr-K2-n1', 'vr-K3-n1']
>>> paper_vr_samples(10, 3), paper_vr_samples(25, 20)
(('88.70 ± 1.94', '3.10 ± 0.31'), ('5.26 ± 0.00', '0.00 ± 0.00'))
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bimu.experiments.reproduce import (
    ENTRIES,
    METHOD_NAMES,
    Entry,
    Options,
    Report,
    Table,
    data_status,
    is_standin,
    rows_note,
    selected_rows,
)

# ------------------------------------------------------------------------------------ paper numbers
PAPER_ANIMALS_POINTS = {"all": "86.28 (100% queried)", "vr": "84.46 at 11% queried; 87.12 at 18% queried"}
"""Animals (Sec. active learning, Fig. animals-bimu): the points the text quotes (overall accuracy %)."""

PAPER_OPENLORIS_POINTS = {"all": "87.76 ± 0.19 (100% queried)", "vr": "88.70 at 3.1% queried; 90.91 at 4.0% queried"}
"""Imbalanced OpenLORIS-Object (Fig. vgg19-8192): the points the text quotes (overall accuracy %)."""

# Appendix tab:appendix-variation ratio: K -> list of (dissent counts n (threshold n/K), accuracy, data used).
PAPER_VR_SAMPLES: dict[int, list[tuple[tuple[int, ...], str, str]]] = {
    2: [((1,), "89.30 ± 0.88", "3.30 ± 0.04")],
    3: [((1,), "90.61 ± 0.53", "3.87 ± 0.05"), ((2,), "82.26 ± 1.15", "1.62 ± 0.03")],
    5: [((1,), "88.85 ± 0.92", "2.91 ± 0.16"), ((2, 3), "80.86 ± 1.90", "1.47 ± 0.16"),
        ((4,), "52.21 ± 23.71", "0.34 ± 0.19")],
    10: [((1,), "90.91 ± 0.98", "3.97 ± 0.03"), ((2, 3), "88.70 ± 1.94", "3.10 ± 0.31"),
         ((4, 5), "79.27 ± 4.00", "1.37 ± 0.24"), ((6,), "44.02 ± 32.02", "0.42 ± 0.39"),
         ((7,), "9.37 ± 8.22", "0.02 ± 0.04"), ((8, 9), "5.26 ± 0.00", "0.00 ± 0.00")],
    25: [((1,), "91.34 ± 0.50", "5.63 ± 0.09"), ((3,), "91.11 ± 0.44", "4.40 ± 0.04"),
         ((4,), "90.93 ± 0.70", "4.03 ± 0.05"), ((5,), "90.23 ± 0.68", "3.65 ± 0.14"),
         ((6,), "89.00 ± 0.64", "3.27 ± 0.23"), ((7,), "87.16 ± 1.88", "2.93 ± 0.36"),
         ((8,), "86.40 ± 2.68", "2.61 ± 0.44"), ((9,), "79.14 ± 13.18", "1.96 ± 0.78"),
         ((10,), "66.41 ± 30.90", "1.48 ± 0.84"), ((11,), "51.53 ± 37.93", "1.03 ± 0.88"),
         ((12,), "34.82 ± 36.25", "0.52 ± 0.65"), ((13,), "19.95 ± 29.37", "0.23 ± 0.45"),
         ((14,), "19.16 ± 27.79", "0.17 ± 0.34"), ((15,), "18.48 ± 26.44", "0.13 ± 0.26"),
         ((16,), "17.01 ± 23.49", "0.10 ± 0.19"), ((17,), "16.07 ± 21.61", "0.07 ± 0.14"),
         (tuple(range(18, 25)), "5.26 ± 0.00", "0.00 ± 0.00")],
}
"""The paper's K ablation (its threshold 0.04 n for K = 25; n = 2 (0.08) is not listed there)."""

PAPER_VR_BASELINE = ("87.76 ± 0.19", "100")
"""The 100%-update baseline row of the K ablation (accuracy, data used)."""

# Appendix tab:adaptive-threshold-openloris: (B, gamma) -> (data used %, accuracy %).
PAPER_BUDGET: dict[tuple[float, float], tuple[str, str]] = {
    (0.005, 0.01): ("0.50 ± 0.00", "52.68 ± 2.29"), (0.005, 0.10): ("1.11 ± 0.03", "79.84 ± 0.65"),
    (0.005, 0.50): ("3.34 ± 0.05", "89.62 ± 0.43"),
    (0.01, 0.01): ("1.00 ± 0.00", "61.95 ± 1.95"), (0.01, 0.10): ("1.22 ± 0.01", "79.53 ± 1.40"),
    (0.01, 0.50): ("3.34 ± 0.05", "89.88 ± 0.57"),
    (0.02, 0.01): ("2.00 ± 0.01", "70.20 ± 1.72"), (0.02, 0.10): ("2.03 ± 0.01", "85.64 ± 1.21"),
    (0.02, 0.50): ("3.70 ± 0.02", "89.97 ± 0.74"),
    (0.03, 0.01): ("3.00 ± 0.01", "73.90 ± 0.60"), (0.03, 0.10): ("3.00 ± 0.01", "86.79 ± 0.71"),
    (0.03, 0.50): ("3.96 ± 0.03", "90.79 ± 0.61"),
    (0.04, 0.01): ("4.00 ± 0.01", "76.97 ± 0.76"), (0.04, 0.10): ("4.00 ± 0.01", "87.94 ± 0.30"),
    (0.04, 0.50): ("4.23 ± 0.03", "90.56 ± 0.30"),
    (0.05, 0.01): ("5.00 ± 0.01", "78.34 ± 0.60"), (0.05, 0.10): ("5.00 ± 0.01", "87.66 ± 0.85"),
    (0.05, 0.50): ("5.01 ± 0.01", "90.87 ± 0.51"),
}
"""The paper's budget-controller table (VR, K = 10, imbalanced OpenLORIS-Object, 8,192 features)."""

PAPER_BUDGET_BASELINE = ("100", "87.76 ± 0.19")
"""Its "Random querying, full stream" row (data used, accuracy)."""

# Appendix tab:openloris-querying-dynamics (b): task -> (updates 0-24 %, 25-73 %, 74-99 %).
PAPER_QUERY_DYNAMICS: dict[str, tuple[str, str, str]] = {
    "1": ("25.43 ± 31.15", "40.19 ± 29.00", "13.08 ± 12.57"), "2": ("41.00 ± 20.55", "41.82 ± 11.01", "15.66 ± 9.49"),
    "3": ("53.47 ± 1.72", "33.85 ± 1.05", "10.95 ± 1.35"), "4": ("58.65 ± 1.75", "29.72 ± 1.47", "9.81 ± 1.37"),
    "5": ("61.35 ± 1.65", "29.07 ± 1.63", "7.67 ± 1.26"), "6": ("56.65 ± 3.22", "32.93 ± 2.51", "8.26 ± 1.02"),
    "7": ("42.37 ± 2.68", "40.33 ± 2.30", "14.96 ± 0.79"), "8": ("41.28 ± 4.12", "42.43 ± 3.22", "14.60 ± 1.55"),
    "9": ("42.83 ± 2.84", "40.16 ± 1.31", "14.76 ± 2.30"), "10": ("40.73 ± 1.84", "43.60 ± 1.14", "13.65 ± 2.15"),
    "11": ("39.53 ± 2.58", "42.64 ± 1.02", "15.13 ± 2.02"), "12": ("46.93 ± 2.25", "39.01 ± 1.72", "12.19 ± 1.45"),
    "Average": ("45.85 ± 9.70", "37.98 ± 4.95", "12.56 ± 2.66"),
}
"""The paper's temporal distribution of VR updates per task (part (b) of its table)."""

BUDGETS = (0.005, 0.01, 0.02, 0.03, 0.04, 0.05)
"""Target budgets B of the controller table."""
GAMMAS = (0.01, 0.10, 0.50)
"""Controller exponents gamma of the controller table."""
VR_SAMPLES = (2, 3, 5, 10, 25)
"""K of the variation-ratio ablation."""

SCORE_NAMES = {"all": "100% updates", "vr": "VR", "entropy": "Predictive entropy", "aleatoric": "Aleatoric",
               "epistemic": "Epistemic", "random": "Random"}
"""Display names of the query rules."""


def paper_vr_samples(k: int, n: int) -> tuple[str, str]:
    """The paper's (accuracy, data used) of the K ablation at threshold ``n / k``; ``("-", "-")`` if
    the paper lists no such row."""
    for ns, acc, used in PAPER_VR_SAMPLES.get(int(k), []):
        if int(n) in ns:
            return acc, used
    return "-", "-"


# ------------------------------------------------------------------------------------ rows and runs
@dataclasses.dataclass
class ALRow:
    """One query rule: label cells, a slug (its folder), the :func:`~bimu.active.sweep.run_stream`
    keyword arguments, and the paper's cells by key."""

    labels: list[str]
    slug: str
    params: dict[str, Any]
    paper: dict[str, str] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class ALSetup:
    """The data of an entry: benchmark name, its factory options and the method preset key."""

    benchmark: str
    options: dict
    preset: str


def animals_setup(opts: Options) -> ALSetup:
    """``animals-ti`` (stand-in) or ``animals``: one task, all features (1,024 at quick scale)."""
    bench = opts.benchmark or "animals-ti"
    if bench not in ("animals-ti", "animals"):
        raise ValueError(f"--benchmark for animals-al must be animals-ti or animals, got {bench!r}")
    return ALSetup(bench, _with_repeats({"n_features": 1024 if opts.scale == "quick" else None}, opts), "animals")


def objects_setup(opts: Options) -> ALSetup:
    """``objects-ti`` (stand-in, imbalanced) or ``openloris`` (imbalanced), 8,192 features (quick 1,024)."""
    bench = opts.benchmark or "objects-ti"
    if bench not in ("objects-ti", "openloris"):
        raise ValueError(f"--benchmark for the OpenLORIS active-learning entries must be objects-ti or "
                         f"openloris, got {bench!r}")
    options = {"n_features": 1024 if opts.scale == "quick" else 8192}
    if bench == "openloris":
        options["imbalanced"] = True
    return ALSetup(bench, _with_repeats(options, opts), "openloris-8192-imbalanced")


def _with_repeats(options: dict, opts: Options) -> dict:
    """``options`` plus ``stream_repeats`` when the stream is repeated (so run directories record it)."""
    r = opts.stream_repeats
    if isinstance(r, bool) or not isinstance(r, int) or r < 1:
        raise ValueError(f"--stream-repeats must be an integer >= 1, got {r!r}")
    return options if r == 1 else {**options, "stream_repeats": r}


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


def rule_params(score: str, threshold=None, *, budget=None, gamma=0.5, k=10, method="bimu", preset=None) -> dict:
    """Keyword arguments of :func:`~bimu.active.sweep.run_stream` for one query rule."""
    return {"method": method, "strategy": score, "threshold": threshold, "budget": budget,
            "budget_exponent": gamma, "mc_samples": k, "preset": preset}


def _grid_rows(opts: Options, setup: ALSetup, points: dict) -> list[ALRow]:
    from bimu.experiments.sweep import DEFAULT_GRIDS

    quick = opts.scale == "quick"
    rows = [ALRow([SCORE_NAMES["all"], "-"], "all", rule_params("all", preset=setup.preset),
                  {"acc": points.get("all", "-")})]
    for score in ("vr", "entropy", "aleatoric", "epistemic", "random"):
        grid = DEFAULT_GRIDS[score][:1] if quick else DEFAULT_GRIDS[score]
        for th in grid:
            rows.append(ALRow([SCORE_NAMES[score], f"{th:g}"], f"{score}-{th:g}",
                              rule_params(score, th, preset=setup.preset), {"acc": points.get(score, "-")}))
    return rows


def rows_animals(opts: Options) -> list[ALRow]:
    """BiMU on imbalanced Animals: the 100% baseline, VR, the entropies and random querying over their
    threshold grids (:data:`bimu.active.sweep.DEFAULT_GRIDS`; quick: the first threshold of each)."""
    return _grid_rows(opts, animals_setup(opts), PAPER_ANIMALS_POINTS)


def rows_openloris_al(opts: Options) -> list[ALRow]:
    """The same on imbalanced OpenLORIS-Object (8,192 features)."""
    return _grid_rows(opts, objects_setup(opts), PAPER_OPENLORIS_POINTS)


def rows_vr_samples(opts: Options) -> list[ALRow]:
    """VR with K in 2, 3, 5, 10, 25 at every vote threshold n/K, n = 1..K-1 (quick: n = 1), and the
    100% baseline."""
    setup = objects_setup(opts)
    rows = [ALRow(["Baseline", "-"], "all", rule_params("all", preset=setup.preset),
                  {"acc": PAPER_VR_BASELINE[0], "used": PAPER_VR_BASELINE[1]})]
    for k in VR_SAMPLES:
        for n in ((1,) if opts.scale == "quick" else range(1, k)):
            acc, used = paper_vr_samples(k, n)
            rows.append(ALRow([str(k), f"{n / k:.2f}"], f"vr-K{k}-n{n}",
                              rule_params("vr", n / k, k=k, preset=setup.preset), {"acc": acc, "used": used}))
    return rows


def rows_budget(opts: Options) -> list[ALRow]:
    """The budget controller (VR, K = 10) for each target B and exponent gamma, and the full-stream
    baseline (quick: B = 3% with gamma 0.5 and 0.1)."""
    setup = objects_setup(opts)
    rows = [ALRow(["Random querying", "Full stream"], "all", rule_params("all", preset=setup.preset),
                  {"used": PAPER_BUDGET_BASELINE[0], "acc": PAPER_BUDGET_BASELINE[1]})]
    pairs = [(0.03, 0.5), (0.03, 0.1)] if opts.scale == "quick" else [(b, g) for b in BUDGETS for g in GAMMAS]
    for b, g in pairs:
        used, acc = PAPER_BUDGET[(b, g)]
        rows.append(ALRow(["Budgeted VR", f"B={100 * b:.1f}%, gamma={g:.2f}"], f"vr-B{b:g}-g{g:g}",
                          rule_params("vr", budget=b, gamma=g, preset=setup.preset), {"used": used, "acc": acc}))
    return rows


def run_dir_of(opts: Options, entry: str, row: ALRow, seed: int) -> Path:
    """``OUT/runs/<scale>/<entry>/<row>/seed-<s>``."""
    return Path(opts.out) / "runs" / opts.scale / entry / row.slug / f"seed-{int(seed)}"


def _job_config(setup: ALSetup, opts: Options, row: ALRow, seed: int) -> dict:
    return {"benchmark": setup.benchmark, "benchmark_options": setup.options, "scale": opts.scale,
            "limits": QUICK_LIMITS if opts.scale == "quick" else None, "seed": int(seed), **row.params}


def run_one(setup: ALSetup, opts: Options, entry: str, row: ALRow, seed: int) -> int:
    """Run (or reuse) one (row, seed) into its run directory; ValueError if the directory holds a run
    of another configuration."""
    from bimu.experiments.sweep import run_stream
    from bimu.experiments.rundir import RunDir, dumps

    rd = RunDir(run_dir_of(opts, entry, row, seed))
    cfg = json.loads(dumps(_job_config(setup, opts, row, seed)))
    if rd.exists("config.json"):
        if rd.read_json("config.json") != cfg:
            raise ValueError(f"{rd.path} holds a run with a different configuration; use another --out or "
                             "remove that directory")
        if rd.exists("result.json"):
            return 0
    rd.write_json("config.json", cfg)
    result = run_stream(load_benchmark(setup, opts), seed=int(seed), **row.params)
    rd.write_json("result.json", result)
    return 0


def run_al_rows(name: str, setup: ALSetup, rows: Sequence[ALRow], opts: Options, log=None):
    """Run every (row, seed) job (``opts.jobs`` side by side); returns ``(results by slug, exit code)``."""
    import torch

    from bimu.experiments.parallel import Job, run_jobs

    torch.set_num_threads(int(opts.threads))
    chosen = selected_rows(opts, name, [r.slug for r in rows])
    load_benchmark(setup, opts)  # a missing data set fails here, before any job starts
    jobs = [Job(f"{row.slug}/seed-{s}", run_one, (setup, opts, name, row, s)) for row in rows for s in opts.seeds
            if row.slug in chosen]
    codes = run_jobs(jobs, opts.jobs, log=log)
    results = {}
    for row in rows:
        got = []
        for s in opts.seeds:
            p = run_dir_of(opts, name, row, s) / "result.json"
            if p.is_file():
                got.append(json.loads(p.read_text()))
        results[row.slug] = got
    return results, max(codes.values(), default=0)


# ------------------------------------------------------------------------------------ tables
def _pm(vals, scale=100.0, digits=2) -> str:
    from bimu.report.tables import fmt_pm

    return fmt_pm([v for v in vals if v is not None], scale, digits)


def _notes(setup: ALSetup, opts: Options, name: str, method: str = "bimu", rows: Sequence[ALRow] = ()) -> list[str]:
    notes = [f"data: {setup.benchmark} ({data_status(setup.benchmark)}), options {setup.options}; "
             f"method {METHOD_NAMES.get(method, method)} (preset {setup.preset}); runs under "
             f"{Path(opts.out) / 'runs' / opts.scale / name}; mean ± std over seeds (sample std)"]
    if is_standin(setup.benchmark):
        notes.append(f"STAND-IN: {setup.benchmark} is an offline substitute built from Tiny-ImageNet "
                     "(EfficientNet-Lite0 features), not the paper's data set")
    if opts.scale == "quick":
        notes.append("quick scale: 2 tasks (1 for Animals) of 60 examples and 1 024 features; a smoke test, "
                     "not comparable with the paper's numbers")
    return notes + rows_note(opts, [r.slug for r in rows])


def _title(base: str, setup: ALSetup, opts: Options) -> str:
    return (base + (f" [stand-in: {setup.benchmark}]" if is_standin(setup.benchmark) else "")
            + (f" [stream x{opts.stream_repeats}]" if opts.stream_repeats != 1 else "")
            + ("" if opts.scale == "full" else " [quick]"))


def _curve_points(rows: Sequence[ALRow], results: dict, group) -> tuple[dict, dict | None]:
    curves, base = {}, None
    for row in rows:
        res = results.get(row.slug) or []
        if not res:
            continue
        point = {k: float(np.mean([r[k] for r in res])) for k in ("accuracy", "rare_accuracy", "frequent_accuracy",
                                                                   "query_fraction")}
        if row.params["strategy"] == "all":
            base = point
        else:
            curves.setdefault(group(row), []).append(point)
    return curves, base


def queried_table(name: str, title: str, setup: ALSetup, rows: Sequence[ALRow], results: dict, opts: Options,
                  figure: bool = True) -> Report:
    """Accuracy (overall / rare / frequent) and queried fraction per query rule, with the paper's quoted
    points, and the three-panel accuracy-vs-queried figure."""
    from bimu.report.plots import plot_accuracy_vs_queried

    header = ["Query rule", "Threshold", "Queried (%)", "Accuracy (%)", "Rare classes (%)", "Frequent classes (%)",
              "Paper (accuracy %)", "Seeds"]
    out = []
    for row in rows:
        res = results.get(row.slug) or []
        out.append(row.labels + [_pm([r["query_fraction"] for r in res]), _pm([r["accuracy"] for r in res]),
                                 _pm([r.get("rare_accuracy") for r in res]),
                                 _pm([r.get("frequent_accuracy") for r in res]), row.paper.get("acc", "-"),
                                 ",".join(str(r["seed"]) for r in res) or "-"])
    notes = _notes(setup, opts, name, rows=rows)
    notes.append("the paper gives these curves as figures; its column holds the points its text quotes "
                 "(BiMU, overall accuracy)")
    table = Table(_title(title, setup, opts), header, out, notes)
    figs = []
    if figure:
        curves, base = _curve_points(rows, results, lambda r: r.labels[0])
        if curves or base:
            figs.append(plot_accuracy_vs_queried(curves, Path(opts.out) / f"{name}-accuracy-vs-queried.png",
                                                 baseline=base, title=table.title))
    return Report(table, figs, 0, [setup.benchmark])


def build_grid(name: str, title: str, setup_fn, rows_fn):
    """A ``build(opts, log)`` for the accuracy-vs-queried entries."""
    def build(opts: Options, log=None) -> Report:
        setup, rows = setup_fn(opts), rows_fn(opts)
        results, code = run_al_rows(name, setup, rows, opts, log)
        rep = queried_table(name, title, setup, rows, results, opts)
        rep.code = code
        return rep
    build.__doc__ = f"Run (or reuse) the rows of ``{name}`` and build its table and figure."
    return build


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
        cells = list(row.labels)
        for _, key, paper in quantities:
            cells += [_pm([r[key] for r in res]), row.paper.get(paper, "-")]
        out.append(cells + [",".join(str(r["seed"]) for r in res) or "-"])
    notes = _notes(setup, opts, name, rows=rows) + [note]
    return Report(Table(_title(title, setup, opts), header + ["Seeds"], out, notes), [], code, [setup.benchmark])


def build_vr_samples(opts: Options, log=None) -> Report:
    """The K ablation table: samples, threshold, accuracy and data used, each beside the paper's."""
    return paired_table("vr-samples", "Number of VR predictors K (imbalanced OpenLORIS-Object)", objects_setup(opts),
                        rows_vr_samples(opts), opts, log, ("Samples", "Threshold"),
                        (("Accuracy (%)", "accuracy", "acc"), ("Data used (%)", "query_fraction", "used")),
                        "the paper merges thresholds with identical results into one row; its numbers are "
                        "repeated here on each threshold of a merged row ('-': a threshold the paper does not list)")


def build_budget(opts: Options, log=None) -> Report:
    """The budget-controller table: setting, data used and accuracy, each beside the paper's."""
    return paired_table("budget-controller",
                        "Budget-driven adaptive VR thresholding (K = 10, imbalanced OpenLORIS-Object)",
                        objects_setup(opts), rows_budget(opts), opts, log, ("Method", "Controller setting"),
                        (("Data used (%)", "query_fraction", "used"), ("Accuracy (%)", "accuracy", "acc")),
                        "the paper's baseline row is labelled 'Random querying, full stream': every example is "
                        "learned (the 100%-update baseline, strategy 'all')")


def build_query_dynamics(opts: Options, log=None) -> Report:
    """Share of each task's VR queries in its first quarter (0-24% of the task's examples), middle
    (25-74%) and last quarter (75-99%), per task and on average, beside the paper's table (b)."""
    setup = objects_setup(opts)
    row = ALRow(["VR", "0.1"], "vr-0.1", rule_params("vr", 0.1, preset=setup.preset))
    results, code = run_al_rows("query-dynamics", setup, [row], opts, log)
    res = results.get(row.slug) or []
    parts = ("first_quarter", "middle", "last_quarter")
    tasks = sorted({int(t) for r in res for t in r.get("task_quarters", {})})
    header = ["Task", "Updates 0-24 (%)", "Paper", "Updates 25-74 (%)", "Paper", "Updates 75-99 (%)", "Paper",
              "Queried in task (%)"]
    out = []
    per_task = {p: [] for p in parts}
    for t in tasks:
        cells = [f"Task {t + 1}"]
        paper = PAPER_QUERY_DYNAMICS.get(str(t + 1), ("-", "-", "-"))
        for p, ref in zip(parts, paper):
            vals = [r["task_quarters"][str(t)][p] for r in res if str(t) in r.get("task_quarters", {})]
            per_task[p].append(float(np.mean(vals)) if vals else math.nan)
            cells += [_pm(vals), ref]
        cells.append(_pm([r["task_quarters"][str(t)]["query_fraction"] for r in res
                          if str(t) in r.get("task_quarters", {})]))
        out.append(cells)
    if tasks:
        avg = ["Average"]
        for p, ref in zip(parts, PAPER_QUERY_DYNAMICS["Average"]):
            avg += [_pm(per_task[p]), ref]
        out.append(avg + [_pm([r["query_fraction"] for r in res])])
    notes = _notes(setup, opts, "query-dynamics")
    notes += ["per task: mean ± std over seeds; Average: mean ± std over tasks of the seed means (as the paper)",
              "regions are percentiles of each task's stream: 0-24, 25-74, 75-99 (the paper's table heads its "
              "columns 0-24, 25-73 and 74-99, its text 0-24, 25-74 and 74-99)",
              "VR, K = 10, threshold 0.1 (the paper's best fixed threshold); the paper's part (a), accuracy at "
              "checkpoints inside each task, is not reproduced (the stream is evaluated after the whole stream)"]
    return Report(Table(_title("Temporal distribution of VR updates per task (imbalanced OpenLORIS-Object)", setup,
                               opts), header, out, notes), [], code, [setup.benchmark])


ACTIVE_ENTRIES = (
    Entry("animals-al", "Imbalanced Animals active learning: accuracy vs queried fraction",
          build=build_grid("animals-al", "Imbalanced Animals active learning (BiMU): accuracy vs queried fraction",
                           animals_setup, rows_animals), repeatable_stream=True),
    Entry("openloris-al", "Imbalanced OpenLORIS-Object active continual learning: accuracy vs queried fraction",
          build=build_grid("openloris-al", "Imbalanced OpenLORIS-Object active continual learning (BiMU): "
                           "accuracy vs queried fraction", objects_setup, rows_openloris_al), repeatable_stream=True),
    Entry("vr-samples", "Number of VR predictors K", build=build_vr_samples, repeatable_stream=True),
    Entry("budget-controller", "Budget-driven adaptive VR thresholding", build=build_budget, repeatable_stream=True),
    Entry("query-dynamics", "Temporal distribution of VR updates", build=build_query_dynamics,
          repeatable_stream=True),
)
"""The entries this module adds to :data:`bimu.experiments.reproduce.ENTRIES`."""

for _e in ACTIVE_ENTRIES:
    ENTRIES[_e.name] = _e

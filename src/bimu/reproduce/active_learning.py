"""``bimu reproduce`` entries of the active-learning experiments: ``animals-al``, ``openloris-al``,
``vr-samples``, ``budget-controller`` and ``query-dynamics``.

Each row is one query rule (score and threshold, or budget controller; ``all`` is the 100%-update
baseline) run by :func:`bimu.experiments.sweep.run_stream` (one pass over every task, then accuracy on
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

from bimu import paper
from bimu.reproduce.spec import Options, Report, data_status, is_standin, rows_note, selected_rows
from bimu.reproduce.table import Table

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
    """The paper's (accuracy, data used) cells of the K ablation at threshold ``n / k``; ``("-", "-")``
    if the paper lists no such row."""
    for ns, row in paper.VR_SAMPLES.get(int(k), []):
        if int(n) in ns:
            cells = paper.cells(row)
            return cells["acc"], cells["used"]
    return "-", "-"


def paper_points(baseline: paper.Row, vr_points) -> dict[str, str]:
    """The paper column of an accuracy-vs-queried table: the 100%-update baseline and the VR points its
    text quotes, by query rule.

    >>> paper_points(paper.ANIMALS_AL_BASELINE, paper.ANIMALS_VR_POINTS)["vr"]
    '84.46 at 11% queried; 87.12 at 18% queried'
    """
    base = paper.cells(baseline)
    return {"all": f"{base['acc']} ({base['used']}% queried)",
            "vr": "; ".join(f"{c['acc']} at {c['queried']}% queried" for c in map(paper.cells, vr_points))}


# ------------------------------------------------------------------------------------ rows and runs
@dataclasses.dataclass
class ALRow:
    """One query rule: label cells, a slug (its folder), the :func:`~bimu.experiments.sweep.run_stream`
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
    """Keyword arguments of :func:`~bimu.experiments.sweep.run_stream` for one query rule."""
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
    threshold grids (:data:`bimu.experiments.sweep.DEFAULT_GRIDS`; quick: the first threshold of each)."""
    return _grid_rows(opts, animals_setup(opts), paper_points(paper.ANIMALS_AL_BASELINE, paper.ANIMALS_VR_POINTS))


def rows_openloris_al(opts: Options) -> list[ALRow]:
    """The same on imbalanced OpenLORIS-Object (8,192 features)."""
    return _grid_rows(opts, objects_setup(opts), paper_points(paper.OPENLORIS_AL_BASELINE, paper.OPENLORIS_VR_POINTS))


def rows_vr_samples(opts: Options) -> list[ALRow]:
    """VR with K in 2, 3, 5, 10, 25 at every vote threshold n/K, n = 1..K-1 (quick: n = 1), and the
    100% baseline."""
    setup = objects_setup(opts)
    rows = [ALRow(["Baseline", "-"], "all", rule_params("all", preset=setup.preset),
                  paper.cells(paper.OPENLORIS_AL_BASELINE))]
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
                  paper.cells(paper.OPENLORIS_AL_BASELINE))]
    pairs = [(0.03, 0.5), (0.03, 0.1)] if opts.scale == "quick" else [(b, g) for b in BUDGETS for g in GAMMAS]
    for b, g in pairs:
        rows.append(ALRow(["Budgeted VR", f"B={100 * b:.1f}%, gamma={g:.2f}"], f"vr-B{b:g}-g{g:g}",
                          rule_params("vr", budget=b, gamma=g, preset=setup.preset), paper.cells(paper.BUDGET[(b, g)])))
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


def run_one(setup: ALSetup, opts: Options, entry: str, row: ALRow, seed: int) -> int:
    """Run (or reuse) one (row, seed) into its run directory; ValueError if the directory holds a run
    of another configuration."""
    from bimu.experiments.sweep import run_stream
    from bimu.rundir import RunDir, dumps

    rd = RunDir(run_dir_of(opts, entry, row, seed))
    cfg = json.loads(dumps(_job_config(setup, opts, row, seed)))
    if rd.exists("config.json"):
        if rd.read_json("config.json") != cfg:
            raise ValueError(f"{rd.path} holds a run with a different configuration; use another --out or "
                             "remove that directory")
        if rd.exists("result.json"):
            return 0
    rd.write_json("config.json", cfg)
    result = run_stream(load_benchmark(setup, opts), seed=int(seed), engine=opts.engine, **row.params)
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
    codes = run_jobs(jobs, opts.jobs, log=log, scheduler=opts.scheduler, shared=opts.out)
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
             f"method {paper.METHOD_NAMES.get(method, method)} (preset {setup.preset}); runs under "
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
            path = Path(opts.out) / f"{name}-accuracy-vs-queried.png"
            plot_accuracy_vs_queried(curves, path, baseline=base, title=table.title)
            figs.append(path)
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
        for _, key, paper_key in quantities:
            cells += [_pm([r[key] for r in res]), row.paper.get(paper_key, "-")]
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
        ref_cells = paper.cells(paper.QUERY_DYNAMICS.get(str(t + 1), dict.fromkeys(parts)))
        for p in parts:
            ref = ref_cells[p]
            vals = [r["task_quarters"][str(t)][p] for r in res if str(t) in r.get("task_quarters", {})]
            per_task[p].append(float(np.mean(vals)) if vals else math.nan)
            cells += [_pm(vals), ref]
        cells.append(_pm([r["task_quarters"][str(t)]["query_fraction"] for r in res
                          if str(t) in r.get("task_quarters", {})]))
        out.append(cells)
    if tasks:
        avg = ["Average"]
        ref_cells = paper.cells(paper.QUERY_DYNAMICS["Average"])
        for p in parts:
            avg += [_pm(per_task[p]), ref_cells[p]]
        out.append(avg + [_pm([r["query_fraction"] for r in res])])
    notes = _notes(setup, opts, "query-dynamics")
    notes += ["per task: mean ± std over seeds; Average: mean ± std over tasks of the seed means (as the paper)",
              "regions are percentiles of each task's stream: 0-24, 25-74, 75-99 (the paper's table heads its "
              "columns 0-24, 25-73 and 74-99, its text 0-24, 25-74 and 74-99)",
              "VR, K = 10, threshold 0.1 (the paper's best fixed threshold); the paper's part (a), accuracy at "
              "checkpoints inside each task, is not reproduced (the stream is evaluated after the whole stream)"]
    return Report(Table(_title("Temporal distribution of VR updates per task (imbalanced OpenLORIS-Object)", setup,
                               opts), header, out, notes), [], code, [setup.benchmark])



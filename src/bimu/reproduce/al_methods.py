"""``bimu reproduce animals-al`` and ``openloris-al``: the active-learning method comparison (the
paper's Figs. animals-bimu / vgg19-8192, animals-vr / openloris-vr and the per-method appendix figures).

Each compared method (:data:`COMPARED`) runs its 100%-update baseline, its paper query rule over a
threshold grid (BiMU, MESU and BayesBiNN: variation ratio with K = 10 posterior samples; STE, which
has no posterior: aleatoric uncertainty of its one deterministic network) and random querying over
:data:`RANDOM_GRID`, with its own hyperparameter preset of the paper's appendix tables
(``animals``: tab:hpo-animals; ``openloris-8192-imbalanced``: tab:hpo-bayes-bimu). Every Bayesian method
also runs the other scores of :data:`RULES` (predictive, aleatoric, epistemic and the oracle VR-True), as
the paper's BiMU figures and per-method appendix figures. MESU also runs
on standardised inputs with its ``-std`` preset (:data:`STANDARDISED`, the paper's MESU-with-
standardisation figures). Each row is one (method, rule, threshold); each (row, seed) its own run
directory ``OUT/runs/<scale>/<entry>/<variant>-<rule>[-<threshold>]/seed-<s>/``.

The table gives accuracy overall / rare / frequent and the queried fraction (mean ± sd over seeds),
and beside each queried row the same method's random querying at the same queried fraction (linear
interpolation between the seed means of its random points), so the rule and random querying are
compared at matched budget. Figures: ``NAME-methods.png`` (one curve per method and rule, its
random querying dashed in the same colour, each method's 100% baseline dotted; mean ± sd over seeds),
``NAME-accuracy-vs-queried.png`` (BiMU, every rule) and one per other variant, ``NAME-<variant>.png``
(its rules, the paper's per-method appendix figures).

>>> [r.slug for r in rows_for(Options(scale="quick"), "animals")][:4]
['bimu-all', 'bimu-vr-0.1', 'bimu-entropy-1', 'bimu-aleatoric-1']
>>> interpolate([(0.02, 0.5), (0.10, 0.9)], 0.06), interpolate([(0.02, 0.5), (0.10, 0.9)], 0.2)
(0.7, None)
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from bimu import paper
from bimu.reproduce import active_learning as al
from bimu.reproduce.spec import Options, Report
from bimu.reproduce.table import Table

COMPARED = {"bimu": ("vr", 10), "mesu": ("vr", 10), "bayesbinn": ("vr", 10), "ste": ("aleatoric", 1)}
"""Method -> (its query rule, Monte Carlo samples K of the query decision), as the paper's method
comparison (Figs. animals-vr and openloris-vr): VR for the Bayesian methods, aleatoric uncertainty for
the deterministic STE (K = 1: its network has no samples to disagree)."""

STANDARDISED = ("mesu",)
"""Methods also compared on standardised inputs (:class:`~bimu.data.features.StreamingStandardizer`, each
example with the statistics of the examples before it) with their ``<preset>-std`` preset, as the paper's
appendix figures of MESU with feature standardisation; their rows are the variant ``<method>-std``. Not on
Permuted MNIST (:data:`RAW_FEATURES`)."""

RAW_FEATURES = ("animals", "openloris")
"""The data whose inputs are raw backbone features, where :data:`STANDARDISED` runs: the paper
standardises for MESU's sensitivity to the scale of raw VGG19 features. Permuted MNIST's pixels are
standardised already (the paper's Permuted-MNIST preprocessing)."""

STE_ALEATORIC_GRID = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0)
"""STE's aleatoric thresholds (bits). They reach below the other methods' grid (1.0-3.5 bits): the softmax
of STE's one deterministic binary network is nearly one-hot (at 1.0 bits it queried 0.1% of the first
1,000 examples of objects-seq at full scale), so the grid spans its queried fractions the way the
others' grids span theirs. Fixed from that query fraction alone, before any accuracy was looked at."""

VR_GRID = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
"""The comparison rule's VR thresholds (K = 10: at least 1, 2, ..., 9 of the 10 samples dissent from
their mode). Beyond the paper's grid (0.1-0.6, :data:`bimu.experiments.sweep.DEFAULT_GRIDS`) it reaches
0.9, so that each method's VR curve also covers the low queried fractions where the other methods' rules
lie: on animals-ti BiMU's VR at 0.6 queried 19% while STE's aleatoric rule queried 0.1-5% and standardised
MESU's VR 1-7% over their whole grids, and two curves that do not overlap cannot be compared at matched
budget. Chosen from those queried fractions alone; the rows of 0.1-0.6 are unchanged."""

RULES = ("vr", "entropy", "aleatoric", "epistemic", "vr-true")
"""The query scores of a Bayesian method's own figure (the paper's BiMU figures and per-method appendix
figures): its unlabelled scores and the oracle VR-True, a diagnostic that reads the label (not deployable).
STE runs only its comparison rule: with one deterministic network, predictive entropy equals its
aleatoric score and epistemic uncertainty and VR are 0."""

RANDOM_GRID = (0.01, 0.02, 0.05, 0.1, 0.2, 0.4)
"""Random querying probabilities: from below the paper's VR budgets on OpenLORIS (3-4%) to above its
Animals ones (11-18%), so every rule point has a random point on each side to compare with."""

SETUPS = al.SETUPS

PAPER_POINTS = {"animals": (paper.ANIMALS_AL_BASELINE, paper.ANIMALS_VR_POINTS),
                "openloris": (paper.OPENLORIS_AL_BASELINE, paper.OPENLORIS_VR_POINTS)}
"""The points the paper's text quotes for BiMU (its baseline and VR points), by entry data (none on
Permuted MNIST, where the paper runs no active learning)."""


def interpolate(points: Sequence[tuple[float, float]], x: float) -> float | None:
    """The value at ``x`` of the piecewise-linear curve through ``points`` ``(x, y)``; ``None`` outside
    their range (no extrapolation)."""
    pts = sorted((float(a), float(b)) for a, b in points if np.isfinite(a) and np.isfinite(b))
    if not pts or not pts[0][0] <= x <= pts[-1][0]:
        return None
    xs, ys = zip(*pts)
    return float(np.interp(x, xs, ys))


def paper_cells(data: str, method: str, score: str) -> dict[str, str]:
    """The paper column of a row: the points its text quotes (BiMU's 100% baseline and VR points, and on
    Animals VR's rare-class gain over random querying); ``-`` for the others (figures only)."""
    if method != "bimu" or score not in ("all", "vr") or data not in PAPER_POINTS:
        return {}
    base, vr = PAPER_POINTS[data]
    text = al.paper_points(base, vr)[score]
    if data == "animals" and score == "vr":
        gain = paper.cells(paper.ANIMALS_VR_RARE_GAIN)
        text += f"; rare classes +{gain['rare_gain']} points over random at {gain['queried']}% queried"
    return {"acc": text}


def variant_of(row: al.ALRow) -> str:
    """The compared variant a row belongs to: its method, ``-std`` added on standardised inputs.

    >>> variant_of(al.ALRow([], "mesu-std-all", {"method": "mesu", "standardize": True}))
    'mesu-std'
    >>> variant_of(al.ALRow([], "mesu-all", {"method": "mesu"}))
    'mesu'
    """
    return row.params["method"] + ("-std" if row.params.get("standardize") else "")


def variant_name(variant: str) -> str:
    """A variant's display name: ``MESU``, ``MESU (standardised)``."""
    method, std = (variant[:-4], True) if variant.endswith("-std") else (variant, False)
    return paper.METHOD_NAMES[method] + (" (standardised)" if std else "")


def rows_for(opts: Options, data: str) -> list[al.ALRow]:
    """The rows of the method comparison on ``data`` (``animals``, ``openloris`` or ``pmnist``): per method
    of :data:`COMPARED`, then per method of :data:`STANDARDISED` on standardised inputs (on
    :data:`RAW_FEATURES`), its 100% baseline,
    its rule over its threshold grid (:data:`bimu.experiments.sweep.DEFAULT_GRIDS`; VR: :data:`VR_GRID`;
    STE: :data:`STE_ALEATORIC_GRID`; the Bayesian methods: every score of :data:`RULES`) and random
    querying over :data:`RANDOM_GRID`. Quick scale: the first threshold of each."""
    from bimu.experiments.sweep import DEFAULT_GRIDS

    setup = SETUPS[data](opts)
    quick = opts.scale == "quick"
    rows = []
    variants = [(m, False) for m in COMPARED] + [(m, True) for m in STANDARDISED if data in RAW_FEATURES]
    for method, std in variants:
        rule, k = COMPARED[method]
        variant = method + ("-std" if std else "")
        name = variant_name(variant)
        preset = setup.preset + ("-std" if std else "")
        extra = {"standardize": True} if std else {}
        net = {"hidden": setup.hidden}
        rows.append(al.ALRow([name, al.SCORE_NAMES["all"], "-"], f"{variant}-all",
                             {**al.rule_params("all", k=k, method=method, preset=preset, **net), **extra},
                             paper_cells(data, method, "all") if not std else {}))
        rules = (rule,) if method == "ste" else RULES
        grids = [(s, STE_ALEATORIC_GRID if method == "ste" else VR_GRID if s == "vr" else DEFAULT_GRIDS[s])
                 for s in rules]
        for score, grid in grids + [("random", RANDOM_GRID)]:
            for th in (grid[:1] if quick else grid):
                rows.append(al.ALRow([name, al.SCORE_NAMES[score], f"{th:g}"], f"{variant}-{score}-{th:g}",
                                     {**al.rule_params(score, th, k=k, method=method, preset=preset, **net),
                                      **extra},
                                     paper_cells(data, method, score) if not std else {}))
    return rows


def in_comparison(row: al.ALRow) -> bool:
    """Whether ``row`` is in the method comparison (the paper's Figs. animals-vr / openloris-vr): its
    method's 100% baseline, comparison rule (:data:`COMPARED`) or random querying, rather than one of the
    other scores of its own figure.

    >>> in_comparison(al.ALRow([], "mesu-vr-0.1", al.rule_params("vr", 0.1, method="mesu")))
    True
    >>> in_comparison(al.ALRow([], "mesu-entropy-1", al.rule_params("entropy", 1.0, method="mesu")))
    False
    """
    strategy = row.params["strategy"]
    return strategy in ("all", "random") or strategy == COMPARED[row.params["method"]][0]


def _ok(res: Sequence[dict] | None) -> list[dict]:
    """The runs of ``res`` that did not diverge."""
    return [r for r in res or [] if not r.get("diverged")]


def _means(res: Sequence[dict]) -> dict:
    """Seed means and sample sds (``<key>_sd``; 0 with one seed) of a row's results."""
    out = {}
    for k in ("accuracy", "rare_accuracy", "frequent_accuracy", "query_fraction"):
        vals = [float(r[k]) for r in res if r.get(k) is not None and np.isfinite(float(r[k]))]
        out[k] = float(np.mean(vals)) if vals else float("nan")
        out[k + "_sd"] = float(np.std(vals, ddof=1)) if len(vals) > 1 else 0.0
    return out


def curve(rows: Sequence[al.ALRow], results: dict, variant: str, strategy: str) -> list[dict]:
    """Seed means (:func:`_means`) of ``variant``'s rows of ``strategy`` that have runs, by queried fraction."""
    pts = [_means(_ok(results.get(r.slug))) for r in rows
           if variant_of(r) == variant and r.params["strategy"] == strategy and _ok(results.get(r.slug))]
    return sorted(pts, key=lambda p: p["query_fraction"])


def random_at(rows: Sequence[al.ALRow], results: dict, method: str, fraction: float) -> dict[str, float | None]:
    """The method's random querying at queried fraction ``fraction``: accuracy overall and on rare
    classes interpolated between the seed means of its random rows (``None`` outside their range)."""
    pts = curve(rows, results, method, "random")
    return {k: interpolate([(p["query_fraction"], p[k]) for p in pts], fraction)
            for k in ("accuracy", "rare_accuracy")}


def methods_table(name: str, title: str, setup: al.ALSetup, rows: Sequence[al.ALRow], results: dict,
                  opts: Options) -> Table:
    """The comparison table: method, rule, threshold, queried %, accuracy overall / rare / frequent
    (mean ± sd over seeds), random querying at the same queried fraction, the paper's points, seeds."""
    header = ["Method", "Query rule", "Threshold", "Queried (%)", "Accuracy (%)", "Rare classes (%)",
              "Frequent classes (%)", "Random, same queried: accuracy (%)", "Random, same queried: rare (%)",
              "Paper (accuracy %)", "Seeds"]
    out, quoted = [], set()  # the paper's points are written on the first row of each (variant, rule)
    for row in rows:
        res = results.get(row.slug) or []
        if not res:
            continue
        key = (variant_of(row), row.params["strategy"])
        paper_cell = "as above" if key in quoted and row.paper.get("acc", "-") != "-" else row.paper.get("acc", "-")
        quoted.add(key)
        same = {"accuracy": None, "rare_accuracy": None}
        if _ok(res) and row.params["strategy"] not in ("all", "random"):
            same = random_at(rows, results, variant_of(row), _means(_ok(res))["query_fraction"])
        out.append(row.labels + [al.pm([r.get("query_fraction") for r in res]), al.pm([r.get("accuracy") for r in res]),
                                 al.pm([r.get("rare_accuracy") for r in res]),
                                 al.pm([r.get("frequent_accuracy") for r in res])]
                   + ["-" if v is None else f"{100 * v:.2f}" for v in same.values()]
                   + [paper_cell, al.seeds_cell(res)])
    std = [m for m in STANDARDISED if any(variant_of(r) == f"{m}-std" for r in rows)]
    presets = ", ".join([f"{paper.METHOD_NAMES[m]} {setup.preset}" for m in COMPARED]
                        + [f"{variant_name(m + '-std')} {setup.preset}-std" for m in std])
    notes = al.table_notes(setup, opts, name, rows=rows)
    notes[0] = notes[0].replace(f"method BiMU (preset {setup.preset})", f"methods and presets: {presets}")
    notes += [f"rules: BiMU, MESU and BayesBiNN query by VR (K = {COMPARED['bimu'][1]} posterior samples), "
              "STE by aleatoric uncertainty (its one deterministic network, K = 1), as the paper; every "
              "Bayesian method also by predictive, aleatoric and epistemic uncertainty and by the oracle "
              "VR-True (it reads the label: a diagnostic, not deployable), as the paper's per-method "
              "figures; " + ("MESU (standardised) is MESU on inputs standardised online (each example with the "
                             "statistics of those before it) with its -std preset; " if std else "")
              + "every method also queries at random; the hyperparameters are each method's preset of the paper's "
              + ("appendix table for these data" if std else
                 f"Permuted-MNIST table ({setup.preset}, tuned on balanced Permuted MNIST)")
              + ", tuned without querying and not retuned per rule (as the paper)",
              "Random, same queried: the same method's random querying at this row's queried fraction, "
              "interpolated linearly between the seed means of its random rows ('-': outside their range)",
              "the paper gives these curves as figures; its column holds the points its text quotes (BiMU)"
              if any(r.paper.get("acc") for r in rows) else
              "the paper reports no active learning on these data: its column is empty"]
    notes += al.waiting_note(rows, results,
                             lambda row: f"{variant_name(variant_of(row))} {al.SCORE_NAMES[row.params['strategy']]}")
    notes += al.diverged_note(results) + al.stalled_note(rows, results)
    notes += al.compute_note(rows, results, lambda row: variant_name(variant_of(row)))
    return Table(al.table_title(title, setup, opts), header, out, notes)


def methods_figure(path: Path, rows: Sequence[al.ALRow], results: dict, title: str) -> None:
    """The paper's method-comparison figure: accuracy (overall, frequent, rare) vs queried fraction,
    one curve per compared variant (:data:`COMPARED`, then :data:`STANDARDISED`) and its rule (mean ± sd
    over seeds), its random querying dashed in the same colour, its 100% baseline dotted."""
    from bimu.report.plots import plot_accuracy_vs_queried

    curves, baselines, colors = {}, {}, {}
    variants = [*COMPARED, *(f"{m}-std" for m in STANDARDISED)]
    for i, variant in enumerate(variants):
        name = variant_name(variant)
        rule = COMPARED[variant.removesuffix("-std")][0]
        for score in (rule, "random"):
            pts = curve(rows, results, variant, score)
            if pts:
                label = f"{name} {al.SCORE_NAMES[score]}"
                curves[label], colors[label] = pts, f"C{i}"
        base = curve(rows, results, variant, "all")
        if base:
            baselines[f"{name} 100%"], colors[f"{name} 100%"] = base[0], f"C{i}"
    plot_accuracy_vs_queried(curves, path, title=title, baselines=baselines, colors=colors)


def build_for(data: str, name: str, title: str):
    """A ``build(opts, log)`` of the method comparison on ``data``."""
    def build(opts: Options, log=None) -> Report:
        setup, rows = SETUPS[data](opts), rows_for(opts, data)
        results, code = al.run_al_rows(name, setup, rows, opts, log)
        table = methods_table(name, title, setup, rows, results, opts)
        figs = []
        if any(map(_ok, results.values())):
            figs.append(Path(opts.out) / f"{name}-methods.png")
            methods_figure(figs[-1], rows, results, table.title)
            bimu_rows = [r for r in rows if variant_of(r) == "bimu"]
            figs.append(Path(opts.out) / f"{name}-accuracy-vs-queried.png")
            al.bimu_figure(figs[-1], bimu_rows, results, table.title + " - BiMU, every rule")
            for variant in [*list(COMPARED)[1:], *(f"{m}-std" for m in STANDARDISED)]:
                mine = [r for r in rows if variant_of(r) == variant]
                if any(_ok(results.get(r.slug)) for r in mine):
                    figs.append(Path(opts.out) / f"{name}-{variant}.png")
                    al.bimu_figure(figs[-1], mine, results, f"{table.title} - {variant_name(variant)}")
        return Report(table, figs, code, [setup.benchmark], seeds=al.seeds_shown(results))
    build.__doc__ = f"Run (or, with --from-runs, read) the rows of ``{name}`` and build its table and figures."
    return build

"""More ``bimu reproduce`` run tables: ``pmnist-2000-neurons``, ``bwt``, ``openloris``,
``standardisation`` and the figure entry ``learning-rate-map``; plus the figures attached to run tables
(accuracy per task, histograms of ``sigmoid(2 lambda)``).

The OpenLORIS entries run on the offline stand-in ``objects-ti`` (Tiny-ImageNet objects under
synthetic nuisance factors, :mod:`bimu.data.feature_benchmarks`) unless ``--benchmark openloris`` is
given and the real data are present; their reports say "stand-in" in the title. The stand-in's
backbone gives 11,520 features where the paper's VGG19 gives 25,088: the "full" rows use all of them.

>>> [r.labels for r in rows_pmnist_2000(Options(scale="quick"))]
[['BiMU'], ['SGD']]
>>> feature_benchmark(Options()), feature_benchmark(Options(benchmark="openloris"))
('objects-ti', 'openloris')
"""

from __future__ import annotations

from pathlib import Path

import dataclasses

from bimu.experiments.reproduce import (ENTRIES, METHOD_NAMES, PAPER_METHOD_ORDER, Entry, Options, Report, Row,
                                        Table, base_config, is_standin, row_dir, share_runs)

# Appendix "Effect of Network Capacity" (tab:pmnist-results-2000neurons): acc last 5, OOD AUC, MMRR.
PAPER_PMNIST_2000: dict[str, tuple[str, str, str]] = {
    "bimu": ("95.20 ± 0.26", "1.00 ± 0.00", "862.09"),
    "bayesbinn": ("86.61 ± 0.27", "0.80 ± 0.10", "9.86"),
    "synaptic-metaplasticity": ("10.34 ± 0.19", "0.00 ± 0.04", "1.33"),
    "ste": ("47.39 ± 1.35", "0.61 ± 0.10", "39.12"),
    "mesu": ("92.99 ± 0.71", "0.86 ± 0.02", "171.82"),
    "ewc-online": ("91.47 ± 0.31", "0.44 ± 0.14", "139.66"),
    "si": ("92.82 ± 0.49", "0.96 ± 0.04", "89.77"),
    "sgd": ("90.61 ± 1.32", "0.98 ± 0.02", "117.65"),
}
"""The paper's 2000-hidden-unit table (1000-task Permuted MNIST)."""

# Appendix "Backward transfer clarifications": tab:appendix-bwt-pm1000 (acc last 5, MMRR, BWT) and
# tab:appendix-bwt-openloris-25088 (mean acc over all tasks, BWT; no MMRR in the paper).
PAPER_BWT_PMNIST: dict[str, tuple[str, str, str]] = {
    "bimu": ("90.30 ± 0.38", "139.47", "-0.8187 ± 0.0014"),
    "bayesbinn": ("41.12 ± 1.62", "2.04", "-0.3897 ± 0.0021"),
    "synaptic-metaplasticity": ("10.27 ± 0.01", "1.64", "-0.0009 ± 0.0001"),
    "ste": ("29.35 ± 0.96", "9.32", "-0.5689 ± 0.0105"),
}
"""The paper's BWT table on 1000-task Permuted MNIST (binary methods)."""

PAPER_BWT_OPENLORIS: dict[str, tuple[str, str]] = {
    "bimu": ("90.62 ± 0.22", "-0.0525 ± 0.0027"),
    "bayesbinn": ("89.37 ± 0.77", "-0.0399 ± 0.0078"),
    "synaptic-metaplasticity": ("86.72 ± 0.34", "-0.0485 ± 0.0021"),
    "ste": ("83.79 ± 1.13", "-0.0790 ± 0.0157"),
    "mesu": ("87.84 ± 0.11", "-0.0515 ± 0.0012"),
    "ewc-online": ("88.23 ± 0.05", "-0.0452 ± 0.0003"),
    "si": ("88.04 ± 0.03", "-0.0517 ± 0.0004"),
    "sgd": ("88.04 ± 0.03", "-0.0517 ± 0.0004"),
}
"""The paper's BWT table on OpenLORIS-Object with 25,088 features."""

# Table 2 (tab:openloris-features-rows): (method, features) -> (mean acc, aleatoric AUC, epistemic AUC).
PAPER_OPENLORIS: dict[tuple[str, int], tuple[str, str, str]] = {
    ("bimu", 1024): ("73.61 ± 1.53", "0.96 ± 0.01", "1.00 ± 0.00"),
    ("bimu", 8192): ("89.19 ± 0.19", "0.99 ± 0.00", "1.00 ± 0.00"),
    ("bimu", 25088): ("90.62 ± 0.22", "0.93 ± 0.00", "0.90 ± 0.00"),
    ("bayesbinn", 1024): ("72.01 ± 1.69", "0.93 ± 0.01", "1.00 ± 0.00"),
    ("bayesbinn", 8192): ("86.93 ± 0.41", "0.99 ± 0.00", "1.00 ± 0.00"),
    ("bayesbinn", 25088): ("89.37 ± 0.77", "0.92 ± 0.00", "0.90 ± 0.01"),
    ("synaptic-metaplasticity", 1024): ("62.82 ± 2.31", "0.72 ± 0.04", "-"),
    ("synaptic-metaplasticity", 8192): ("88.03 ± 0.38", "0.63 ± 0.03", "-"),
    ("synaptic-metaplasticity", 25088): ("86.72 ± 0.34", "0.55 ± 0.00", "-"),
    ("ste", 1024): ("52.88 ± 3.39", "0.73 ± 0.02", "-"),
    ("ste", 8192): ("79.12 ± 1.39", "0.61 ± 0.05", "-"),
    ("ste", 25088): ("83.79 ± 1.13", "0.55 ± 0.00", "-"),
    ("mesu", 1024): ("80.82 ± 0.94", "0.90 ± 0.01", "0.99 ± 0.00"),
    ("mesu", 8192): ("87.01 ± 0.69", "1.00 ± 0.00", "0.98 ± 0.00"),
    ("mesu", 25088): ("87.84 ± 0.11", "0.83 ± 0.00", "0.86 ± 0.00"),
    ("ewc-online", 1024): ("75.72 ± 0.87", "0.97 ± 0.01", "-"),
    ("ewc-online", 8192): ("87.18 ± 0.58", "1.00 ± 0.00", "-"),
    ("ewc-online", 25088): ("88.23 ± 0.05", "0.79 ± 0.00", "-"),
    ("si", 1024): ("70.75 ± 0.57", "0.95 ± 0.03", "-"),
    ("si", 8192): ("86.44 ± 0.64", "1.00 ± 0.00", "-"),
    ("si", 25088): ("88.04 ± 0.03", "0.83 ± 0.00", "-"),
    ("sgd", 1024): ("62.31 ± 1.80", "0.50 ± 0.00", "-"),
    ("sgd", 8192): ("86.27 ± 0.51", "1.00 ± 0.00", "-"),
    ("sgd", 25088): ("88.04 ± 0.03", "0.83 ± 0.00", "-"),
}
"""The paper's Table 2 (OpenLORIS-Object, linear head on frozen VGG19 features)."""

# Appendix "Effect of standardization" (tab:openloris-uncertainty-8192), in the paper's row order.
PAPER_STANDARDISED: dict[str, tuple[str, str, str]] = {
    "bimu": ("90.98 ± 0.38", "1.00 ± 0.00", "1.00 ± 0.00"),
    "bayesbinn": ("90.20 ± 0.13", "1.00 ± 0.00", "1.00 ± 0.00"),
    "ste": ("77.69 ± 2.29", "-", "-"),
    "synaptic-metaplasticity": ("79.28 ± 0.85", "-", "-"),
    "mesu": ("92.55 ± 0.24", "0.99 ± 0.00", "0.99 ± 0.00"),
    "ewc-online": ("92.34 ± 0.32", "1.00 ± 0.00", "-"),
    "si": ("92.23 ± 0.30", "1.00 ± 0.00", "-"),
    "sgd": ("92.31 ± 0.31", "1.00 ± 0.00", "-"),
}
"""The paper's standardised-feature table (OpenLORIS-Object, 8,192 features)."""

ALL_FEATURES_NOTE = ("'full' / 'all' features: all of the benchmark's backbone features (25 088 VGG19 features in "
                     "the paper; 11 520 EfficientNet-Lite0 features on the stand-in objects-ti)")
"""Note of the all-features rows."""

STANDARDISED_NOTE = ("hyperparameters: each method's openloris-8192-std preset (the paper's table hpo-openloris-std, "
                     "tuned on standardised features)")
"""Note of the standardisation table."""

QUICK_METHODS = ("bimu", "sgd")
"""Methods of the quick (smoke-test) scale of the run tables."""

FEATURES = (1024, 8192, None)
"""Feature counts of Table 2 (``None``: all the backbone's features: 25,088 for VGG19)."""


def feature_benchmark(opts: Options) -> str:
    """The benchmark of the OpenLORIS entries: ``--benchmark`` or the stand-in ``objects-ti``."""
    return opts.benchmark or "objects-ti"


def _fmt_features(n) -> str:
    return "full" if n is None else f"{n:,}".replace(",", " ")


def _preset(method: str, key: str) -> str:
    from bimu.methods import get_method

    return key if key in get_method(method).presets else "none"


def feature_config(opts: Options, method: str, n_features: int | None, preset_key: str, **options):
    """A linear-head run on the OpenLORIS benchmark (all 12 tasks; quick: 2 tasks of 60 examples)."""
    from bimu.experiments.config import RunConfig

    quick = opts.scale == "quick"
    bench = feature_benchmark(opts)
    return RunConfig.from_dict(dict(
        benchmark=bench, method=method, hidden=(), seeds=opts.seeds, tasks=2 if quick else None,
        preset=_preset(method, preset_key), engine=opts.engine, threads=opts.threads, data_dir=opts.data_dir,
        ood=True, ood_every=0, ood_scores=("epistemic", "aleatoric"), train_limit=60 if quick else None,
        benchmark_options={"n_features": n_features, **options}))


def rows_pmnist_2000(opts: Options) -> list[Row]:
    """The eight methods on 1000-task Permuted MNIST with 2000 hidden units (paper preset
    ``pmnist-2000``; current task after each task, the last five after the final one)."""
    methods = QUICK_METHODS if opts.scale == "quick" else PAPER_METHOD_ORDER
    return [Row([METHOD_NAMES[m]], m,
                base_config(opts, tasks_full=1000, method=m, train_limit=100, test_limit=100, hidden=(2000,),
                            eval_final="last", eval_final_last=5),
                dict(zip(("acc", "auc", "mmrr"), PAPER_PMNIST_2000[m]))) for m in methods]


def rows_bwt(opts: Options) -> list[Row]:
    """BWT needs the whole final row of the accuracy matrix: 1000-task Permuted MNIST (binary methods,
    the runs of ``pmnist-1000``, which evaluate every task at the end), then OpenLORIS with all features
    (eight methods)."""
    from bimu.experiments.reproduce import rows_pmnist_1000

    quick = opts.scale == "quick"
    table1 = rows_pmnist_1000(opts)
    rows = []
    for m in (QUICK_METHODS[:1] if quick else PAPER_BWT_PMNIST):
        acc, mmrr, bwt = PAPER_BWT_PMNIST[m]
        cfg = next(r.config for r in table1 if r.slug == m)
        rows.append(Row(["Permuted MNIST (1000 tasks)", METHOD_NAMES[m]], f"pmnist-{m}", cfg,
                        {"headline": acc, "mmrr": mmrr, "bwt": bwt}))
    share_runs(rows, "pmnist-1000", table1)
    bench = feature_benchmark(opts)
    n = 1024 if quick else None
    label = (f"OpenLORIS ({'all' if n is None else _fmt_features(n)} features)"
             + (f" [stand-in: {bench}]" if is_standin(bench) else ""))
    for m in (QUICK_METHODS if quick else PAPER_METHOD_ORDER):
        acc, bwt = PAPER_BWT_OPENLORIS[m]
        cfg = feature_config(opts, m, n, "openloris-25088").replace(ood=False)
        rows.append(Row([label, METHOD_NAMES[m]], f"{bench}-{m}", cfg, {"headline": acc, "bwt": bwt},
                        note=ALL_FEATURES_NOTE if n is None and m == "bimu" else ""))
    return rows


def rows_openloris(opts: Options) -> list[Row]:
    """Table 2: each method with 1,024 / 8,192 / all features (quick: BiMU and SGD, 1,024 features)."""
    quick = opts.scale == "quick"
    rows = []
    for m in (QUICK_METHODS if quick else PAPER_METHOD_ORDER):
        for n in ((1024,) if quick else FEATURES):
            paper = PAPER_OPENLORIS[(m, 25088 if n is None else n)]
            key = f"openloris-{25088 if n is None else n}"
            rows.append(Row([METHOD_NAMES[m], _fmt_features(n)], f"{m}-{n or 'full'}",
                            feature_config(opts, m, n, key), dict(zip(("mean_acc", "auc_alea", "auc_epi"), paper)),
                            note=ALL_FEATURES_NOTE if n is None and not rows[3:] else ""))
    return rows


def rows_standardisation(opts: Options) -> list[Row]:
    """The standardisation appendix: 8,192 features standardised with the training data's statistics
    (the paper's offline control), each method with its ``openloris-8192-std`` preset (quick: BiMU, SGD)."""
    quick = opts.scale == "quick"
    methods = QUICK_METHODS if quick else tuple(PAPER_STANDARDISED)
    return [Row([METHOD_NAMES[m]], m, feature_config(opts, m, 1024 if quick else 8192, "openloris-8192-std",
                                                     standardize=True),
                dict(zip(("mean_acc", "auc_alea", "auc_epi"), PAPER_STANDARDISED[m])),
                note=STANDARDISED_NOTE if m == "bimu" else "") for m in methods]


# ----------------------------------------------------------------------------------- figures
def _row_runs(opts: Options, entry_name: str, row: Row) -> list[dict]:
    from bimu.report.tables import find_seed_dirs, load_run

    d = row_dir(opts, entry_name, row)
    if not d.exists():
        return []
    runs = [load_run(p) for p in find_seed_dirs([d])]
    return [r for r in runs if r["summary"] and r["summary"].get("complete")]


def accuracy_per_task_figure(entry: Entry, opts: Options, rows, summaries) -> list[Path]:
    """``OUT/NAME-accuracy-per-task.png``: accuracy right after each task and at the end, one curve per
    row (seed means)."""
    from bimu.report.plots import plot_accuracy_per_task

    groups = {}
    for row in rows:
        if row.config is None:
            continue
        runs = _row_runs(opts, entry.name, row)
        if runs:
            groups[(row.config.benchmark, " ".join(row.labels), tuple(row.config.hidden or ()), None)] = runs
    if not groups:
        return []
    return [plot_accuracy_per_task(groups, Path(opts.out) / f"{entry.name}-accuracy-per-task.png",
                                   title=entry.title)]


def probability_histograms_figure(entry: Entry, opts: Options, rows, summaries) -> list[Path]:
    """``OUT/NAME-probabilities.png``: histograms of ``sigmoid(2 lambda)`` at the end of training, one
    panel per row (first complete seed's checkpoint), as the paper's memory-window figure."""
    from bimu.experiments.rundir import RunDir
    from bimu.report.plots import lambdas_of, plot_probability_histograms

    panels = {}
    for row in rows:
        runs = _row_runs(opts, entry.name, row) if row.config is not None else []
        if not runs:
            continue
        ckpt = RunDir(runs[0]["path"]).load_checkpoint()
        if ckpt is None:
            continue
        try:
            panels[("N = " if row.slug.startswith("bimu-N") else "") + " ".join(row.labels)] = lambdas_of(
                ckpt["method_state"])
        except ValueError:
            continue
    if not panels:
        return []
    return [plot_probability_histograms(panels, Path(opts.out) / f"{entry.name}-probabilities.png",
                                        title="p = sigmoid(2 lambda) at the end of training")]


def learning_rate_map(opts: Options, log=None) -> Report:
    """The colour map of eta over (lambda, dL/dlambda) with alpha_max = 1, and a table of a few of its
    values (the paper has the figure only)."""
    import numpy as np

    from bimu.report.plots import learning_rate_grid, plot_learning_rate_map

    fig = plot_learning_rate_map(Path(opts.out) / "learning-rate-map.png", lr_max=1.0)
    lam, g, eta = learning_rate_grid(lr_max=1.0, n=5)
    rows = [[f"{lam[j]:g}", f"{g[i]:g}", f"{eta[i, j]:.4f}"] for i in range(len(g)) for j in range(len(lam))]
    notes = ["eta = 1 / (kl_multiplier (1 - tanh^2 lambda) + 2 likelihood_multiplier (tanh(lambda) g + |g|) "
             "+ 1 / alpha_max), from bimu.optim.bimu.bimu_learning_rate, multipliers 1, alpha_max = 1",
             f"eta ranges over [{float(np.min(eta)):.4f}, {float(np.max(eta)):.4f}] on this grid; the paper "
             "shows this map as a figure without numbers", f"figure: {fig}"]
    table = Table("BiMU learning-rate colour map (alpha_max = 1)", ["lambda", "dL/dlambda", "eta"], rows, notes)
    return Report(table, [fig], 0, [])


MORE_ENTRIES = (
    Entry("pmnist-2000-neurons", "1000-task Permuted MNIST, 2000 hidden units", ("Method",), ("acc", "auc", "mmrr"),
          rows_pmnist_2000, figures=accuracy_per_task_figure),
    Entry("bwt", "Backward transfer: 1000-task Permuted MNIST and OpenLORIS-Object (all features)",
          ("Benchmark", "Method"), ("headline", "mmrr", "bwt"), rows_bwt, figures=accuracy_per_task_figure),
    Entry("openloris", "Table 2: OpenLORIS-Object, linear head, 1 024 / 8 192 / all features",
          ("Method", "Features"), ("mean_acc", "auc_alea", "auc_epi"), rows_openloris,
          figures=accuracy_per_task_figure),
    Entry("standardisation", "OpenLORIS-Object with standardised 8 192 features",
          ("Method",), ("mean_acc", "auc_alea", "auc_epi"), rows_standardisation),
    Entry("learning-rate-map", "BiMU learning-rate colour map", build=learning_rate_map),
)
"""The entries this module adds to :data:`bimu.experiments.reproduce.ENTRIES`."""

for _e in MORE_ENTRIES:
    ENTRIES[_e.name] = _e
ENTRIES["memory-window"] = dataclasses.replace(ENTRIES["memory-window"], figures=probability_histograms_figure)

"""The figures of ``bimu reproduce``: accuracy per task and histograms of ``sigmoid(2 lambda)`` attached
to run tables, and the ``learning-rate-map`` entry (BiMU's learning-rate colour map).

Figures are drawn from the completed runs of each row (seed means, or the first complete seed's
checkpoint) and written as ``OUT/<entry>-*.png``.
"""

from __future__ import annotations

from pathlib import Path

from bimu.reproduce.spec import Entry, Options, Report, Row, row_dir
from bimu.reproduce.table import Table


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
    path = Path(opts.out) / f"{entry.name}-accuracy-per-task.png"
    plot_accuracy_per_task(groups, path, title=entry.title)
    return [path]


def probability_histograms_figure(entry: Entry, opts: Options, rows, summaries) -> list[Path]:
    """``OUT/NAME-probabilities.png``: histograms of ``sigmoid(2 lambda)`` at the end of training, one
    panel per row (first complete seed's checkpoint), as the paper's memory-window figure."""
    from bimu.report.plots import lambdas_of, plot_probability_histograms
    from bimu.rundir import RunDir

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
    path = Path(opts.out) / f"{entry.name}-probabilities.png"
    plot_probability_histograms(panels, path, title="p = sigmoid(2 lambda) at the end of training")
    return [path]


def learning_rate_map(opts: Options, log=None) -> Report:
    """The colour map of eta over (lambda, dL/dlambda) with alpha_max = 1, and a table of a few of its
    values (the paper has the figure only)."""
    import numpy as np

    from bimu.report.plots import learning_rate_grid, plot_learning_rate_map

    fig = Path(opts.out) / "learning-rate-map.png"
    plot_learning_rate_map(fig, lr_max=1.0)
    lam, g, eta = learning_rate_grid(lr_max=1.0, n=5)
    rows = [[f"{lam[j]:g}", f"{g[i]:g}", f"{eta[i, j]:.4f}"] for i in range(len(g)) for j in range(len(lam))]
    notes = ["eta = 1 / (kl_multiplier (1 - tanh^2 lambda) + 2 likelihood_multiplier (tanh(lambda) g + |g|) "
             "+ 1 / alpha_max), from bimu.optim.bimu.bimu_learning_rate, multipliers 1, alpha_max = 1",
             f"eta ranges over [{float(np.min(eta)):.4f}, {float(np.max(eta)):.4f}] on this grid; the paper "
             "shows this map as a figure without numbers", f"figure: {fig}"]
    table = Table("BiMU learning-rate colour map (alpha_max = 1)", ["lambda", "dL/dlambda", "eta"], rows, notes)
    return Report(table, [fig], 0, [])

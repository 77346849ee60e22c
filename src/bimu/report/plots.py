"""Figures from run directories, as :class:`matplotlib.figure.Figure` objects.

Every ``plot_*`` function builds its figure with matplotlib's object API (no pyplot, so the backend
of a notebook or script is left as it is), returns it, and when given a ``path`` also writes it there
as a PNG, atomically. In Jupyter the returned figure displays as the cell's value.

Accuracy per task (:func:`plot_accuracy_per_task`), the accuracy matrix as a heatmap
(:func:`plot_accuracy_matrix`), the prequential (test-then-train) curve (:func:`plot_prequential`, from
:func:`prequential_curves`), accuracy vs queried fraction overall / frequent /
rare (:func:`plot_accuracy_vs_queried`), histograms of ``sigmoid(2 lambda)`` of trained models
(:func:`plot_probability_histograms`, :func:`lambdas_of`) and the colour map of BiMU's learning rate
(:func:`plot_learning_rate_map`, from :func:`bimu.optim.bimu.bimu_learning_rate`).

>>> lam, g, eta = learning_rate_grid(n=3)
>>> eta.shape, float(eta[1, 1])   # lambda = 0, gradient = 0: 1 / (1 + 1 / alpha_max)
((3, 3), 0.5)
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from matplotlib.figure import Figure



def _mean_matrix(runs):
    from bimu.metrics import mean_accuracy_matrix

    mats = [r["R"] for r in runs if r["R"] is not None]
    if not mats or len({m.shape for m in mats}) != 1:
        return None
    return mean_accuracy_matrix(mats)


def group_matrices(groups: dict) -> dict[str, np.ndarray]:
    """Label -> seed-mean accuracy matrix of each group of :func:`bimu.report.tables.group_runs` (groups
    whose seeds have no matrix, or matrices of different shapes, are left out), in the report's row
    order. A key is ``(benchmark, method, hidden, active)``, optionally followed by the configuration
    cells that tell its group apart (in the label too)."""
    from bimu.report.tables import group_sort_key

    out = {}
    for key, runs in sorted(groups.items(), key=lambda kv: group_sort_key(kv[0])):
        R = _mean_matrix(runs)
        if R is not None:
            out[_label(key)] = R
    return out


def _label(key: tuple) -> str:
    """A figure's label of a group key: ``method (benchmark, hidden widths, active strategy, cells)``."""
    bench, method, hidden, active = key[:4]
    extras = "".join(f", {cell}" for _, cell in (key[4] if len(key) > 4 else ()))
    return f"{method} ({bench}, {'x'.join(map(str, hidden)) or 'linear'}{', ' + active if active else ''}{extras})"


def plot_accuracy_per_task(groups: dict, path: str | os.PathLike | None = None, title: str | None = None) -> Figure:
    """Two panels: accuracy right after training on each task, and accuracy on each task after the
    whole stream (seed means, NaN entries skipped), one line per group of
    :func:`bimu.report.tables.group_runs`. Returns the figure (also written to ``path`` if given)."""
    fig = _figure(11, 4)
    axes = fig.subplots(1, 2, sharey=True)
    for label, R in group_matrices(groups).items():
        tasks = np.arange(1, R.shape[0] + 1)
        diag = np.diagonal(R) * 100
        final = R[-1] * 100
        ok = ~np.isnan(diag)
        axes[0].plot(tasks[ok], diag[ok], marker="o" if ok.sum() <= 50 else None, label=label)
        ok = ~np.isnan(final)
        axes[1].plot(tasks[ok], final[ok], marker="o" if ok.sum() <= 50 else None, label=label)
    axes[0].set_title("right after training on the task")
    axes[1].set_title("after the whole stream")
    from matplotlib.ticker import MaxNLocator

    for ax in axes:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_ylim(0, 100)
        ax.set_xlabel("task")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("test accuracy (%)")
    axes[1].legend(fontsize=8, loc="lower left")
    if title:
        fig.suptitle(title)
    return _finish(fig, path)


def _figure(width: float, height: float) -> Figure:
    """A new figure of the object API (not registered with pyplot, so no backend is selected)."""
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height))


def _finish(fig: Figure, path: str | os.PathLike | None, layout: bool = True) -> Figure:
    """Lay ``fig`` out (``layout``: with ``tight_layout``, else cropped when written), write it to
    ``path`` atomically (temp file + ``os.replace``) if given, and return it."""
    if layout:
        fig.tight_layout()
    if path is not None:
        from bimu.atomic import atomic_path

        with atomic_path(Path(path)) as tmp:
            fig.savefig(tmp, dpi=110, format="png", bbox_inches=None if layout else "tight")
    return fig


def plot_accuracy_matrix(R, path: str | os.PathLike | None = None, title: str | None = None,
                         annotate: bool | None = None) -> Figure:
    """The accuracy matrix as a heatmap: row ``i`` after training on task ``i + 1``, column ``j`` the
    accuracy (%) on task ``j + 1``; entries never evaluated (NaN) are left blank. ``R`` is one matrix
    (fractions in [0, 1]) or a mapping label -> matrix, one panel each. ``annotate`` writes each
    value in its cell (default: matrices up to 12 tasks). Returns the figure (also written to
    ``path`` if given).

    >>> fig = plot_accuracy_matrix(np.array([[0.9, np.nan], [0.8, 0.95]]))
    >>> fig.axes[0].images[0].get_array().tolist()
    [[90.0, None], [80.0, 95.0]]
    """
    panels = dict(R) if isinstance(R, Mapping) else {"": R}
    mats = {k: np.asarray(v, dtype=np.float64) for k, v in panels.items()}
    for k, m in mats.items():
        if m.ndim != 2 or m.shape[0] != m.shape[1] or m.size == 0:
            raise ValueError(f"accuracy matrix {k or ''}: expected a non-empty square matrix, got shape {m.shape}")
    cols = min(len(mats), 3)
    rows = -(-len(mats) // cols)
    side = 4.2 if max(m.shape[0] for m in mats.values()) <= 12 else 5.2
    fig = _figure(side * cols + 1.0, side * rows)
    axes = fig.subplots(rows, cols, squeeze=False).ravel()
    from matplotlib.ticker import MaxNLocator

    image = None
    for ax, (label, m) in zip(axes, mats.items()):
        n = m.shape[0]
        pct = np.ma.masked_invalid(100.0 * m)
        image = ax.imshow(pct, vmin=0.0, vmax=100.0, cmap="viridis", origin="upper", interpolation="nearest",
                          extent=(0.5, n + 0.5, n + 0.5, 0.5))
        if (annotate if annotate is not None else n <= 12):
            for i, j in zip(*np.nonzero(~np.isnan(m))):
                ax.text(j + 1, i + 1, f"{pct[i, j]:.1f}", ha="center", va="center", fontsize=7,
                        color="white" if pct[i, j] < 60 else "black")
        for axis in (ax.xaxis, ax.yaxis):
            axis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("evaluated task")
        ax.set_ylabel("after training on task")
        if label:
            ax.set_title(str(label))
    for ax in axes[len(mats):]:
        ax.axis("off")
    fig.colorbar(image, ax=list(axes[:len(mats)]), label="test accuracy (%)")
    if title:
        fig.suptitle(title)
    return _finish(fig, path, layout=False)  # a colour bar over several panels: no tight_layout


def prequential_curves(groups: dict) -> dict[str, dict]:
    """Label (as :func:`group_matrices`) -> the prequential curve of each group whose runs recorded one
    (``prequential.csv``): ``example`` (examples seen before each prediction), ``window_acc`` (the seeds'
    mean where they predicted the same examples, else the first seed's), ``boundaries`` (the example
    index at which each task after the first starts, from the records' ``n_train``), ``acc`` (the mean
    over seeds of the run's prequential accuracy), ``seeds`` and ``window`` (predictions per window
    accuracy). Groups without a curve are left out."""
    from bimu.report.tables import group_sort_key

    out = {}
    for key, runs in sorted(groups.items(), key=lambda kv: group_sort_key(kv[0])):
        have = [r for r in runs if r.get("prequential") is not None and len(r["prequential"]["example"])]
        if not have:
            continue
        first = have[0]["prequential"]
        same = [r["prequential"] for r in have if np.array_equal(r["prequential"]["example"], first["example"])]
        starts = np.cumsum([int(rec.get("n_train", 0)) for rec in have[0]["records"]])[:-1]
        out[_label(key)] = {"example": first["example"], "window_acc": np.mean([c["window_acc"] for c in same], axis=0),
                      "boundaries": starts, "seeds": len(same), "window": first.get("window"),
                      "acc": float(np.mean([np.mean(c["correct"]) for c in same]))}
    return out


def plot_prequential(curves: Mapping[str, Mapping], path: str | os.PathLike | None = None,
                     title: str | None = None) -> Figure:
    """The prequential curves of :func:`prequential_curves`: accuracy of the last W test-then-train
    predictions (%, W the curves' ``window``) against the examples seen, one line per group (its stream's
    accuracy in the legend),
    task boundaries as dotted vertical lines (those of the first group; every k-th of a long stream,
    at most 100 lines). Returns the figure (also written to ``path`` if given).

    >>> fig = plot_prequential({"sgd": {"example": np.array([0, 10, 20]), "window_acc": np.array([0.0, 0.5, 0.67]),
    ...                                 "boundaries": np.array([15]), "acc": 0.67, "seeds": 1}})
    >>> len(fig.axes[0].lines)  # the curve and one task boundary
    2
    """
    fig = _figure(11, 4)
    ax = fig.subplots()
    for label, c in curves.items():
        ax.plot(np.asarray(c["example"]), 100 * np.asarray(c["window_acc"], dtype=np.float64),
                label=f"{label}: {100 * c['acc']:.2f}% over the stream" + (f", {c['seeds']} seeds" if c["seeds"] > 1
                                                                           else ""))
    if curves:
        starts = np.asarray(next(iter(curves.values()))["boundaries"])
        step = max(1, -(-len(starts) // 100))
        for b in starts[step - 1::step]:
            ax.axvline(b, color="0.5", linestyle=":", linewidth=0.7)
        ax.legend(fontsize=8, loc="lower right")
        note = "" if step == 1 else f" (every {step}th task boundary dotted)"
    ax.set_ylim(0, 100)
    ax.set_xlabel("training examples seen" + (note if curves else ""))
    windows = sorted({int(c["window"]) for c in curves.values() if c.get("window")})
    ax.set_ylabel(f"accuracy of the last {'/'.join(map(str, windows)) or 'W'} predictions (%)")
    ax.grid(alpha=0.3)
    ax.set_title(title or "test-then-train accuracy (task boundaries dotted)")
    return _finish(fig, path)


QUERY_PANELS = (("accuracy", "overall"), ("frequent_accuracy", "frequent classes"), ("rare_accuracy", "rare classes"))
"""The three panels of the accuracy-vs-queried-fraction figures: (key, title)."""


def plot_accuracy_vs_queried(curves: dict, path: str | os.PathLike | None = None, baseline: dict | None = None,
                             title: str = "", dashed=("random",), baselines: dict | None = None,
                             colors: dict | None = None) -> Figure:
    """Accuracy vs queried fraction in three panels (overall, frequent, rare classes), as the paper's
    active-learning figures. ``curves``: label -> list of points, each a dict with ``query_fraction``
    and the panel keys (fractions in [0, 1]; a point with ``<key>_sd`` gets that error bar); a label
    containing a word of ``dashed`` is drawn dashed. ``baseline``: the 100%-update point drawn as a
    black horizontal line; ``baselines``: label -> such a point, one dotted line each. ``colors``: label
    -> colour of its curve or line. The queried axis is logarithmic, so a point that queried nothing
    (fraction 0: the tables list it) is left out rather than drawn as a line from the axis' left edge.
    Returns the figure (also written to ``path`` if given)."""
    fig = _figure(15, 4.3)
    axes = fig.subplots(1, 3)
    colors = colors or {}
    for ax, (key, name) in zip(axes, QUERY_PANELS):
        for label, pts in curves.items():
            pts = sorted((p["query_fraction"], p.get(key, float("nan")), p.get(key + "_sd", 0.0)) for p in pts
                         if p["query_fraction"] > 0)
            if not pts:
                continue
            xs, ys, sds = (100 * np.asarray(v, float) for v in zip(*pts))
            style = "--" if any(w.lower() in dashed for w in label.split(" ")) else "-"
            ax.errorbar(xs, ys, yerr=sds if np.any(sds > 0) else None, marker="o", label=label, linestyle=style,
                        color=colors.get(label), capsize=2)
        if baseline and np.isfinite(baseline.get(key, float("nan"))):
            ax.axhline(100 * baseline[key], color="k", linestyle=":", label="100% updates")
        for label, point in (baselines or {}).items():
            if np.isfinite(point.get(key, float("nan"))):
                ax.axhline(100 * point[key], color=colors.get(label, "k"), linestyle=":", label=label)
        ax.set_xscale("log")
        ax.set_ylim(-2, 102)  # an accuracy: error bars past 0 or 100% are cut at the axis
        ax.set_xlabel("queried labels / updates (% of stream, log)")
        ax.set_ylabel(f"accuracy, {name} (%)")
        ax.set_title(name)
        ax.grid(alpha=0.3)
    if axes[0].get_legend_handles_labels()[0]:
        axes[0].legend(fontsize=7)
    if title:
        fig.suptitle(title)
    return _finish(fig, path)


def lambdas_of(method_state: dict) -> np.ndarray:
    """All natural parameters ``lambda`` of a BiMU / BayesBiNN ``method.state_dict()`` (torch or fused
    engine layout), flattened; ValueError if the state holds none."""
    mods = method_state.get("modules", method_state)
    found = []
    if isinstance(mods.get("lam"), (list, tuple)):
        found = [np.asarray(a, dtype=np.float64).ravel() for a in mods["lam"]]
    else:
        model = mods.get("model", {})
        found = [np.asarray(v.detach().cpu() if hasattr(v, "detach") else v, dtype=np.float64).ravel()
                 for k, v in model.items() if k.split(".")[-1] == "lam"]
    if not found:
        raise ValueError("this method state holds no lambda (only BiMU and BayesBiNN have Bernoulli synapses)")
    return np.concatenate(found)


def plot_probability_histograms(panels: dict, path: str | os.PathLike | None = None, title: str = "",
                                bins: int = 50) -> Figure:
    """One histogram per panel of the synaptic probabilities ``p = sigmoid(2 lambda)`` (the paper's
    memory-window figure). ``panels``: label -> lambda array. Returns the figure (also written to
    ``path`` if given)."""
    n = max(1, len(panels))
    cols = min(n, 3)
    rows = (n + cols - 1) // cols
    fig = _figure(4.2 * cols, 3.2 * rows)
    axes = fig.subplots(rows, cols, squeeze=False)
    for ax, (label, lam) in zip(axes.ravel(), panels.items()):
        p = 0.5 * (1.0 + np.tanh(np.asarray(lam, dtype=np.float64)))  # sigmoid(2 lambda), no overflow
        ax.hist(p, bins=bins, range=(0.0, 1.0), color="C0")
        ax.set_title(label)
        ax.set_xlabel("p = sigmoid(2 lambda)")
        ax.set_ylabel("synapses")
    for ax in axes.ravel()[len(panels):]:
        ax.axis("off")
    if title:
        fig.suptitle(title)
    return _finish(fig, path)


def learning_rate_grid(lr_max: float = 1.0, likelihood_multiplier: float = 1.0, kl_multiplier: float = 1.0,
                       lam_range=(-4.0, 4.0), grad_range=(-2.0, 2.0), n: int = 201):
    """``(lambda values, gradient values, eta [n_grad, n_lambda])`` from
    :func:`bimu.optim.bimu.bimu_learning_rate` on a regular grid."""
    import torch

    from bimu.optim.bimu import bimu_learning_rate

    lam = torch.linspace(float(lam_range[0]), float(lam_range[1]), int(n), dtype=torch.float64)
    g = torch.linspace(float(grad_range[0]), float(grad_range[1]), int(n), dtype=torch.float64)
    G, L = torch.meshgrid(g, lam, indexing="ij")
    eta = bimu_learning_rate(L, G, lr_max, likelihood_multiplier, kl_multiplier)
    return lam.numpy(), g.numpy(), eta.numpy()


def plot_learning_rate_map(path: str | os.PathLike | None = None, lr_max: float = 1.0,
                           likelihood_multiplier: float = 1.0, kl_multiplier: float = 1.0, lam_range=(-4.0, 4.0),
                           grad_range=(-2.0, 2.0), n: int = 201) -> Figure:
    """The paper's colour map of the metaplastic step size eta over (lambda, dL/dlambda) with
    alpha_max = ``lr_max`` (default 1, as in the paper). Returns the figure (also written to ``path``
    if given)."""
    lam, g, eta = learning_rate_grid(lr_max, likelihood_multiplier, kl_multiplier, lam_range, grad_range, n)
    fig = _figure(6, 4.6)
    ax = fig.subplots()
    mesh = ax.pcolormesh(lam, g, eta, shading="auto", cmap="viridis", vmin=0.0, vmax=float(lr_max))
    fig.colorbar(mesh, ax=ax, label="eta")
    ax.set_xlabel("lambda_{t-1}")
    ax.set_ylabel("dL/dlambda")
    ax.set_title(f"BiMU learning rate (alpha_max = {lr_max:g})")
    return _finish(fig, path)

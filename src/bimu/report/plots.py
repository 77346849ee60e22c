"""Figures from run directories (matplotlib, Agg backend; no display needed; written atomically).

Accuracy per task (:func:`plot_accuracy_per_task`), accuracy vs queried fraction overall / frequent /
rare (:func:`plot_accuracy_vs_queried`), histograms of ``sigmoid(2 lambda)`` of trained models
(:func:`plot_probability_histograms`, :func:`lambdas_of`) and the colour map of BiMU's learning rate
(:func:`plot_learning_rate_map`, from :func:`bimu.optim.bimu.bimu_learning_rate`).

>>> lam, g, eta = learning_rate_grid(n=3)
>>> eta.shape, float(eta[1, 1])   # lambda = 0, gradient = 0: 1 / (1 + 1 / alpha_max)
((3, 3), 0.5)
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np


def _mean_matrix(runs):
    from bimu.metrics import mean_accuracy_matrix

    mats = [r["R"] for r in runs if r["R"] is not None]
    if not mats or len({m.shape for m in mats}) != 1:
        return None
    return mean_accuracy_matrix(mats)


def plot_accuracy_per_task(groups: dict, path: str | os.PathLike, title: str | None = None) -> Path:
    """Two panels per figure: accuracy right after training on each task, and accuracy on each task
    after the whole stream (seed means, NaN entries skipped). Returns the PNG path."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    for key, runs in sorted(groups.items(), key=lambda kv: str(kv[0])):
        R = _mean_matrix(runs)
        if R is None:
            continue
        bench, method, hidden, active = key
        label = f"{method} ({bench}, {'x'.join(map(str, hidden)) or 'linear'}{', ' + active if active else ''})"
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
    fig.tight_layout()
    return _save(fig, path)


def _save(fig, path) -> Path:
    """Save ``fig`` to ``path`` atomically (temp file + ``os.replace``) and close it."""
    import matplotlib.pyplot as plt

    from bimu.atomic import atomic_path

    p = Path(path)
    try:
        with atomic_path(p) as tmp:
            fig.savefig(tmp, dpi=110)
    finally:
        plt.close(fig)
    return p


def _pyplot():
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt


QUERY_PANELS = (("accuracy", "overall"), ("frequent_accuracy", "frequent classes"), ("rare_accuracy", "rare classes"))
"""The three panels of the accuracy-vs-queried-fraction figures: (key, title)."""


def plot_accuracy_vs_queried(curves: dict, path: str | os.PathLike, baseline: dict | None = None,
                             title: str = "", dashed=("random",)) -> Path:
    """Accuracy vs queried fraction in three panels (overall, frequent, rare classes), as the paper's
    active-learning figures. ``curves``: label -> list of points, each a dict with ``query_fraction``
    and the panel keys (fractions in [0, 1]); ``baseline``: the 100%-update point drawn as a horizontal
    line. Returns the PNG path."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.3))
    for ax, (key, name) in zip(axes, QUERY_PANELS):
        for label, pts in curves.items():
            pts = sorted((p["query_fraction"], p.get(key, float("nan"))) for p in pts)
            if not pts:
                continue
            xs, ys = zip(*pts)
            ax.plot(100 * np.asarray(xs, float), 100 * np.asarray(ys, float), marker="o", label=label,
                    linestyle="--" if label.split(" ")[0].lower() in dashed else "-")
        if baseline and np.isfinite(baseline.get(key, float("nan"))):
            ax.axhline(100 * baseline[key], color="k", linestyle=":", label="100% updates")
        ax.set_xscale("log")
        ax.set_xlabel("queried labels / updates (% of stream, log)")
        ax.set_ylabel(f"accuracy, {name} (%)")
        ax.set_title(name)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return _save(fig, path)


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


def plot_probability_histograms(panels: dict, path: str | os.PathLike, title: str = "", bins: int = 50) -> Path:
    """One histogram per panel of the synaptic probabilities ``p = sigmoid(2 lambda)`` (the paper's
    memory-window figure). ``panels``: label -> lambda array. Returns the PNG path."""
    plt = _pyplot()
    n = max(1, len(panels))
    cols = min(n, 3)
    rows = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.2 * rows), squeeze=False)
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
    fig.tight_layout()
    return _save(fig, path)


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


def plot_learning_rate_map(path: str | os.PathLike, lr_max: float = 1.0, likelihood_multiplier: float = 1.0,
                           kl_multiplier: float = 1.0, lam_range=(-4.0, 4.0), grad_range=(-2.0, 2.0),
                           n: int = 201) -> Path:
    """The paper's colour map of the metaplastic step size eta over (lambda, dL/dlambda) with
    alpha_max = ``lr_max`` (default 1, as in the paper). Returns the PNG path."""
    plt = _pyplot()
    lam, g, eta = learning_rate_grid(lr_max, likelihood_multiplier, kl_multiplier, lam_range, grad_range, n)
    fig, ax = plt.subplots(figsize=(6, 4.6))
    mesh = ax.pcolormesh(lam, g, eta, shading="auto", cmap="viridis", vmin=0.0, vmax=float(lr_max))
    fig.colorbar(mesh, ax=ax, label="eta")
    ax.set_xlabel("lambda_{t-1}")
    ax.set_ylabel("dL/dlambda")
    ax.set_title(f"BiMU learning rate (alpha_max = {lr_max:g})")
    fig.tight_layout()
    return _save(fig, path)

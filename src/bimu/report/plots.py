"""Figures from run directories (matplotlib, Agg backend; no display needed)."""

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
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

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
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(f".{p.stem}.tmp-{os.getpid()}{p.suffix}")
    fig.savefig(tmp, dpi=120)
    plt.close(fig)
    os.replace(tmp, p)
    return p

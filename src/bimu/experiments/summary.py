"""The summary of one completed stream of the runner (:func:`summarize`), what ``summary.json`` holds."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from bimu import metrics
from bimu.experiments.prequential import summary_fields


def summarize(R: np.ndarray, records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The summary of one completed stream (fractions in [0, 1]; NaN where undefined): accuracy-matrix
    metrics, OOD AUCs, timing and counters, the prequential accuracy over the stream
    (:func:`bimu.experiments.prequential.summary_fields`), the last task's active-learning counters."""
    n = R.shape[0]
    k = min(5, n)
    final = R[-1]
    try:
        last_k = metrics.last_k_mean(R, k)
    except ValueError:
        last_k = float("nan")
    train_s = sum(r["train_seconds"] for r in records)
    steps = sum(r["steps"] for r in records)
    last = records[-1] if records else {}
    ood = next((r["ood_auc"] for r in reversed(records) if r.get("ood_auc")), None)
    ood_ref = next((r["ood_auc_reference"] for r in reversed(records) if r.get("ood_auc_reference")), None)
    out = {
        "complete": len(records) == n and bool(records) and records[-1]["task"] == n - 1,
        "n_tasks": n, "last_k": k, "last_k_acc": last_k,
        "final_mean_acc": float(np.nanmean(final)) if not np.isnan(final).all() else float("nan"),
        "first_task_acc": float(R[0, 0]), "just_trained_mean_acc": float(np.nanmean(np.diagonal(R))),
        "mmrr": metrics.mmrr(R) if not np.isnan(R[-1, -1]) else float("nan"),
        "bwt": metrics.bwt(R), "ood_auc": ood, "ood_auc_reference": ood_ref,
        "steps_per_s": steps / train_s if train_s > 0 else float("nan"),
        "train_seconds": train_s, "eval_seconds": sum(r["eval_seconds"] for r in records),
        "memory_bytes": last.get("memory_bytes"), "state_bytes": last.get("state_bytes"),
        "examples_seen": last.get("examples_seen"), "updates_applied": last.get("updates_applied"),
    }
    out.update(summary_fields(records))  # prequential_acc, prequential_n, when the tasks recorded them
    if last.get("active") is not None:
        out["active"] = last["active"]
    return out

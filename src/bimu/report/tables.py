"""Paper-style tables from run directories: mean +- std over seeds, with the paper's numbers beside.

>>> fmt_pm([0.9, 0.92], scale=100)
'91.00 ± 1.41'
>>> fmt_pm([])
'-'
"""

from __future__ import annotations

import math
import os
import sys
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bimu.paper import TABLE1, cells
from bimu.rundir import CONFIG, SUMMARY, RunDir, find_run_dirs

_ALIASES = {"ewc": "ewc-online", "ewc_online": "ewc-online", "synmeta": "synaptic-metaplasticity",
            "syn-meta": "synaptic-metaplasticity"}


def paper_table1_cells(method: str) -> dict[str, str]:
    """The paper's Table 1 cells of ``method`` (aliases accepted) as printed: ``acc``, ``auc``, ``mmrr``,
    ``one_task`` ("m ± s", or "-" where the paper has no value; :data:`bimu.paper.TABLE1`).

    >>> paper_table1_cells("ewc-online")
    {'acc': '81.78 ± 0.82', 'auc': '0.66 ± 0.11', 'mmrr': '6.63', 'one_task': '96.06 ± 0.11'}
    >>> paper_table1_cells("synaptic-metaplasticity")["auc"]
    '-'
    """
    return cells(TABLE1[_ALIASES.get(method, method)])


def find_seed_dirs(paths: Iterable[str | os.PathLike]) -> list[Path]:
    """Every run directory under ``paths`` (recursively, or the path itself) that finished a task
    (:func:`bimu.rundir.find_run_dirs` with ``started_only``); FileNotFoundError naming a
    path that does not exist."""
    return find_run_dirs(paths, started_only=True)


def load_run(path: str | os.PathLike) -> dict[str, Any]:
    """One seed directory: config, accuracy matrix, metric records, summary (None if incomplete)."""
    rd = RunDir(path)
    p = rd.path
    cfg = rd.read_json(CONFIG)
    R = rd.read_matrix() if rd.has_matrix() else None
    recs = rd.read_metrics()
    summ = rd.read_json(SUMMARY) if rd.exists(SUMMARY) else None
    seed = summ.get("seed") if summ else None
    if seed is None and p.name.startswith("seed-"):
        seed = int(p.name[5:])
    return {"path": p, "config": cfg, "R": R, "records": recs, "summary": summ, "seed": seed}


def group_runs(runs: Sequence[dict[str, Any]]) -> dict[tuple, list[dict[str, Any]]]:
    """Runs grouped by (benchmark, method, hidden widths, active strategy)."""
    groups: dict[tuple, list] = defaultdict(list)
    for r in runs:
        c = r["config"]
        hidden = tuple(c.get("resolved", {}).get("sizes", [])[1:-1])
        groups[(c["benchmark"], c["method"], hidden, c.get("active"))].append(r)
    return dict(groups)


def _finite(vals) -> list[float]:
    return [float(v) for v in vals if v is not None and isinstance(v, (int, float)) and math.isfinite(v)]


TRAIL_SHOWN = 10
"""Accuracies an incomplete run's note lists in full; a longer trail is summarised."""


def accuracy_trail(accs: Sequence[float]) -> str:
    """The accuracies right after each task of an incomplete run, in percent: all of them up to
    :data:`TRAIL_SHOWN`, else the first and last three with the mean and range over all.

    >>> accuracy_trail([0.935, 0.94])
    '93.50, 94.00'
    >>> accuracy_trail([0.5 + 0.01 * t for t in range(12)])
    '50.00, 51.00, 52.00, ..., 59.00, 60.00, 61.00 (12 tasks: mean 55.50, range 50.00-61.00)'
    """
    pct = [f"{100 * a:.2f}" for a in accs]
    if len(pct) <= TRAIL_SHOWN:
        return ", ".join(pct)
    vals = [100 * a for a in accs]
    return (f"{', '.join(pct[:3])}, ..., {', '.join(pct[-3:])} ({len(pct)} tasks: mean {sum(vals) / len(vals):.2f}, "
            f"range {min(vals):.2f}-{max(vals):.2f})")


def fmt_hours(h: float) -> str:
    """Core-hours: two decimals, two significant digits below 0.1 h (a minute is 0.017), so that a
    short run does not read 0.00, and ``<0.001`` below 3.6 s.

    >>> fmt_hours(7.034), fmt_hours(0.1), fmt_hours(0.0123), fmt_hours(0.0042), fmt_hours(0.00009)
    ('7.03', '0.10', '0.012', '0.0042', '<0.001')
    """
    return f"{h:.2f}" if h >= 0.095 else f"{h:.2g}" if h >= 0.001 else "<0.001"


def fmt_pm(vals, scale: float = 1.0, digits: int = 2) -> str:
    """``mean ± std`` (sample std, ddof=1; no std for one value) of the finite values, ``-`` if none."""
    v = _finite(vals)
    if not v:
        return "-"
    a = np.asarray(v) * scale
    if len(a) == 1:
        return f"{a[0]:.{digits}f}"
    return f"{a.mean():.{digits}f} ± {a.std(ddof=1):.{digits}f}"


def failed_reason(run: dict[str, Any]) -> str | None:
    """Why a complete run's numbers cannot be reported (``None`` when they can): a last-k accuracy
    that is not a finite number, or an accuracy matrix holding infinity or no finite diagonal. Such a
    seed is listed as failed, never averaged in nor dropped without a word.

    >>> failed_reason({"summary": {"complete": True, "last_k_acc": None}, "R": None})
    'its summary holds no finite last-k accuracy'
    """
    acc = run["summary"].get("last_k_acc")
    if not isinstance(acc, (int, float)) or isinstance(acc, bool) or not math.isfinite(acc):
        return "its summary holds no finite last-k accuracy"
    R = run.get("R")
    if R is not None and (np.isinf(R).any() or not np.isfinite(np.diag(R)).any()):
        return "its accuracy matrix holds infinity or no finite accuracy"
    return None


def group_stats(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Per-seed values of each reported quantity, for complete runs only. MMRR is left out (``None``)
    for single-task streams, where it is ``1 / eps`` by construction and says nothing about forgetting."""
    complete = [r for r in runs if r["summary"] and r["summary"].get("complete")]
    failed = [r for r in complete if failed_reason(r) is not None]
    done = [r for r in complete if r not in failed]
    s = [r["summary"] for r in done]
    from bimu.metrics import mmrr_seed_averaged

    mats = [r["R"] for r in done if r["R"] is not None]
    single_task = bool(mats) and all(m.shape[0] == 1 for m in mats)
    return {
        "seeds": [r["seed"] for r in done],
        "incomplete": [r["seed"] for r in runs if r not in complete],
        "failed": [r["seed"] for r in failed],
        "last_k": s[0]["last_k"] if s else 5,
        "last_k_acc": [x["last_k_acc"] for x in s],
        "auc_epistemic": [(x.get("ood_auc") or {}).get("epistemic") for x in s],
        "auc_aleatoric": [(x.get("ood_auc") or {}).get("aleatoric") for x in s],
        "auc_vr": [(x.get("ood_auc") or {}).get("variation_ratio") for x in s],
        "mmrr": [None if single_task else x["mmrr"] for x in s],
        "mmrr_seed_avg": (mmrr_seed_averaged(mats) if mats and not single_task and len({m.shape for m in mats}) == 1
                          else None),
        "bwt": [x["bwt"] for x in s],
        "first_task_acc": [x["first_task_acc"] for x in s],
        "steps_per_s": [x["steps_per_s"] for x in s],
        "queried": [(x.get("active") or {}).get("query_fraction") for x in s],
    }


def markdown_table(groups: dict[tuple, list[dict[str, Any]]], paper: bool = True) -> str:
    """The paper-style markdown table (accuracies in %, mean ± std over seeds)."""
    head = ["benchmark", "method", "hidden", "seeds", "last-k acc (%)", "AUC epi", "AUC alea", "AUC VR",
            "MMRR", "MMRR (seed-avg)", "BWT (%)", "1st task (%)", "queried (%)", "steps/s"]
    if paper:
        head += ["paper last-5", "paper AUC", "paper MMRR", "paper 1-task"]
    rows = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    for (bench, method, hidden, active), runs in sorted(groups.items(), key=lambda kv: str(kv[0])):
        st = group_stats(runs)
        name = method + (f" [active: {active}]" if active else "")
        seeds = ",".join(map(str, st["seeds"])) or "-"
        if st["incomplete"]:
            seeds += f" (incomplete: {','.join(map(str, st['incomplete']))})"
        if st["failed"]:
            seeds += f" (FAILED: {','.join(map(str, st['failed']))})"
        cells = [bench, name, "x".join(map(str, hidden)) or "-", seeds,
                 fmt_pm(st["last_k_acc"], 100) + ("" if st["last_k"] == 5 else f" (last {st['last_k']})"),
                 fmt_pm(st["auc_epistemic"], 1, 3), fmt_pm(st["auc_aleatoric"], 1, 3), fmt_pm(st["auc_vr"], 1, 3),
                 fmt_pm(st["mmrr"]), "-" if st["mmrr_seed_avg"] is None else f"{st['mmrr_seed_avg']:.2f}",
                 fmt_pm(st["bwt"], 100), fmt_pm(st["first_task_acc"], 100),
                 fmt_pm(st["queried"], 100) if active else "100",
                 fmt_pm(st["steps_per_s"], 1, 0)]
        if paper:
            if bench == "pmnist" and hidden == (100,) and _ALIASES.get(method, method) in TABLE1:
                ref = paper_table1_cells(method)
                cells += [ref["acc"], ref["auc"], ref["mmrr"], ref["one_task"]]
            else:
                cells += ["-"] * 4
        rows.append("| " + " | ".join(cells) + " |")
    notes = []
    for key, runs in sorted(groups.items(), key=lambda kv: str(kv[0])):
        for r in runs:
            if r["summary"] and r["summary"].get("complete"):
                why = failed_reason(r)
                if why is not None:
                    notes.append(f"- {key[0]}-{key[1]} seed {r['seed']}: FAILED, {why} (not in the means); "
                                 f"inspect {r['path']} and rerun it in a new --out")
                continue
            done = [rec["task"] for rec in r["records"]]
            diag = accuracy_trail([rec["acc"] for rec in r["records"] if rec.get("acc") is not None])
            n = r["config"].get("tasks", "?")
            notes.append(f"- {key[0]}-{key[1]} seed {r['seed']}: incomplete, {len(done)}/{n} tasks done; "
                         f"accuracy right after training (%): {diag or '-'} (run the same command to resume)")
    if notes:
        rows += ["", *notes]
    return "\n".join(rows)


def report(paths: Sequence[str | os.PathLike], paper: bool = True, warn=None) -> tuple[str, dict]:
    """``(markdown table, groups)`` for the run directories under ``paths``. A run whose files cannot be
    read (missing, unreadable, corrupt) is skipped with a one-line ``warn(message)`` (default: printed
    to stderr) and the others are reported; FileNotFoundError when no run is left."""
    warn = warn or (lambda msg: print(f"bimu: warning: {msg}", file=sys.stderr))
    dirs = find_seed_dirs(paths)
    if not dirs:
        raise FileNotFoundError(f"no run directories (config.json + metrics.jsonl) under {list(map(str, paths))}")
    runs = []
    for d in dirs:
        try:
            run = load_run(d)
            group_runs([run])  # its config names a benchmark and a method
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
            warn(f"skipping {d}: a file of this run cannot be read ({type(e).__name__}: {' '.join(str(e).split())[:200]})")
            continue
        runs.append(run)
    if not runs:
        raise FileNotFoundError(f"no readable run directory under {list(map(str, paths))}")
    groups = group_runs(runs)
    return markdown_table(groups, paper=paper), groups

"""One-pass active streams over a benchmark, and the threshold sweep (accuracy vs queried fraction).

:func:`run_stream` runs one method through every task of a benchmark with an acquisition rule
(the one online loop, :func:`bimu.experiments.stream.stream_tasks`), then evaluates on every task's
test set (after the whole stream; accuracies are averaged over tasks, overall and separately on rare
and frequent classes). :func:`sweep` runs it for each (score, threshold) pair and seed, plus the
100%-update baseline (every example learned), and :func:`write_sweep` writes ``sweep.csv``,
``sweep.md``, ``sweep.json`` and ``sweep.png``.

>>> rows = [{"score": "all", "threshold": float("nan"), "seed": 0, "accuracy": 0.8, "query_fraction": 1.0},
...         {"score": "vr", "threshold": 0.1, "seed": 0, "accuracy": 0.795, "query_fraction": 0.05}]
>>> update_savings(aggregate(rows), tolerance=0.01)["vr"]["ratio"]
20.0
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np
import torch

from bimu.active.learner import ActiveLearner, make_acquisition
from bimu.atomic import atomic_write_text
from bimu.data.features import StreamingStandardizer
from bimu.data.imbalance import split_accuracy
from bimu.engine.build import build_method
from bimu.experiments.stream import eval_generator, stream_tasks
from bimu.methods import get_method

_CHECKPOINT_TAG = 0xC100
"""Evaluation-generator tag of the accuracy checkpoints inside a task (plus the percent)."""

DEFAULT_GRIDS = {
    "vr": [0.1, 0.2, 0.3, 0.4, 0.5, 0.6],
    "vr-true": [0.1, 0.3, 0.5, 0.7, 0.9],
    "entropy": [1.0, 1.5, 2.0, 2.5, 3.0, 3.5],
    "aleatoric": [1.0, 1.5, 2.0, 2.5, 3.0, 3.5],
    "epistemic": [0.05, 0.1, 0.2, 0.3, 0.5],
    "random": [0.02, 0.05, 0.1, 0.2, 0.4],
}
"""Default thresholds per score (probabilities for ``random``)."""


def method_hparams(method: str, preset: str | None, overrides: Mapping | None = None) -> dict:
    """Resolve hyperparameters: defaults, then the method's paper ``preset``, then ``overrides``."""
    return get_method(method).resolve_hyperparameters(dict(overrides or {}), preset=preset)


def _predict(method, X: torch.Tensor, mc_samples: int | None, batch: int, generator) -> torch.Tensor:
    """``method.predict`` of ``X`` in batches of ``batch``."""
    return torch.cat([method.predict(X[i:i + batch], n_samples=mc_samples, generator=generator)
                      for i in range(0, len(X), batch)])


def evaluate(method, benchmark, mc_samples: int | None = None, batch: int = 512,
             generator: torch.Generator | None = None) -> dict:
    """Accuracy on every task's test set (overall, rare, frequent), and their averages over tasks."""
    per_task = []
    rare = benchmark.rare_classes
    for t in range(benchmark.n_tasks):
        X, y = benchmark.test_task(t)
        preds = _predict(method, X, mc_samples, batch, generator)
        per_task.append(split_accuracy(preds.numpy(), y.numpy(), rare))
    out = {k: float(np.nanmean([d[k] for d in per_task])) if any(not math.isnan(d[k]) for d in per_task)
           else float("nan") for k in ("accuracy", "rare_accuracy", "frequent_accuracy")}
    out["per_task_accuracy"] = [d["accuracy"] for d in per_task]
    return out


def run_stream(benchmark, method: str = "bimu", strategy: str = "vr", threshold: float | None = None,
               budget: float | None = None, budget_exponent: float = 0.5, mc_samples: int = 10,
               seed: int = 0, preset: str | None = None, hparams: Mapping | None = None,
               standardize: bool = False, baseline_predicts: bool = False, engine: str = "auto",
               checkpoints: Sequence[int] = (), hidden: Sequence[int] = ()) -> dict:
    """One single-pass active stream over all tasks, then the final evaluation.

    ``strategy="all"`` is the 100%-update baseline (every example learned; with
    ``baseline_predicts=False`` it skips the K query forward passes, which it does not need).
    Random querying does not need the K forward passes: its decisions are drawn first and the
    queried examples learned in stream order (one compiled call with the fused engine); the
    ``forward_passes`` counter is then 0.
    ``standardize`` applies :class:`~bimu.data.features.StreamingStandardizer` (each example is
    transformed with the statistics of the examples before it; test data with the final statistics).
    The final evaluation draws the method's own number of evaluation samples (``n_eval_samples``),
    not ``mc_samples``, so runs with different query K are evaluated alike.
    ``checkpoints`` (percents of a task's examples, 0-99) add ``checkpoint_accuracy``: for each task,
    the accuracy on that task's test set when that share of its examples has streamed past (the
    paper's accuracy checkpoints of the querying dynamics; each with its own evaluation generator, so
    the stream and the final evaluation are the same with or without them).
    ``engine`` is :func:`~bimu.engine.build.build_method`'s: ``"auto"`` runs the fused engine when it
    supports the method, ``"torch"`` always the torch method, ``"fused"`` requires the engine (same
    results up to float rounding; the fused path is several times faster). The result's ``engine``
    says which ran. ``hidden``: the hidden widths of the network (default none: a linear head).
    """
    hp = method_hparams(method, preset, hparams)
    sizes = [benchmark.n_features, *(int(h) for h in hidden), benchmark.n_classes]
    model, used = build_method(method, sizes, seed, hp, engine)
    acq = make_acquisition(strategy, threshold=threshold, budget=budget, budget_exponent=budget_exponent,
                           mc_samples=mc_samples, seed=seed)
    learner = ActiveLearner(model, acq)
    std = StreamingStandardizer(benchmark.n_features) if standardize else None
    # 'all' (unless asked to predict) and 'random' (unstandardised) decide without the K forward passes
    predict = not ((acq.strategy == "all" and not baseline_predicts) or (acq.strategy == "random" and std is None))
    eval_bench = benchmark if std is None else _StandardizedView(benchmark, std)
    at: dict[str, dict[str, float]] = {}

    def checkpoint(task: int, percent: int) -> None:
        X, y = eval_bench.test_task(task)
        gen = eval_generator(seed, task, task, tag=_CHECKPOINT_TAG + percent)
        preds = _predict(model, X, None, 512, gen)
        at.setdefault(str(task), {})[str(percent)] = float((preds == y).double().mean())

    for _ in stream_tasks(benchmark, model, seed=seed, tasks=range(benchmark.n_tasks), learner=learner,
                          predict=predict, transform=None if std is None else _prequential(std),
                          checkpoints=checkpoints, on_checkpoint=checkpoint if checkpoints else None):
        pass
    result = evaluate(model, eval_bench, mc_samples=None,
                      generator=torch.Generator().manual_seed(seed * 31 + 0xE7A1))
    quarters = learner.ledger.task_quarters()
    result.update(learner.accounting)
    result.update({
        "benchmark": benchmark.name, "method": method, "score": acq.strategy, "engine": used,
        "threshold": (float("nan") if acq.strategy == "all" else
                      (acq.probability if acq.strategy == "random" else
                       (acq.threshold if acq.threshold is not None else acq.budget))),
        "budget_mode": acq.controller is not None, "budget_exponent": budget_exponent, "seed": seed,
        "mc_samples": mc_samples, "oracle": acq.needs_labels, "query_sampler": learner.query_sampler,
        "first_quarter_share": float(np.mean([q["first_quarter"] for q in quarters.values()])),
        "middle_share": float(np.mean([q["middle"] for q in quarters.values()])),
        "last_quarter_share": float(np.mean([q["last_quarter"] for q in quarters.values()])),
        "task_quarters": {str(k): v for k, v in quarters.items()},
    })
    if checkpoints:
        result["checkpoint_accuracy"] = at
    return result


def _prequential(std: StreamingStandardizer):
    """A task's inputs standardised in stream order: each row with the statistics of the rows before it
    (then folded into ``std``), as it would be on arrival."""
    def transform(X: torch.Tensor) -> torch.Tensor:
        out = np.empty(tuple(X.shape), dtype=np.float32)
        for i in range(len(X)):
            raw = X[i:i + 1].numpy()
            out[i:i + 1] = std.transform(raw)
            std.update(raw)
        return torch.from_numpy(out)

    return transform


class _StandardizedView:
    """A benchmark whose test inputs go through a fitted standardiser."""

    def __init__(self, benchmark, std):
        self._b, self._std = benchmark, std
        self.n_tasks, self.rare_classes = benchmark.n_tasks, benchmark.rare_classes

    def test_task(self, t):
        X, y = self._b.test_task(t)
        return torch.from_numpy(self._std.transform(X.numpy())), y


def sweep_configs(scores: Sequence[str], thresholds: Sequence[float] | None = None,
                  grids: Mapping[str, Sequence[float]] | None = None, baseline: bool = True) -> list[tuple]:
    """``(score, threshold)`` pairs: ``grids[score]`` or ``thresholds`` or :data:`DEFAULT_GRIDS`."""
    from bimu.active.scores import canonical_score

    out = [("all", None)] if baseline else []
    for s in scores:
        s = canonical_score(s)
        if s == "all":
            continue
        values = (grids or {}).get(s) or thresholds or DEFAULT_GRIDS.get(s)
        if not values:
            raise ValueError(f"no thresholds for score {s!r}")
        out.extend((s, float(v)) for v in values)
    return out


_WORKER_BENCH = None


def _worker(args):
    torch.set_num_threads(1)
    kwargs = args
    return run_stream(_WORKER_BENCH, **kwargs)


_LOADED: dict = {}


def _remote_stream(load, task):
    """One sweep run as a Dask task: the benchmark ``load[0](*load[1])`` (loaded once per worker
    process), then :func:`run_stream` with ``task``'s keywords."""
    fn, spec = load
    key = (fn.__module__, fn.__qualname__, tuple(spec))
    if key not in _LOADED:
        _LOADED.clear()
        _LOADED[key] = fn(*spec)
    torch.set_num_threads(1)
    return run_stream(_LOADED[key], **task)


def sweep(benchmark, method: str = "bimu", scores: Sequence[str] = ("vr",), thresholds=None, grids=None,
          seeds: Iterable[int] = (0,), mc_samples: int = 10, preset: str | None = None,
          hparams: Mapping | None = None, jobs: int = 1, standardize: bool = False,
          log=None, baseline: bool = True, engine: str = "auto", scheduler: str | None = None,
          load=None, hidden: Sequence[int] = ()) -> list[dict]:
    """Run every (score, threshold) pair and the 100% baseline for each seed; returns one row per run.

    ``jobs > 1``: that many forked processes; ``scheduler``: each run a task of that Dask scheduler,
    whose workers build the benchmark as ``load[0](*load[1])`` (a module-level function and plain
    data; ``benchmark`` is not sent). ``hidden``: the network's hidden widths (default: a linear head)."""
    global _WORKER_BENCH
    tasks = [dict(method=method, strategy=s, threshold=th, mc_samples=mc_samples, seed=int(seed),
                  preset=preset, hparams=dict(hparams or {}), standardize=standardize, engine=engine,
                  **({"hidden": [int(h) for h in hidden]} if hidden else {}))
             for seed in seeds for s, th in sweep_configs(scores, thresholds, grids, baseline)]
    _WORKER_BENCH = benchmark
    rows = []
    if scheduler is not None:
        from bimu.experiments.distributed import map_on

        if load is None:
            raise ValueError("a sweep on a Dask cluster needs load=(function, arguments) building the benchmark")
        keys = [f"{t['strategy']}-{t['threshold']}/seed-{t['seed']}" for t in tasks]
        rows = map_on(scheduler, _remote_stream, [(load, t) for t in tasks], keys)
        for r in rows:
            if log:
                log(_row_line(r))
    elif jobs > 1:
        import multiprocessing as mp

        with mp.get_context("fork").Pool(jobs) as pool:
            for r in pool.imap(_worker, tasks):
                rows.append(r)
                if log:
                    log(_row_line(r))
    else:
        for t in tasks:
            r = run_stream(benchmark, **t)
            rows.append(r)
            if log:
                log(_row_line(r))
    return rows


def _row_line(r) -> str:
    return (f"{r['score']:>9} tau={r['threshold']!s:>6} seed={r['seed']} acc={100 * r['accuracy']:.2f} "
            f"rare={100 * r.get('rare_accuracy', float('nan')):.2f} "
            f"freq={100 * r.get('frequent_accuracy', float('nan')):.2f} "
            f"queried={100 * r['query_fraction']:.2f}%")


def _key(r):
    th = r["threshold"]
    return (r["score"], None if th is None or (isinstance(th, float) and math.isnan(th)) else round(float(th), 6))


def aggregate(rows: Sequence[Mapping]) -> list[dict]:
    """Mean and sample std (ddof=1; 0 with one seed) over seeds of each (score, threshold)."""
    groups: dict = {}
    for r in rows:
        groups.setdefault(_key(r), []).append(r)
    out = []
    for (score, th), rs in groups.items():
        d = {"score": score, "threshold": th, "n_seeds": len(rs)}
        for k in ("accuracy", "rare_accuracy", "frequent_accuracy", "query_fraction", "first_quarter_share",
                  "last_quarter_share"):
            vals = [float(r[k]) for r in rs if k in r]
            if vals:
                d[k] = float(np.mean(vals))
                d[k + "_std"] = float(np.std(vals, ddof=1)) if len(vals) > 1 else 0.0
        out.append(d)
    return out


def update_savings(agg: Sequence[Mapping], tolerance: float = 0.01) -> dict:
    """Per score: the lowest queried fraction whose mean accuracy is within ``tolerance`` of (or
    above) the 100% baseline, and the ratio of updates saved (1 / that fraction)."""
    base = [a for a in agg if a["score"] == "all"]
    if not base:
        return {}
    target = base[0]["accuracy"] - tolerance
    out = {}
    for score in sorted({a["score"] for a in agg} - {"all"}):
        ok = [a for a in agg if a["score"] == score and a["accuracy"] >= target and a["query_fraction"] > 0]
        if ok:
            best = min(ok, key=lambda a: a["query_fraction"])
            out[score] = {"threshold": best["threshold"], "query_fraction": best["query_fraction"],
                          "accuracy": best["accuracy"], "ratio": round(1.0 / best["query_fraction"], 2)}
        else:
            out[score] = {"threshold": None, "query_fraction": None, "accuracy": None, "ratio": None}
    return out


CSV_FIELDS = ["benchmark", "method", "score", "threshold", "budget_mode", "seed", "mc_samples", "oracle",
              "accuracy", "rare_accuracy", "frequent_accuracy", "query_fraction", "labels_queried",
              "backward_passes", "weight_writes", "forward_passes", "examples_seen", "first_quarter_share",
              "middle_share", "last_quarter_share"]


def write_sweep(rows: Sequence[Mapping], out: str | os.PathLike, title: str = "", tolerance: float = 0.01) -> dict:
    """Write ``sweep.csv`` (one row per run), ``sweep.json``, ``sweep.md`` (means over seeds, savings)
    and ``sweep.png`` (accuracy vs queried fraction: overall, frequent, rare) atomically."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=CSV_FIELDS, extrasaction="ignore")
    w.writeheader()
    for r in rows:
        w.writerow(r)
    atomic_write_text(out / "sweep.csv", buf.getvalue())
    atomic_write_text(out / "sweep.json", json.dumps(list(rows), indent=1, default=float))
    agg = aggregate(rows)
    savings = update_savings(agg, tolerance)
    atomic_write_text(out / "sweep.md", markdown_table(agg, savings, title, tolerance))
    plot_sweep(agg, out / "sweep.png", title)
    return {"aggregate": agg, "savings": savings}


def markdown_table(agg, savings, title="", tolerance=0.01) -> str:
    """Markdown: accuracy (overall / rare / frequent) and queried fraction per (score, threshold)."""
    lines = [f"# {title}" if title else "# Threshold sweep", "",
             "| score | threshold | queried % | accuracy % | rare % | frequent % | queries in 1st / last "
             "task quarter % | seeds |",
             "|---|---|---|---|---|---|---|---|"]

    def f(a, k):
        v = a.get(k)
        if v is None or (isinstance(v, float) and math.isnan(v)):
            return "-"
        s = a.get(k + "_std", 0.0)
        return f"{100 * v:.2f}" + (f" ± {100 * s:.2f}" if a.get("n_seeds", 1) > 1 else "")

    order = sorted(agg, key=lambda a: (a["score"] != "all", a["score"], a["threshold"] or 0))
    for a in order:
        th = "100% baseline" if a["score"] == "all" else f"{a['threshold']:g}"
        name = a["score"] + (" (ORACLE)" if a["score"] == "vr-true" else "")
        quarters = (f"{100 * a['first_quarter_share']:.1f} / {100 * a['last_quarter_share']:.1f}"
                    if "first_quarter_share" in a else "-")
        lines.append(f"| {name} | {th} | {f(a, 'query_fraction')} | {f(a, 'accuracy')} | "
                     f"{f(a, 'rare_accuracy')} | {f(a, 'frequent_accuracy')} | {quarters} | {a['n_seeds']} |")
    if savings:
        lines += ["", f"Updates saved at matched accuracy (within {100 * tolerance:g} point of the 100% baseline):",
                  "", "| score | threshold | queried % | accuracy % | updates saved |", "|---|---|---|---|---|"]
        for s, v in savings.items():
            if v["ratio"] is None:
                lines.append(f"| {s} | - | - | - | not reached |")
            else:
                lines.append(f"| {s} | {v['threshold']:g} | {100 * v['query_fraction']:.2f} | "
                             f"{100 * v['accuracy']:.2f} | {v['ratio']:.1f}x |")
    return "\n".join(lines) + "\n"


def plot_sweep(agg, path, title="") -> None:
    """Three panels (overall, frequent, rare accuracy) vs queried fraction, baseline as a line
    (:func:`bimu.report.plots.plot_accuracy_vs_queried`)."""
    from bimu.report.plots import plot_accuracy_vs_queried

    curves = {score + (" (oracle)" if score == "vr-true" else ""): [a for a in agg if a["score"] == score]
              for score in sorted({a["score"] for a in agg} - {"all"})}
    base = next((a for a in agg if a["score"] == "all"), None)
    plot_accuracy_vs_queried(curves, path, baseline=base, title=title)

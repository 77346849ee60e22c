"""The objects-ti / animals-ti active-learning study: a resumable queue of single-stream runs.

Each job is one :func:`~bimu.experiments.sweep.run_stream` call (one seed, one rule) described by a dict;
its result is appended as one JSON line to ``<out>/runs.jsonl``, and a job whose key is already
there is skipped, so the queue can be stopped and restarted. :func:`report` groups the rows by
setting (benchmark, features, K, hyperparameters, split), writes one table per setting with the
updates saved at matched accuracy, and one figure per benchmark ``<out>/curves-<benchmark>.png``.

    python scripts/active_study.py run --plan objects-main --out results/objects-ti-study
    python scripts/active_study.py report --out results/objects-ti-study

>>> job_key({"bench": "objects-ti", "nf": 8192, "strategy": "vr", "threshold": 0.6, "seed": 0})
'objects-ti|8192|test|-|-|vr|0.6|-|10|0'
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from bimu.atomic import atomic_path, atomic_write_text
from bimu.paper import OPENLORIS_TRAIN_EXAMPLES

OD_PRESET = "openloris-8192-imbalanced"
"""The paper's preset for the imbalanced OpenLORIS active-learning experiment."""


def job_key(job: dict) -> str:
    """A stable identifier of one job (benchmark, features, split, preset, overrides, rule, K, seed)."""
    hp = job.get("hp") or {}
    hp_s = ",".join(f"{k}={hp[k]}" for k in sorted(hp)) or "-"
    th = job.get("threshold")
    b = job.get("budget")
    key = "|".join(str(v) for v in (job["bench"], job["nf"], job.get("split", "test"), job.get("preset") or "-",
                                     hp_s, job["strategy"], "-" if th is None else th, "-" if b is None else b,
                                     job.get("K", 10), job["seed"]))
    return (key + (f"|repeat={job['repeat']}" if job.get("repeat", 1) != 1 else "")
            + ("|std" if job.get("standardize") else ""))


def _grid(bench, nf, seeds, vr=(), rnd=(), budgets=(), K=10, preset=OD_PRESET, hp=None, baseline=True,
          split="test", repeat=1, standardize=False):
    jobs = []
    for s in seeds:
        common = dict(bench=bench, nf=nf, seed=s, K=K, preset=preset, hp=dict(hp or {}), split=split)
        if repeat != 1:
            common["repeat"] = repeat
        if standardize:
            common["standardize"] = True
        if baseline:
            jobs.append(dict(common, strategy="all"))
        jobs += [dict(common, strategy="random", threshold=p) for p in rnd]
        jobs += [dict(common, strategy="vr", threshold=t) for t in vr]
        jobs += [dict(common, strategy="vr", budget=b) for b in budgets]
    return jobs


TUNE_TRIALS = [
    {},
    {"memory_window": 6700},
    {"lr": 33.2, "lr_max": 0.08, "likelihood_multiplier": 187.8, "kl_multiplier": 1.5, "memory_window": 6700},
    {"likelihood_multiplier": 50},
    {"likelihood_multiplier": 100, "memory_window": 6700},
    {"lr_max": 0.2},
    {"lr_max": 0.2, "likelihood_multiplier": 50, "memory_window": 6700},
    {"kl_multiplier": 0.1, "memory_window": 20000},
]
"""Hyperparameter overrides of the objects-ti validation trials (on top of :data:`OD_PRESET`)."""

ANIMALS_TUNE_TRIALS = [
    {"likelihood_multiplier": lm, "lr_max": am, "memory_window": n}
    for lm in (50, 150) for am in (0.054, 0.15) for n in (1000, 4600)
] + [{"likelihood_multiplier": 50, "lr": 20.0}, {"likelihood_multiplier": 50, "kl_multiplier": 0.03},
     {"likelihood_multiplier": 400, "lr_max": 0.15, "memory_window": 1000},
     {}, {"likelihood_multiplier": 25}, {"likelihood_multiplier": 25, "lr_max": 0.15, "memory_window": 1000}]
"""Hyperparameter overrides (on top of the ``animals`` preset) of the animals-ti validation trials."""

ANIMALS_SCORE_THRESHOLDS = {"entropy": (3.7, 3.9), "aleatoric": (3.6,), "epistemic": (0.1, 0.2)}
"""Thresholds (bits) of the entropy scores on the repeated animals-ti stream (plan ``animals-scores-repeat<R>``),
chosen from a seed-0 probe (entropy 3.0 / 3.4 / 3.7 queried 61 / 37 / 16%, aleatoric 2.5 / 3.0 / 3.4
80 / 58 / 32%, epistemic 0.2 4.6%) to fall near 5-20% of the stream."""


def plan(name: str, seeds=(0, 1, 2)) -> list[dict]:
    """The named job list (seeds ``seeds`` unless the plan says otherwise):

    ``objects-main`` (8,192 features, K = 10: 100% baseline, random 3-50%, VR thresholds),
    ``objects-1024`` (the same at 1,024 features), ``objects-k25-1024`` (K = 25), ``objects-vr01``
    (tau = 0.1, 1,024 features), ``objects-budget`` (budget controller B = 3/5/10%, 2 seeds),
    ``objects-tune`` (validation split: 100% baseline per :data:`TUNE_TRIALS` entry),
    ``objects-tuned:<json overrides>`` (test runs with chosen overrides, 2 seeds),
    ``objects-repeat<R>`` (every task streamed R times, 1,024 features; ``objects-repeat<R>-std`` with
    standardised inputs, 2 seeds), ``objects-std`` (streaming
    standardisation, 8,192 features, 2 seeds), ``animals`` and ``animals-extra`` (animals-ti acceptance),
    ``animals-std`` (animals-ti with streaming standardisation), ``animals-tune`` (validation split,
    standardised inputs: 100% baseline and VR tau = 0.5 / 0.6 per :data:`ANIMALS_TUNE_TRIALS` entry, 2
    seeds), ``animals-tuned:<json overrides>`` (test runs with chosen overrides, standardised inputs),
    ``animals-8192-std`` (8,192 features, standardised inputs), ``animals-repeat<R>`` (the animals-ti
    stream R times, standardised inputs; R = 4 gives 10,572 examples, the length of the paper's stream),
    ``animals-scores-repeat<R>`` (the same stream queried by predictive entropy, aleatoric and epistemic
    scores at :data:`ANIMALS_SCORE_THRESHOLDS`).
    """
    s = list(seeds)
    if name == "objects-main":
        return (_grid("objects-ti", 8192, s, rnd=(0.03, 0.05, 0.1, 0.25, 0.5), vr=(0.2, 0.4, 0.5, 0.6)))
    if name == "objects-budget":
        return _grid("objects-ti", 8192, s[:2], budgets=(0.03, 0.05, 0.1), baseline=False)  # time: 2 seeds
    if name == "objects-1024":
        return _grid("objects-ti", 1024, s, rnd=(0.05, 0.1, 0.25, 0.5), vr=(0.2, 0.4, 0.6, 0.8))
    if name == "objects-k25":
        return _grid("objects-ti", 8192, s, K=25, vr=(0.4, 0.6, 0.76), baseline=False)
    if name == "objects-k25-1024":
        return _grid("objects-ti", 1024, s, K=25, vr=(0.44, 0.52, 0.6), baseline=False)
    if name == "objects-budget-1024":
        return _grid("objects-ti", 1024, s, budgets=(0.03, 0.05, 0.1), baseline=False)
    if name == "objects-tune":
        return [dict(bench="objects-ti", nf=8192, seed=0, K=10, preset=OD_PRESET, hp=hp, split="validation",
                     strategy="all") for hp in TUNE_TRIALS]
    if name.startswith("objects-tuned:"):
        hp = json.loads(name.split(":", 1)[1])
        return _grid("objects-ti", 8192, s[:2], hp=hp, rnd=(0.05, 0.1, 0.25), vr=(0.4,))  # time: 2 seeds
    if name.startswith("objects-repeat"):  # objects-repeat<R>[-std]: every task's data streamed R times
        std = name.endswith("-std")
        r = int(name[len("objects-repeat"):len(name) - 4 * std] or 8)
        if std:  # standardised inputs: VR does not collapse (2 seeds for time)
            return _grid("objects-ti", 1024, s[:2], repeat=r, standardize=True, rnd=(0.03, 0.1),
                         vr=(0.4, 0.5, 0.6, 0.7))
        return _grid("objects-ti", 1024, s, repeat=r, rnd=(0.03, 0.1), vr=(0.4, 0.6))
    if name == "objects-std":  # streaming per-feature standardisation of the inputs
        return _grid("objects-ti", 8192, s[:2], standardize=True, rnd=(0.05,), vr=(0.4, 0.6))  # time: 2 seeds
    if name == "animals":
        return _grid("animals-ti", 1024, s, preset="animals", hp={"likelihood_multiplier": 50},
                     vr=(0.3, 0.4, 0.5), rnd=(0.2, 0.3))
    if name == "animals-std":  # streaming standardisation (removed the VR collapse on objects-ti)
        return _grid("animals-ti", 1024, s, preset="animals", hp={"likelihood_multiplier": 50}, standardize=True,
                     vr=(0.3, 0.4, 0.5, 0.6, 0.7), rnd=(0.2,))
    if name == "animals-tune":  # validation split: hyperparameters per rule (VR near 20% of labels, 100%)
        return [dict(bench="animals-ti", nf=1024, seed=q, K=10, preset="animals", hp=hp, split="validation",
                     standardize=True, **rule)
                for q in s[:2] for hp in ANIMALS_TUNE_TRIALS
                for rule in (dict(strategy="all"), dict(strategy="vr", threshold=0.5),
                             dict(strategy="vr", threshold=0.6))]
    if name.startswith("animals-tuned:"):  # test runs with chosen overrides (standardised inputs)
        hp = json.loads(name.split(":", 1)[1])
        return _grid("animals-ti", 1024, s, preset="animals", hp=hp, standardize=True, vr=(0.4, 0.5, 0.6, 0.7),
                     rnd=(0.2,))
    if name.startswith("animals-repeat"):  # animals-repeat<R>: the stream R times (R = 4: the paper's length)
        r = int(name[len("animals-repeat"):] or 4)
        return _grid("animals-ti", 1024, s, preset="animals", hp={"likelihood_multiplier": 50}, standardize=True,
                     repeat=r, vr=(0.4, 0.5, 0.6, 0.7), rnd=(0.05, 0.1, 0.2))
    if name.startswith("animals-scores-repeat"):  # entropy scores on animals-repeat<R> (thresholds in bits)
        r = int(name[len("animals-scores-repeat"):] or 4)
        return [dict(j, strategy=score) for score, taus in ANIMALS_SCORE_THRESHOLDS.items()
                for j in _grid("animals-ti", 1024, s, preset="animals", hp={"likelihood_multiplier": 50},
                               standardize=True, repeat=r, vr=taus, baseline=False)]
    if name == "animals-8192-std":  # more features, standardised
        return _grid("animals-ti", 8192, s, preset="animals", hp={"likelihood_multiplier": 50}, standardize=True,
                     vr=(0.4, 0.5, 0.6, 0.7), rnd=(0.2,))
    if name == "objects-vr01":  # tau = 0.1: query on any dissenting vote (the highest VR rate)
        return _grid("objects-ti", 1024, s, vr=(0.1,), baseline=False)  # time: 1,024 features only
    if name == "animals-extra":  # finer control near 20% of labels: K = 25 vote levels, entropy
        hp, s = {"likelihood_multiplier": 50}, s[:3]  # time: 3 seeds
        return (_grid("animals-ti", 1024, s, preset="animals", hp=hp, K=25, vr=(0.36, 0.44), baseline=False)
                + [dict(j, strategy="entropy") for j in _grid("animals-ti", 1024, s, preset="animals", hp=hp,
                                                               vr=(3.7, 3.8), baseline=False)])
    raise ValueError(f"unknown plan {name!r}")


_BENCH: dict = {}


def _bench(job):
    from bimu.data.feature_benchmarks import get_feature_benchmark
    from bimu.data.views import RepeatedStream

    key = (job["bench"], job["nf"], job.get("split", "test"))
    if key not in _BENCH:
        _BENCH[key] = get_feature_benchmark(job["bench"], n_features=job["nf"], split=key[2])
    r = int(job.get("repeat", 1))
    return _BENCH[key] if r == 1 else RepeatedStream(_BENCH[key], r)


def run_jobs(jobs, out, log=print) -> None:
    """Run every job not yet in ``<out>/runs.jsonl``, appending one line per finished run."""
    import fcntl  # POSIX: one writer per output folder

    from bimu.experiments.sweep import run_stream

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "runs.jsonl"
    lock = open(out / ".study.lock", "w")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.close()
        raise RuntimeError(f"another study run is writing {out}; wait for it or use another --out") from None
    try:
        _run_unlocked(jobs, path, log, run_stream)
    finally:
        lock.close()


def _run_unlocked(jobs, path, log, run_stream) -> None:
    done = {row["key"] for row in load_rows(path.parent)}
    for job in jobs:
        key = job_key(job)
        if key in done:
            continue
        t0 = time.time()
        r = run_stream(_bench(job), "bimu", job["strategy"], job.get("threshold"), job.get("budget"), 0.5,
                       job.get("K", 10), job["seed"], job.get("preset"), job.get("hp") or {},
                       bool(job.get("standardize", False)))
        r.pop("task_quarters", None)
        r.update(key=key, job=job, seconds=round(time.time() - t0, 1))
        append_row(path, r)
        done.add(key)
        log(f"{key}: acc {100 * r['accuracy']:.2f} rare {100 * r['rare_accuracy']:.2f} "
            f"queried {100 * r['query_fraction']:.2f}% ({r['seconds']} s)")


def append_row(path, row) -> None:
    """Append one finished run to ``runs.jsonl`` as one line, written and synced in one call.

    The file only grows (linear in the number of runs, where rewriting it whole was quadratic). A
    crash can at worst leave a torn last line without its newline; it is cut off here before the
    next row is written, and :func:`load_rows` ignores it, so that run is simply run again.

    >>> import tempfile
    >>> p = Path(tempfile.mkdtemp()) / "runs.jsonl"
    >>> _ = p.write_text('{"key": "a"}\\n{"key": "b", "acc')   # a crash tore the second row
    >>> append_row(p, {"key": "c"})
    >>> p.read_text()
    '{"key": "a"}\\n{"key": "c"}\\n'
    """
    import os

    path = Path(path)
    data = (json.dumps(row, default=float) + "\n").encode()
    with open(path, "ab+") as f:
        size = f.seek(0, os.SEEK_END)
        if size:
            f.seek(size - 1)
            if f.read(1) != b"\n":  # a torn row: cut back to the end of the last whole line
                f.seek(0)
                f.truncate(f.read().rfind(b"\n") + 1)
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def load_rows(out) -> list[dict]:
    """The finished runs of ``<out>/runs.jsonl``, one per job key (the last line written wins: runs
    are deterministic, so a job that was run twice wrote the same result twice).

    A last line without its newline is a row torn by a crash and is ignored (its run is not done);
    any other line that is not JSON is an error naming the file and line.
    """
    path = Path(out) / "runs.jsonl"
    if not path.exists():
        return []
    rows = {}
    text = path.read_text()
    lines = text.split("\n")
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            if i == len(lines):  # no newline after it: torn by a crash, rerun
                break
            raise ValueError(f"{path}: line {i} is not a JSON run record ({e.msg}); "
                             "remove or repair that line") from None
        rows[row["key"]] = row
    return list(rows.values())


def setting_of(row) -> str:
    """The setting a run belongs to: benchmark, features, K, split and hyperparameter overrides."""
    j = row["job"]
    hp = j.get("hp") or {}
    hp_s = ",".join(f"{k}={hp[k]}" for k in sorted(hp)) or "preset"
    rep = (f" repeat={j['repeat']}" if j.get("repeat", 1) != 1 else "") + (" standardized" if j.get("standardize")
                                                                          else "")
    # the baseline and random querying do not depend on K: they join every K of their setting
    return f"{j['bench']} nf={j['nf']} {j.get('split', 'test')} {j.get('preset')} {hp_s}{rep}"


def _label(row) -> tuple[str, float | None]:
    j = row["job"]
    if j["strategy"] == "all":
        return "all", None
    if j.get("budget") is not None:
        return f"vr-budget K={j.get('K', 10)}", float(j["budget"])
    if j["strategy"] == "vr":
        return f"vr K={j.get('K', 10)}", float(j["threshold"])
    return j["strategy"], float(j["threshold"])


def summarize(rows, tolerances=(0.01, 0.02)) -> dict:
    """Per setting: mean/std over seeds of each (rule, threshold), and the best matched-accuracy ratio
    per rule and tolerance (lowest mean queried fraction with mean accuracy >= baseline - tolerance).
    Each seed counts once (a job recorded twice, which runs deterministically, is one run); std is the
    sample std (ddof=1; 0 with one seed)."""
    groups: dict = {}
    for r in rows:
        seeds = groups.setdefault(setting_of(r), {}).setdefault(_label(r), {})
        seeds.setdefault(r["seed"], r)
    groups = {s: {k: list(v.values()) for k, v in pts.items()} for s, pts in groups.items()}
    out = {}
    for setting, pts in groups.items():
        agg = []
        for (rule, th), rs in pts.items():
            d = {"rule": rule, "threshold": th, "n_seeds": len(rs), "seeds": sorted(r["seed"] for r in rs)}
            for k in ("accuracy", "rare_accuracy", "frequent_accuracy", "query_fraction", "first_quarter_share",
                      "last_quarter_share"):
                v = np.array([float(r[k]) for r in rs])
                d[k], d[k + "_std"] = float(v.mean()), float(v.std(ddof=1)) if len(v) > 1 else 0.0
            d["updates"] = float(np.mean([r["labels_queried"] for r in rs]))
            agg.append(d)
        base = next((a for a in agg if a["rule"] == "all"), None)
        savings = {}
        if base is not None:
            for tol in tolerances:
                for rule in sorted({a["rule"] for a in agg} - {"all"}):
                    ok = [a for a in agg if a["rule"] == rule and a["accuracy"] >= base["accuracy"] - tol]
                    best = min(ok, key=lambda a: a["query_fraction"]) if ok else None
                    savings[f"{rule} @{100 * tol:g}pt"] = None if best is None else {
                        "threshold": best["threshold"], "query_fraction": best["query_fraction"],
                        "accuracy": best["accuracy"], "ratio": 1.0 / best["query_fraction"]}
        out[setting] = {"points": sorted(agg, key=lambda a: (a["rule"], -a["query_fraction"])), "savings": savings}
    return out


def _fmt(a, k):
    return f"{100 * a[k]:.2f} ± {100 * a[k + '_std']:.2f}"


def markdown(summary) -> str:
    """One table per setting (mean ± std over seeds) and its matched-accuracy ratios."""
    lines = []
    for setting, d in summary.items():
        lines += [f"### {setting}", "", "| rule | tau / p / budget | seeds | queried % | updates | accuracy % | "
                  "rare % | frequent % | 1st / last quarter % |", "|---|---|---|---|---|---|---|---|---|"]
        for a in d["points"]:
            th = "100% baseline" if a["rule"] == "all" else f"{a['threshold']:g}"
            lines.append(f"| {a['rule']} | {th} | {a['n_seeds']} | {_fmt(a, 'query_fraction')} | {a['updates']:.0f} | "
                         f"{_fmt(a, 'accuracy')} | {_fmt(a, 'rare_accuracy')} | {_fmt(a, 'frequent_accuracy')} | "
                         f"{100 * a['first_quarter_share']:.1f} / {100 * a['last_quarter_share']:.1f} |")
        if d["savings"]:
            lines += ["", "| matched accuracy (rule @ tolerance) | tau | queried % | accuracy % | updates saved |",
                      "|---|---|---|---|---|"]
            for k, v in d["savings"].items():
                lines.append(f"| {k} | - | - | - | not reached |" if v is None else
                             f"| {k} | {v['threshold']:g} | {100 * v['query_fraction']:.2f} | "
                             f"{100 * v['accuracy']:.2f} | {v['ratio']:.1f}x |")
        lines.append("")
    return "\n".join(lines)


def plot(summary, path, settings=None) -> None:
    """Accuracy (overall and rare classes) vs queried fraction, one colour per rule, one row per setting."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [s for s in summary if settings is None or s in settings]
    fig, axes = plt.subplots(len(names), 2, figsize=(12, 3.8 * len(names)), squeeze=False)
    for row, name in zip(axes, names):
        pts = summary[name]["points"]
        base = next((a for a in pts if a["rule"] == "all"), None)
        for ax, key, title in ((row[0], "accuracy", "overall"), (row[1], "rare_accuracy", "rare classes")):
            for rule in sorted({a["rule"] for a in pts} - {"all"}):
                ps = sorted((a for a in pts if a["rule"] == rule), key=lambda a: a["query_fraction"])
                ax.errorbar([100 * a["query_fraction"] for a in ps], [100 * a[key] for a in ps],
                            yerr=[100 * a[key + "_std"] for a in ps], marker="o", capsize=2, label=rule,
                            linestyle="--" if rule == "random" else "-")
            if base is not None:
                ax.axhline(100 * base[key], color="k", linestyle=":", label="100% updates")
                ax.axhspan(100 * (base[key] - 0.01), 100 * base[key], color="k", alpha=0.08)
            ax.set_xscale("log")
            ax.set_xlabel("queried labels = updates (% of stream, log)")
            ax.set_ylabel(f"accuracy, {title} (%)")
            ax.set_title(f"{name}", fontsize=8)
            ax.grid(alpha=0.3)
        row[0].legend(fontsize=7)
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=100)
    plt.close(fig)


PAPER_STREAM = OPENLORIS_TRAIN_EXAMPLES[0]
"""OpenLORIS-Object's training examples in the paper (:data:`bimu.paper.OPENLORIS_TRAIN_EXAMPLES`)."""


def plot_updates(summary, path, settings) -> None:
    """Accuracy vs the absolute number of updates (log), one line per (setting, rule), with the
    paper's OpenLORIS operating points marked: VR at 3.1% of 442,194 examples and the full stream."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(14, 6))
    colors = iter(plt.cm.tab20(np.linspace(0, 1, 20)))
    for name in settings:
        pts = summary[name]["points"]
        short = (name.replace("objects-ti ", "").replace(" test openloris-8192-imbalanced", "")
                 .replace("kl_multiplier=1.5,likelihood_multiplier=187.8,lr=33.2,lr_max=0.08,memory_window=6700",
                          "openloris-8192 values"))
        for rule in sorted({a["rule"] for a in pts}):
            ps = sorted((a for a in pts if a["rule"] == rule), key=lambda a: a["updates"])
            ps = [a for a in ps if a["updates"] >= 1]
            if not ps:
                continue
            ax.errorbar([a["updates"] for a in ps], [100 * a["accuracy"] for a in ps],
                        yerr=[100 * a["accuracy_std"] for a in ps], marker="s" if rule == "all" else "o",
                        capsize=2, linestyle="--" if rule in ("random", "all") else "-", label=f"{short}: {rule}",
                        color=next(colors, None))
    ax.axvline(0.031 * PAPER_STREAM, color="r", linestyle=":", label="paper: VR at 3.1% (~13.7k updates)")
    ax.axvline(PAPER_STREAM, color="k", linestyle=":", label="paper: 100% baseline (442k updates)")
    ax.set_xscale("log")
    ax.set_xlabel("updates (= labels queried), log")
    ax.set_ylabel("accuracy, mean over the 12 tasks (%)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=100)
    plt.close(fig)


def report(out) -> dict:
    """Write ``<out>/summary.md``, ``<out>/summary.json``, ``<out>/curves-<benchmark>.png`` (every test
    setting of the benchmark) and ``<out>/curves-<benchmark>-x<R>.png`` (the settings of streams repeated
    R times, on their own)."""
    out = Path(out)
    summary = summarize(load_rows(out))
    atomic_write_text(out / "summary.md", markdown(summary))
    atomic_write_text(out / "summary.json", json.dumps(summary, indent=1, default=float))
    for bench in sorted({k.split(" ", 1)[0] for k in summary}):
        names = [k for k in summary if k.startswith(bench + " ") and " validation " not in k]
        if names:
            plot(summary, out / f"curves-{bench}.png", settings=names)
        for r in sorted({k.split(" repeat=", 1)[1].split()[0] for k in names if " repeat=" in k}):
            plot(summary, out / f"curves-{bench}-x{r}.png", settings=[k for k in names if f" repeat={r}" in k])
    names = [k for k in summary if k.startswith("objects-ti ") and " validation " not in k]
    if names:
        plot_updates(summary, out / "updates-objects-ti.png", names)
    return summary


def dataset_stats(bench, probe_epochs: int = 30, seed: int = 0) -> dict:
    """Stream statistics of a feature benchmark, and the accuracy of an OFFLINE linear probe.

    The probe (multinomial logistic regression on standardised features, Adam, ``probe_epochs``
    shuffled passes over the training data of all tasks pooled) bounds what any linear head on these
    features can reach; the online one-pass learners stay below it.
    """
    import torch

    Xs, ys, per_task = [], [], []
    for t in range(bench.n_tasks):
        X, y = bench.train_task(t, seed)
        Xs.append(X.float())
        ys.append(y)
        per_task.append(len(y))
    X, y = torch.cat(Xs), torch.cat(ys)
    counts = np.bincount(y.numpy(), minlength=bench.n_classes)
    rare = sorted(bench.rare_classes)
    mu, sd = X.mean(0), X.std(0).clamp_min(1e-6)
    g = torch.Generator().manual_seed(seed)
    W = torch.zeros(X.shape[1], bench.n_classes, requires_grad=True)
    b = torch.zeros(bench.n_classes, requires_grad=True)
    opt = torch.optim.Adam([W, b], lr=1e-3, weight_decay=1e-4)
    Z = (X - mu) / sd
    for _ in range(probe_epochs):
        for idx in torch.randperm(len(y), generator=g).split(256):
            opt.zero_grad()
            torch.nn.functional.cross_entropy(Z[idx] @ W + b, y[idx]).backward()
            opt.step()
    accs = []
    with torch.no_grad():
        for t in range(bench.n_tasks):
            Xt, yt = bench.test_task(t)
            accs.append(float((((Xt.float() - mu) / sd @ W + b).argmax(1) == yt).float().mean()))
    return {"benchmark": bench.name, "n_features": int(X.shape[1]), "classes": int(bench.n_classes),
            "tasks": int(bench.n_tasks), "train_examples": int(len(y)),
            "train_per_task": [int(v) for v in per_task], "class_counts": counts.tolist(),
            "imbalance_ratio": float(counts.max() / max(counts.min(), 1)),
            "rare_share_of_stream": float(counts[rare].sum() / counts.sum()) if rare else 0.0,
            "test_per_task": int(len(bench.test_task(0)[1])),
            "offline_linear_probe_accuracy": float(np.mean(accs)), "probe_per_task": accs}


def main(argv=None) -> int:
    """``python scripts/active_study.py {run,report,stats}``."""
    p = argparse.ArgumentParser(prog="python scripts/active_study.py", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="run the jobs of one or more plans (skipping finished ones)")
    r.add_argument("--plan", nargs="+", required=True, help="plan names (see plan() in scripts/active_study.py)")
    r.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="seeds (default 0 1 2)")
    r.add_argument("--out", required=True, help="output folder (runs.jsonl is appended)")
    q = sub.add_parser("report", help="tables and figure from <out>/runs.jsonl")
    q.add_argument("--out", required=True, help="folder holding runs.jsonl")
    st = sub.add_parser("stats", help="stream statistics and an offline linear probe of a feature benchmark")
    st.add_argument("benchmark", help="animals-ti or objects-ti")
    st.add_argument("--n-features", type=int, nargs="+", default=[1024, 8192], help="feature subset sizes")
    st.add_argument("--out", required=True, help="folder; writes stats-<benchmark>.json")
    args = p.parse_args(argv)
    if args.cmd == "stats":
        from bimu.data.feature_benchmarks import get_feature_benchmark

        res = []
        for nf in args.n_features:
            res.append(dataset_stats(get_feature_benchmark(args.benchmark, n_features=nf)))
            print(json.dumps({k: v for k, v in res[-1].items() if k != "probe_per_task"}), flush=True)
        atomic_write_text(Path(args.out) / f"stats-{args.benchmark}.json", json.dumps(res, indent=1))
        return 0
    if args.cmd == "run":
        try:
            jobs = [plan(name, args.seeds) for name in args.plan]  # every plan name checked first
            for js in jobs:
                run_jobs(js, args.out, log=lambda s: print(s, flush=True))
        except (ValueError, RuntimeError) as e:
            print(f"study: error: {e}", file=sys.stderr)
            return 2
    else:
        print(markdown(report(args.out)))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

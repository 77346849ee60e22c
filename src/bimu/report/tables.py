"""Paper-style tables from run directories: mean +- std over seeds, with the paper's numbers beside.

>>> fmt_pm([0.9, 0.92], scale=100)
'91.00 ± 1.41'
>>> fmt_pm([])
'-'
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import sys
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bimu.metrics import MMRR_CAP_TEXT, format_mmrr, mmrr_at_cap
from bimu.paper import TABLE1, cells
from bimu.rundir import CONFIG, CONFIG_KEYS_ADDED, PREQUENTIAL, SUMMARY, RunDir, find_run_dirs, read_prequential

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
    """One seed directory: config, accuracy matrix, metric records, summary (None if incomplete), the
    prequential curve (:func:`bimu.rundir.read_prequential`; None for a run without a readable
    ``prequential.csv``)."""
    rd = RunDir(path)
    p = rd.path
    cfg = rd.read_json(CONFIG)
    R = rd.read_matrix() if rd.has_matrix() else None
    recs = rd.read_metrics()
    summ = rd.read_json(SUMMARY) if rd.exists(SUMMARY) else None
    seed = summ.get("seed") if summ else None
    if seed is None and p.name.startswith("seed-"):
        seed = int(p.name[5:])
    try:
        curve = read_prequential(rd.file(PREQUENTIAL)) if rd.exists(PREQUENTIAL) else None
    except (OSError, ValueError):  # a damaged curve: the run's other numbers are still reported
        curve = None
    return {"path": p, "config": cfg, "R": R, "records": recs, "summary": summ, "seed": seed, "prequential": curve}


REPORT_IGNORED_KEYS: tuple[str, ...] = (
    # Keys of a run's config.json (dotted for nested ones) that never change its numbers, so runs that
    # differ only in them are seeds of one configuration; every other key splits a row. The grouping
    # reads config.json only: environment.json (timestamps, host, versions, git commit) and summary.json
    # never enter it. bimu.experiments.config.NON_SEMANTIC_KEYS (what a run may resume with changed) is
    # a subset of this list (tests/test_report_groups.py checks it).
    "seeds",                    # every seed of the command that wrote it; the run's own seed is the seeds cell
    "out",                      # the output folder
    "threads",                  # torch / fused-engine threads: results do not depend on the count
    "data_dir",                 # where checksummed data sets are read from
    "log_to",                   # extra result sinks (csv, tensorboard, mlflow)
    "prequential_every",        # how often test-then-train predictions are recorded: no other number changes
    "engine",                   # the engine asked for ("auto"); the engine that ran, resolved.engine, splits
    "preset", "overrides",      # compared through what they resolve to, resolved.hparams
    "resolved.preset",          # the preset's name; its values are in resolved.hparams
    "resolved.note",            # a remark on the preset choice, for people
    "resolved.data_file.path",  # where an own-data file was read; its SHA-256 is the data fingerprint
    "benchmark_options.path",   # the same path as the benchmark's option, ignored only when the run
                                # records that fingerprint (data=<SHA-256, short> then splits)
    "hidden", "resolved.sizes",  # already the hidden column (the input / output widths follow the data)
)
"""Configuration keys that never split a report's rows (see the comments in the source)."""
DATA_KEY = "data"
"""Name of the data fingerprint (an own-data file's or folder's SHA-256) in a report's configuration."""
FINGERPRINT_SHOWN = 12
"""Hex digits of the data fingerprint a report shows (``data=3f9a1c0b2e47``)."""
_MISSING = object()


class DuplicateSeedError(ValueError):
    """Two run directories hold the same seed of one configuration: a report would average a seed twice."""


def _canonical(v: Any) -> Any:
    """``v`` with integral floats as ints (``500.0`` == ``500``), lists and dicts recursively."""
    if isinstance(v, float) and math.isfinite(v) and v == int(v):
        return int(v)
    if isinstance(v, (list, tuple)):
        return [_canonical(x) for x in v]
    if isinstance(v, Mapping):
        return {str(k): _canonical(x) for k, x in v.items()}
    return v


def _flatten(d: Mapping[str, Any], prefix: str, out: dict[str, Any]) -> None:
    for k, v in d.items():
        path = f"{prefix}{k}"
        if isinstance(v, Mapping):
            _flatten(v, path + ".", out)
        else:
            out[path] = _canonical(v)


def _filled_hparams(method: str, hparams: Mapping[str, Any]) -> dict[str, Any]:
    """``hparams`` with every hyperparameter the run predates at the value runs had before it existed
    (as :func:`bimu.experiments.runner.same_hparams` compares them), for a registered method."""
    out = dict(hparams)
    try:
        from bimu.methods import get_method

        declared = get_method(method).hyperparameters
    except (ValueError, KeyError, AttributeError):
        return out
    for name, h in declared.items():
        if name not in out:
            out[name] = json.loads(json.dumps(h.value_before, default=str))
    return out


def run_configuration(config: Mapping[str, Any]) -> dict[str, Any]:
    """What determines a run's results, from its ``config.json``: the keys, dotted where nested
    (``resolved.hparams.lr``), and their values, less :data:`REPORT_IGNORED_KEYS` (and the keys nested
    in them); an own-data run's fingerprint as :data:`DATA_KEY`; a hyperparameter the run predates at
    the value it had before it existed, and so a configuration key (of ``bimu run``'s ``config.json``,
    :data:`bimu.rundir.CONFIG_KEYS_ADDED`). Runs with equal configurations (and benchmark, method, hidden
    widths, active strategy) are seeds of one row of a report.

    >>> run_configuration({"benchmark": "npz", "out": "a", "threads": 2, "threshold": 0.2, "overrides": {"lr": "1"},
    ...                    "benchmark_options": {"path": "/d/s.npz"},
    ...                    "resolved": {"data_file": {"path": "/d/s.npz", "sha256": "ab12"}, "engine": "fused"}})
    {'benchmark': 'npz', 'threshold': 0.2, 'resolved.engine': 'fused', 'data': 'ab12'}
    """
    cfg = {**CONFIG_KEYS_ADDED, **config} if "eval_all_every" in config else dict(config)
    resolved = dict(cfg.get("resolved") or {})
    if isinstance(resolved.get("hparams"), Mapping) and isinstance(cfg.get("method"), str):
        resolved["hparams"] = _filled_hparams(cfg["method"], resolved["hparams"])
        cfg["resolved"] = resolved
    flat: dict[str, Any] = {}
    _flatten(cfg, "", flat)
    fingerprint = flat.pop("resolved.data_file.sha256", None)
    ignored = tuple(k for k in REPORT_IGNORED_KEYS if fingerprint is not None or k != "benchmark_options.path")
    out = {k: v for k, v in flat.items() if not any(k == i or k.startswith(i + ".") for i in ignored)}
    if fingerprint is not None:
        out[DATA_KEY] = fingerprint
    return out


def _shown(name: str, value: Any) -> str:
    """``name=value`` as a report cell (an own-data fingerprint shortened, ``-`` for a key the run lacks)."""
    if value is _MISSING:
        text = "-"
    elif value is None:
        text = "none"
    elif isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, str):
        text = value[:FINGERPRINT_SHOWN] if name == DATA_KEY else value
    elif isinstance(value, float):
        text = repr(value)
    elif isinstance(value, (list, dict)):
        text = json.dumps(value, separators=(",", ":"))
    else:
        text = str(value)
    return f"{name}={text}"


def _labels(configs: dict[str, dict[str, Any]]) -> dict[str, tuple[tuple[str, str], ...]]:
    """Frozen configuration -> ``((name, "name=value"), ...)`` for the keys whose values differ among
    ``configs`` (the configurations of one benchmark and method), in the order the keys first appear."""
    paths = list(dict.fromkeys(k for c in configs.values() for k in c))
    differ = [p for p in paths if len({json.dumps([p in c, c.get(p)], sort_keys=True) for c in configs.values()}) > 1]
    tails = [p.rpartition(".")[2] for p in differ]
    names = {p: t if tails.count(t) == 1 else p for p, t in zip(differ, tails)}
    return {f: tuple((names[p], _shown(names[p], c.get(p, _MISSING))) for p in differ) for f, c in configs.items()}


def group_sort_key(key: tuple) -> tuple:
    """Order of a report's rows: benchmark, method, hidden widths and strategy as text, then the
    configuration's values, numbers by value (``threshold=0.05`` before ``threshold=0.2``, ``9`` before ``10``)."""
    def value(cell: str):
        text = cell.partition("=")[2]
        try:
            return (0, float(text), "")
        except ValueError:
            return (1, 0.0, text)

    extras = key[4] if len(key) > 4 else ()
    return (str(tuple(key[:4])), tuple(value(cell) for _, cell in extras))


def group_label(key: tuple) -> str:
    """``benchmark-method``, with the configuration cells of its row in parentheses when it has any.

    >>> group_label(("pmnist", "bimu", (100,), "vr", (("threshold", "threshold=0.2"),)))
    'pmnist-bimu (threshold=0.2)'
    """
    extras = key[4] if len(key) > 4 else ()
    return f"{key[0]}-{key[1]}" + (f" ({', '.join(cell for _, cell in extras)})" if extras else "")


def group_runs(runs: Sequence[dict[str, Any]]) -> dict[tuple, list[dict[str, Any]]]:
    """Runs grouped by configuration: ``(benchmark, method, hidden widths, active strategy, extras)`` ->
    runs, one group per distinct :func:`run_configuration` (data fingerprint included). ``extras`` holds
    ``(name, "name=value")`` for each key whose value differs among the groups of the same benchmark
    and method (empty when they all agree), so that each group's row says which configuration it is.
    :class:`DuplicateSeedError` (a ValueError) naming both run directories when a seed is in two runs of
    one group."""
    by_config: dict[tuple, list] = defaultdict(list)
    configs: dict[tuple, dict[str, Any]] = {}
    for r in runs:
        c = r["config"]
        hidden = tuple(c.get("resolved", {}).get("sizes", [])[1:-1])
        conf = run_configuration(c)
        ident = ((c["benchmark"], c["method"], hidden, c.get("active")), json.dumps(conf, sort_keys=True))
        by_config[ident].append(r)
        configs[ident] = conf
    families: dict[tuple, list] = defaultdict(list)
    for ident in sorted(by_config, key=lambda i: (str(i[0]), i[1])):
        families[ident[0][:2]].append(ident)
    groups: dict[tuple, list] = {}
    for idents in families.values():
        labels = _labels({i[1]: configs[i] for i in idents})
        keys = {i: (*i[0], labels[i[1]]) for i in idents}
        if len(set(keys.values())) < len(keys):  # values that print alike: tell the rows apart by a hash
            keys = {i: (*k[:4], (*k[4], ("config", "config=" + hashlib.sha256(i[1].encode()).hexdigest()[:8])))
                    for i, k in keys.items()}
        for i in idents:
            groups[keys[i]] = by_config[i]
    for key, members in groups.items():
        seen: dict[Any, dict[str, Any]] = {}
        for r in members:
            s = r.get("seed")
            if s is not None and s in seen:
                raise DuplicateSeedError(f"seed {s} of {group_label(key)} is in two run directories of the same "
                                         f"configuration, {seen[s]['path']} and {r['path']}: report them "
                                         "separately or remove one")
            seen.setdefault(s, r)
    return groups


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


def fmt_mmrr(vals) -> str:
    """:func:`fmt_pm` of per-seed MMRRs, those at the cap printed as :data:`bimu.metrics.MMRR_CAP_TEXT`.

    >>> fmt_mmrr([100000.0, 100000.0]), fmt_mmrr([20.0, 100000.0]), fmt_mmrr([20.0, 22.0])
    ('1e5 (cap)', '20.00; 1 of 2 seeds at 1e5 (cap)', '21.00 ± 1.41')
    """
    v = _finite(vals)
    capped = sum(map(mmrr_at_cap, v))
    if not capped:
        return fmt_pm(v)
    rest = [x for x in v if not mmrr_at_cap(x)]
    return MMRR_CAP_TEXT if not rest else f"{fmt_pm(rest)}; {capped} of {len(v)} seeds at {MMRR_CAP_TEXT}"


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
    """The paper-style markdown table (accuracies in %, mean ± std over seeds), one row per group of
    :func:`group_runs`. A configuration key that tells groups apart gets a column after ``hidden``
    (cells ``threshold=0.2``; ``-`` in rows of a benchmark and method whose groups do not differ in it)."""
    ordered = sorted(groups.items(), key=lambda kv: group_sort_key(kv[0]))
    extra = list(dict.fromkeys(name for key, _ in ordered for name, _ in (key[4] if len(key) > 4 else ())))
    head = ["benchmark", "method", "hidden", *extra, "seeds", "last-k acc (%)", "AUC epi", "AUC alea", "AUC VR",
            "MMRR", "MMRR (seed-avg)", "BWT (%)", "1st task (%)", "queried (%)", "steps/s"]
    if paper:
        head += ["paper last-5", "paper AUC", "paper MMRR", "paper 1-task"]
    rows = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    for key, runs in ordered:
        bench, method, hidden, active = key[:4]
        shown = dict(key[4] if len(key) > 4 else ())
        st = group_stats(runs)
        name = method + (f" [active: {active}]" if active else "")
        seeds = ",".join(map(str, st["seeds"])) or "-"
        if st["incomplete"]:
            seeds += f" (incomplete: {','.join(map(str, st['incomplete']))})"
        if st["failed"]:
            seeds += f" (FAILED: {','.join(map(str, st['failed']))})"
        cells = [bench, name, "x".join(map(str, hidden)) or "-", *(shown.get(n, "-") for n in extra), seeds,
                 fmt_pm(st["last_k_acc"], 100) + ("" if st["last_k"] == 5 else f" (last {st['last_k']})"),
                 fmt_pm(st["auc_epistemic"], 1, 3), fmt_pm(st["auc_aleatoric"], 1, 3), fmt_pm(st["auc_vr"], 1, 3),
                 fmt_mmrr(st["mmrr"]), "-" if st["mmrr_seed_avg"] is None else format_mmrr(st["mmrr_seed_avg"]),
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
    for key, runs in ordered:
        for r in runs:
            if r["summary"] and r["summary"].get("complete"):
                why = failed_reason(r)
                if why is not None:
                    notes.append(f"- {group_label(key)} seed {r['seed']}: FAILED, {why} (not in the means); "
                                 f"inspect {r['path']} and rerun it in a new --out")
                continue
            done = [rec["task"] for rec in r["records"]]
            diag = accuracy_trail([rec["acc"] for rec in r["records"] if rec.get("acc") is not None])
            n = r["config"].get("tasks", "?")
            notes.append(f"- {group_label(key)} seed {r['seed']}: incomplete, {len(done)}/{n} tasks done; "
                         f"accuracy right after training (%): {diag or '-'} (run the same command to resume)")
    if notes:
        rows += ["", *notes]
    return "\n".join(rows)


def report(paths: Sequence[str | os.PathLike], paper: bool = True, warn=None) -> tuple[str, dict]:
    """``(markdown table, groups)`` for the run directories under ``paths``: one row per configuration
    (:func:`group_runs`), seeds averaged within it. A run whose files cannot be read (missing,
    unreadable, corrupt) is skipped with a one-line ``warn(message)`` (default: printed to stderr) and
    the others are reported; FileNotFoundError when no run is left; :class:`DuplicateSeedError` naming
    both directories when a seed is in two runs of one configuration."""
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

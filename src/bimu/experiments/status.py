"""``bimu status``: where long runs stand, read from their run directories (nothing is loaded or run).

For every seed directory under the given paths: its state (``complete``, also for an active-learning
run whose ``result.json`` is written; ``running`` while a live
process holds its lock, ``failed`` with an ``error.txt``, ``stopped`` part way, ``not started``), tasks
done out of the stream's (the tasks of ``metrics.jsonl``, which the runner writes after the checkpoint,
so they are never more than a resume will keep), the accuracy right after the last task, the recent training rate (median
over the last :data:`RECENT_TASKS` tasks) and the time it still needs at that rate. The total says
how much single-core work is left, which is what a resumed sitting has to plan for.

>>> import tempfile, json
>>> from bimu.rundir import RunDir, seed_dir
>>> rd = RunDir(seed_dir(tempfile.mkdtemp(), "pmnist", "bimu", 0))
>>> rd.write_json("config.json", {"benchmark": "pmnist", "method": "bimu", "tasks": 4})
>>> rd.write_metrics([{"task": t, "steps": 600, "acc": 0.9, "train_seconds": 0.2, "eval_seconds": 0.05,
...                    "steps_per_s": 3000.0} for t in range(3)])
>>> s = seed_status(rd.path)
>>> s["state"], s["tasks_done"], s["tasks"], s["steps_per_s"], s["seconds_spent"], s["seconds_left"]
('stopped', 3, 4, 3000.0, 0.75, 0.25)
"""

from __future__ import annotations

import json
import os
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bimu.rundir import CONFIG, ERROR, RESULT, SUMMARY, RunDir, RunDirRefused, find_run_dirs
from bimu.untrusted import NUMBER, check_fields, read_text

RESULT_FIELDS = {"per_task_accuracy": (list, type(None)), "accuracy": (*NUMBER, type(None))}
"""The types of the fields of an active-learning ``result.json`` that ``bimu status`` reads."""

RECENT_TASKS = 10
"""Tasks over which the recent rate and time per task are taken (medians)."""

STATES = ("running", "stopped", "failed", "not started", "complete")
"""Run states, in the order the table lists them."""


def seed_status(path: str | os.PathLike) -> dict[str, Any]:
    """The status of one seed directory (holding ``config.json``): ``state``, ``tasks_done``, ``tasks``
    (``None`` when the config leaves it to the benchmark and no summary says it), ``last_acc``,
    ``steps_per_s`` and ``seconds_per_task`` (medians over the last tasks; ``None`` before the first),
    ``hidden`` (the hidden widths), ``seconds_spent`` (training and evaluation time of the tasks done, summed over sittings),
    ``seconds_left`` (``None`` when unknown) and ``error`` (the last line of ``error.txt``). A run whose
    metrics, summary, result or lock cannot be read (not a regular file, malformed, values of the wrong
    type) is ``failed`` with ``error`` naming the file; a ``config.json`` that cannot be read is a
    ValueError naming it."""
    rd = RunDir(path)
    p = rd.path
    try:
        cfg = rd.read_json(CONFIG)
    except (OSError, ValueError) as e:
        raise ValueError(f"{p}: not a readable run directory ({CONFIG}: {e})") from None
    try:
        records = rd.read_metrics()
        summary = rd.read_json(SUMMARY) if rd.exists(SUMMARY) else None
        result = rd.read_json(RESULT) if rd.exists(RESULT) else None  # an active-learning run, done
        if result is not None:
            check_fields(result, RESULT_FIELDS, str(rd.file(RESULT)))
        live = rd.locked_by_live_process()
    except (OSError, ValueError, RunDirRefused) as e:  # this run's files are unreadable: the others go on
        return _unreadable(p, cfg, e)
    tasks = cfg.get("tasks")
    if summary and summary.get("n_tasks"):
        tasks = int(summary["n_tasks"])
    done = len(records)
    if result is not None and not records:  # an active-learning stream: its tasks are in its result
        done = len(result.get("per_task_accuracy") or [])
        tasks = done or tasks
    recent = records[-RECENT_TASKS:]
    rates = [r["steps_per_s"] for r in recent if r.get("steps_per_s")]
    per_task = [r.get("train_seconds", 0.0) + r.get("eval_seconds", 0.0) for r in recent if "train_seconds" in r]
    error = None
    if rd.exists(ERROR):
        try:
            text = read_text(rd.file(ERROR), 16 * 2**20)
        except (OSError, ValueError) as e:
            text = f"error.txt cannot be read ({e})"
        lines = [x for x in text.splitlines() if x.strip()]
        error = lines[-1] if lines else "error.txt is empty"
    if (summary and summary.get("complete")) or result is not None:
        state = "complete"
    elif live:
        state = "running"
    elif error is not None:
        state = "failed"
    elif done == 0:
        state = "not started"
    else:
        state = "stopped"
    seconds_per_task = statistics.median(per_task) if per_task else None
    spent = sum(r.get("train_seconds", 0.0) + r.get("eval_seconds", 0.0) for r in records)
    if state == "complete":
        seconds_left = 0.0
    elif tasks is not None and seconds_per_task is not None:
        seconds_left = max(int(tasks) - done, 0) * seconds_per_task
    else:
        seconds_left = None
    return {"path": str(p), "benchmark": cfg.get("benchmark"), "method": cfg.get("method"),
            "hidden": list(cfg.get("hidden") or []), "state": state,
            "tasks_done": done, "tasks": tasks,
            "last_acc": records[-1].get("acc") if records else (result or {}).get("accuracy"),
            "steps_per_s": statistics.median(rates) if rates else None, "seconds_per_task": seconds_per_task,
            "seconds_spent": spent, "seconds_left": seconds_left, "error": error}


def _unreadable(p: Path, cfg: dict, e: BaseException) -> dict[str, Any]:
    """The status of a run whose files cannot be read: ``failed``, the reason in ``error``."""
    return {"path": str(p), "benchmark": cfg.get("benchmark"), "method": cfg.get("method"),
            "hidden": list(cfg.get("hidden") or []), "state": "failed", "tasks_done": 0, "tasks": cfg.get("tasks"),
            "last_acc": None, "steps_per_s": None, "seconds_per_task": None, "seconds_spent": 0.0,
            "seconds_left": None, "error": f"unreadable: {' '.join(str(e).split())}"}


def format_duration(seconds: float | None) -> str:
    """``"?"`` for ``None``, else seconds, minutes or hours (one decimal), whichever reads best.

    >>> format_duration(None), format_duration(42), format_duration(600), format_duration(5400)
    ('?', '42 s', '10 min', '1.5 h')
    """
    if seconds is None:
        return "?"
    if seconds < 60:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _name(path: str, roots: Sequence[Path]) -> str:
    for root in roots:
        try:
            rel = Path(path).relative_to(root)
        except ValueError:
            continue
        return str(rel) if str(rel) != "." else Path(path).name
    return path


def format_status(statuses: Sequence[dict[str, Any]], roots: Sequence[str | os.PathLike] = ()) -> str:
    """A text table of :func:`seed_status` results (running first, then stopped, failed, not started,
    complete) and a total line with the single-core work left.

    >>> print(format_status([{"path": "r/a", "state": "stopped", "tasks_done": 3, "tasks": 4, "last_acc": 0.9,
    ...                       "steps_per_s": 3000.0, "seconds_spent": 5400.0, "seconds_left": 7200.0,
    ...                       "error": None}], ["r"]))
    run  state    tasks  last acc  steps/s  spent   left
    a    stopped  3/4      90.00%    3,000  1.5 h  2.0 h
    1 run: 1 stopped; work left: 2.0 h of one core
    """
    roots = [Path(r) for r in roots]
    order = sorted(statuses, key=lambda s: (STATES.index(s["state"]), s["path"]))
    table = [("run", "state", "tasks", "last acc", "steps/s", "spent", "left")]
    for s in order:
        table.append((_name(s["path"], roots), s["state"],
                      f"{s['tasks_done']}/{'?' if s['tasks'] is None else s['tasks']}",
                      "-" if s["last_acc"] is None else f"{100 * s['last_acc']:.2f}%",
                      "-" if s["steps_per_s"] is None else f"{s['steps_per_s']:,.0f}",
                      format_duration(s.get("seconds_spent", 0.0)), format_duration(s["seconds_left"])))
    widths = [max(len(r[i]) for r in table) for i in range(len(table[0]))]
    right = {3, 4, 5, 6}
    lines = ["  ".join(c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))).rstrip()
             for r in table]
    for s in order:
        if s["state"] == "failed" and s["error"]:
            lines.append(f"  {_name(s['path'], roots)}: {s['error']}")
    counts = [f"{sum(s['state'] == st for s in statuses)} {st}" for st in STATES
              if any(s["state"] == st for s in statuses)]
    left = [s["seconds_left"] for s in statuses]
    known = sum(x for x in left if x is not None)
    unknown = sum(x is None for x in left)
    total = f"work left: {format_duration(known)} of one core" + (f" (+ {unknown} runs with no rate yet)" if unknown else "")
    n = len(statuses)
    lines.append(f"{n} run{'s' if n != 1 else ''}: {', '.join(counts) or 'none'}; {total}")
    return "\n".join(lines)


def cmd_status(args) -> int:
    """``bimu status PATH...``: print the table (or JSON with ``--json``); 2 if a path is missing or a file."""
    try:
        for path in args.paths:
            if Path(path).is_file():
                raise ValueError(f"{path} is a file; give run directories or folders holding them "
                                 "(bimu run --out, bimu reproduce --out)")
        runs = find_run_dirs(args.paths)
        statuses = [seed_status(p) for p in runs]
    except (FileNotFoundError, ValueError) as e:
        print(f"bimu: error: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(statuses, indent=2))
    else:
        print(format_status(statuses, args.paths))
    return 0


def add_parser(subparsers) -> None:
    """Register ``status`` on an argparse ``subparsers`` object."""
    p = subparsers.add_parser(
        "status", help="where runs stand: state, tasks done, recent rate, time left",
        description="Read every run directory under the paths (bimu run --out, bimu reproduce --out) and "
                    "print each seed's state (running / stopped / failed / not started / complete), tasks "
                    "done, accuracy after its last task, recent steps/s and time left at that rate.")
    p.add_argument("paths", nargs="+", help="run directories or folders holding them")
    p.add_argument("--json", action="store_true", help="print the statuses as JSON")
    p.set_defaults(func=cmd_status)

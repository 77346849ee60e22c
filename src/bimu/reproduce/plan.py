"""``bimu reproduce NAME --dry-run``: what a run table would train, without training.

Each (row, seed) is listed with its state and the time left, estimated from the started runs of the
same method, benchmark and hidden widths under ``OUT/runs`` (:mod:`bimu.experiments.status`), else from
the committed full-scale runs (:mod:`bimu.reproduce.estimate`).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from pathlib import Path

from bimu.reproduce.entries import entry_of
from bimu.reproduce.spec import Options, row_dir, selected_rows


def plan(name: str, opts: Options) -> list[dict]:
    """What ``bimu reproduce NAME`` would train, without training: one dict per (row, seed) of a run
    table (the rows ``opts.rows`` selects) with ``row``, ``seed``, ``path`` (the seed's run directory) and
    :func:`~bimu.experiments.status.seed_status`'s fields (``state`` ``"to run"`` for a run not started,
    its time left estimated from started runs of the same method, benchmark and hidden widths under
    ``OUT/runs`` when there are any, else from the committed runs, :func:`~bimu.reproduce.estimate.run_seconds`;
    ``estimated_from``: ``"own"``, ``"out"``, ``"committed"`` or ``None``) and ``checkpoint`` (whether a
    run not complete resumes from one).
    ValueError for an entry that builds its own runs (the active-learning sweeps)."""
    from bimu.reproduce.estimate import committed_runs, run_seconds
    from bimu.rundir import CHECKPOINT, CONFIG, find_run_dirs, seed_dir

    entry = entry_of(name)
    if entry.build is not None:
        raise ValueError(f"--dry-run lists the runs of the run tables; {name!r} builds its own "
                         "(run it, or look at its folder with 'bimu status')")
    if entry.rows is None:
        raise ValueError(f"--dry-run: {name!r} trains nothing (it is computed directly); run it")
    rows = entry.rows(opts)
    chosen = selected_rows(opts, name, [r.slug for r in rows])
    out = []
    configs = {}
    for row in rows:
        if row.config is None or row.slug not in chosen:
            continue
        cfg = row.config
        for seed in cfg.seeds:
            d = seed_dir(row_dir(opts, name, row), cfg.benchmark, cfg.method, seed)
            if (d / CONFIG).is_file():
                st = _status(d)
            else:
                st = {"path": str(d), "benchmark": cfg.benchmark, "method": cfg.method,
                      "hidden": list(cfg.hidden_widths()), "state": "to run", "tasks_done": 0, "tasks": cfg.tasks,
                      "last_acc": None, "steps_per_s": None, "seconds_per_task": None, "seconds_spent": 0.0,
                      "seconds_left": None, "error": None}
            shared = "/".join(row.same_runs_as) if row.same_runs_as else None
            configs[len(out)] = (row.same_runs_as or (name, row.slug), cfg)
            out.append(dict(st, row=row.slug, seed=seed, shared_with=shared,
                            checkpoint=st["state"] != "complete" and (d / CHECKPOINT).is_file(),
                            estimated_from=None if st["seconds_left"] is None else "own"))
    # a run without a rate of its own: the median time per task of the started runs of the same method,
    # benchmark and hidden widths anywhere under OUT/runs (only the folders of those kinds are read)
    pool = []
    wanted = {f"{st['benchmark']}-{st['method']}" for st in out if st["seconds_left"] is None}
    if wanted and (Path(opts.out) / "runs").is_dir():
        pool = [_status(p) for p in find_run_dirs([Path(opts.out) / "runs"], started_only=True)
                if p.parent.name in wanted]
    measured = None
    for i, st in enumerate(out):
        if st["seconds_left"] is None and st["tasks"] is not None:
            kind = (st["method"], st["benchmark"], list(st["hidden"]))
            known = [o["seconds_per_task"] for o in pool if o["seconds_per_task"] is not None
                     and (o["method"], o["benchmark"], list(o["hidden"])) == kind]
            if known:
                st["seconds_left"] = (int(st["tasks"]) - st["tasks_done"]) * statistics.median(known)
                st["estimated_from"] = "out"
        if st["seconds_left"] is None:  # no started run of its kind here: the committed runs' seconds
            measured = committed_runs() if measured is None else measured
            (entry_name, slug), cfg = configs[i]
            whole = run_seconds(measured, entry_name, slug, cfg)
            if whole is not None:
                tasks = st["tasks"] or cfg.tasks
                done = min(st["tasks_done"] / int(tasks), 1.0) if tasks else 0.0
                st["seconds_left"] = whole * (1.0 - done)
                st["estimated_from"] = "committed"
    return out


def _status(d: Path) -> dict:
    """:func:`~bimu.experiments.status.seed_status` of run directory ``d``, read from its ``summary.json``
    alone when that says the run is complete (its seconds a task: the whole run's over its tasks), so that
    a folder of long finished runs is planned without reading their metrics."""
    from bimu.experiments.status import seed_status
    from bimu.rundir import CONFIG, SUMMARY, RunDir

    rd = RunDir(d)
    try:
        s = rd.read_json(SUMMARY) if rd.exists(SUMMARY) else None
        cfg = rd.read_json(CONFIG)
    except (OSError, ValueError):
        s = None
    if not (isinstance(s, dict) and s.get("complete") and isinstance(s.get("n_tasks"), int) and s["n_tasks"] > 0
            and isinstance(s.get("train_seconds"), (int, float))):
        return seed_status(d)
    spent = float(s["train_seconds"]) + float(s.get("eval_seconds") or 0.0)
    return {"path": str(rd.path), "benchmark": cfg.get("benchmark"), "method": cfg.get("method"),
            "hidden": list(cfg.get("hidden") or []), "state": "complete", "tasks_done": s["n_tasks"],
            "tasks": s["n_tasks"], "last_acc": None, "steps_per_s": s.get("steps_per_s"),
            "seconds_per_task": spent / s["n_tasks"], "seconds_spent": spent, "seconds_left": 0.0, "error": None}


def format_plan(name: str, runs: Sequence[dict]) -> str:
    """The dry-run table of :func:`plan` and a total line (a run is estimated from the started runs of
    the same method, benchmark and hidden widths under ``OUT/runs``: "their kind").

    >>> print(format_plan("memory-window", [{"row": "bimu-N100", "seed": 0, "state": "to run", "tasks_done": 0,
    ...   "tasks": 100, "seconds_left": None}, {"row": "bimu-N100", "seed": 1, "state": "complete",
    ...   "tasks_done": 100, "tasks": 100, "seconds_left": 0.0}]))
    memory-window: 2 runs (1 complete, 1 to run)
    row        seed  state     tasks    left
    bimu-N100  0     to run    0/100       ?
    bimu-N100  1     complete  100/100   0 s
    work left: 0 s of one core (+ 1 not estimated: no run of their kind started under OUT/runs or committed)
    """
    from bimu.experiments.status import format_duration

    table = [("row", "seed", "state", "tasks", "left")]
    for r in runs:
        row = r["row"] + (f" (= {r['shared_with']})" if r.get("shared_with") else "")
        table.append((row, str(r["seed"]), r["state"],
                      f"{r['tasks_done']}/{'?' if r['tasks'] is None else r['tasks']}", format_duration(r["seconds_left"])))
    widths = [max(len(t[i]) for t in table) for i in range(5)]
    lines = ["  ".join(c.rjust(w) if i == 4 else c.ljust(w) for i, (c, w) in enumerate(zip(t, widths))).rstrip()
             for t in table]
    states: dict[str, int] = {}
    for r in runs:
        states[r["state"]] = states.get(r["state"], 0) + 1
    head = f"{name}: {len(runs)} run{'s' if len(runs) != 1 else ''} (" + \
        ", ".join(f"{v} {k}" for k, v in sorted(states.items())) + ")"
    left = [r["seconds_left"] for r in runs]
    unknown = sum(x is None for x in left)
    total = f"work left: {format_duration(sum(x for x in left if x is not None))} of one core"
    committed = sum(r.get("estimated_from") == "committed" for r in runs)
    if committed:
        total += f" ({committed} estimated from the committed runs' seconds)"
    if unknown:
        total += f" (+ {unknown} not estimated: no run of their kind started under OUT/runs or committed)"
    return "\n".join([head, *lines, total])

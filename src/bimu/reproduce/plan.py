"""``bimu reproduce NAME --dry-run``: what a run table would train, without training.

Each (row, seed) is listed with its state and the time left, estimated from the started runs of the
same method, benchmark and hidden widths under ``OUT/runs`` (:mod:`bimu.experiments.status`).
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
    ``OUT/runs`` when there are any).
    ValueError for an entry that builds its own runs (the active-learning sweeps)."""
    from bimu.experiments.status import seed_status
    from bimu.rundir import CONFIG, find_run_dirs, seed_dir

    entry = entry_of(name)
    if entry.build is not None:
        raise ValueError(f"--dry-run lists the runs of the run tables; {name!r} builds its own "
                         "(run it, or look at its folder with 'bimu status')")
    if entry.rows is None:
        raise ValueError(f"--dry-run: {name!r} trains nothing (it is computed directly); run it")
    rows = entry.rows(opts)
    chosen = selected_rows(opts, name, [r.slug for r in rows])
    out = []
    for row in rows:
        if row.config is None or row.slug not in chosen:
            continue
        cfg = row.config
        for seed in cfg.seeds:
            d = seed_dir(row_dir(opts, name, row), cfg.benchmark, cfg.method, seed)
            if (d / CONFIG).is_file():
                st = seed_status(d)
            else:
                st = {"path": str(d), "benchmark": cfg.benchmark, "method": cfg.method,
                      "hidden": list(cfg.hidden_widths()), "state": "to run", "tasks_done": 0, "tasks": cfg.tasks,
                      "last_acc": None, "steps_per_s": None, "seconds_per_task": None, "seconds_spent": 0.0,
                      "seconds_left": None, "error": None}
            shared = "/".join(row.same_runs_as) if row.same_runs_as else None
            out.append(dict(st, row=row.slug, seed=seed, shared_with=shared))
    # a run without a rate of its own: the median time per task of the started runs of the same method,
    # benchmark and hidden widths anywhere under OUT/runs
    pool = []
    if (Path(opts.out) / "runs").is_dir():
        pool = [seed_status(p) for p in find_run_dirs([Path(opts.out) / "runs"])]
    for st in out:
        if st["seconds_left"] is None and st["tasks"] is not None:
            kind = (st["method"], st["benchmark"], list(st["hidden"]))
            known = [o["seconds_per_task"] for o in pool if o["seconds_per_task"] is not None
                     and (o["method"], o["benchmark"], list(o["hidden"])) == kind]
            if known:
                st["seconds_left"] = (int(st["tasks"]) - st["tasks_done"]) * statistics.median(known)
    return out


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
    work left: 0 s of one core (+ 1 not estimated: no started run of their kind under OUT/runs)
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
    if unknown:
        total += f" (+ {unknown} not estimated: no started run of their kind under OUT/runs)"
    return "\n".join([head, *lines, total])

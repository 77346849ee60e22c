"""The run tables of ``bimu reproduce``: every (row, seed) run as a job, then mean ± std over seeds.

:func:`run_rows` runs (or reuses) each row's runs with :func:`~bimu.experiments.runner.run_experiment`,
side by side with ``--jobs N`` (:mod:`bimu.experiments.parallel`) or as the tasks of a Dask cluster
with ``--scheduler ADDRESS`` (:mod:`bimu.experiments.distributed`); :func:`run_table` puts each
quantity's mean ± std over seeds beside the paper's number, marking gaps beyond
:data:`~bimu.reproduce.gaps.GAP_SD` standard deviations with their explanation.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Sequence
from pathlib import Path

from bimu.experiments.config import RunConfig
from bimu.reproduce.gaps import GAP_SD
from bimu.reproduce.spec import (QUANTITIES, Entry, Options, Row, data_status, is_standin, row_dir, rows_note,
                                 selected_rows)
from bimu.reproduce.table import Table


def run_rows(entry: Entry, opts: Options, log=None) -> tuple[list[Row], dict[str, list[dict]], int]:
    """Run (or reuse) every applicable row, one job per (row, seed) side by side with ``opts.jobs``
    processes or, with ``opts.scheduler``, as tasks of that Dask scheduler (completed runs are not
    sent) (:func:`~bimu.experiments.parallel.run_jobs`); returns ``(rows, summaries by row slug,
    exit code)``. Every configuration is checked first (clear errors before any training; a row whose
    runs are all complete is read back without its data, :func:`~bimu.experiments.runner.complete_runs`);
    a failing job leaves its ``error.txt`` and the others complete. Two commands sharing one output
    folder share the work: a seed that another live process on this host runs is skipped here, said
    so, and waited for before the table is read (a run on another host is not waited for)."""
    from bimu.experiments.jobs import HELD
    from bimu.experiments.parallel import Job, run_jobs
    from bimu.experiments.runner import benchmark_module, complete_runs, is_complete, preflight, run_config_job

    from bimu.rundir import RunDirInUse

    say = log or (lambda m: print(m, file=sys.stderr, flush=True))
    rows = entry.rows(opts)
    chosen = selected_rows(opts, entry.name, [r.slug for r in rows])
    jobs = []
    held: dict[str, tuple[RunConfig, int]] = {}
    held_if: dict[str, tuple[RunConfig, int]] = {}
    done = 0
    for row in rows:
        if row.config is None or row.slug not in chosen:
            continue
        cfg = row.config.replace(out=str(row_dir(opts, entry.name, row)))
        if complete_runs(cfg) is not None:  # every seed complete and of this configuration: no data loaded
            done += len(cfg.seeds)
            if log is not None:
                log(f"{row.slug}: seeds {', '.join(map(str, cfg.seeds))} already complete in {cfg.out}")
            continue
        try:
            preflight(cfg)
        except RunDirInUse:  # another command sharing the folder runs one of its seeds: the others go here
            pass
        for seed in cfg.seeds:
            if opts.scheduler is not None and is_complete(cfg, seed):
                done += 1  # nothing to send to the cluster
                continue
            owner = _held_by(cfg, seed)
            if owner is not None:
                say(f"{row.slug}/seed-{seed}: run by process {owner.pid} (another command sharing {opts.out}): "
                    "skipped here")
                held[f"{row.slug}/seed-{seed}"] = (cfg, seed)
                continue
            held_if[f"{row.slug}/seed-{seed}"] = (cfg, seed)
            jobs.append(Job(f"{row.slug}/seed-{seed}", run_config_job,
                            (cfg.replace(seeds=[seed]).to_dict(), opts.progress, benchmark_module(cfg.benchmark)),
                            label=f"{entry.name} {row.slug} seed {seed}"))
    if opts.jobs == 1 and opts.scheduler is None:  # in this process: keep the caller's log
        jobs = [dataclasses.replace(j, args=(*j.args, log)) for j in jobs]
    codes = run_jobs(jobs, opts.jobs, log=log, scheduler=opts.scheduler, shared=opts.out, done=done)
    held.update({k: held_if[k] for k, c in codes.items() if c == HELD})
    for key, (cfg, seed) in held.items():  # the other command's runs: wait for them, then read them
        codes[key] = _wait_for_other(key, cfg, seed, say)
    summaries = {row.slug: read_summaries(row.config.replace(out=str(row_dir(opts, entry.name, row))))
                 for row in rows if row.config is not None}
    return rows, summaries, max(codes.values(), default=0)


POLL_S = 2.0
"""How often a reproduction checks whether another command has finished a run it waits for."""


def _held_by(cfg: RunConfig, seed: int):
    """The live process other than this one that holds ``seed``'s run directory, or ``None``."""
    from bimu.process import Owner
    from bimu.rundir import RunDir, seed_dir

    owner = RunDir(seed_dir(cfg.out, cfg.benchmark, cfg.method, seed)).lock_owner()
    return owner if owner is not None and owner != Owner.current() and owner.alive() else None


def _wait_for_other(key: str, cfg: RunConfig, seed: int, say) -> int:
    """Wait while another live process on this host runs ``seed``'s directory; 0 once the run is complete,
    1 (with a line saying so) when that process ended without completing it or runs on another host."""
    import time

    from bimu.experiments.runner import is_complete

    announced = False
    while (owner := _held_by(cfg, seed)) is not None and owner.is_local():
        if not announced:
            say(f"{key}: waiting for process {owner.pid} (another command sharing the folder) to finish it")
            announced = True
        time.sleep(POLL_S)
    if is_complete(cfg, seed):
        return 0
    owner = _held_by(cfg, seed)
    where = f"is still run by process {owner.pid} on host {owner.host}" if owner else "was left incomplete by the other command"
    say(f"{key}: {where}; run the same command again to finish it")
    return 1


def seeds_on_disk(cfg: RunConfig) -> tuple[int, ...]:
    """The seeds that have a run directory under ``cfg.out`` (for ``cfg``'s benchmark and method)."""
    from bimu.rundir import seed_dir

    folder = seed_dir(cfg.out, cfg.benchmark, cfg.method, 0).parent
    if not folder.is_dir():
        return ()
    return tuple(sorted(int(p.name[5:]) for p in folder.glob("seed-*") if p.name[5:].isdigit()))


def table_from_runs(entry: Entry, opts: Options) -> tuple[Table, list[Row], dict[str, list[dict]]]:
    """The table of a run-table ``entry`` from the complete runs already under ``opts.out``, training
    nothing: each row with every complete seed found on disk (whatever ``opts.seeds``), rows without
    complete runs left out and named in a note. Returns ``(table, rows shown, summaries by slug)``."""
    rows, summaries, missing = [], {}, []
    for row in entry.rows(opts):
        if row.config is None:
            continue
        cfg = row.config.replace(out=str(row_dir(opts, entry.name, row)))
        seeds = seeds_on_disk(cfg)
        summ = read_summaries(cfg.replace(seeds=list(seeds))) if seeds else []
        if summ:
            rows.append(row)
            summaries[row.slug] = summ
        else:
            missing.append(" ".join(row.labels))
    table = run_table(entry, dataclasses.replace(opts, rows=None), rows, summaries)
    if missing:
        table.notes.insert(0, f"not shown, no complete runs under {Path(opts.out) / 'runs' / opts.scale}: "
                              + "; ".join(missing))
    return table, rows, summaries


def read_summaries(cfg: RunConfig) -> list[dict]:
    """The complete seeds' ``summary.json`` of ``cfg`` (its accuracy matrix under ``_R``), seed order."""
    from bimu.rundir import SUMMARY, RunDir, seed_dir

    out = []
    for seed in cfg.seeds:
        rd = RunDir(seed_dir(cfg.out, cfg.benchmark, cfg.method, seed))
        if rd.exists(SUMMARY):
            summ = rd.read_json(SUMMARY)
            if summ.get("complete"):
                out.append(dict(summ, _R=rd.read_matrix(), _dir=str(rd.path)))
    return out


def run_table(entry: Entry, opts: Options, rows: Sequence[Row], summaries: dict[str, list[dict]]) -> Table:
    """The table of ``entry``: label cells, then for each quantity mean ± std over seeds and the paper's.
    A cell beyond :data:`~bimu.reproduce.gaps.GAP_SD` is marked ``†N``, N numbering its cause in this
    table; :attr:`Table.gaps` gives each cause once with the cells it explains."""
    from bimu.reproduce.gaps import RULE, explanation, gap_sd, parse_reported
    from bimu.report.tables import fmt_pm

    header = list(entry.label_headers)
    for q in entry.quantities:
        header += list(MMRR_HEADERS) + ["Paper"] if q == "mmrr" else [QUANTITIES[q][0], "Paper"]
    header.append("Seeds")
    out_rows, notes = [], []
    causes: dict[str, dict] = {}
    for row in rows:
        cells = list(row.labels)
        summ = summaries.get(row.slug, [])
        judged = opts.scale == "full" and row.config is not None and not is_standin(row.config.benchmark)
        for q in entry.quantities:
            name, get, scale, digits = QUANTITIES[q]
            if row.config is None:
                cells.append("n/a")
            elif q == "mmrr":
                cells += [seed_averaged_mmrr(summ), per_seed_mmrr(summ)]
            else:
                values = [get(s) for s in summ]
                cell = fmt_pm(values, scale, digits)
                paper = parse_reported(row.paper.get(q, "-"))
                gap = gap_sd([v * scale for v in values if isinstance(v, (int, float))], paper) if judged and paper else None
                if gap is not None and gap > GAP_SD:
                    cause, text = explanation(entry.name, row.slug, q)
                    g = causes.setdefault(cause, {"mark": f"†{len(causes) + 1}", "cause": cause, "cells": [],
                                                  "text": text})
                    g["cells"].append(f"{', '.join(row.labels)}, {name}: {cell} against the paper's "
                                      f"{row.paper[q]} ({gap:.1f} sd)")
                    cell += f" {g['mark']}"
                cells.append(cell)
            cells.append(row.paper.get(q, "-"))
        cells.append("n/a" if row.config is None else (",".join(str(s.get("seed")) for s in summ) or "-"))
        out_rows.append(cells)
        if row.note and row.note not in notes:  # rows that share a note (a switch's rows) state it once
            notes.append(row.note)
    standins = sorted({r.config.benchmark for r in rows if r.config is not None and is_standin(r.config.benchmark)})
    for b in standins:
        notes.append(f"STAND-IN: runs on {b} ({data_status(b)}), an offline substitute built from "
                     "Tiny-ImageNet; its numbers are not the paper's data set")
    if opts.scale == "quick":
        notes.append("quick scale: 2 tasks on a few hundred examples; numbers are a smoke test, "
                     "not comparable with the paper's")
    notes += rows_note(opts, [r.slug for r in rows if r.config is not None])
    benches = {r.config.benchmark for r in rows if r.config is not None}
    ood = "Fashion-MNIST" if benches <= {"pmnist"} else "the held-out OOD class" if "pmnist" not in benches \
        else "Fashion-MNIST (Permuted MNIST) or the held-out OOD class (feature benchmarks)"
    notes.append(f"runs under {Path(opts.out) / 'runs' / opts.scale / entry.name}; mean ± std over seeds "
                 f"(sample std); OOD AUC is the epistemic score vs {ood} "
                 "(aleatoric for deterministic methods)" + (MMRR_NOTE if "mmrr" in entry.quantities else ""))
    if any(MMRR_CAP in cell for cells in out_rows for cell in cells):
        notes.append(mmrr_cap_note())
    notes += compute_note(rows, summaries)
    if causes:
        notes.append(f"†N: {RULE}; N numbers the cause, written once below")
    title = entry.title + "".join(f" [stand-in: {b}]" for b in standins)
    return Table(title + ("" if opts.scale == "full" else " [quick]"), header, out_rows, notes,
                 gaps=with_passages(list(causes.values())))


def compute_note(rows: Sequence[Row], summaries: dict[str, list[dict]]) -> list[str]:
    """The note giving each row's compute: the core-hours a seed took (training and evaluation seconds of
    its ``summary.json``, on one core), the mean over seeds and each seed's; ``[]`` when no row has any.

    >>> row = Row(["BiMU"], "bimu", None, {})
    >>> note = compute_note([row], {"bimu": [{"seed": 0, "train_seconds": 7000.0, "eval_seconds": 200.0},
    ...                                       {"seed": 1, "train_seconds": 6000.0, "eval_seconds": 100.0}]})
    >>> note[0].split("differ): ")[1]
    'BiMU 1.85 (seed 0: 2.00, 1: 1.69)'
    """
    from bimu.report.tables import fmt_hours

    parts = []
    for row in rows:
        timed = [(s.get("seed"), s["train_seconds"] + (s.get("eval_seconds") or 0.0))
                 for s in summaries.get(row.slug, []) if isinstance(s.get("train_seconds"), (int, float))]
        if timed:
            hours = [t / 3600 for _, t in timed]
            each = ", ".join(f"{seed}: {fmt_hours(h)}" for (seed, _), h in zip(timed, hours))
            parts.append(f"{', '.join(row.labels)} {fmt_hours(sum(hours) / len(hours))} (seed {each})")
    if not parts:
        return []
    return ["compute, core-hours a seed (training and evaluation time in each run's summary.json, one core; "
            "machines and their load differ): " + "; ".join(parts)]


def with_passages(gaps: list[dict]) -> list[dict]:
    """``gaps`` followed by the shared passages their texts refer to (each once, no cells)."""
    from bimu.reproduce.gaps import passage, passage_ids

    names = list(dict.fromkeys(p for g in gaps for p in passage_ids(g["text"])))
    return gaps + [{"mark": "", "cause": p, "cells": [], "text": passage(p)} for p in names]


MMRR_HEADERS = ("MMRR, seed-avg. matrix (paper's code)", "MMRR per seed")
"""The two MMRR columns of a run table: the paper code's convention, then the mean ± sd of each seed's."""

MMRR_NOTE = ("; MMRR two ways: from the seed-averaged accuracy matrix, 1 / (a_max - a_T + 1e-5) of the mean "
             "matrix (one number; what the paper's code computes and the paper reports), and per seed, the mean ± "
             "sd over seeds of each seed's own MMRR (a mean of reciprocals is not the reciprocal of a mean, so the "
             "two differ)")
"""The run tables' note on their two MMRR columns."""

MMRR_CAP = "1e5 (cap)"
"""The MMRR cell of runs whose last task ends at the best accuracy of the whole (seed-averaged) matrix:
``1 / (a_max - a_T + 1e-5)`` then takes its largest value, which ranks nothing (a short stream learned to
100% gives it)."""


def mmrr_cap_note() -> str:
    """The table note under a cell showing :data:`MMRR_CAP`, its numbers from :data:`bimu.metrics.MMRR_EPS`.

    >>> mmrr_cap_note().split(", where ")[1]
    '1 / (a_max - a_T + 1e-5) takes its largest value, 100000'
    """
    from bimu.metrics import MMRR_EPS

    eps = f"{MMRR_EPS:g}".replace("e-0", "e-")
    return (f"MMRR {MMRR_CAP}: the last task ends at the best accuracy of the seed-averaged matrix, where "
            f"1 / (a_max - a_T + {eps}) takes its largest value, {1 / MMRR_EPS:.0f}")


def seed_averaged_mmrr(summaries: Sequence[dict]) -> str:
    """MMRR as the paper reports it (one number): from the seed-averaged accuracy matrices
    (:func:`~bimu.metrics.mmrr_seed_averaged`); ``-`` without complete runs, :data:`MMRR_CAP` at its cap.

    >>> R = [[1.0, float("nan")], [0.9, 1.0]]
    >>> seed_averaged_mmrr([{"_R": R}]), seed_averaged_mmrr([{"_R": [[1.0, float("nan")], [0.9, 0.95]]}])
    ('1e5 (cap)', '20.00')
    """
    import numpy as np

    from bimu.metrics import MMRR_EPS, mmrr_seed_averaged

    mats = [np.asarray(s["_R"], dtype=float) for s in summaries if s.get("_R") is not None]
    if not mats or len({m.shape for m in mats}) != 1:
        return "-"
    try:
        value = mmrr_seed_averaged(mats)
    except ValueError:
        return "-"
    return MMRR_CAP if value >= 1 / MMRR_EPS * (1 - 1e-9) else f"{value:.2f}"


def per_seed_mmrr(summaries: Sequence[dict]) -> str:
    """MMRR of each seed's own accuracy matrix (:func:`~bimu.metrics.mmrr`), mean ± sd over seeds; seeds at
    :data:`MMRR_CAP` are counted apart (a mean with them would be the cap's); ``-`` without complete runs.

    >>> R1, R2 = [[0.9, float("nan")], [0.5, 0.8]], [[0.7, float("nan")], [0.5, 0.6]]  # 1 / 0.1 each
    >>> per_seed_mmrr([{"_R": R1}, {"_R": R2}]), per_seed_mmrr([{"_R": R1}, {"_R": [[1.0, float("nan")], [0.9, 1.0]]}])
    ('10.00 ± 0.00', '10.00; 1e5 (cap) in 1 of 2 seeds')
    """
    import numpy as np

    from bimu.metrics import MMRR_EPS, mmrr
    from bimu.report.tables import fmt_pm

    values = []
    for s in summaries:
        try:
            values.append(mmrr(np.asarray(s["_R"], dtype=float)) if s.get("_R") is not None else float(s["mmrr"]))
        except (KeyError, TypeError, ValueError):
            continue
    capped = sum(v >= 1 / MMRR_EPS * (1 - 1e-9) for v in values)
    rest = [v for v in values if v < 1 / MMRR_EPS * (1 - 1e-9)]
    cells = [fmt_pm(rest, 1.0, 2)] if rest else []
    cells += [f"{MMRR_CAP} in {capped} of {len(values)} seeds"] if capped else []
    return "; ".join(cells) or "-"

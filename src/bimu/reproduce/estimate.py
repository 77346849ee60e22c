"""What a ``bimu reproduce`` run costs, estimated from the committed full-scale runs, and the summary
printed before any training (how many runs are trained, reused and resumed, and the core-hours).

The committed runs (:func:`committed_runs_dir`: ``results/reproduce-full/runs`` of the source tree, or
``$BIMU_COMMITTED_RUNS``) each keep a ``summary.json`` with the training and evaluation seconds of the
whole stream. A run to do is estimated from the committed runs of the same table row (same entry, row,
method and benchmark), else of the same method, benchmark, hidden widths and benchmark options, else of
the same method and benchmark: the mean over their seeds of ``train_seconds + eval_seconds``, scaled by
the examples trained (tasks x examples per task, ``--scale quick`` limits them) and by the weights of
the network where the widths differ. No committed run of that method and benchmark: no estimate ("?"),
and the summary says which. Only ``summary.json`` and ``config.json`` are read (no data, no metrics).

>>> m = Measured("e", "r", "pmnist", "bimu", (100,), "{}", 1000, 60_000_000, (784, 100, 10), 7200.0)
>>> scaled_seconds(m, tasks=10, per_task=None, sizes=None)  # 10 of 1000 tasks
72.0
>>> # 300 of 60 000 examples a task, twice the weights
>>> round(scaled_seconds(m, tasks=10, per_task=300, sizes=(784, 200, 10)), 6)
0.72
"""

from __future__ import annotations

import dataclasses
import json
import os
import statistics
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

COMMITTED_ENV = "BIMU_COMMITTED_RUNS"
"""Environment variable naming another folder of committed runs to estimate from (laid out as
``results/reproduce-full/runs``)."""

COMMITTED_RUNS = Path(__file__).resolve().parents[3] / "results" / "reproduce-full" / "runs"
"""The committed full-scale runs of the source tree (absent from an installed wheel)."""


def committed_runs_dir() -> Path:
    """The folder of committed runs: ``$BIMU_COMMITTED_RUNS`` when set, else :data:`COMMITTED_RUNS`."""
    env = os.environ.get(COMMITTED_ENV)
    return Path(env) if env else COMMITTED_RUNS


@dataclasses.dataclass(frozen=True)
class Measured:
    """One complete committed run: where it lies (``entry``/``row``, ``None`` outside a table's folder),
    what it ran (benchmark, method, hidden widths, benchmark options as JSON), its tasks, the examples
    it trained on, its layer sizes (``None``: not recorded) and its training + evaluation seconds."""

    entry: str | None
    row: str | None
    benchmark: str
    method: str
    hidden: tuple[int, ...]
    options: str
    tasks: int
    examples: int | None
    sizes: tuple[int, ...] | None
    seconds: float


def _options(d: dict | None) -> str:
    """Benchmark options as canonical JSON (unset options dropped), so equal options compare equal."""
    return json.dumps({k: v for k, v in (d or {}).items() if v is not None}, sort_keys=True)


@lru_cache(maxsize=8)
def _read(root: str) -> tuple[Measured, ...]:
    out = []
    base = Path(root)
    for f in sorted(base.rglob("summary.json")) if base.is_dir() else ():
        try:
            s = json.loads(f.read_text(encoding="utf-8"))
            cfg = json.loads((f.parent / "config.json").read_text(encoding="utf-8")) \
                if (f.parent / "config.json").is_file() else {}
            if not (isinstance(s, dict) and s.get("complete") and isinstance(s.get("train_seconds"), (int, float))
                    and s.get("n_tasks")):
                continue
            parts = f.relative_to(base).parts  # <scale>/<entry>/<row>/<benchmark>-<method>/seed-<s>/summary.json
            sizes = (cfg.get("resolved") or {}).get("sizes")
            out.append(Measured(parts[1] if len(parts) == 6 else None, parts[2] if len(parts) == 6 else None,
                                str(s.get("benchmark") or cfg.get("benchmark")),
                                str(s.get("method") or cfg.get("method")),
                                tuple(int(h) for h in (s.get("hidden") or cfg.get("hidden") or ())),
                                _options(cfg.get("benchmark_options")), int(s["n_tasks"]),
                                int(s["examples_seen"]) if isinstance(s.get("examples_seen"), int) else None,
                                tuple(int(x) for x in sizes) if sizes else None,
                                float(s["train_seconds"]) + float(s.get("eval_seconds") or 0.0)))
        except (OSError, ValueError, TypeError, AttributeError, KeyError):
            continue  # a run that cannot be read is left out of the estimates
    return tuple(out)


def committed_runs(root: str | os.PathLike | None = None) -> tuple[Measured, ...]:
    """Every complete run under ``root`` (default :func:`committed_runs_dir`) with its seconds; read once."""
    return _read(str(Path(root) if root is not None else committed_runs_dir()))


def _weights(sizes: Sequence[int]) -> int:
    return sum(a * b for a, b in zip(sizes, sizes[1:]))


def scaled_seconds(m: Measured, tasks: int | None, per_task: int | None, sizes: Sequence[int] | None) -> float:
    """``m``'s seconds scaled to a run of ``tasks`` tasks (``None``: ``m``'s), ``per_task`` training
    examples a task at most (``None``: ``m``'s) and layer ``sizes`` (``None``: ``m``'s)."""
    factor = (tasks if tasks is not None else m.tasks) / m.tasks
    if per_task is not None and m.examples:
        factor *= min(1.0, per_task / (m.examples / m.tasks))
    if sizes and m.sizes and _weights(m.sizes):
        factor *= _weights(sizes) / _weights(m.sizes)
    return m.seconds * factor


def run_seconds(measured: Sequence[Measured], entry: str, row: str, cfg) -> float | None:
    """The estimated seconds of one whole run of ``cfg`` (a :class:`~bimu.experiments.config.RunConfig`),
    row ``row`` of ``entry`` (the row whose folder it runs in), from ``measured``: the mean over the
    closest committed runs (same row; else same method, benchmark, widths and options; else same method
    and benchmark), each scaled (:func:`scaled_seconds`); ``None`` without a run of that method and benchmark."""
    hidden = tuple(cfg.hidden_widths())
    options = _options(cfg.benchmark_options)
    kind = [m for m in measured if m.method == cfg.method and m.benchmark == cfg.benchmark]
    pool = ([m for m in kind if (m.entry, m.row) == (entry, row)]
            or [m for m in kind if m.hidden == hidden and m.options == options] or kind)
    if not pool:
        return None
    out = []
    for m in pool:
        sizes = None
        if m.sizes and (m.hidden != hidden or m.options != options):
            n_in = (cfg.benchmark_options or {}).get("n_features") or (m.sizes[0] if m.options == options else None)
            sizes = (int(n_in), *hidden, m.sizes[-1]) if n_in else None
        out.append(scaled_seconds(m, cfg.tasks, cfg.train_limit, sizes))
    return statistics.fmean(out)


def fmt_core_hours(seconds: float) -> str:
    """Core-hours to two decimals, with the duration beside them below 0.01.

    >>> fmt_core_hours(7200), fmt_core_hours(18), fmt_core_hours(0.2), fmt_core_hours(0.0)
    ('2.00 core-hours', '<0.01 core-hours (18 s)', '<0.01 core-hours (< 1 s)', '0 core-hours')
    """
    from bimu.experiments.status import format_duration

    if seconds == 0:
        return "0 core-hours"
    h = seconds / 3600
    if h >= 0.01:
        return f"{h:.2f} core-hours"
    return f"<0.01 core-hours ({format_duration(seconds) if seconds >= 1 else '< 1 s'})"


def summary(name: str, runs: Sequence[dict], scale: str, jobs: int | None = None) -> str:
    """The lines printed before ``bimu reproduce NAME`` trains anything, from :func:`bimu.reproduce.plan.plan`'s
    runs: how many it trains (resuming how many from a checkpoint), reuses (complete) or leaves to another
    command, and the core-hours left; runs without an estimate are counted and their method and benchmark named.

    >>> print(summary("t", [{"state": "complete", "seconds_left": 0.0, "method": "bimu", "benchmark": "pmnist"},
    ...    {"state": "to run", "seconds_left": 5400.0, "method": "bimu", "benchmark": "pmnist"},
    ...    {"state": "stopped", "seconds_left": 1800.0, "method": "sgd", "benchmark": "pmnist", "checkpoint": True},
    ...    {"state": "to run", "seconds_left": None, "method": "ste", "benchmark": "pmnist"}], "full"))
    t (full scale): 4 runs: 3 to train (1 resumes from a checkpoint), 1 complete (reused)
    estimated work: 2.00 core-hours + ? for 1 run (no committed run of ste on pmnist)
    >>> print(summary("t", [{"state": "to run", "seconds_left": 3600.0 * 50}] * 4, "full", jobs=2).splitlines()[1])
    estimated work: 200.00 core-hours (at best 100.0 h on 2 jobs)
    >>> print(summary("t", [{"state": "to run", "seconds_left": None, "method": "sgd", "benchmark": "b"}], "full"))
    t (full scale): 1 run: 1 to train (0 resume from a checkpoint), 0 complete (reused)
    estimated work: ? for 1 run (no committed run of sgd on b)
    """
    from bimu.experiments.status import format_duration

    complete = [r for r in runs if r["state"] == "complete"]
    elsewhere = [r for r in runs if r["state"] == "running"]
    train = [r for r in runs if r["state"] not in ("complete", "running")]
    resume = sum(bool(r.get("checkpoint")) for r in train)
    head = (f"{name} ({scale} scale): {len(runs)} run{'s' if len(runs) != 1 else ''}: {len(train)} to train "
            f"({resume} resume{'s' if resume == 1 else ''} from a checkpoint), {len(complete)} complete (reused)")
    if elsewhere:
        head += f", {len(elsewhere)} run by another live command (waited for)"
    left = [r["seconds_left"] for r in train if r.get("seconds_left") is not None]
    unknown = [r for r in train if r.get("seconds_left") is None]
    work = f"estimated work: {fmt_core_hours(sum(left))}" if left or not unknown else "estimated work: ?"
    if jobs and jobs > 1 and len(train) > 1 and sum(left) >= 3600:
        work += f" (at best {format_duration(sum(left) / min(jobs, len(train)))} on {min(jobs, len(train))} jobs)"
    if unknown:
        kinds = sorted({f"{r.get('method')} on {r.get('benchmark')}" for r in unknown})
        work += (f"{' + ?' if left else ''} for {len(unknown)} run{'s' if len(unknown) != 1 else ''} "
                 "(no committed run of " + ", ".join(kinds) + ")")
    return "\n".join([head, work])

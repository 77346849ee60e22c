"""Independent jobs side by side on one machine (``bimu reproduce NAME --jobs N``).

A :class:`Job` is a key, a function returning an exit code and its arguments. :func:`run_jobs` runs
them with at most ``n`` alive at a time, each in its own process (``n == 1``: one after the other in
this process). Processes come from a ``forkserver`` (a clean server that has imported torch and bimu
but never run a computation, so forking it is safe where forking a process that already used
OpenMP is not); the function and its arguments are therefore pickled: a module-level function and
plain data. Every job writes its own run directory atomically, so jobs never share a file; a job that
raises, exits non-zero or dies (even from a signal) is reported with exit code 1 and the others go
on. A KeyboardInterrupt terminates the running children (their completed tasks stay checkpointed)
and propagates.

>>> run_jobs([Job("a", int, ("0",)), Job("b", int, ("3",))], n=1, log=lambda s: None)
{'a': 0, 'b': 1}
"""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Callable, Sequence

from bimu.experiments.jobs import HELD, Job


PRELOAD = ("torch", "numpy", "bimu.experiments.runner", "bimu.experiments.sweep")
"""Modules the fork server imports once, so that each job starts without importing them again."""


def default_jobs() -> int:
    """The number of cores this process may use (``--jobs`` default)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def check_jobs(n) -> int:
    """``n`` as a positive int; ValueError otherwise."""
    try:
        v = int(n)
    except (TypeError, ValueError):
        raise ValueError(f"--jobs must be a positive integer, got {n!r}") from None
    if v < 1 or isinstance(n, bool) or (isinstance(n, float) and n != v):
        raise ValueError(f"--jobs must be a positive integer, got {n!r}")
    return v


def _call(job: Job, log) -> int:
    try:
        code = int(job() or 0)
        return code if code in (0, HELD) else 1
    except KeyboardInterrupt:
        raise
    except Exception as e:  # noqa: BLE001 - one job failing must not stop the others
        log(f"job {job.key} FAILED: {type(e).__name__}: {e}\n{traceback.format_exc()}")
        return 1


def _child(job: Job) -> None:  # pragma: no cover - runs in the forked process
    try:
        code = _call(job, lambda s: print(s, file=sys.stderr, flush=True))
    except KeyboardInterrupt:
        code = 130
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def run_jobs(jobs: Sequence[Job], n: int = 1, log: Callable[[str], None] | None = None,
             scheduler: str | None = None, shared: str | os.PathLike | None = None,
             done: int = 0) -> dict[str, int]:
    """Run ``jobs`` (at most ``n`` at a time, forked processes when ``n > 1``; with ``scheduler``, as
    tasks of that Dask scheduler, :mod:`bimu.experiments.distributed`, whose workers must see the output
    folder ``shared``; ``done`` of them are already complete); returns the exit code of each by key:
    0 success, 1 failure (raised, non-zero exit or killed), :data:`~bimu.experiments.jobs.HELD` for a
    job whose run directory another live process runs."""
    log = log or (lambda s: print(s, file=sys.stderr, flush=True))
    keys = [j.key for j in jobs]
    if len(set(keys)) != len(keys):
        raise ValueError("job keys must be unique")
    if scheduler is not None:
        from bimu.experiments.distributed import run_jobs_on

        return run_jobs_on(scheduler, jobs, log, shared=shared, done=done)
    n = check_jobs(n)
    if n == 1 or len(jobs) <= 1:
        return {j.key: _call(j, log) for j in jobs}
    import multiprocessing as mp
    from multiprocessing.connection import wait

    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(list(PRELOAD))
    pending = list(jobs)
    running: dict[int, tuple[Job, object]] = {}
    codes: dict[str, int] = {}
    try:
        while pending or running:
            while pending and len(running) < n:
                job = pending.pop(0)
                p = ctx.Process(target=_child, args=(job,), name=f"bimu-job-{job.key}")
                p.start()
                running[p.sentinel] = (job, p)
            for sentinel in wait(list(running)):
                job, p = running.pop(sentinel)
                p.join()
                code = p.exitcode
                if code not in (0, HELD):
                    why = f"killed by signal {-code}" if code is not None and code < 0 else f"exit code {code}"
                    log(f"job {job.key} FAILED ({why}); the other jobs go on")
                codes[job.key] = code if code in (0, HELD) else 1
    except KeyboardInterrupt:
        for _, p in running.values():
            p.terminate()
        for _, p in running.values():
            p.join()
        raise
    return {k: codes[k] for k in keys}

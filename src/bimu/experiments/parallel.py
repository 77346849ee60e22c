"""Independent jobs side by side on one machine (``bimu reproduce NAME --jobs N``).

A :class:`Job` is a key, a function returning an exit code and its arguments. :func:`run_jobs` runs
them with at most ``n`` alive at a time, each in its own process (``n == 1``: one after the other in
this process). Processes come from a ``forkserver`` (a clean server that has imported torch and bimu
but never run a computation, so forking it is safe where forking a process that already used
OpenMP is not); the function and its arguments are therefore pickled: a module-level function and
plain data. Every job writes its own run directory atomically, so jobs never share a file; a job that
raises, exits non-zero or dies (even from a signal) is reported with exit code 1 and the others go
on. A KeyboardInterrupt terminates the running children (their completed tasks stay checkpointed)
and propagates. Side by side, every line a child prints (its standard output and error, also what
libraries write to the descriptors) reaches this process's stream of the same name prefixed with the
job's label, ``[pmnist-1000 bimu seed 1] ...`` (:attr:`~bimu.experiments.jobs.Job.label`). A child ends
through :mod:`multiprocessing`'s own exit, which runs its finalizers: a lock a library made in the child
(numba's threading-layer lock is one) is unlinked there, not left to the resource tracker to warn about.

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


def _child(job: Job, out=None, err=None) -> None:  # pragma: no cover - runs in the forked process
    if out is not None:  # standard output and error into the parent's pipes, which label each line
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(out.fileno(), 1)
        os.dup2(err.fileno(), 2)
        out.close()
        err.close()
        for stream in (sys.stdout, sys.stderr):
            if hasattr(stream, "reconfigure"):
                stream.reconfigure(line_buffering=True)
    try:
        code = _call(job, lambda s: print(s, file=sys.stderr, flush=True))
    except KeyboardInterrupt:
        code = 130
    sys.stdout.flush()
    sys.stderr.flush()
    # SystemExit, not os._exit: multiprocessing's exit then runs the child's finalizers, which unlink
    # and unregister the semaphores made here (numba makes a lock when it starts its threads); skipped,
    # the resource tracker warns of "leaked semaphore objects" when the command ends
    sys.exit(code)


class _Labelled:
    """The parent's end of a child's standard output or error: each complete line is written to this
    process's stream of the same name (``"stdout"``/``"stderr"``) after ``prefix``."""

    def __init__(self, conn, prefix: str, stream: str):
        self.conn, self.prefix, self.stream, self.buf = conn, prefix, stream, b""

    def _write(self, lines: list[bytes]) -> None:
        if lines:
            out = getattr(sys, self.stream)
            out.write("".join(f"{self.prefix}{x.decode(errors='replace')}\n" for x in lines))
            out.flush()

    def pump(self) -> bool:
        """Read what is there and write its complete lines; False once nothing more comes (the child
        closed its end, or, when not blocking, nothing is waiting); at the end the pipe is closed."""
        try:
            data = os.read(self.conn.fileno(), 1 << 16)
        except BlockingIOError:
            return False
        if not data:
            self.close()
            return False
        *lines, self.buf = (self.buf + data).split(b"\n")
        self._write(lines)
        return True

    def drain(self) -> None:
        """Write all that is left once the child has ended (an unfinished last line too), then close
        (what a process the child left behind writes later is not waited for)."""
        if not self.conn.closed:
            os.set_blocking(self.conn.fileno(), False)
        while not self.conn.closed and self.pump():
            pass
        self.close()

    def close(self) -> None:
        """Write an unfinished last line and close the pipe."""
        if self.buf:
            self._write([self.buf])
            self.buf = b""
        if not self.conn.closed:
            self.conn.close()


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
    running: dict[int, tuple[Job, object, list[_Labelled]]] = {}
    readers: dict[object, _Labelled] = {}
    codes: dict[str, int] = {}
    try:
        while pending or running:
            while pending and len(running) < n:
                job = pending.pop(0)
                (out_r, out_w), (err_r, err_w) = ctx.Pipe(duplex=False), ctx.Pipe(duplex=False)
                p = ctx.Process(target=_child, args=(job, out_w, err_w), name=f"bimu-job-{job.key}")
                try:
                    p.start()
                except BaseException:
                    out_r.close()
                    err_r.close()
                    raise
                finally:
                    out_w.close()
                    err_w.close()
                prefix = f"[{job.label or job.key}] "
                ends = [_Labelled(out_r, prefix, "stdout"), _Labelled(err_r, prefix, "stderr")]
                readers.update((e.conn, e) for e in ends)
                running[p.sentinel] = (job, p, ends)
            for ready in wait([*running, *readers]):
                if ready in readers:
                    if not readers[ready].pump():
                        del readers[ready]
                    continue
                if ready not in running:
                    continue
                job, p, ends = running.pop(ready)
                p.join()
                for e in ends:
                    readers.pop(e.conn, None)
                    e.drain()
                code = p.exitcode
                if code not in (0, HELD):
                    why = f"killed by signal {-code}" if code is not None and code < 0 else f"exit code {code}"
                    log(f"job {job.key} FAILED ({why}); the other jobs go on")
                codes[job.key] = code if code in (0, HELD) else 1
    except KeyboardInterrupt:
        for _, p, _ in running.values():
            p.terminate()
        for _, p, _ in running.values():
            p.join()
        raise
    finally:
        for e in readers.values():
            e.close()
    return {k: codes[k] for k in keys}

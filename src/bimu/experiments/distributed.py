"""Independent jobs on a Dask cluster (``--scheduler ADDRESS``): every run of a table, a seed sweep or a
tuning study sent to any free worker, landing in one output folder.

Each :class:`~bimu.experiments.parallel.Job` becomes one Dask task. The output folder must lie on a
filesystem that every worker mounts at the same path (NFS, a cluster's shared scratch): the run
directories' per-seed locks, atomic writes and per-task checkpoints then make a task that the scheduler
reruns after its worker died (Dask's ``distributed.scheduler.allowed-failures``, 3 by default) resume
after its last completed task, on whichever worker takes it.

Install the extra with ``pip install -e ".[dask]"``; start a cluster with ``dask scheduler`` and
``dask worker ADDRESS --nthreads 1`` (one run per worker process), or with dask-jobqueue on Slurm/PBS
(docs/distributed.md).

A task reports ``(exit code, host, message)``; a task whose worker lacks the shared folder fails with
a message naming it, and the other tasks go on.
"""

from __future__ import annotations

import os
import socket
import sys
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path

from bimu.redact import redact_url

CONNECT_TIMEOUT_S = 10.0
"""How long to wait for the scheduler before giving up with a one-line error."""

def check_address(address: str) -> str:
    """``address`` as a scheduler address (``tcp://HOST:PORT``, ``tls://...``, ``HOST:PORT``); ValueError
    naming it otherwise, before anything connects.

    >>> check_address("tcp://127.0.0.1:8786"), check_address("127.0.0.1:8786")
    ('tcp://127.0.0.1:8786', 'tcp://127.0.0.1:8786')
    >>> check_address("http://x:1")
    Traceback (most recent call last):
    ValueError: --scheduler: 'http://x:1' is not a Dask scheduler address (tcp://HOST:PORT)
    """
    a = str(address).strip()
    if "://" not in a:
        a = "tcp://" + a
    proto, _, rest = a.partition("://")
    host, _, port = rest.rpartition(":")
    if proto not in ("tcp", "tls", "inproc", "ucx", "ws", "wss") or not host or not port.isdigit():
        raise ValueError(f"--scheduler: {redact_url(address)!r} is not a Dask scheduler address (tcp://HOST:PORT)")
    return a


def connect(address: str, timeout: float = CONNECT_TIMEOUT_S):
    """A ``distributed.Client`` on ``address``; ValueError (one line) when the extra is missing or the
    scheduler does not answer within ``timeout`` seconds."""
    address = check_address(address)
    try:
        from distributed import Client
    except ImportError:
        raise ValueError("--scheduler needs Dask: pip install -e \".[dask]\"") from None
    try:
        return Client(address, timeout=timeout, set_as_default=False)
    except (OSError, TimeoutError) as e:
        raise ValueError(f"--scheduler: no Dask scheduler answered at {redact_url(address)} within {timeout:g} s "
                         f"({type(e).__name__})") from None


def _remote(job, shared: str | None) -> tuple[int, str, str]:
    """Run ``job`` on a worker: ``(0 | 1, host, message)``; never raises, so that one failing run
    leaves the others going."""
    host = socket.gethostname()
    if shared is not None and not Path(shared).is_dir():
        return 1, host, (f"the shared output folder {shared} is not mounted on worker {host} "
                         "(every worker must see it at the same path)")
    try:
        code = int(job() or 0)
    except Exception as e:  # noqa: BLE001 - reported to the client
        return 1, host, f"{type(e).__name__}: {e}\n{traceback.format_exc()}"
    return (0 if code == 0 else 1), host, "" if code == 0 else f"exit code {code}"


def run_jobs_on(address: str, jobs: Sequence, log: Callable[[str], None] | None = None,
                shared: str | os.PathLike | None = None, done: int = 0) -> dict[str, int]:
    """Run ``jobs`` as tasks of the Dask scheduler at ``address``; returns each job's exit code by key
    (0 success, 1 failure). ``shared`` is the output folder every worker must see; ``done`` how many of
    the jobs are already complete (printed)."""
    log = log or (lambda s: print(s, file=sys.stderr, flush=True))
    address = check_address(address)
    client = connect(address)
    try:
        from distributed import as_completed

        info = client.scheduler_info()
        n_workers = len(info.get("workers", {}))
        log(f"dask: scheduler {redact_url(address)}, dashboard {client.dashboard_link}, {n_workers} worker"
            f"{'s' if n_workers != 1 else ''}; {len(jobs)} run{'s' if len(jobs) != 1 else ''} submitted "
            f"({done} already done)")
        shared_s = None if shared is None else str(Path(shared).resolve())
        futures = {client.submit(_remote, job, shared_s, key=f"bimu-{job.key}-{os.getpid()}", pure=False): job.key for job in jobs}
        codes: dict[str, int] = {}
        for fut in as_completed(list(futures), loop=client.loop):
            key = futures[fut]
            try:
                code, host, message = fut.result()
            except Exception as e:  # noqa: BLE001 - e.g. its workers died more often than allowed
                code, host, message = 1, "?", f"{type(e).__name__}: {e}"
            if code:
                log(f"job {key} FAILED on {host}: {message}; the other jobs go on")
            codes[key] = code
        return {j.key: codes[j.key] for j in jobs}
    finally:
        client.close()

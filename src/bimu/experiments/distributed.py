"""Independent jobs on a Dask cluster (``--scheduler ADDRESS``): every run of a table, a seed sweep or a
tuning study sent to any free worker, landing in one output folder.

Each :class:`~bimu.experiments.jobs.Job` becomes one Dask task. The output folder must lie on a
filesystem that every worker mounts at the same path (NFS, a cluster's shared scratch): the run
directories' per-seed locks, atomic writes and per-task checkpoints then make a task that the scheduler
reruns after its worker died (Dask's ``distributed.scheduler.allowed-failures``, 3 by default) resume
after its last completed task, on whichever worker takes it.

Install the extra with ``pip install -e ".[dask]"``; start a cluster with ``dask scheduler`` and
``dask worker ADDRESS --nthreads 1`` (one run per worker process), or with dask-jobqueue on Slurm/PBS
(docs/distributed.md).

:func:`submit_all` sends ``(key, function, arguments)`` calls and prints the start line (scheduler,
dashboard, workers, runs submitted and already done); :func:`run_jobs_on` runs jobs that return an exit
code, :func:`map_on` calls whose values come back (a threshold sweep's rows), :func:`run_seeds_on` the
seeds of ``bimu run``. A task whose worker lacks the shared folder or the data fails with a message
naming it, and the other tasks go on. Relative ``--out`` and ``--data-dir`` are made absolute first.
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


def check_scheduler(address: str) -> str:
    """``address`` checked and its scheduler reached (then let go): the one-line ValueError of
    :func:`connect` comes before any data is loaded or any run starts."""
    connect(address).close()
    return check_address(address)


def _remote(fn: Callable, args: tuple, shared: str | None) -> tuple[bool, str, object]:
    """``fn(*args)`` on a worker: ``(True, host, value)`` or ``(False, host, message)``; never raises, so
    that one failing task leaves the others going."""
    host = socket.gethostname()
    if shared is not None and not Path(shared).is_dir():
        return False, host, (f"the shared output folder {shared} is not mounted on worker {host} "
                             "(every worker must see it at the same path)")
    try:
        return True, host, fn(*args)
    except Exception as e:  # noqa: BLE001 - reported to the client
        return False, host, f"{type(e).__name__}: {e}\n{traceback.format_exc()}"


def submit_all(address: str, calls: Sequence[tuple[str, Callable, tuple]], log: Callable[[str], None] | None = None,
               shared: str | os.PathLike | None = None, done: int = 0) -> dict[str, tuple[bool, str, object]]:
    """Each ``(key, fn, args)`` of ``calls`` as one task of the Dask scheduler at ``address`` (``fn`` and
    ``args`` picklable); returns ``{key: (ok, host, value or failure message)}``. Prints the scheduler,
    its dashboard, the workers and how many calls were submitted and ``done`` already first; a failed
    task is logged with its key and the others go on. ``shared`` is the folder every worker must see
    (made here when missing)."""
    log = log or (lambda s: print(s, file=sys.stderr, flush=True))
    address = check_address(address)
    client = connect(address)
    try:
        from distributed import as_completed

        n_workers = len(client.scheduler_info().get("workers", {}))
        log(f"dask: scheduler {redact_url(address)}, dashboard {client.dashboard_link}, {n_workers} worker"
            f"{'s' if n_workers != 1 else ''}; {len(calls)} run{'s' if len(calls) != 1 else ''} submitted "
            f"({done} already done)")
        shared_s = None
        if shared is not None:  # made here, so that a worker that does not see it is told so
            Path(shared).mkdir(parents=True, exist_ok=True)
            shared_s = str(Path(shared).resolve())
        futures = {client.submit(_remote, fn, tuple(args), shared_s, key=f"bimu-{key}-{os.getpid()}-{i}",
                                 pure=False): key for i, (key, fn, args) in enumerate(calls)}
        out: dict[str, tuple[bool, str, object]] = {}
        for fut in as_completed(list(futures), loop=client.loop):
            key = futures[fut]
            try:
                out[key] = fut.result()
            except Exception as e:  # noqa: BLE001 - e.g. its workers died more often than allowed
                out[key] = (False, "?", f"{type(e).__name__}: {e}")
            if not out[key][0]:
                log(f"job {key} FAILED on {out[key][1]}: {out[key][2]}; the other jobs go on")
        return {key: out[key] for key, _, _ in calls}
    finally:
        client.close()


def run_jobs_on(address: str, jobs: Sequence, log: Callable[[str], None] | None = None,
                shared: str | os.PathLike | None = None, done: int = 0) -> dict[str, int]:
    """Run ``jobs`` (:class:`~bimu.experiments.jobs.Job`) as tasks of the Dask scheduler at
    ``address`` (:func:`submit_all`); returns each job's exit code by key (0 success, 1 failure: raised,
    non-zero exit, or its worker died more often than the scheduler allows)."""
    log = log or (lambda s: print(s, file=sys.stderr, flush=True))
    results = submit_all(address, [(j.key, j.fn, tuple(j.args)) for j in jobs], log, shared, done)
    codes = {}
    for key, (ok, host, value) in results.items():
        codes[key] = 0 if ok and int(value or 0) == 0 else 1
        if ok and codes[key]:
            log(f"job {key} FAILED on {host}: exit code {value}; the other jobs go on")
    return codes


def map_on(address: str, fn: Callable, args_list: Sequence[tuple], keys: Sequence[str],
           log: Callable[[str], None] | None = None) -> list:
    """``[fn(*args) for args in args_list]``, each call a task of the Dask scheduler at ``address``;
    RuntimeError naming the failed keys once every task has ended (their messages are logged)."""
    results = submit_all(address, list(zip(keys, [fn] * len(keys), args_list)), log)
    failed = [k for k, (ok, _, _) in results.items() if not ok]
    if failed:
        raise RuntimeError(f"{len(failed)} of {len(keys)} runs failed on the cluster: {', '.join(failed)}")
    return [results[k][2] for k in keys]


def run_seeds_on(address: str, config, log: Callable[[str], None] | None = None) -> tuple[dict[int, dict], int]:
    """``bimu run --scheduler ADDRESS``: every seed of ``config`` (a
    :class:`~bimu.experiments.config.RunConfig`) as one task of the Dask scheduler at ``address``, the
    seeds already complete under ``config.out`` not sent; returns ``({seed: {"run_dir": ...}} for the
    complete seeds, exit code)`` as :func:`~bimu.experiments.runner.run_experiment` does (1 if any seed
    failed)."""
    from bimu.experiments.jobs import Job
    from bimu.experiments.runner import benchmark_module, is_complete, preflight, run_config_job
    from bimu.rundir import seed_dir

    check_scheduler(address)
    config = config.replace(out=str(Path(config.out).resolve()),  # the same paths on every worker
                            data_dir=None if config.data_dir is None else str(Path(config.data_dir).resolve()))
    preflight(config)
    todo = [s for s in config.seeds if not is_complete(config, s)]
    module = benchmark_module(config.benchmark)
    jobs = [Job(f"seed-{s}", run_config_job, (config.replace(seeds=[s]).to_dict(), False, module)) for s in todo]
    codes = run_jobs_on(address, jobs, log, shared=config.out, done=len(config.seeds) - len(todo))
    results = {s: {"run_dir": str(seed_dir(config.out, config.benchmark, config.method, s))}
               for s in config.seeds if is_complete(config, s)}
    return results, max(codes.values(), default=0)

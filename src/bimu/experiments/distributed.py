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

import ipaddress
import os
import re
import socket
import struct
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path

from bimu.experiments.jobs import HELD
from bimu.redact import redact_text, redact_url

CONNECT_TIMEOUT_S = 10.0
"""How long to wait for the scheduler before giving up with a one-line error."""
HANDSHAKE_TIMEOUT_S = 5.0
"""How long :func:`probe` waits, once connected, for the first bytes of the scheduler's handshake (a
scheduler sends them as soon as it accepts; something else on the port sends nothing)."""

PROTOCOLS = ("tcp", "tls", "ws", "wss", "ucx")
"""The address schemes of a Dask scheduler that other processes can reach (``inproc://`` is not one)."""

_HOST = re.compile(r"^(?:[A-Za-z0-9](?:[A-Za-z0-9_-]{0,62})?)(?:\.[A-Za-z0-9_-]{1,63})*\.?$")


def parse_address(address: str) -> tuple[str, str, int]:
    """``(scheme, host, port)`` of a scheduler address (``tcp://HOST:PORT``, ``tls://...``, ``HOST:PORT``,
    ``tcp://[IPv6]:PORT``), checked here before Dask sees it; ValueError (one line, the address redacted)
    for anything else: another scheme, a user name or password, a malformed host or bracket, a port
    outside 1..65535.

    >>> parse_address("127.0.0.1:8786"), parse_address("tls://[::1]:8786")
    (('tcp', '127.0.0.1', 8786), ('tls', '::1', 8786))
    >>> parse_address("tcp://bob:hunter2@127.0.0.1:1")
    Traceback (most recent call last):
    ValueError: --scheduler: 'tcp://bob:***@127.0.0.1:1' holds a user name or password; a Dask address is tcp://HOST:PORT (credentials go in the TLS configuration)
    """
    raw = str(address).strip()
    shown = redact_url(raw if "://" in raw else "tcp://" + raw)

    def bad(why: str) -> ValueError:
        return ValueError(f"--scheduler: {shown!r} {why}")

    a = raw if "://" in raw else "tcp://" + raw
    proto, _, rest = a.partition("://")
    if proto.lower() not in PROTOCOLS:
        raise ValueError(f"--scheduler: {redact_url(raw)!r} is not a Dask scheduler address (tcp://HOST:PORT)")
    if "@" in rest:
        raise bad("holds a user name or password; a Dask address is tcp://HOST:PORT (credentials go in the "
                  "TLS configuration)")
    rest = rest.rstrip("/")
    if rest.startswith("["):
        host, sep, tail = rest[1:].partition("]")
        if not sep or not tail.startswith(":"):
            raise bad("is not a Dask scheduler address: an IPv6 host is written [ADDRESS]:PORT")
        port = tail[1:]
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise bad(f"is not a Dask scheduler address: {host!r} is not an IPv6 address")
    else:
        host, _, port = rest.rpartition(":")
        if not host or not _HOST.match(host):
            raise bad("is not a Dask scheduler address (tcp://HOST:PORT)")
    if not port.isdigit() or not 1 <= int(port) <= 65535:
        raise bad("is not a Dask scheduler address: the port must be a number in 1..65535")
    return proto.lower(), host, int(port)


def check_address(address: str) -> str:
    """``address`` as a scheduler address Dask accepts (:func:`parse_address`), before anything connects.

    >>> check_address("tcp://127.0.0.1:8786"), check_address("127.0.0.1:8786")
    ('tcp://127.0.0.1:8786', 'tcp://127.0.0.1:8786')
    >>> check_address("http://x:1")
    Traceback (most recent call last):
    ValueError: --scheduler: 'http://x:1' is not a Dask scheduler address (tcp://HOST:PORT)
    """
    proto, host, port = parse_address(address)
    return f"{proto}://{'[' + host + ']' if ':' in host else host}:{port}"


def probe(address: str, timeout: float = CONNECT_TIMEOUT_S) -> None:
    """ValueError (one line) unless a Dask scheduler answers at ``address`` within ``timeout`` seconds:
    a TCP connection is opened, and on ``tcp://`` the first frame of the Dask handshake, which a
    scheduler sends as soon as it accepts, must begin (an 8-byte length, at most 1 MiB) within
    :data:`HANDSHAKE_TIMEOUT_S`. A port where something else listens (an HTTP server, which waits for
    a request) is refused here, where a blocked read cannot outlive ``timeout``, never inside Dask."""
    proto, host, port = parse_address(address)
    shown = redact_url(check_address(address))
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            deadline = time.monotonic() + min(timeout, HANDSHAKE_TIMEOUT_S)
            if proto != "tcp":  # TLS and websockets speak first from the client: the connection is the check
                return
            head = b""
            while len(head) < 8:
                sock.settimeout(max(deadline - time.monotonic(), 0.01))
                chunk = sock.recv(8 - len(head))
                if not chunk:
                    raise ValueError(f"--scheduler: the server at {shown} closed the connection without a Dask "
                                     "handshake; is a Dask scheduler listening there?")
                head += chunk
            (n,) = struct.unpack("<Q", head)
            if not 0 < n <= 2**20:
                raise ValueError(f"--scheduler: the server at {shown} does not speak Dask's protocol; is a Dask "
                                 "scheduler listening there?")
    except TimeoutError:
        raise ValueError(f"--scheduler: no Dask scheduler answered at {shown} (the port accepts connections but "
                         f"sent no Dask handshake within {min(timeout, HANDSHAKE_TIMEOUT_S):g} s; is something else "
                         "listening there?)") from None
    except OSError as e:
        raise ValueError(f"--scheduler: no Dask scheduler answered at {shown} within {timeout:g} s "
                         f"({type(e).__name__}: {e.strerror or e})") from None


def connect(address: str, timeout: float = CONNECT_TIMEOUT_S):
    """A ``distributed.Client`` on ``address``; ValueError (one line, the address redacted) when the
    extra is missing, the address is malformed (:func:`parse_address`) or no scheduler answers within
    ``timeout`` seconds (:func:`probe`, before Dask connects)."""
    address = check_address(address)
    try:
        from distributed import Client
    except ImportError:
        raise ValueError("--scheduler needs Dask: pip install -e \".[dask]\"") from None
    probe(address, timeout)
    try:
        return Client(address, timeout=timeout, set_as_default=False)
    except Exception as e:  # noqa: BLE001 - whatever Dask raises becomes one redacted line
        raise ValueError(redact_text(f"--scheduler: no Dask scheduler answered at {redact_url(address)} within "
                                     f"{timeout:g} s ({type(e).__name__}: {' '.join(str(e).split())[:200]})",
                                     address)) from None


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


LOST = "the connection to the scheduler was lost before this run reported"
"""The failure message :func:`submit_all` gives the calls whose result a lost scheduler took with it."""


def submit_all(address: str, calls: Sequence[tuple[str, Callable, tuple]], log: Callable[[str], None] | None = None,
               shared: str | os.PathLike | None = None, done: int = 0) -> dict[str, tuple[bool, str, object]]:
    """Each ``(key, fn, args)`` of ``calls`` as one task of the Dask scheduler at ``address`` (``fn`` and
    ``args`` picklable); returns ``{key: (ok, host, value or failure message)}``. Prints the scheduler,
    its dashboard, the workers and how many calls were submitted and ``done`` already first; a failed
    task is logged with its key and the others go on. When the connection to the scheduler is lost,
    one line says which calls had reported finishing; the others get :data:`LOST`. ``shared`` is the
    folder every worker must see (made here when missing)."""
    log = log or (lambda s: print(s, file=sys.stderr, flush=True))
    address = check_address(address)
    client = connect(address)
    lost = False
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
                if "scheduler-connection-lost" in str(e) or client.status in ("closing", "closed"):
                    lost = True
                    out[key] = (False, "?", LOST)
                    continue
                out[key] = (False, "?", f"{type(e).__name__}: {e}")
            if not out[key][0]:
                log(f"job {key} FAILED on {out[key][1]}: {out[key][2]}; the other jobs go on")
        if lost:
            ok = [k for k, _, _ in calls if out[k][0]]
            log(f"dask: lost the connection to the scheduler at {redact_url(address)}; {len(ok)} of {len(calls)} "
                f"run{'s' if len(calls) != 1 else ''} reported finishing ({', '.join(ok) or 'none'}), the others' "
                "runs may have finished on their workers")
        return {key: out[key] for key, _, _ in calls}
    finally:
        if lost:  # Dask's own reconnect and close errors would print tracebacks: the line above says it
            import logging

            for name in ["distributed", *logging.root.manager.loggerDict]:
                if name.split(".")[0] == "distributed":
                    logging.getLogger(name).setLevel(logging.CRITICAL + 1)
        client.close()


def run_jobs_on(address: str, jobs: Sequence, log: Callable[[str], None] | None = None,
                shared: str | os.PathLike | None = None, done: int = 0) -> dict[str, int]:
    """Run ``jobs`` (:class:`~bimu.experiments.jobs.Job`) as tasks of the Dask scheduler at
    ``address`` (:func:`submit_all`); returns each job's exit code by key (0 success, 1 failure: raised,
    non-zero exit, or its worker died more often than the scheduler allows;
    :data:`~bimu.experiments.jobs.HELD`: another command runs it). When the scheduler is lost, a run
    that did not report but is complete on disk counts as done, and one line lists which are not."""
    log = log or (lambda s: print(s, file=sys.stderr, flush=True))
    results = submit_all(address, [(j.key, j.fn, tuple(j.args)) for j in jobs], log, shared, done)
    by_key = {j.key: j for j in jobs}
    lost = [k for k, (ok, _, value) in results.items() if not ok and value == LOST]
    if lost:
        on_disk = [k for k in lost if _finished_on_disk(by_key[k])]
        results.update({k: (True, "?", 0) for k in on_disk})
        rest = [k for k in lost if k not in on_disk]
        log(f"dask: of the runs that did not report, finished on disk: {', '.join(on_disk) or 'none'}; not "
            f"finished: {', '.join(rest) or 'none'}" + ("; run the same command again to finish them (finished "
                                                        "runs are reused)" if rest else ""))
    codes = {}
    for key, (ok, host, value) in results.items():
        codes[key] = int(value or 0) if ok and int(value or 0) in (0, HELD) else 1
        if ok and codes[key] not in (0, HELD):
            log(f"job {key} FAILED on {host}: exit code {value}; the other jobs go on")
    return codes


def _finished_on_disk(job) -> bool:
    """Whether ``job``, a seed of ``bimu run`` / ``bimu reproduce``
    (:func:`~bimu.experiments.runner.run_config_job`), has its run complete on disk (``False`` for any
    other job: only its result could tell)."""
    from bimu.experiments.config import RunConfig
    from bimu.experiments.runner import is_complete, run_config_job

    if job.fn is not run_config_job:
        return False
    try:
        cfg = RunConfig.from_dict(job.args[0])
        return all(is_complete(cfg, s) for s in cfg.seeds)
    except (OSError, ValueError):
        return False


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

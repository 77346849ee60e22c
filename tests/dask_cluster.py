"""A real Dask cluster on loopback for the tests: ``dask scheduler`` and ``dask worker`` processes."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LoopbackCluster:
    """``dask scheduler`` on a free loopback port and ``n_workers`` ``dask worker`` processes (one thread
    each, with a nanny that restarts a killed worker; ``worker_env["wI"]`` is added to worker I's environment).
    The scheduler gives a worker one task per thread (``worker-saturation`` 1.0). Logs go to ``folder``."""

    def __init__(self, folder: Path, n_workers: int = 2, env: dict | None = None,
                 worker_env: dict[str, dict] | None = None):
        self.folder = Path(folder)
        self.port = free_port()
        self.address = f"tcp://127.0.0.1:{self.port}"
        self.env = dict(os.environ, **(env or {}))
        tests = str(Path(__file__).resolve().parent)  # workers unpickle functions of the test modules
        self.env["PYTHONPATH"] = os.pathsep.join(p for p in (tests, self.env.get("PYTHONPATH")) if p)
        self.procs: list[subprocess.Popen] = []
        self.n_workers = n_workers
        self.worker_env = worker_env or {}

    def _start(self, args, log, env=None):
        p = subprocess.Popen([sys.executable, "-m", *args], stdout=open(self.folder / log, "w"),
                             stderr=subprocess.STDOUT, env=dict(self.env, **(env or {})), start_new_session=True)
        self.procs.append(p)
        return p

    def start_worker(self, name: str, env: dict | None = None):
        """One more ``dask worker`` (with its nanny), named ``name``, with ``env`` added to its environment."""
        return self._start(["distributed.cli.dask_worker", self.address, "--nthreads", "1", "--host", "127.0.0.1",
                            "--no-dashboard", "--name", name], f"{name}.log", env)

    def __enter__(self):
        self.folder.mkdir(parents=True, exist_ok=True)
        self._start(["distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port", str(self.port),
                     "--dashboard-address", f"127.0.0.1:{free_port()}"], "scheduler.log",
                    {"DASK_DISTRIBUTED__SCHEDULER__WORKER_SATURATION": "1.0"})  # one run per worker thread
        for i in range(self.n_workers):
            self.start_worker(f"w{i}", self.worker_env.get(f"w{i}"))
        self.wait_for_workers(self.n_workers)
        return self

    def wait_for_workers(self, n: int, timeout: float = 120.0) -> None:
        from distributed import Client

        deadline = time.time() + timeout
        while True:
            try:
                with Client(self.address, timeout=5, set_as_default=False) as c:
                    c.wait_for_workers(n, timeout=max(1.0, deadline - time.time()))
                    return
            except (OSError, TimeoutError):
                if time.time() > deadline:
                    raise RuntimeError(f"dask cluster at {self.address} did not start: see {self.folder}")
                time.sleep(0.5)

    def __exit__(self, *exc):
        for p in reversed(self.procs):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGKILL)
                p.wait()

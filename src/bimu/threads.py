"""How the compiled engine's threads wait, and when a machine is too busy for more than one.

The fused engine splits a step over threads with one parallel region per step, a few microseconds of
work per thread. numba runs those regions on the OpenMP runtime that torch loads (GNU libgomp), whose
threads by default spin while they wait for the next region: on a machine with other work running, a
spinning thread takes the core its partner needs, and two threads ran at 0.1x-0.2x the speed of one
(``benchmarks/threads_under_load.py``). With ``OMP_WAIT_POLICY=passive`` waiting threads sleep instead.
The runtime reads that setting once, when it is loaded (when torch is imported), so importing bimu
sets it (:func:`passive_openmp`) unless ``OMP_WAIT_POLICY`` is set already or an OpenMP runtime is
loaded in the process (torch imported first); processes bimu starts (``--jobs``, Dask workers)
inherit it.

Even with sleeping waits, a second thread gains nothing on cores that other work keeps busy, so an
engine method on several threads runs each compiled call on one thread while the machine is busy
(:func:`busy`: more other runnable tasks than the cores its threads would leave). The results do not
depend on the number of threads either way.

>>> env = {"OMP_WAIT_POLICY": "active"}
>>> passive_openmp(env), env
(False, {'OMP_WAIT_POLICY': 'active'})
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import MutableMapping
from pathlib import Path

ENV = "OMP_WAIT_POLICY"

RECHECK_SECONDS = 0.5
"""How long a reading of the machine's load is used before :func:`busy` reads it again."""

_load: tuple[float, int] = (-float("inf"), 0)


def openmp_loaded() -> bool:
    """Whether an OpenMP runtime (or torch, which loads one) is already loaded in this process."""
    if "torch" in sys.modules:
        return True
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        return False
    return any(name in maps for name in ("libgomp", "libiomp", "libomp"))


def passive_openmp(environ: MutableMapping[str, str] = os.environ) -> bool:
    """Set ``OMP_WAIT_POLICY=passive`` in ``environ`` unless it is set or (``environ`` being the process's)
    an OpenMP runtime is loaded already; returns whether it set it."""
    if ENV in environ or (environ is os.environ and openmp_loaded()):
        return False
    environ[ENV] = "passive"
    return True


def runnable_tasks() -> int | None:
    """Tasks runnable on the machine now (``/proc/loadavg``, the caller included); ``None`` where unknown."""
    try:
        return int(Path("/proc/loadavg").read_text().split()[3].split("/")[0])
    except (OSError, ValueError, IndexError):
        return None


def busy(threads: int, cores: int | None = None) -> bool:
    """Whether ``threads`` threads of this process would compete with other work for the cores: more
    other runnable tasks (:func:`runnable_tasks` less the caller) than ``cores`` (default: those this
    process may use) less ``threads``. Read at most every :data:`RECHECK_SECONDS`; ``False`` where the
    load cannot be read.

    >>> busy(1)
    False
    """
    global _load
    if threads <= 1:
        return False
    now = time.monotonic()
    if now - _load[0] > RECHECK_SECONDS:
        _load = (now, runnable_tasks() or 1)
    cores = cores if cores is not None else len(os.sched_getaffinity(0))
    return _load[1] - 1 > cores - threads

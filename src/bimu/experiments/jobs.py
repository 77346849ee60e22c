"""A unit of work for :mod:`bimu.experiments.parallel` (processes on one machine) and
:mod:`bimu.experiments.distributed` (tasks of a Dask scheduler).

>>> Job("a", int, ("3",))()
3
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable


HELD = 75
"""The exit code of a job whose run directory another live process runs (another command sharing the
output folder): skipped here, not failed; the caller waits for it or says so."""


@dataclasses.dataclass(frozen=True)
class Job:
    """One unit of work: a unique ``key`` (for messages) and ``fn(*args) -> exit code`` (picklable when
    it runs in a child process: a module-level function and plain data)."""

    key: str
    fn: Callable[..., int]
    args: tuple = ()
    label: str = ""
    """What prefixes each line the job prints when it runs beside others (``pmnist-1000 bimu seed 1``);
    empty: its ``key``."""

    def __call__(self) -> int:
        """Run the job here."""
        return self.fn(*self.args)

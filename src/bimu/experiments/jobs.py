"""A unit of work for :mod:`bimu.experiments.parallel` (processes on one machine) and
:mod:`bimu.experiments.distributed` (tasks of a Dask scheduler).

>>> Job("a", int, ("3",))()
3
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable


@dataclasses.dataclass(frozen=True)
class Job:
    """One unit of work: a unique ``key`` (for messages) and ``fn(*args) -> exit code`` (picklable when
    it runs in a child process: a module-level function and plain data)."""

    key: str
    fn: Callable[..., int]
    args: tuple = ()

    def __call__(self) -> int:
        """Run the job here."""
        return self.fn(*self.args)

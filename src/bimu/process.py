"""Which process owns a file: an identity that tells a live owner from a dead one whose pid was reused.

A pid alone names a process only while it runs: after it dies the kernel hands the number to another
process. An :class:`Owner` records the host, the pid, the process's start time (clock ticks since boot,
field 22 of ``/proc/PID/stat``) and the boot id (``/proc/sys/kernel/random/boot_id``); it is alive
only if a process with that pid runs on this host, in this boot, and started at that moment. Where
``/proc`` is missing (not Linux) the start time and boot id are ``None`` and the pid alone decides.
Run-directory locks (:mod:`bimu.rundir`) and the temporary files of atomic writes (:mod:`bimu.atomic`)
name their owner this way.

>>> me = Owner.current()
>>> me.alive(), me.pid == os.getpid()
(True, True)
>>> Owner.parse(me.dumps()) == me
True
>>> import dataclasses
>>> dataclasses.replace(me, start=(me.start or 0) + 1).alive()  # the same pid, another process
False
>>> Owner.parse("1") is None  # not an owner record
True
"""

from __future__ import annotations

import dataclasses
import json
import os
import socket

__all__ = ["Owner", "boot_id", "pid_alive", "start_time"]


def pid_alive(pid: int) -> bool:
    """Whether a process ``pid`` exists on this host (one owned by another user counts as alive)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OverflowError:
        return False
    return True


def start_time(pid: int) -> int | None:
    """When process ``pid`` started, in clock ticks since boot (``None`` if it does not exist or there is
    no ``/proc``). The command name in ``/proc/PID/stat`` may hold spaces and parentheses, so the
    fields are counted after its last ``)``."""
    try:
        with open(f"/proc/{int(pid)}/stat", "rb") as f:
            stat = f.read()
        return int(stat[stat.rindex(b")") + 2:].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def boot_id() -> str | None:
    """This boot's id (``None`` without ``/proc``)."""
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as f:
            return f.read().strip() or None
    except OSError:
        return None


@dataclasses.dataclass(frozen=True)
class Owner:
    """One process: host, pid, start time and boot id (see the module docs)."""

    host: str
    pid: int
    start: int | None
    boot: str | None

    @classmethod
    def current(cls) -> Owner:
        """The calling process."""
        pid = os.getpid()
        return cls(socket.gethostname(), pid, start_time(pid), boot_id())

    def dumps(self) -> str:
        """One line of JSON (what a lock file holds)."""
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def parse(cls, text: str) -> Owner | None:
        """The owner written by :meth:`dumps`, or ``None`` for anything else (empty, torn, a bare pid)."""
        try:
            d = json.loads(text)
            owner = cls(str(d["host"]), int(d["pid"]), d["start"], d["boot"])
        except (ValueError, TypeError, KeyError, RecursionError):
            return None
        if not (owner.start is None or isinstance(owner.start, int)) or not (owner.boot is None
                                                                             or isinstance(owner.boot, str)):
            return None
        return owner

    def is_local(self) -> bool:
        """Whether the process ran on this host (only then can :meth:`alive` tell)."""
        return self.host == socket.gethostname()

    def alive(self) -> bool:
        """Whether this very process still runs: a process of another host is taken to be alive (it
        cannot be checked from here); on this host, one of an earlier boot is dead, and a live pid that
        started at another moment is a different process (a reused pid). Where the start time cannot be
        read, a live pid counts as alive."""
        if not self.is_local():
            return True
        if not pid_alive(self.pid):
            return False
        here = boot_id()
        if self.boot is not None and here is not None and self.boot != here:
            return False
        now = start_time(self.pid)
        return self.start is None or now is None or now == self.start

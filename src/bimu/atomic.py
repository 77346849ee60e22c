"""Atomic file writes: every file bimu writes (run directories, reports, plots, caches, exports,
installed data) goes through a temporary file in the target's folder that is flushed, fsynced and
``os.replace``-d over the target, so a crash or a kill leaves either the old file or the new one,
never a torn one, and never a temporary file behind when the write itself fails; the temporary file
of a writer killed mid-write is removed by the next write to the same folder.

>>> import tempfile
>>> from pathlib import Path
>>> d = Path(tempfile.mkdtemp())
>>> atomic_write_text(d / "sub" / "a.txt", "one\\n")  # parent folders are created
>>> (d / "sub" / "a.txt").read_text()
'one\\n'
>>> with atomic_path(d / "b.npy") as tmp:  # any writer that takes a path (the suffix is kept)
...     _ = tmp.write_bytes(b"x"); tmp.suffix
'.npy'
>>> sorted(p.name for p in d.rglob("*"))  # nothing else left behind
['a.txt', 'b.npy', 'sub']
>>> try:
...     with atomic_path(d / "a.txt") as tmp:
...         _ = tmp.write_text("half")
...         raise RuntimeError("crash mid-write")
... except RuntimeError:
...     pass
>>> (d / "sub" / "a.txt").read_text(), sorted(p.name for p in d.iterdir())  # old file kept, no temp
('one\\n', ['b.npy', 'sub'])
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

from bimu.process import Owner, start_time

__all__ = ["atomic_path", "atomic_write_bytes", "atomic_write_text", "owned_temp", "remove_orphan_temps"]


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """A temporary path beside ``path`` (same folder, same suffix, unique name) to write to; on a
    normal exit it is fsynced and replaces ``path`` (mode 0o644), on an exception it is removed and
    ``path`` is left as it was. Temporary files of killed writers found in the folder are removed
    first (see :func:`owned_temp`)."""
    p = Path(path)
    tmp = _new_temp(p)
    try:
        yield tmp
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, p)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


@contextlib.contextmanager
def owned_temp(folder: str | os.PathLike, name: str) -> Iterator[Path]:
    """An empty temporary file in ``folder`` for a file ``name`` there, removed when the block ends (if
    still there). Its name says which process made it (``.<stem>.<pid>-<start time>-<host>.<random>.tmp
    <suffix>``: :mod:`bimu.process`), so that the next write to the folder removes the temporary files
    a killed writer left behind (those whose process is gone), and only those: a live writer's, another
    host's and other files are kept.

    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp())
    >>> orphan = d / f".x.{2 ** 22 + 7}-5-{_host_tag()}.abcdefgh.tmp.json"  # no such pid: its writer died
    >>> _ = orphan.write_bytes(b"half")
    >>> with owned_temp(d, "x.json") as tmp:
    ...     orphan.exists(), tmp.exists()
    (False, True)
    >>> tmp.exists()
    False
    """
    tmp = _new_temp(Path(folder) / name)
    try:
        yield tmp
    finally:
        tmp.unlink(missing_ok=True)


_TEMP_NAME = re.compile(r"\..*\.(?P<pid>\d+)-(?P<start>\d+|x)-(?P<host>[0-9a-f]{8})\.[a-z0-9_]{8}\.tmp(\.[^.]*)?")


def _host_tag() -> str:
    return hashlib.sha1(socket.gethostname().encode()).hexdigest()[:8]


def _new_temp(p: Path) -> Path:
    """Remove the folder's orphan temporary files, then create a new one for ``p`` (see :func:`owned_temp`)."""
    p.parent.mkdir(parents=True, exist_ok=True)
    remove_orphan_temps(p.parent)
    pid = os.getpid()
    token = f"{pid}-{start_time(pid) or 'x'}-{_host_tag()}"
    fd, name = tempfile.mkstemp(dir=p.parent, prefix=f".{p.stem}.{token}.", suffix=f".tmp{p.suffix}")
    os.close(fd)
    return Path(name)


def remove_orphan_temps(folder: str | os.PathLike) -> list[Path]:
    """Remove the temporary files of :func:`owned_temp` / :func:`atomic_path` in ``folder`` whose writer
    (on this host) no longer runs; returns them."""
    removed = []
    host = _host_tag()
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return removed
    for e in entries:
        if not e.name.startswith(".") or ".tmp" not in e.name:
            continue
        m = _TEMP_NAME.fullmatch(e.name)
        if m is None or m["host"] != host:
            continue
        start = None if m["start"] == "x" else int(m["start"])
        if Owner(socket.gethostname(), int(m["pid"]), start, None).alive():
            continue
        try:
            os.unlink(e.path)
            removed.append(Path(e.path))
        except OSError:
            pass
    return removed


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (see :func:`atomic_path`)."""
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` to ``path`` atomically, UTF-8 encoded (see :func:`atomic_path`)."""
    atomic_write_bytes(path, text.encode("utf-8"))


def check_new_file(path: str | os.PathLike, overwrite: bool = False) -> Path:
    """``path`` checked before any work is done to produce it: ValueError naming it when it is a folder,
    lies under a file, or exists while ``overwrite`` is false (a command's ``--force``).

    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp())
    >>> _ = (d / "out.json").write_text("{}")
    >>> check_new_file(d / "out.json", overwrite=True) == d / "out.json"
    True
    >>> try:
    ...     check_new_file(d / "out.json")
    ... except ValueError as e:
    ...     print(str(e).replace(str(d), "D"))
    D/out.json exists; pass --force to overwrite it
    """
    p = Path(path)
    if p.is_dir():
        raise ValueError(f"{p} is a folder, not a file")
    parent = next((q for q in p.parents if q.exists()), None)
    if parent is not None and not parent.is_dir():
        raise ValueError(f"cannot write {p}: {parent} is a file, not a folder")
    if p.exists() and not overwrite:
        raise ValueError(f"{p} exists; pass --force to overwrite it")
    return p

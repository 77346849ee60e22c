"""Atomic file writes: every file bimu writes (run directories, reports, plots, caches, exports,
installed data) goes through a temporary file in the target's folder that is flushed, fsynced and
``os.replace``-d over the target, so a crash or a kill leaves either the old file or the new one,
never a torn one, and never a temporary file behind when the write itself fails.

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
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

__all__ = ["atomic_path", "atomic_write_bytes", "atomic_write_text"]


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """A temporary path beside ``path`` (same folder, same suffix, unique name) to write to; on a
    normal exit it is fsynced and replaces ``path`` (mode 0o644), on an exception it is removed and
    ``path`` is left as it was."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=p.parent, prefix=f".{p.stem}.", suffix=f".tmp{p.suffix}")
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, p)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


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

"""Private cache folders: created with mode 0700, and refused when another user could put files in them.

bimu loads code and data from its caches (generated kernel modules and numba's cache index beside
them, which numba unpickles; extracted features). A cache folder that another local user owns, or can
write to, lets that user plant a file bimu would load, and so run code as you. :func:`private_dir`
creates a missing cache folder with mode 0700 and checks an existing one, and every folder above it:
each must be owned by you (or by root, for the folders above) and not writable by group or others,
unless it has the sticky bit (as ``/tmp`` does, where others cannot rename or delete your entries).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path


class UnsafeFolderError(PermissionError):
    """A cache folder (or a folder above it) that another user owns or may write to."""


def _check(folder: Path, uid: int, is_target: bool) -> None:
    st = os.stat(folder)
    owners = (uid,) if is_target else (uid, 0)
    what = "the cache folder" if is_target else "the folder above the cache folder"
    if st.st_uid not in owners:
        raise UnsafeFolderError(f"{what} {folder} is owned by uid {st.st_uid}, not by you (uid {uid}): another user "
                                "could plant files that bimu would load; choose a folder of your own")
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and (is_target or not st.st_mode & stat.S_ISVTX):
        raise UnsafeFolderError(f"{what} {folder} is writable by other users (mode {stat.S_IMODE(st.st_mode):o}): "
                                f"they could plant files that bimu would load; chmod go-w {folder} or choose "
                                "another folder")


def private_dir(path: str | os.PathLike) -> Path:
    """The cache folder ``path`` (resolved), created with mode 0700 (and its missing parents with the
    default mode) when missing; :class:`UnsafeFolderError` when it or a folder above it is another
    user's or writable by others (see the module docstring); other OSErrors when it cannot be created.

    >>> import tempfile
    >>> d = private_dir(Path(tempfile.mkdtemp()) / "bimu" / "kernels")
    >>> oct(d.stat().st_mode & 0o777)
    '0o700'
    >>> _ = d.chmod(0o777)
    >>> private_dir(d)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    bimu.privatedir.UnsafeFolderError: the cache folder .../bimu/kernels is writable by other users (mode 777): ...
    """
    path = Path(path).expanduser()
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            pass  # created meanwhile (by another process): checked below like any existing folder
    real = Path(os.path.realpath(path))
    if not real.is_dir():
        raise NotADirectoryError(f"the cache folder {path} is not a folder")
    uid = os.getuid()
    _check(real, uid, True)
    for parent in real.parents:
        _check(parent, uid, False)
    return real

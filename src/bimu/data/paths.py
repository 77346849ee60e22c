"""Where data lives: ``--data-dir``, then ``$BIMU_DATA_DIR``, then a per-user cache directory.

>>> import os
>>> str(resolve_data_dir("/tmp/x"))
'/tmp/x'
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ENV_VAR = "BIMU_DATA_DIR"


def user_cache_dir() -> Path:
    """The per-user cache directory for bimu data (XDG on Linux, the platform's cache elsewhere)."""
    if sys.platform == "darwin":
        base = Path.home() / "Library" / "Caches"
    elif os.name == "nt":
        base = Path(os.environ.get("LOCALAPPDATA", Path.home() / "AppData" / "Local"))
    else:
        base = Path(os.environ.get("XDG_CACHE_HOME") or (Path.home() / ".cache"))
    return base / "bimu" / "data"


def resolve_data_dir(data_dir: str | os.PathLike | None = None) -> Path:
    """The data directory: the argument if given, else ``$BIMU_DATA_DIR`` if set, else the user cache."""
    if data_dir is not None and str(data_dir) != "":
        return Path(data_dir).expanduser()
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env).expanduser()
    return user_cache_dir()


def describe_resolution(data_dir: str | os.PathLike | None = None) -> str:
    """A one-line explanation of which rule chose the data directory (for error messages)."""
    if data_dir is not None and str(data_dir) != "":
        return f"{resolve_data_dir(data_dir)} (from --data-dir)"
    if os.environ.get(ENV_VAR):
        return f"{resolve_data_dir()} (from ${ENV_VAR})"
    return f"{resolve_data_dir()} (the per-user cache; set --data-dir or ${ENV_VAR} to change it)"


def locate_dataset_root(data_dir, dataset: str, subfolders, is_root, expected: str) -> Path:
    """The root of ``dataset`` under ``data_dir`` (or ``$BIMU_DATA_DIR``): the first of ``data_dir``
    and ``data_dir/<subfolder>`` for which ``is_root(path)`` holds; a clear error if there is none.

    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp()); (d / "zoo" / "train").mkdir(parents=True)
    >>> locate_dataset_root(d, "Zoo", ["zoo"], lambda c: (c / "train").is_dir(), "train/").name
    'zoo'
    """
    if data_dir is None:
        data_dir = os.environ.get(ENV_VAR)
        if not data_dir:
            raise ValueError(f"no data directory: pass data_dir or set {ENV_VAR}")
    base = Path(data_dir).expanduser()
    for cand in (base, *(base / sub for sub in subfolders)):
        if is_root(cand):
            return cand
    raise FileNotFoundError(f"{dataset} not found under {base}: expected {expected}")


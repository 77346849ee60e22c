"""numba's disk cache of the engine, kept consistent with the engine's source.

numba keys a cached function on its own source file (path, modification time, size) and its own
bytecode, and links the compiled code of every function it calls into it. A function of one engine
module that calls a function of another (every dot product goes through
:func:`bimu.engine.dots.dot8`, every random number through :mod:`bimu.rng`) would therefore keep
loading code built against an old callee after that callee changed, until its own file changed too:
after an edit, a ``git pull`` or a checkout, a run could mix old and new arithmetic. On import the
engine compares :func:`engine_digest` of its sources with the one recorded beside its cache
(:data:`STAMP`); when they differ it empties the cache index of every compiled function of
:mod:`bimu.engine` and :mod:`bimu.rng` (numba's own ``flush``) and records the new digest, so everything
compiles afresh once. Generated per-K modules carry the digest in their names instead
(:func:`bimu.engine.rowpass.generated_name`).
"""

from __future__ import annotations

import functools
import hashlib
import sys
from pathlib import Path

STAMP = "bimu-engine-source.sha256"
"""File beside the engine's numba cache holding the digest of the sources that cache was built from."""

COMPILED_MODULES = ("bimu.engine", "bimu.rng")
"""The modules (and packages) whose compiled functions the engine's kernels call."""


@functools.cache
def engine_digest() -> str:
    """SHA-256 of the source of every module of :data:`COMPILED_MODULES`. Read once per process (the
    sources a process runs do not change under it)."""
    here = Path(__file__).resolve().parent
    digest = hashlib.sha256()
    for path in sorted(here.glob("*.py")) + [here.parent / "rng.py"]:
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def engine_dispatchers() -> list:
    """Every compiled function with a disk cache in the imported modules of :data:`COMPILED_MODULES`."""
    from numba.core.caching import NullCache
    from numba.core.registry import CPUDispatcher

    found = {}
    for name, module in list(sys.modules.items()):
        if module is None or not any(name == m or name.startswith(m + ".") for m in COMPILED_MODULES):
            continue
        for value in vars(module).values():
            cache = getattr(value, "_cache", None)
            if isinstance(value, CPUDispatcher) and cache is not None and not isinstance(cache, NullCache):
                found[id(value)] = value
    return list(found.values())


def refresh_stale_cache(digest: str | None = None, dispatchers=None) -> list[Path]:
    """Empty the numba cache of ``dispatchers`` (default: :func:`engine_dispatchers`) in every cache folder
    whose recorded digest is not ``digest`` (default: the engine's sources today), and record ``digest``
    there; returns the folders emptied (none on the usual import). Never raises for file-system trouble (an
    unwritable cache only means numba recompiles, as it would anyway)."""
    import fcntl

    from bimu.atomic import atomic_write_text

    digest = engine_digest() if digest is None else digest
    by_dir: dict[Path, list] = {}
    for dispatcher in engine_dispatchers() if dispatchers is None else dispatchers:
        by_dir.setdefault(Path(dispatcher._cache._cache_path), []).append(dispatcher)
    emptied = []
    for folder, dispatchers in sorted(by_dir.items()):
        try:
            folder.mkdir(parents=True, exist_ok=True)
            with open(folder / (STAMP + ".lock"), "w") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)  # parallel jobs: one checks and empties, the others wait
                stamp = folder / STAMP
                if stamp.exists() and stamp.read_text().strip() == digest:
                    continue
                for dispatcher in dispatchers:
                    dispatcher._cache.flush()
                atomic_write_text(stamp, digest + "\n")
                emptied.append(folder)
        except OSError:
            continue
    return emptied

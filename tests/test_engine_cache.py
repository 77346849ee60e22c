"""The engine's numba cache is emptied when the engine's sources change (numba itself only checks the
file defining each function, so callers in other files kept code built against old callees)."""

import importlib.util
import sys

import numpy as np

from bimu import rng
from bimu.engine import cache, dots


def test_the_engine_cache_is_stamped_with_the_sources_it_was_built_from():
    dispatchers = cache.engine_dispatchers()
    assert dots.dot8 in dispatchers and dots.dot in dispatchers and rng.hash64 in dispatchers
    stamp = cache.Path(dots.dot._cache._cache_path) / cache.STAMP
    if stamp.exists():  # absent only where the cache folder cannot be written
        assert stamp.read_text().strip() == cache.engine_digest()
    assert cache.refresh_stale_cache() == []  # same sources: nothing emptied


def test_a_cache_built_from_other_sources_is_emptied_once(tmp_path):
    (tmp_path / "mod_cached.py").write_text(
        "from numba import njit\n\n@njit(cache=True, fastmath=False)\ndef twice(x):\n    return 2 * x\n")
    spec = importlib.util.spec_from_file_location("mod_cached", tmp_path / "mod_cached.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["mod_cached"] = mod
    try:
        spec.loader.exec_module(mod)
        assert mod.twice(np.float32(3)) == 6
        index = mod.twice._cache._cache_file
        assert index._load_index()  # compiled code on disk
        emptied = cache.refresh_stale_cache(digest="a" * 64, dispatchers=[mod.twice])
        assert [str(f) for f in emptied] == [mod.twice._cache._cache_path]
        assert index._load_index() == {}  # the code built from the old sources is gone
        stamp = cache.Path(mod.twice._cache._cache_path) / cache.STAMP
        assert stamp.read_text().strip() == "a" * 64
        assert mod.twice(np.float32(4)) == 8  # the in-memory code still runs
        assert cache.refresh_stale_cache(digest="a" * 64, dispatchers=[mod.twice]) == []  # once only
    finally:
        sys.modules.pop("mod_cached", None)

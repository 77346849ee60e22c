"""The engine's numba cache is emptied when the engine's sources change (numba itself only checks the
file defining each function, so callers in other files kept code built against old callees)."""

import importlib.util
import sys

import numpy as np
import pytest

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


@pytest.mark.parametrize("planted_by", ["another user", "anyone (mode 777)"])
def test_a_kernel_cache_folder_another_user_could_write_is_never_used(planted_by, tmp_path, monkeypatch):
    """The kernel folder is unwritable, so bimu falls back to ``$TMPDIR/bimu-kernels-<uid>``, which someone
    else made first: a module or numba cache index planted there would run as you."""
    import os
    import tempfile
    import warnings

    from bimu.engine import rowpass

    if planted_by == "another user" and os.geteuid() != 0:
        pytest.skip("giving a folder to another user needs root")
    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv("BIMU_KERNEL_DIR", str(tmp_path / "a-file" / "kernels"))  # cannot be created
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    planted = tmp_path / "tmp" / f"bimu-kernels-{os.getuid()}"
    planted.mkdir(parents=True)
    if planted_by == "another user":
        os.chown(planted, 4242, 4242)
    else:
        planted.chmod(0o777)
    name = rowpass.generated_name(1)
    monkeypatch.setattr(rowpass, "_MODULES", {})
    monkeypatch.delitem(sys.modules, name, raising=False)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        module = rowpass.generated_module(1)
    assert sys.modules[name] is module
    folder = cache.Path(module.__file__).parent
    assert folder != planted and folder.parent == tmp_path / "tmp" and folder.name.startswith("bimu-kernels-")
    assert folder.stat().st_uid == os.getuid() and folder.stat().st_mode & 0o777 == 0o700
    assert list(planted.iterdir()) == []  # nothing written into it, nothing read from it
    messages = [str(w.message) for w in caught]
    assert len(messages) == 1 and messages[0].startswith(f"the cache folder {planted} is ")
    assert messages[0].endswith("; bimu does not use it")

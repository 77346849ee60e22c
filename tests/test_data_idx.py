import gzip
import os

import numpy as np
import pytest

from bimu.data import idx
from bimu.data.idx import ChecksumError, IDXFormatError, read_idx, sha256_file, write_idx


@pytest.fixture(autouse=True)
def _fresh_cache():
    idx.clear_checksum_cache()
    yield
    idx.clear_checksum_cache()


@pytest.mark.parametrize("name", ["a-idx3-ubyte", "a-idx3-ubyte.gz"])
def test_roundtrip_raw_and_gzip(tmp_path, name):
    arr = np.arange(2 * 3 * 4, dtype=np.uint8).reshape(2, 3, 4)
    p = write_idx(tmp_path / name, arr)
    with open(p, "rb") as f:
        assert (f.read(2) == b"\x1f\x8b") == name.endswith(".gz")
    out = read_idx(p, sha256=sha256_file(p))
    assert out.dtype == np.uint8 and out.shape == (2, 3, 4)
    np.testing.assert_array_equal(out, arr)


def test_big_endian_types_roundtrip(tmp_path):
    arr = np.array([[1.5, -2.0], [3.25, 4.0]], dtype=np.float32)
    np.testing.assert_array_equal(read_idx(write_idx(tmp_path / "f.idx", arr)), arr)
    ints = np.array([1, -70000, 5], dtype=np.int32)
    np.testing.assert_array_equal(read_idx(write_idx(tmp_path / "i.idx", ints)), ints)


def test_header_bytes_are_the_idx_format(tmp_path):
    p = write_idx(tmp_path / "l.idx", np.array([7, 2, 9], dtype=np.uint8))
    assert p.read_bytes() == bytes([0, 0, 8, 1, 0, 0, 0, 3, 7, 2, 9])


def test_corrupt_file_fails_checksum_before_parsing(tmp_path):
    p = write_idx(tmp_path / "x-idx1-ubyte.gz", np.arange(10, dtype=np.uint8))
    good = sha256_file(p)
    data = bytearray(p.read_bytes())
    data[-5] ^= 0xFF
    p.write_bytes(bytes(data))
    with pytest.raises(ChecksumError, match="x-idx1-ubyte.gz.*expected sha256 " + good):
        read_idx(p, sha256=good)


def test_truncated_and_bad_magic(tmp_path):
    p = write_idx(tmp_path / "t.idx", np.arange(10, dtype=np.uint8))
    p.write_bytes(p.read_bytes()[:-3])
    with pytest.raises(IDXFormatError, match="truncated or corrupt"):
        read_idx(p)
    q = tmp_path / "m.idx"
    q.write_bytes(b"\x01\x02\x03\x04rest")
    with pytest.raises(IDXFormatError, match="bad IDX magic"):
        read_idx(q)
    g = tmp_path / "bad.gz"
    g.write_bytes(gzip.compress(b"0123456789")[:-6])
    with pytest.raises(IDXFormatError, match="cannot decompress"):
        read_idx(g)


def test_missing_file_names_it(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope-idx1-ubyte"):
        read_idx(tmp_path / "nope-idx1-ubyte")


def test_checksum_is_computed_once_per_file(tmp_path, monkeypatch):
    p = write_idx(tmp_path / "c.idx", np.arange(5, dtype=np.uint8))
    sha = sha256_file(p)
    calls = []
    real = idx.sha256_file
    monkeypatch.setattr(idx, "sha256_file", lambda path: calls.append(path) or real(path))
    for _ in range(3):
        read_idx(p, sha256=sha)
    assert len(calls) == 1
    # a rewritten file (new mtime/size) is verified again
    write_idx(p, np.arange(6, dtype=np.uint8))
    os.utime(p, ns=(1, 1))
    with pytest.raises(ChecksumError):
        read_idx(p, sha256=sha)
    assert len(calls) == 2

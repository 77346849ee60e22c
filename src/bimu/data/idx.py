"""IDX files (the MNIST format), gzipped or raw, with SHA-256 verification cached per process.

>>> import numpy as np, tempfile, os
>>> d = tempfile.mkdtemp()
>>> p = write_idx(os.path.join(d, "x-idx2-ubyte.gz"), np.arange(6, dtype=np.uint8).reshape(2, 3))
>>> read_idx(p).tolist()
[[0, 1, 2], [3, 4, 5]]
>>> read_idx(p, sha256="0" * 64)  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
bimu.data.idx.ChecksumError: checksum mismatch for ...x-idx2-ubyte.gz: expected sha256 000..., got ...
"""

from __future__ import annotations

import gzip
import hashlib
import os
import struct
import threading
from pathlib import Path

import numpy as np

from bimu.atomic import atomic_write_bytes

_DTYPES = {
    0x08: np.dtype(np.uint8),
    0x09: np.dtype(np.int8),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}
_CODES = {np.dtype(v).newbyteorder("=") if v.byteorder != "|" else v: k for k, v in _DTYPES.items()}

_VERIFIED: dict[tuple[str, int, int, str], bool] = {}
_LOCK = threading.Lock()


class ChecksumError(ValueError):
    """A file's SHA-256 differs from the pinned value (corrupt or wrong file)."""


class IDXFormatError(ValueError):
    """A file is not a well-formed IDX file (bad magic, truncated, trailing bytes)."""


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    """Hex SHA-256 of a file's bytes (as stored, i.e. of the ``.gz`` if gzipped); an OSError names the file."""
    h = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            while True:
                b = f.read(chunk)
                if not b:
                    break
                h.update(b)
    except OSError as e:  # the error names the file it could not read
        raise type(e)(e.errno, e.strerror or str(e), os.fspath(path)) from None
    return h.hexdigest()


def verify_sha256(path: str | os.PathLike, expected: str) -> None:
    """Raise :class:`ChecksumError` unless ``path`` hashes to ``expected``.

    The result is cached per process, keyed by (real path, size, mtime), so each file is hashed
    once however often it is read.
    """
    p = Path(path)
    try:
        st = p.stat()
    except FileNotFoundError:
        raise FileNotFoundError(f"missing data file {p}") from None
    key = (str(p.resolve()), st.st_size, st.st_mtime_ns, expected.lower())
    with _LOCK:
        if _VERIFIED.get(key):
            return
    got = sha256_file(p)
    if got != expected.lower():
        raise ChecksumError(f"checksum mismatch for {p}: expected sha256 {expected.lower()}, got {got} "
                            f"(the file is corrupt or not the expected one; delete it and run `bimu data fetch`)")
    with _LOCK:
        _VERIFIED[key] = True


def clear_checksum_cache() -> None:
    """Forget which files were verified (tests use this)."""
    with _LOCK:
        _VERIFIED.clear()


def _is_gzip(path: Path) -> bool:
    with open(path, "rb") as f:
        return f.read(2) == b"\x1f\x8b"


def read_idx_bytes(data: bytes, name: str = "<bytes>") -> np.ndarray:
    """Parse the bytes of an (uncompressed) IDX file into a numpy array of its native dtype."""
    if len(data) < 4:
        raise IDXFormatError(f"{name}: too short to be an IDX file ({len(data)} bytes)")
    zero, code, ndim = struct.unpack(">HBB", data[:4])
    if zero != 0 or code not in _DTYPES or ndim == 0:
        raise IDXFormatError(f"{name}: bad IDX magic {data[:4].hex()} (expected 0000 + type code + ndim)")
    header = 4 + 4 * ndim
    if len(data) < header:
        raise IDXFormatError(f"{name}: truncated IDX header")
    shape = struct.unpack(">" + "I" * ndim, data[4:header])
    dtype = _DTYPES[code]
    expected = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    body = len(data) - header
    if body != expected:
        raise IDXFormatError(f"{name}: IDX header says shape {shape} ({expected} bytes of data) "
                             f"but the file holds {body} bytes (truncated or corrupt)")
    arr = np.frombuffer(data, dtype=dtype, offset=header).reshape(shape)
    return arr.astype(dtype.newbyteorder("="), copy=True) if dtype.byteorder not in ("=", "|") else arr.copy()


def read_idx(path: str | os.PathLike, sha256: str | None = None) -> np.ndarray:
    """Read an IDX file, gzipped (detected by its magic bytes) or raw.

    ``sha256``, if given, is the expected hash of the file as stored; a mismatch raises
    :class:`ChecksumError` before parsing. A missing file raises FileNotFoundError naming it.
    """
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"missing data file {p}")
    if sha256 is not None:
        verify_sha256(p, sha256)
    try:
        if _is_gzip(p):
            with gzip.open(p, "rb") as f:
                data = f.read()
        else:
            data = p.read_bytes()
    except (OSError, EOFError, gzip.BadGzipFile) as e:
        raise IDXFormatError(f"{p}: cannot decompress ({e})") from None
    return read_idx_bytes(data, str(p))


def write_idx(path: str | os.PathLike, array: np.ndarray, compress: bool | None = None) -> Path:
    """Write ``array`` as an IDX file (gzipped if ``compress`` or if the name ends in ``.gz``)."""
    p = Path(path)
    a = np.asarray(array)
    key = a.dtype.newbyteorder("=") if a.dtype.byteorder not in ("|",) else a.dtype
    code = {np.dtype(np.uint8): 0x08, np.dtype(np.int8): 0x09, np.dtype(np.int16): 0x0B,
            np.dtype(np.int32): 0x0C, np.dtype(np.float32): 0x0D, np.dtype(np.float64): 0x0E}.get(np.dtype(key))
    if code is None:
        raise ValueError(f"cannot write dtype {a.dtype} as IDX")
    header = struct.pack(">HBB", 0, code, a.ndim) + struct.pack(">" + "I" * a.ndim, *a.shape)
    body = a.astype(_DTYPES[code], copy=False).tobytes()
    data = header + body
    if compress is None:
        compress = p.name.endswith(".gz")
    if compress:
        data = gzip.compress(data, mtime=0)
    atomic_write_bytes(p, data)
    return p

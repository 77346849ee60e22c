"""Reading files that someone else may have written: every reader here bounds what a file may cost
before reading it.

A run directory, a data file, a config or a study journal can come from another user, a shared disk or
a half-finished copy. The readers here refuse, in one line naming the file and the limit
(:class:`UntrustedFileError`, a ValueError), before anything large is allocated:

- anything but a regular file (a FIFO would block the reader forever, ``/dev/zero`` never ends);
  the file is opened non-blocking and checked with ``fstat`` on the open descriptor, so a symlink
  swapped in between cannot slip through;
- text files (JSON, JSON lines, configs, locks) larger than their limit, JSON nested deeper than
  :data:`MAX_JSON_DEPTH` and values of the wrong type (:func:`check_fields`);
- ``.npy`` arrays whose header declares more bytes than the file holds or than :func:`memory_budget`
  allows, ``.npz`` archives whose members declare more decompressed bytes than the budget (a zip bomb
  is refused from its directory, before one byte is inflated), object arrays;
- images with more pixels than :data:`MAX_IMAGE_PIXELS`.

>>> import tempfile, os
>>> p = os.path.join(tempfile.mkdtemp(), "deep.json")
>>> _ = open(p, "w").write("[" * 1000 + "]" * 1000)
>>> try:
...     read_json(p)
... except UntrustedFileError as e:
...     print(str(e).replace(p, "deep.json"))
deep.json: JSON nested deeper than 64 levels; refused
"""

from __future__ import annotations

import io
import json
import math
import os
import re
import stat
import zipfile
from collections.abc import Mapping
from typing import Any

import numpy as np

MAX_JSON_DEPTH = 64
"""Deepest nesting of lists and objects a JSON file bimu reads may have (bimu's own files use under 6)."""
MAX_JSON_BYTES = 256 * 2**20
"""Largest JSON or JSON-lines file bimu reads (a 1000-task ``metrics.jsonl`` is about 25 MB)."""
MAX_LOCK_BYTES = 4096
"""Largest ``.lock`` file (one owner line)."""
MAX_IMAGE_PIXELS = 100_000_000
"""Most pixels an image bimu reads may have (100 megapixels; a photo is 12)."""
MAX_IMAGE_BYTES = 512 * 2**20
"""Largest image file bimu reads."""
DEFAULT_BUDGET_BYTES = 8 * 2**30
"""The array budget where the available memory cannot be read (8 GiB)."""


class UntrustedFileError(ValueError):
    """A file refused before it was read: not a regular file, larger than a limit, nested too deep,
    values of the wrong type. The message is one line naming the file and the limit."""


def memory_budget() -> int:
    """Bytes the arrays of one file may take: half of the memory available now
    (:func:`available_memory_bytes`), or :data:`DEFAULT_BUDGET_BYTES` where that
    cannot be read; the environment variable ``BIMU_READ_BUDGET`` (bytes) lowers it."""

    have = available_memory_bytes()
    budget = DEFAULT_BUDGET_BYTES if have is None else have // 2
    try:
        cap = int(os.environ.get("BIMU_READ_BUDGET", "0"))
    except ValueError:
        cap = 0
    return min(budget, cap) if cap > 0 else budget


def gib(n: float) -> str:
    """Bytes as GiB (or MiB below one GiB) for messages.

    >>> gib(3 * 2**30), gib(5 * 2**20)
    ('3.0 GiB', '5.0 MiB')
    """
    return f"{n / 2**30:.1f} GiB" if n >= 2**30 else f"{n / 2**20:.1f} MiB"


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "FIFO"), (stat.S_ISCHR, "character device"), (stat.S_ISBLK, "block device"),
                       (stat.S_ISSOCK, "socket"), (stat.S_ISDIR, "directory")):
        if test(mode):
            return name
    return "special file"


def open_regular(path: str | os.PathLike) -> io.BufferedReader:
    """``path`` opened for binary reading, refused unless it is a regular file (after following
    symlinks): opened non-blocking, so that a FIFO cannot block, then checked on the open descriptor.
    FileNotFoundError and other OSErrors pass through."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0)
    fd = os.open(path, flags)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UntrustedFileError(f"{path}: not a regular file (a {_kind(st.st_mode)}); refused")
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_bytes(path: str | os.PathLike, limit: int) -> bytes:
    """The bytes of the regular file ``path`` (:func:`open_regular`), refused when larger than ``limit``."""
    with open_regular(path) as f:
        size = os.fstat(f.fileno()).st_size
        # at most one byte past what fstat reported: a read of ``limit + 1`` would reserve the whole limit
        data = f.read(size + 1) if size <= limit else b""
        if size <= limit and len(data) > size:
            raise UntrustedFileError(f"{path}: the file grew while it was read; refused")
        if size > limit or len(data) > limit:
            raise UntrustedFileError(f"{path}: {gib(max(size, len(data)))} is larger than the limit of {gib(limit)} "
                                     "for this file; refused")
        return data


def read_text(path: str | os.PathLike, limit: int = MAX_JSON_BYTES) -> str:
    """The UTF-8 text of ``path`` (:func:`read_bytes`); UntrustedFileError for bytes that are not UTF-8."""
    try:
        return read_bytes(path, limit).decode("utf-8")
    except UnicodeDecodeError as e:
        raise UntrustedFileError(f"{path}: not UTF-8 text (byte {e.start})") from None


_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.S)
_BRACKET = re.compile(r"[\[\]{}]")


def json_depth(text: str) -> int:
    """The deepest nesting of ``[`` and ``{`` in JSON ``text`` (brackets inside strings do not count).

    >>> json_depth('{"a": [1, {"b": "[[["}]}')
    3
    """
    depth = top = 0
    for m in _BRACKET.finditer(_STRING.sub('""', text)):
        depth += 1 if m.group() in "[{" else -1
        top = max(top, depth)
    return top


def loads_json(text: str, where: str, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """``json.loads(text)`` refused when nested deeper than ``max_depth``; errors name ``where``."""
    if text.count("[") + text.count("{") > max_depth and json_depth(text) > max_depth:
        raise UntrustedFileError(f"{where}: JSON nested deeper than {max_depth} levels; refused")
    try:
        return json.loads(text)
    except RecursionError:
        raise UntrustedFileError(f"{where}: JSON nested deeper than {max_depth} levels; refused") from None
    except json.JSONDecodeError as e:
        raise UntrustedFileError(f"{where}: not valid JSON ({e})") from None


def read_json(path: str | os.PathLike, *, limit: int = MAX_JSON_BYTES, max_depth: int = MAX_JSON_DEPTH,
              kind: type | tuple[type, ...] | None = None) -> Any:
    """The JSON value in the regular file ``path``, bounded in size and depth; with ``kind`` refused
    unless the value is of that type (``dict`` for bimu's files)."""
    value = loads_json(read_text(path, limit), str(path), max_depth)
    if kind is not None and not isinstance(value, kind):
        raise UntrustedFileError(f"{path}: holds a JSON {_json_type(value)}, not {_names(kind)}")
    return value


def read_jsonl(path: str | os.PathLike, *, limit: int = MAX_JSON_BYTES, max_depth: int = MAX_JSON_DEPTH) -> list[dict]:
    """The JSON objects of a JSON-lines file, one per non-blank line; a line that is not an object is
    refused naming the file and the line number."""
    out = []
    for i, line in enumerate(read_text(path, limit).splitlines(), 1):
        if line.strip():
            rec = loads_json(line, f"{path}:{i}", max_depth)
            if not isinstance(rec, dict):
                raise UntrustedFileError(f"{path}:{i}: holds a JSON {_json_type(rec)}, not an object")
            out.append(rec)
    return out


def _json_type(v: Any) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}.get(
        type(v), "number" if isinstance(v, (int, float)) else type(v).__name__)


NUMBER = (int, float)
"""A JSON number for :func:`check_fields` (``true``/``false`` are not numbers)."""


_KIND_NAMES = {int: "an integer", float: "a number", str: "a string", bool: "a boolean", dict: "an object",
               list: "an array", type(None): "null"}


def _names(kind) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if float in kinds:
        kinds = tuple(k for k in kinds if k is not int)
    return " or ".join(_KIND_NAMES.get(k, k.__name__) for k in kinds)


def check_fields(obj: Mapping[str, Any], schema: Mapping[str, Any], where: str, *, finite: bool = False) -> None:
    """UntrustedFileError naming ``where`` and the key when a key of ``schema`` present in ``obj`` holds
    a value that is not of its type (a type or a tuple of types; ``None`` is allowed wherever ``type(None)``
    is listed; a bool never counts as a number). With ``finite`` a number must also be finite."""
    for key, kind in schema.items():
        if key not in obj:
            continue
        v = obj[key]
        kinds = kind if isinstance(kind, tuple) else (kind,)
        ok = isinstance(v, kinds) and not (isinstance(v, bool) and bool not in kinds)
        if ok and finite and isinstance(v, float) and not math.isfinite(v):
            raise UntrustedFileError(f"{where}: {key!r} is {v}, not a finite number")
        if not ok:
            raise UntrustedFileError(f"{where}: {key!r} holds {_json_type(v)} {str(v)[:40]!r}, not {_names(kind)}")


# ------------------------------------------------------------------------------- arrays
def _npy_header(f, where: str) -> tuple[tuple[int, ...], np.dtype, int]:
    """``(shape, dtype, declared bytes)`` from the header of the ``.npy`` stream ``f``."""
    from numpy.lib import format as npformat

    try:
        version = npformat.read_magic(f)
        if version == (1, 0):
            shape, _, dtype = npformat.read_array_header_1_0(f, max_header_size=10000)
        elif version in ((2, 0), (3, 0)):
            shape, _, dtype = npformat.read_array_header_2_0(f, max_header_size=10000)
        else:
            raise ValueError(f"unknown .npy version {version}")
    except (ValueError, OSError, EOFError, SyntaxError, TypeError) as e:
        raise UntrustedFileError(f"{where}: not a readable .npy array ({' '.join(str(e).split())[:120]})") from None
    if dtype.hasobject:
        raise UntrustedFileError(f"{where}: holds Python objects (dtype object), which bimu does not load; "
                                 "store numeric arrays")
    n = 1
    for s in shape:
        n *= int(s)
    return tuple(int(s) for s in shape), dtype, n * dtype.itemsize


def _refuse_size(where: str, shape, need: int, have: int, what: str) -> None:
    raise UntrustedFileError(f"{where}: declares an array of shape {tuple(shape)} ({gib(need)}), more than {what} "
                             f"({gib(have)}); refused before reading")


def load_npy(path: str | os.PathLike, budget: int | None = None) -> np.ndarray:
    """The array of a ``.npy`` file, its header checked first: the bytes it declares must be in the file
    and within ``budget`` (default :func:`memory_budget`); read with ``allow_pickle=False``."""
    budget = memory_budget() if budget is None else budget
    with open_regular(path) as f:
        size = os.fstat(f.fileno()).st_size
        shape, _, need = _npy_header(f, str(path))
        have = size - f.tell()
        if need > have:
            _refuse_size(str(path), shape, need, have, "the file holds")
        if need > budget:
            _refuse_size(str(path), shape, need, budget, "the memory budget")
        f.seek(0)
        try:
            return np.load(f, allow_pickle=False)
        except (ValueError, OSError, EOFError) as e:
            raise UntrustedFileError(f"{path}: not a readable .npy array ({' '.join(str(e).split())[:120]})") from None


def check_npz(path: str | os.PathLike, budget: int | None = None) -> list[str]:
    """The array names of the ``.npz`` archive ``path`` after checking, from its zip directory and each
    member's ``.npy`` header, that loading every array costs at most ``budget`` bytes (default
    :func:`memory_budget`): each member's declared decompressed size and its array's declared bytes are
    compared with the budget before anything is inflated past a header. Regular files only."""
    budget = memory_budget() if budget is None else budget
    with open_regular(path) as f:
        try:
            with zipfile.ZipFile(f) as z:
                infos = [i for i in z.infolist() if not i.is_dir()]
                total = sum(i.file_size for i in infos)
                if total > budget:
                    big = max(infos, key=lambda i: i.file_size)
                    raise UntrustedFileError(f"{path}: its arrays expand to {gib(total)} ({big.filename}: "
                                             f"{gib(big.file_size)}), more than the memory budget ({gib(budget)}); "
                                             "refused before reading")
                names = []
                for info in infos:
                    name = info.filename[:-4] if info.filename.endswith(".npy") else info.filename
                    where = f"{path}: {name}"
                    with z.open(info) as m:
                        shape, _, need = _npy_header(m, where)
                        have = info.file_size - m.tell()
                    if need > have:
                        _refuse_size(where, shape, need, max(have, 0), "the archive member holds")
                    names.append(name)
                return names
        except (zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError, EOFError, OSError) as e:
            if isinstance(e, FileNotFoundError):
                raise
            raise UntrustedFileError(f"{path}: not a readable .npz file ({e})") from None


# ------------------------------------------------------------------------------- images
def open_image(path: str | os.PathLike, max_pixels: int = MAX_IMAGE_PIXELS, load: bool = True):
    """The PIL image in the regular file ``path`` (at most :data:`MAX_IMAGE_BYTES`), refused from its
    header when it has more than ``max_pixels`` pixels (PIL's own decompression-bomb limit is turned into
    the same one line); decoded unless ``load`` is false (then ``verify()`` may follow)."""
    import warnings

    from PIL import Image

    data = io.BytesIO(read_bytes(path, MAX_IMAGE_BYTES))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            img = Image.open(data)
            w, h = img.size
            if w * h > max_pixels:
                raise UntrustedFileError(f"{path}: a {w} x {h} image ({w * h:,} pixels) has more than the limit of "
                                         f"{max_pixels:,} pixels; refused")
            if load:
                img.load()
            return img
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as e:
        raise UntrustedFileError(f"{path}: more pixels than the limit of {max_pixels:,} ({e}); refused") from None


def is_regular_file(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a regular file (after following symlinks)."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


__all__ = ["MAX_IMAGE_BYTES", "MAX_IMAGE_PIXELS", "MAX_JSON_BYTES", "MAX_JSON_DEPTH", "NUMBER", "UntrustedFileError", "check_fields",
           "check_npz", "gib", "is_regular_file", "json_depth", "load_npy", "loads_json", "memory_budget",
           "open_image", "open_regular", "read_bytes", "read_json", "read_jsonl", "read_text"]


def available_memory_bytes() -> int | None:
    """The memory available to a new allocation (``MemAvailable`` of ``/proc/meminfo``, else the
    physical memory), or ``None`` where neither can be read."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (OSError, ValueError, AttributeError):
        return None

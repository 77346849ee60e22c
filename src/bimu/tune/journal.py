"""The journal file of a study: whole records only, and a torn tail cut before anything is appended.

Optuna's journal file holds one JSON record per line. A write cut short (a full disk, a file size
limit, a worker killed in the middle of a write) leaves a partial last line; a record appended after
it fuses with it into a line that no reader can parse, and the whole study becomes unreadable.
:class:`JournalFile`, the backend of every journal storage of ``bimu tune``, prevents that:

- it writes a batch of records with ``os.write`` on one descriptor, and when a write or the
  ``fsync`` fails (``ENOSPC``, ``EFBIG``, ``EIO``) it truncates the file back to its length before
  the batch and raises the error: the journal only ever gains whole records;
- when it opens the file, and again before every append (under the journal's lock), it cuts a
  partial last line (left by a worker killed in mid-write) and prints a warning naming the file and
  the bytes removed (:func:`repair_torn_tail`);
- it refuses, with a one-line ValueError, a journal holding an unreadable record before its last
  line (:func:`check_journal`): no repair recovers that without losing the records after it.

After the disk is freed, the same ``bimu tune`` command goes on with the study: the trial that was
running when the write failed is failed and retried (:func:`bimu.tune.storage.fail_dead_local_trials`).
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

try:  # Optuna >= 4.0
    from optuna.storages.journal import JournalFileBackend as _OptunaJournalFile
except ImportError:  # Optuna < 4.0
    from optuna.storages import JournalFileStorage as _OptunaJournalFile


CHUNK = 1 << 16
"""Bytes read at a time when looking back for the end of the last whole record."""


def _last_newline_end(fd: int, size: int) -> int:
    """Offset just past the last ``\\n`` among the first ``size`` bytes of ``fd`` (0 when there is none)."""
    end = size
    while end > 0:
        start = max(0, end - CHUNK)
        block = os.pread(fd, end - start, start)
        i = block.rfind(b"\n")
        if i >= 0:
            return start + i + 1
        end = start
    return 0


def repair_torn_tail(path: str | os.PathLike, warn=None) -> int:
    """Cut a partial last line (no final newline) from the journal at ``path``; returns the bytes removed.

    Call it under the journal's lock: the bytes after the last newline are then a record whose writer
    died in mid-write, never one being written. ``warn`` (default: print to stderr) gets a one-line
    message naming the file and the number of bytes removed.

    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "optuna.journal"
    >>> _ = p.write_bytes(b'{"op_code": 0}\\n{"op_co')
    >>> repair_torn_tail(p, warn=print)  # doctest: +ELLIPSIS
    bimu tune: warning: removed 7 bytes of a torn record (an interrupted write) from the end of .../optuna.journal
    7
    >>> p.read_bytes()
    b'{"op_code": 0}\\n'
    """
    fd = os.open(path, os.O_RDWR)
    try:
        size = os.fstat(fd).st_size
        if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
            return 0
        keep = _last_newline_end(fd, size)
        os.ftruncate(fd, keep)
        os.fsync(fd)
    finally:
        os.close(fd)
    removed = size - keep
    (warn or _print_warning)(f"bimu tune: warning: removed {removed} bytes of a torn record (an interrupted "
                             f"write) from the end of {path}")
    return removed


def _print_warning(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


_OPT_NUM = (int, float, type(None))
RECORD_FIELDS = {"op_code": int, "worker_id": str, "study_id": int, "trial_id": int, "study_name": str,
                 "directions": list, "state": int, "values": (list, type(None)), "value": _OPT_NUM,
                 "params": dict, "distributions": dict, "distribution": str, "param_name": str,
                 "param_value_internal": (int, float), "step": int, "intermediate_value": _OPT_NUM,
                 "intermediate_values": dict, "user_attr": dict, "system_attr": dict, "user_attrs": dict,
                 "system_attrs": dict, "datetime_start": (str, type(None)), "datetime_complete": (str, type(None))}
"""The types of the fields of an Optuna journal record (checked before Optuna replays the journal)."""
REQUIRED = {0: ("study_name", "directions"), 1: ("study_id",), 2: ("study_id", "user_attr"),
            3: ("study_id", "system_attr"), 4: ("study_id",), 5: ("trial_id", "param_name", "param_value_internal",
                                                                "distribution"),
            6: ("trial_id", "state"), 7: ("trial_id", "step", "intermediate_value"), 8: ("trial_id", "user_attr"),
            9: ("trial_id", "system_attr"), 10: ("study_id",)}
"""The fields each operation (``op_code`` 0..10, Optuna's ``JournalOperation``) needs."""


def check_record(record: Any, where: str) -> None:
    """ValueError naming ``where`` (file and line) unless ``record`` is an Optuna journal record: an object
    with a known ``op_code``, the fields its operation needs and fields of the right types."""
    from bimu.untrusted import check_fields

    if not isinstance(record, dict):
        raise ValueError(f"{where}: not a study journal record (a JSON {type(record).__name__}, not an object)")
    op = record.get("op_code")
    if not isinstance(op, int) or isinstance(op, bool) or op not in REQUIRED:
        raise ValueError(f"{where}: unknown journal operation op_code={op!r} (Optuna's are 0..{max(REQUIRED)})")
    missing = [k for k in REQUIRED[op] if k not in record]
    if missing:
        raise ValueError(f"{where}: the record of op_code {op} lacks {', '.join(missing)}")
    check_fields(record, RECORD_FIELDS, where)


def check_journal(path: str | os.PathLike) -> None:
    """ValueError (one line, naming the file and the line) when a whole line of the journal at ``path``
    is not a JSON record of Optuna's journal (:func:`check_record`: an operation it knows, fields of the
    right types, nesting within :data:`bimu.untrusted.MAX_JSON_DEPTH`) or the journal is not a regular
    file; a partial last line is left to :func:`repair_torn_tail`.

    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "optuna.journal"
    >>> _ = p.write_bytes(b'{"op_code": 1, "study_id": 0}\\n{"op_co{"op_code": 1}\\n')
    >>> check_journal(p)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: the study journal .../optuna.journal is corrupt at line 2 (a record cut short by an ...
    >>> _ = p.write_bytes(b'{"op_code": 99}\\n')
    >>> check_journal(p)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: the study journal .../optuna.journal:1: unknown journal operation op_code=99 (Optuna's are 0..10); ...
    """
    from bimu.untrusted import UntrustedFileError, loads_json, open_regular

    with open_regular(path) as fh:
        for number, line in enumerate(fh, start=1):
            if not line.endswith(b"\n"):
                return
            try:
                record = loads_json(line.decode("utf-8"), f"{path}:{number}")
            except UntrustedFileError as e:
                if "nested deeper" in str(e):
                    raise ValueError(f"the study journal {e}") from None
                raise ValueError(f"the study journal {path} is corrupt at line {number} (a record cut short by an "
                                 "interrupted write, with records after it); restore it from a copy or start a "
                                 "new study (another --out or --study-name)") from None
            except UnicodeDecodeError:
                raise ValueError(f"the study journal {path} is corrupt at line {number} (not UTF-8 text)") from None
            try:
                check_record(record, f"{path}:{number}")
            except ValueError as e:
                raise ValueError(f"the study journal {e}; restore it from a copy or start a new study (another "
                                 "--out or --study-name)") from None


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


class JournalFile(_OptunaJournalFile):
    """Optuna's journal file backend writing whole records only, cutting a torn tail under its lock
    before every append and refusing a corrupt journal (see :mod:`bimu.tune.journal`).

    ``JournalFile(path)`` opens (creating it if needed) the journal at ``path``; pass it to
    ``optuna.storages.JournalStorage``.
    """

    def __init__(self, file_path: str, lock_obj=None) -> None:
        super().__init__(file_path, lock_obj)
        self._locked(lambda: repair_torn_tail(self._file_path))
        check_journal(self._file_path)

    def _locked(self, fn):
        self._lock.acquire()
        try:
            return fn()
        finally:
            self._lock.release()

    def append_logs(self, logs: list[dict[str, Any]]) -> None:
        """Append ``logs`` as whole lines, or nothing at all when a write fails (the error is raised)."""
        data = "".join(json.dumps(log, separators=(",", ":")) + "\n" for log in logs).encode("utf-8")
        self._locked(lambda: self._append(data))

    def _append(self, data: bytes) -> None:
        repair_torn_tail(self._file_path)
        fd = os.open(self._file_path, os.O_WRONLY | os.O_APPEND)
        try:
            start = os.fstat(fd).st_size
            try:
                _write_all(fd, data)
                os.fsync(fd)
            except OSError:
                os.ftruncate(fd, start)  # a cut-short batch never stays in the journal
                raise
        finally:
            os.close(fd)

"""Run directories: ``<out>/<benchmark>-<method>/seed-<s>/`` with atomically written files.

Files: ``config.json`` (resolved), ``environment.json``, ``metrics.jsonl`` (one line per completed
task), ``accuracy_matrix.npy`` + ``.csv``, ``prequential.csv`` (the test-then-train predictions, when
the run records them), ``summary.json`` (written when the stream is complete),
``checkpoint.pt`` (method state + runner state after the last completed task), ``error.txt`` (the
traceback if the seed failed). Every write goes to a temporary file in the same folder, is flushed
and fsynced, then ``os.replace``-d over the target, so a crash leaves either the old or the new file.

>>> import tempfile
>>> d = RunDir(seed_dir(tempfile.mkdtemp(), "pmnist", "bimu", 3))
>>> d.path.name, d.path.parent.name
('seed-3', 'pmnist-bimu')
>>> d.write_json("x.json", {"a": 1}); d.read_json("x.json")
{'a': 1}
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import io
import json
import math
import os
import platform
import subprocess
import sys
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from bimu.atomic import atomic_write_bytes, atomic_write_text, owned_temp
from bimu.checkpoint import (CheckpointError, check_checkpoint_state, checkpoint_bytes,  # noqa: F401 - used from here
                             checkpoint_value, load_checkpoint_file)
from bimu.process import Owner, pid_alive  # noqa: F401 - pid_alive is used from here by bimu.tune
from bimu.untrusted import (MAX_LOCK_BYTES, NUMBER, UntrustedFileError, check_fields, gib, load_npy, memory_budget,
                            read_json, read_jsonl, read_text)

CONFIG = "config.json"
ENVIRONMENT = "environment.json"
METRICS = "metrics.jsonl"
MATRIX_NPY = "accuracy_matrix.npy"
MATRIX_CSV = "accuracy_matrix.csv"
SUMMARY = "summary.json"
CHECKPOINT = "checkpoint.pt"
ERROR = "error.txt"
LOCK = ".lock"
RESULT = "result.json"
"""The one file an active-learning run of ``bimu reproduce`` writes when it is done (beside its config)."""
PREQUENTIAL = "prequential.csv"
"""A run's test-then-train predictions, one row each (:mod:`bimu.experiments.prequential`)."""
CONFIG_KEYS_ADDED = {"eval_all_max": 0}
"""``config.json`` keys added after run directories were made, with the value such a run had: a
``config.json`` without one is read as having it (resume and report grouping alike)."""


METRIC_FIELDS = {"task": int, "acc": (*NUMBER, type(None)), "steps": (int, type(None)),
                 "steps_per_s": (*NUMBER, type(None)), "train_seconds": (*NUMBER, type(None)),
                 "eval_seconds": (*NUMBER, type(None)), "evaluated": (dict, type(None))}
"""The types of the fields of a ``metrics.jsonl`` record that bimu reads (checked on every read)."""
_OPT_NUMBER = (*NUMBER, type(None))
FILE_FIELDS = {
    CONFIG: {"benchmark": str, "method": str, "tasks": (int, type(None)), "seeds": list, "hidden": (list, type(None)),
             "resolved": dict, "active": (str, type(None))},
    SUMMARY: {"complete": bool, "n_tasks": int, "last_k": int, "seed": int, "last_k_acc": _OPT_NUMBER,
              "first_task_acc": _OPT_NUMBER, "mmrr": _OPT_NUMBER, "bwt": _OPT_NUMBER, "steps_per_s": _OPT_NUMBER,
              "ood_auc": (dict, type(None)), "active": (dict, type(None))},
}
"""The types of the fields bimu reads from ``config.json`` and ``summary.json`` (checked on every read)."""


class RunDirRefused(RuntimeError):
    """This command may not use the run directory: it holds another run (configuration, engine,
    stream), a checkpoint that cannot be resumed exactly, or another live process runs it. The command
    stops, and writes no ``error.txt`` there (the directory is not this command's to mark failed)."""


class RunDirInUse(RunDirRefused):
    """Another live process (``owner``, a :class:`~bimu.process.Owner`) runs this run directory: another
    command sharing the output folder, which finishes it there."""

    def __init__(self, message: str, owner: Owner):
        super().__init__(message)
        self.owner = owner


@contextlib.contextmanager
def _serialised(path: Path) -> Iterator[None]:
    """Hold an exclusive ``flock`` on the directory ``path`` (released when the block ends, or when the
    process dies); a file system without ``flock`` runs the block unserialised."""
    try:
        import fcntl
        fd = os.open(path, os.O_RDONLY)
    except (ImportError, OSError):
        yield
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError:
            pass
        yield
    finally:
        os.close(fd)


def seed_dir(out: str | os.PathLike, benchmark: str, method: str, seed: int) -> Path:
    """The directory of one seed's run."""
    return Path(out) / f"{benchmark}-{method}" / f"seed-{int(seed)}"


def find_run_dirs(paths: Iterable[str | os.PathLike], *, started_only: bool = False) -> list[Path]:
    """Every run directory (one holding a ``config.json``) under ``paths``, recursively, or the path
    itself; with ``started_only`` only those that finished a task (holding a ``metrics.jsonl``).
    A git checkout nested below a path (a folder holding ``.git``, e.g. a worktree of the code that
    trains the runs) is source, not runs, and is not searched. Sorted, each once; FileNotFoundError
    naming a path that does not exist.

    >>> import tempfile
    >>> root = Path(tempfile.mkdtemp())
    >>> for s in (0, 1):
    ...     RunDir(seed_dir(root, "pmnist", "bimu", s)).write_json(CONFIG, {"seed": s})
    >>> RunDir(seed_dir(root, "pmnist", "bimu", 1)).write_metrics([{"task": 0}])
    >>> RunDir(seed_dir(root / "code" / "results", "pmnist", "bimu", 2)).write_json(CONFIG, {"seed": 2})
    >>> _ = (root / "code" / ".git").write_text("gitdir: elsewhere")
    >>> [p.name for p in find_run_dirs([root])], [p.name for p in find_run_dirs([root], started_only=True)]
    (['seed-0', 'seed-1'], ['seed-1'])
    >>> [p.name for p in find_run_dirs([root / "code" / "results"])]
    ['seed-2']
    """
    found: set[Path] = set()
    for p in map(Path, paths):
        if not p.exists():
            raise FileNotFoundError(f"no such run directory: {p}")
        if (p / CONFIG).is_file():
            found.add(p)
            continue
        for here, dirs, files in os.walk(p):
            if CONFIG in files:
                found.add(Path(here))
            dirs[:] = sorted(d for d in dirs if not os.path.lexists(os.path.join(here, d, ".git")))
    return sorted(d for d in found if not started_only or (d / METRICS).is_file())


def _jsonable(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, (np.floating,)):
        return _jsonable(float(v))
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, np.ndarray):
        return [_jsonable(x) for x in v.tolist()]
    if isinstance(v, Mapping):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    return v


def dumps(obj: Any, indent: int | None = 2) -> str:
    """JSON text with NaN/inf written as null and numpy scalars as Python numbers."""
    return json.dumps(_jsonable(obj), indent=indent, sort_keys=False)


def git_commit(start: str | os.PathLike | None = None) -> str | None:
    """The git commit of the source tree holding bimu (``None`` if not a git checkout)."""
    start = Path(start or Path(__file__).resolve().parent)
    try:
        r = subprocess.run(["git", "-C", str(start), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5)
        if r.returncode != 0:
            return None
        commit = r.stdout.strip()
        d = subprocess.run(["git", "-C", str(start), "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True, timeout=5)
        return commit + ("-dirty" if d.returncode == 0 and d.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return None


def cpu_info() -> dict[str, Any]:
    """The processor's model name and those of its vector extensions that library kernels (BLAS, oneDNN)
    choose their code by (Linux: ``/proc/cpuinfo``; elsewhere ``platform.processor()`` and no flags): float
    results, and an active stream's decisions with them, can differ in the last bits between processor types."""
    from bimu.vectors import processor

    model, flags = processor()
    isa = {"avx", "avx2", "fma", "avx512f", "avx512_fp16", "amx_tile", "sse4_2"}
    return {"model": model or platform.processor() or None, "isa": sorted(flags & isa)}


def environment_info(seed: int, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Versions, platform, seed, commit: what ``environment.json`` records."""
    import torch

    from bimu._version import __version__

    versions = {"python": sys.version.split()[0], "bimu": __version__, "torch": torch.__version__,
                "numpy": np.__version__}
    for mod in ("numba", "matplotlib", "tqdm"):  # from the installed metadata: no import (matplotlib: ~0.1 s)
        try:
            versions[mod] = importlib.metadata.version(mod)
        except importlib.metadata.PackageNotFoundError:  # optional packages
            versions[mod] = None
    info = {"seed": int(seed), "versions": versions, "platform": platform.platform(),
            "machine": platform.machine(), "cpu": cpu_info(), "cpu_count": os.cpu_count(),
            "torch_threads": torch.get_num_threads(), "commit": git_commit(), "argv": sys.argv}
    if extra:
        info.update(extra)
    return info


class RunDir:
    """One seed's run directory (created on first write)."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)

    def file(self, name: str) -> Path:
        """Path of file ``name`` inside the directory."""
        return self.path / name

    def exists(self, name: str) -> bool:
        """Whether file ``name`` exists."""
        return self.file(name).is_file()

    def write_json(self, name: str, obj: Any) -> None:
        """Atomically write ``obj`` as JSON."""
        atomic_write_text(self.file(name), dumps(obj) + "\n")

    def read_json(self, name: str) -> Any:
        """Read a JSON object file of the directory, bounded (:func:`bimu.untrusted.read_json`: a regular
        file, size and nesting limited, an object)."""
        obj = read_json(self.file(name), kind=dict)
        if name in FILE_FIELDS:
            check_fields(obj, FILE_FIELDS[name], str(self.file(name)))
        return obj

    def write_metrics(self, records: Iterable[Mapping[str, Any]]) -> None:
        """Atomically rewrite ``metrics.jsonl`` with one line per record."""
        atomic_write_text(self.file(METRICS), "".join(dumps(r, indent=None) + "\n" for r in records))

    def read_metrics(self) -> list[dict[str, Any]]:
        """The records of ``metrics.jsonl`` (empty if absent)."""
        if not self.exists(METRICS):
            return []
        records = read_jsonl(self.file(METRICS))
        for i, rec in enumerate(records, 1):
            check_fields(rec, METRIC_FIELDS, f"{self.file(METRICS)}:{i}")
        return records

    def write_matrix(self, R: np.ndarray) -> None:
        """Atomically write the accuracy matrix as ``.npy`` and ``.csv`` (empty cells for NaN)."""
        buf = io.BytesIO()
        np.save(buf, np.asarray(R, dtype=np.float64))
        atomic_write_bytes(self.file(MATRIX_NPY), buf.getvalue())
        atomic_write_text(self.file(MATRIX_CSV), matrix_csv(R))

    def has_matrix(self) -> bool:
        """Whether :meth:`read_matrix` has something to read."""
        return self.exists(MATRIX_NPY) or (self.exists(METRICS) and self.n_tasks() is not None)

    def n_tasks(self) -> int | None:
        """The stream's number of tasks, from ``summary.json`` or ``config.json`` (``None``: neither says)."""
        for name, key in ((SUMMARY, "n_tasks"), (CONFIG, "tasks")):
            n = self.read_json(name).get(key) if self.exists(name) else None
            if isinstance(n, int) and not isinstance(n, bool):
                return n
        return None

    def read_matrix(self) -> np.ndarray:
        """The accuracy matrix: ``accuracy_matrix.npy``, or where a kept copy leaves it out, the same
        matrix rebuilt from ``metrics.jsonl`` (:func:`matrix_from_records`)."""
        if self.exists(MATRIX_NPY) or not self.has_matrix():
            n = self.n_tasks()
            budget = memory_budget() if n is None else min(memory_budget(), 8 * n * n + 1024)
            R = load_npy(self.file(MATRIX_NPY), budget=budget)
            if R.ndim != 2 or R.shape[0] != R.shape[1] or R.dtype.kind not in "fiu":
                raise UntrustedFileError(f"{self.file(MATRIX_NPY)}: not a square numeric matrix "
                                         f"(shape {R.shape}, dtype {R.dtype})")
            return R
        return matrix_from_records(self.n_tasks(), self.read_metrics())

    def save_checkpoint(self, state: Mapping[str, Any]) -> None:
        """Atomically write the checkpoint (:func:`checkpoint_bytes`)."""
        atomic_write_bytes(self.file(CHECKPOINT), checkpoint_bytes(state))

    def load_checkpoint(self) -> dict[str, Any] | None:
        """The checkpoint (:func:`load_checkpoint_file`), or ``None`` if there is none."""
        if not self.exists(CHECKPOINT):
            return None
        return load_checkpoint_file(self.file(CHECKPOINT))

    def write_error(self, text: str) -> None:
        """Record a failure's traceback in ``error.txt``."""
        atomic_write_text(self.file(ERROR), text)

    def clear_error(self) -> None:
        """Remove ``error.txt`` (a resumed run that succeeds)."""
        try:
            self.file(ERROR).unlink()
        except FileNotFoundError:
            pass

    def acquire_lock(self) -> None:
        """Claim the directory for this process: ``.lock`` names it (:class:`~bimu.process.Owner`: host,
        pid, start time, boot id).

        The lock appears with its owner already in it (written to a temporary file, then hard-linked
        into place, which fails if a lock exists), so no reader ever sees an empty lock, and claims are
        serialised by an exclusive ``flock`` on the directory, so two processes never both take over a
        stale lock. Re-entrant for the same process. Raises :class:`RunDirRefused` if another live
        process holds it; a lock of a dead process (after ``kill -9``), of an earlier boot, of a live
        process that is not the one that wrote it (a reused pid), or one that names no owner is taken over.
        """
        self.path.mkdir(parents=True, exist_ok=True)
        me = Owner.current()
        lock = self.file(LOCK)
        with _serialised(self.path):
            for _ in range(3):
                owner = self.check_lock(me)
                if owner == me:
                    return
                if lock.exists() or lock.is_symlink():
                    lock.unlink(missing_ok=True)  # stale: its owner is gone
                with owned_temp(self.path, LOCK) as tmp:
                    tmp.write_text(me.dumps() + "\n", encoding="utf-8")
                    try:
                        os.link(tmp, lock)
                    except FileExistsError:
                        continue
                    except OSError:  # a file system without hard links: the flock above serialises claims
                        os.rename(tmp, lock)
                return
        raise RunDirRefused(f"could not lock {self.path}: its .lock keeps changing")

    def check_lock(self, me: Owner | None = None) -> Owner | None:
        """Raise :class:`RunDirInUse` if a live process other than ``me`` (this process) holds ``.lock``;
        else return the lock's owner (``None`` if none)."""
        me = me or Owner.current()
        owner = self.lock_owner()
        if owner is not None and owner != me and owner.alive():
            where = "" if owner.is_local() else f" on host {owner.host}"
            raise RunDirInUse(f"{self.path} is in use by process {owner.pid}{where}; wait for it or stop it", owner)
        return owner

    def lock_owner(self) -> Owner | None:
        """The process named in ``.lock`` (it may have died: see :meth:`locked_by_live_process`), or
        ``None`` when there is no lock or it names no owner."""
        try:
            return Owner.parse(read_text(self.file(LOCK), MAX_LOCK_BYTES))
        except UntrustedFileError as e:
            raise RunDirRefused(f"{e}: a .lock must be a small regular file; remove {self.file(LOCK)} by hand "
                                "once you know what made it") from None
        except OSError:
            return None

    def lock_pid(self) -> int | None:
        """The pid of :meth:`lock_owner` (``None`` when there is no readable lock)."""
        owner = self.lock_owner()
        return None if owner is None else owner.pid

    def locked_by_live_process(self) -> bool:
        """Whether the process that wrote ``.lock`` still runs (a run in progress; see
        :meth:`bimu.process.Owner.alive`)."""
        owner = self.lock_owner()
        return owner is not None and owner.alive()

    def release_lock(self) -> None:
        """Remove ``.lock`` if this process holds it."""
        try:
            with _serialised(self.path):
                if self.lock_owner() == Owner.current():
                    self.file(LOCK).unlink(missing_ok=True)
        except (OSError, RunDirRefused):  # a lock that is no longer ours (or not a file) is not ours to remove
            pass

    def __repr__(self) -> str:
        return f"RunDir({str(self.path)!r})"


def read_prequential(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """The rows of a ``prequential.csv`` (:data:`PREQUENTIAL`) as int64 arrays ``example``, ``task`` (from
    1), ``correct``, the float64 ``window_acc`` and the ``window`` it is over, from the last column's name
    ``acc_last_W`` (arrays empty and ``window`` None when there is no file);
    :class:`~bimu.untrusted.UntrustedFileError` for a file that is not one (other columns, a bad row).

    >>> import tempfile
    >>> p = Path(tempfile.mkdtemp()) / PREQUENTIAL
    >>> _ = p.write_text("example,task,correct,acc_last_100\\n0,1,0,0.0000\\n5,1,1,0.5000\\n")
    >>> curve = read_prequential(p)
    >>> {k: v.tolist() for k, v in curve.items() if k != "window"}, curve["window"]
    ({'example': [0, 5], 'task': [1, 1], 'correct': [0, 1], 'window_acc': [0.0, 0.5]}, 100)
    """
    names = ("example", "task", "correct", "window_acc")
    if not Path(path).exists():
        return {**{k: np.zeros(0, np.float64 if k == "window_acc" else np.int64) for k in names}, "window": None}
    size, budget = os.path.getsize(path), memory_budget()  # read() sizes its buffer by the limit: the file's
    if size > budget // 4:  # text, then a float64 row of four per ~20 bytes
        raise UntrustedFileError(f"{path}: {gib(size)} is more than this machine's budget for it ({gib(budget // 4)})")
    text = read_text(path, size)
    head, _, body = text.partition("\n")
    cols = head.strip().split(",")
    if cols[:3] != ["example", "task", "correct"] or len(cols) != 4 or not cols[3].startswith("acc_last_") \
            or not cols[3][9:].isdigit():
        raise UntrustedFileError(f"{path}: not a prequential curve (columns {head.strip()[:80]!r})")
    try:
        a = np.loadtxt(io.StringIO(body), delimiter=",", dtype=np.float64, ndmin=2).reshape(-1, 4)
    except ValueError as e:
        raise UntrustedFileError(f"{path}: a row that is not four numbers ({e})") from None
    ints = a[:, :3]
    if not np.isfinite(a).all() or (ints != np.round(ints)).any() or (ints[:, :2] < 0).any():
        raise UntrustedFileError(f"{path}: a row whose example, task or correct is not a whole number")
    return {"example": ints[:, 0].astype(np.int64), "task": ints[:, 1].astype(np.int64),
            "correct": ints[:, 2].astype(np.int64), "window_acc": a[:, 3].copy(), "window": int(cols[3][9:])}


def matrix_csv(R) -> str:
    """The accuracy matrix as CSV text: six decimals, an empty cell for NaN. Only the cells that hold a
    number are formatted, so a 1000-task matrix (mostly empty) is written in milliseconds.

    >>> matrix_csv(np.array([[0.5, np.nan], [0.25, 1.0]])).splitlines()
    ['0.500000,', '0.250000,1.000000']
    """
    R = np.asarray(R, dtype=np.float64)
    lines = []
    for row in R:
        cells = [""] * len(row)
        for j in np.flatnonzero(~np.isnan(row)):
            cells[j] = f"{row[j]:.6f}"
        lines.append(",".join(cells))
    return "\n".join(lines) + "\n"


def matrix_from_records(n_tasks: int, records: Iterable[Mapping[str, Any]]) -> np.ndarray:
    """The accuracy matrix that a stream's records describe, exactly: ``R[t, j]`` is record ``t``'s
    ``evaluated[str(j)]``, NaN where nothing was evaluated.

    >>> matrix_from_records(2, [{"task": 0, "evaluated": {"0": 0.5}},
    ...                         {"task": 1, "evaluated": {"0": 0.25, "1": 1.0}}]).tolist()
    [[0.5, nan], [0.25, 1.0]]
    """
    R = np.full((int(n_tasks), int(n_tasks)), np.nan)
    for rec in records:
        if not 0 <= int(rec["task"]) < n_tasks:
            raise ValueError(f"a record is for task {rec['task']}, outside a stream of {n_tasks} tasks")
        for j, acc in rec.get("evaluated", {}).items():
            R[int(rec["task"]), int(j)] = float(acc)
    return R


def compact_checkpoint(state: Mapping[str, Any]) -> dict[str, Any]:
    """A stream's checkpoint without the accuracy matrix ``R`` that its records rebuild exactly
    (:func:`full_checkpoint`): 1 MB instead of 10 MB for 1000 tasks."""
    out = dict(state)
    if "R" in out and "records" in out and "n_tasks" in out and np.array_equal(
            np.asarray(out["R"], dtype=np.float64), matrix_from_records(out["n_tasks"], out["records"]), equal_nan=True):
        del out["R"]
    return out


def full_checkpoint(state: Mapping[str, Any]) -> dict[str, Any]:
    """Inverse of :func:`compact_checkpoint` (a checkpoint that holds ``R`` is returned as it is)."""
    out = dict(state)
    if "R" not in out and "records" in out and "n_tasks" in out:
        out["R"] = matrix_from_records(int(out["n_tasks"]), out["records"])
    return out

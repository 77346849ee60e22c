"""Copy run directories from a computing folder into the tracked ``results/reproduce-full/runs``, or back.

    python scripts/keep_runs.py SRC DST [--partial] [--compact]

SRC and DST are ``bimu reproduce --out`` folders (their runs lie under ``SRC/runs``). A run directory is
copied whole: the copy is built beside the target and swapped in, so that a target never mixes files of
two runs. A finished run (``summary.json`` says complete; an active-learning run: its ``result.json`` is
written) is copied without its checkpoint and lock; with ``--partial`` an unfinished run is copied *with*
its ``checkpoint.pt``, which git ignores, so that it can be force-added at the end of a sitting
(``git add -f``) and resumed by the next one (see ``results/reproduce-full/runs/README.md``).

What is never replaced:

- a finished run by an unfinished one;
- an unfinished run by one with no more progress (fewer or as many lines of ``metrics.jsonl``, then an
  older or equal checkpoint): a second computing folder seeded from DST holds an older copy of a run the
  first one goes on training;
- a finished run by a *different* finished run: reported as ``conflict`` and left for a person to decide.

With ``--compact`` (copying into the repository) a copy leaves out what the run's ``metrics.jsonl``
rebuilds exactly: ``accuracy_matrix.npy`` (8 MB for 1000 tasks) and the accuracy matrix inside the
checkpoint (``bimu.rundir.compact_checkpoint``: 10 MB -> 1 MB), so that the checkpoints an unfinished
run leaves in the repository stay small. Without it, a copy has both again (``full_checkpoint``) and
its numpy values written as plain pickled numpy, the form every bimu version reads: the frozen code a
queue trains with predates the tagged numpy values of ``bimu.rundir.checkpoint_bytes`` and reads those
as dicts (``load_checkpoint_file`` reads both forms).

The same script seeds a computing folder from the repository (``keep_runs.py results/reproduce-full OUT
--partial``): finished runs are reused, a kept checkpoint resumes, and a run trained further in OUT stays.
"""

import filecmp
import io
import shutil
import sys
from pathlib import Path

import numpy as np

from bimu.rundir import (CHECKPOINT, MATRIX_NPY, CheckpointError, METRICS, RESULT, SUMMARY, RunDir, checkpoint_bytes,
                         compact_checkpoint, find_run_dirs, full_checkpoint, load_checkpoint_file,
                         matrix_from_records)


def _finished(rd: RunDir) -> bool:
    """Whether ``rd`` holds a finished run (``summary.json`` says complete; an active-learning run: its
    ``result.json`` is written)."""
    return bool((rd.exists(SUMMARY) and rd.read_json(SUMMARY).get("complete")) or rd.exists(RESULT))


def _files(d: Path, done: bool) -> list[Path]:
    """The files of run directory ``d`` that a copy carries: no dot files (the lock, atomic writes in
    flight), no checkpoint once the run is finished."""
    return sorted(f for f in d.iterdir()
                  if f.is_file() and not f.name.startswith(".") and not (done and f.name == CHECKPOINT))


def _progress(d: Path) -> tuple[int, float]:
    """How far the unfinished run in ``d`` has come: lines of its metrics, then its checkpoint's time."""
    metrics, ckpt = d / METRICS, d / CHECKPOINT
    lines = sum(1 for _ in metrics.open("rb")) if metrics.exists() else 0
    return lines, ckpt.stat().st_mtime if ckpt.exists() else 0.0


def _same(src: Path, target: Path) -> bool:
    """Whether ``target`` holds exactly the finished run of ``src`` (same files, same bytes; an
    ``accuracy_matrix.npy`` that one side leaves out is rebuilt from that side's metrics)."""
    mine, theirs = _files(src, True), _files(target, True)
    if ({f.name for f in mine} ^ {f.name for f in theirs}) - {MATRIX_NPY}:
        return False
    if not all(filecmp.cmp(f, target / f.name, shallow=True) for f in mine
               if f.name != MATRIX_NPY and (target / f.name).exists()):
        return False
    return np.array_equal(RunDir(src).read_matrix(), RunDir(target).read_matrix(), equal_nan=True) \
        if RunDir(src).has_matrix() or RunDir(target).has_matrix() else True


def _rebuilt_exactly(d: Path) -> bool:
    """Whether ``d``'s ``accuracy_matrix.npy`` equals the matrix its ``metrics.jsonl`` rebuilds."""
    rd = RunDir(d)
    if not rd.exists(METRICS):
        return False
    kept = np.load(rd.file(MATRIX_NPY))
    try:
        rebuilt = matrix_from_records(kept.shape[0], rd.read_metrics())
    except (ValueError, KeyError, TypeError, IndexError):
        return False
    return rd.n_tasks() == kept.shape[0] and np.array_equal(kept, rebuilt, equal_nan=True)


def _replace(src: Path, target: Path, done: bool, compact: bool = False) -> None:
    """Make ``target`` a copy of run directory ``src``: built beside it, then swapped in. With
    ``compact`` the copy leaves out what ``metrics.jsonl`` rebuilds exactly (the matrix file, the
    checkpoint's matrix); without it, it has both."""
    tmp, old = target.with_name(f".{target.name}.new"), target.with_name(f".{target.name}.old")
    for p in (tmp, old):
        shutil.rmtree(p, ignore_errors=True)
    tmp.mkdir(parents=True)
    for f in _files(src, done):
        if f.name == MATRIX_NPY and compact and _rebuilt_exactly(src):
            continue
        if f.name == CHECKPOINT:
            try:
                state = load_checkpoint_file(f)
            except CheckpointError:  # copied as it is: resuming from it names the problem
                state = None
            if state is not None:
                (tmp / f.name).write_bytes(checkpoint_bytes(compact_checkpoint(state)) if compact
                                           else checkpoint_bytes(full_checkpoint(state), tagged=False))
                shutil.copystat(f, tmp / f.name)
                continue
        shutil.copy2(f, tmp / f.name)
    rd = RunDir(tmp)
    if not compact and not rd.exists(MATRIX_NPY) and rd.has_matrix():
        buf = io.BytesIO()
        np.save(buf, rd.read_matrix())
        rd.file(MATRIX_NPY).write_bytes(buf.getvalue())
        if rd.exists(METRICS):
            shutil.copystat(rd.file(METRICS), rd.file(MATRIX_NPY))
    if target.exists():
        target.rename(old)
    tmp.rename(target)
    shutil.rmtree(old, ignore_errors=True)


def keep(src: Path, dst: Path, partial: bool, compact: bool = False) -> list[str]:
    """Copy the runs of ``src`` into ``dst``; return one line per run copied or in conflict."""
    lines = []
    for d in find_run_dirs([src / "runs"]):
        if any(part.startswith(".") for part in d.relative_to(src).parts):
            continue  # a copy left half-built by an interrupted keep
        rd = RunDir(d)
        done = _finished(rd)
        if not done and not (partial and rd.exists(CHECKPOINT)):
            continue
        target = dst / d.relative_to(src)
        there = target.exists() and _finished(RunDir(target))
        if done and there:
            if not _same(d, target):
                lines.append(f"conflict {target}: a different finished run is there, not replaced")
            continue
        if not done and (there or (target.exists() and _progress(target) >= _progress(d))):
            continue
        _replace(d, target, done, compact)
        lines.append(("finished " if done else "partial  ") + str(target))
    return lines


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a not in ("--partial", "--compact")]
    if len(args) != 2:
        sys.exit(__doc__)
    print("\n".join(keep(Path(args[0]), Path(args[1]), "--partial" in sys.argv, "--compact" in sys.argv)))

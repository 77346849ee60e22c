"""Copy run directories from a computing folder into the tracked ``results/reproduce-full/runs``.

    python scripts/keep_runs.py SRC DST [--partial]

SRC and DST are ``bimu reproduce --out`` folders (their runs lie under ``SRC/runs``). A finished run
(``summary.json`` says complete; an active-learning run: its ``result.json`` is written) is copied
without its checkpoint and lock; with ``--partial`` an
unfinished run is copied *with* its ``checkpoint.pt``, which git ignores, so that it can be
force-added at the end of a sitting (``git add -f``) and resumed by the next one
(see ``results/reproduce-full/runs/README.md``). An unfinished run is not copied over a finished one, nor
over a checkpoint at least as new (a second computing folder seeded from DST holds an older copy of
a run the first one goes on training).
"""

import shutil
import sys
from pathlib import Path

from bimu.rundir import CHECKPOINT, RESULT, SUMMARY, RunDir, find_run_dirs


def _finished(rd: RunDir) -> bool:
    """Whether ``rd`` holds a finished run (``summary.json`` says complete; an active-learning run: its
    ``result.json`` is written)."""
    return bool((rd.exists(SUMMARY) and rd.read_json(SUMMARY).get("complete")) or rd.exists(RESULT))


def _newer_or_finished(target: RunDir, checkpoint: Path) -> bool:
    """Whether ``target`` holds a finished run or a checkpoint no older than ``checkpoint``."""
    if _finished(target):
        return True
    mine = target.path / CHECKPOINT
    return mine.exists() and mine.stat().st_mtime >= checkpoint.stat().st_mtime


def keep(src: Path, dst: Path, partial: bool) -> list[str]:
    """Copy the runs of ``src`` into ``dst``; return one line per copied run."""
    lines = []
    for d in find_run_dirs([src / "runs"]):
        rd = RunDir(d)
        done = _finished(rd)
        if not done and not (partial and rd.exists(CHECKPOINT)):
            continue
        target = dst / d.relative_to(src)
        if not done and _newer_or_finished(RunDir(target), d / CHECKPOINT):
            continue
        target.mkdir(parents=True, exist_ok=True)
        for f in d.iterdir():  # dot files: the lock and atomic writes in flight
            if f.is_file() and not f.name.startswith(".") and not (done and f.name == CHECKPOINT):
                shutil.copy2(f, target / f.name)
        if done:
            (target / CHECKPOINT).unlink(missing_ok=True)
        lines.append(("finished " if done else "partial  ") + str(target))
    return lines


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--partial"]
    if len(args) != 2:
        sys.exit(__doc__)
    print("\n".join(keep(Path(args[0]), Path(args[1]), "--partial" in sys.argv)))

"""Copy run directories from a computing folder into the tracked ``results/reproduce-full/runs``.

    python scripts/keep_runs.py SRC DST [--partial]

SRC and DST are ``bimu reproduce --out`` folders (their runs lie under ``SRC/runs``). A finished run
(``summary.json`` says complete) is copied without its checkpoint and lock; with ``--partial`` an
unfinished run is copied *with* its ``checkpoint.pt``, which git ignores, so that it can be
force-added at the end of a sitting (``git add -f``) and resumed by the next one
(see ``results/reproduce-full/runs/README.md``).
"""

import json
import shutil
import sys
from pathlib import Path


def keep(src: Path, dst: Path, partial: bool) -> list[str]:
    """Copy the runs of ``src`` into ``dst``; return one line per copied run."""
    lines = []
    for cfg in sorted((src / "runs").rglob("config.json")):
        d = cfg.parent
        summary = d / "summary.json"
        done = summary.is_file() and json.loads(summary.read_text()).get("complete")
        if not done and not (partial and (d / "checkpoint.pt").is_file()):
            continue
        target = dst / d.relative_to(src)
        target.mkdir(parents=True, exist_ok=True)
        for f in d.iterdir():
            skip = f.name == ".lock" or f.name.startswith(".") or (done and f.name == "checkpoint.pt")
            if f.is_file() and not skip:
                shutil.copy2(f, target / f.name)
        if done:
            (target / "checkpoint.pt").unlink(missing_ok=True)
        lines.append(("finished " if done else "partial  ") + str(target))
    return lines


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--partial"]
    if len(args) != 2:
        sys.exit(__doc__)
    print("\n".join(keep(Path(args[0]), Path(args[1]), "--partial" in sys.argv)))

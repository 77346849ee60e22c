"""Peak resident memory of a short `bimu run pmnist`: this checkout against a baseline commit, in one run.

Workload: ``bimu run pmnist --method bimu --tasks 3 --threads 1`` (784-100-10, K = 5, batch size 1, the
full 60,000 training and 10,000 test images per task, the accuracy matrix and the Fashion-MNIST OOD
scores after every task; ``--tasks``, ``--train-limit`` and ``--test-limit`` change it). Each version runs
in its own process, ``python -m bimu`` with ``PYTHONPATH`` at its ``src``: this checkout's, and the
baseline's from a temporary ``git worktree`` of ``--baseline`` (default :data:`BASELINE`, the commit
before the memory work), removed afterwards. Each version first runs the same command once with one
task of 200 examples, so that the measured run finds its kernels compiled, as every run after a
version's first does. A process's peak is its ``ru_maxrss`` (``os.wait4``). Prints the peak of
``import torch, numba, bimu.cli`` alone (the floor both share), both peaks, their ratio, and whether the
two runs wrote the same accuracy matrix and records (the fields both write, times left out).

    BIMU_DATA_DIR=../shared/data python benchmarks/peak_memory.py [--baseline REF] [--tasks 3]
        [--train-limit N] [--test-limit N]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
BASELINE = "deddc485924a2d6249e7665e10006e0ad006f98c"
"""The commit before the memory work (tasks gathered from uint8 images, arrays dropped between tasks)."""
WARMUP_ARGS = ["--tasks", "1", "--train-limit", "200", "--test-limit", "200"]
"""The warm-up run of each version: the measured run's kernels, on a few examples."""
_TIMES = ("seconds", "steps_per_s")


def peak_mib(argv: list[str], src: Path, cwd: Path) -> float:
    """Run ``python argv`` with ``PYTHONPATH=src`` in ``cwd``; its peak RSS in MiB (RuntimeError with the
    end of its output if it fails)."""
    env = {**os.environ, "PYTHONPATH": str(src), "OMP_NUM_THREADS": "1"}
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen([sys.executable, *argv], cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            out.seek(0)
            tail = out.read().decode(errors="replace")[-3000:]
            raise RuntimeError(f"{' '.join(argv)} (PYTHONPATH={src}) exited with {proc.returncode}:\n{tail}")
    return usage.ru_maxrss / 1024.0


def run_args(args, out: Path, extra: list[str] | None = None) -> list[str]:
    """``-m bimu run pmnist ...`` for the measured run (or with ``extra`` options) into ``out``."""
    argv = ["-m", "bimu", "run", "pmnist", "--method", "bimu", "--threads", "1", "--no-progress",
            "--out", str(out), "--tasks", str(args.tasks)]
    for flag, value in (("--train-limit", args.train_limit), ("--test-limit", args.test_limit)):
        if value is not None:
            argv += [flag, str(value)]
    return argv + (extra or [])


def results(out: Path) -> tuple[list[dict], np.ndarray]:
    """The records (times left out) and the accuracy matrix a run wrote into ``out``."""
    (seed_dir,) = out.glob("*/seed-0")
    records = [{k: v for k, v in json.loads(line).items() if not any(t in k for t in _TIMES)}
               for line in (seed_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    return records, np.load(seed_dir / "accuracy_matrix.npy")


def same_records(a: list[dict], b: list[dict]) -> bool:
    """Whether two runs' records agree on every field both write (a newer version may add fields).

    >>> same_records([{"acc": 0.5, "new": 1}], [{"acc": 0.5}]), same_records([{"acc": 0.5}], [{"acc": 0.6}])
    (True, False)
    """
    return len(a) == len(b) and all(all(ra[k] == rb[k] for k in ra.keys() & rb.keys()) for ra, rb in zip(a, b))


def measure(args, src: Path, work: Path, name: str) -> tuple[float, tuple[list[dict], np.ndarray]]:
    """Warm-up run, then the measured run of the version at ``src``: ``(peak MiB, its results)``."""
    peak_mib(run_args(args, work / f"{name}-warmup", WARMUP_ARGS), src, work)
    out = work / name
    return peak_mib(run_args(args, out), src, work), results(out)


def git(*args: str, cwd: Path = ROOT) -> str:
    """``git -C cwd args``' output (RuntimeError with git's message if it fails)."""
    r = subprocess.run(["git", "-C", str(cwd), *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)}: {r.stderr.strip()}")
    return r.stdout.strip()


def baseline_worktree(ref: str, where: Path) -> Path:
    """A detached worktree of ``ref`` at ``where`` holding only ``src`` (what the run imports)."""
    git("worktree", "add", "--detach", "--no-checkout", str(where), ref)
    git("checkout", ref, "--", "src", cwd=where)
    return where


def main(argv: list[str] | None = None) -> int:
    """Measure both versions and print the peaks and their ratio."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--baseline", default=BASELINE, help="git revision to compare with (default: %(default)s)")
    p.add_argument("--tasks", type=int, default=3, help="tasks of the measured run (default 3)")
    p.add_argument("--train-limit", type=int, help="training examples per task (default all 60,000)")
    p.add_argument("--test-limit", type=int, help="test and OOD examples (default all 10,000)")
    args = p.parse_args(argv)
    ref = git("rev-parse", "--short", f"{args.baseline}^{{commit}}")
    work = Path(tempfile.mkdtemp(prefix="bimu-peak-memory-"))
    tree = work / "baseline"
    try:
        floor = peak_mib(["-c", "import torch, numba, bimu.cli"], ROOT / "src", work)
        before, before_results = measure(args, baseline_worktree(ref, tree) / "src", work, "before")
        after, after_results = measure(args, ROOT / "src", work, "after")
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], capture_output=True)
        subprocess.run(["git", "-C", str(ROOT), "worktree", "prune"], capture_output=True)
        shutil.rmtree(work, ignore_errors=True)
    same = same_records(before_results[0], after_results[0]) and np.array_equal(
        before_results[1], after_results[1], equal_nan=True)
    print(f"workload: bimu run pmnist {' '.join(run_args(args, Path('OUT'))[4:])}")
    for label, mib in (("imports alone", floor), (f"before ({ref})", before), ("after (this tree)", after)):
        print(f"{label:<20}: {mib:7.1f} MiB peak RSS")
    print(f"{'ratio after/before':<20}: {after / before:.3f}")
    print(f"{'same results':<20}: {'yes' if same else 'NO'}")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())

"""What keeps a run's peak memory down: the stream holds no task's arrays once the task is learned, nor
OOD inputs between evaluations; and benchmarks/peak_memory.py at its smallest settings (both peaks in
one run, their ratio, the same results)."""

import os
import re
import subprocess
import sys
import weakref
from pathlib import Path

import pytest
import torch

from bimu import create_method
from bimu.experiments.stream import run_stream
from repo_scripts import load

ROOT = Path(__file__).resolve().parents[1]


def has_commit(rev: str) -> bool:
    """Whether the repository holds commit ``rev`` (not in a shallow clone that stops after it)."""
    return subprocess.run(["git", "-C", str(ROOT), "cat-file", "-e", f"{rev}^{{commit}}"],
                          capture_output=True).returncode == 0


class TrackedBench:
    """Two tasks of random inputs; every tensor it hands out is tracked, and each new task's build checks
    that the run let go of the earlier task's inputs and of the OOD inputs."""

    name, n_features, n_classes, n_tasks, is_standin = "tracked", 4, 2, 2, True

    def __init__(self):
        self.train, self.ood, self.alive_at_build = [], [], []

    def _make(self, seed, n, refs):
        x = torch.randn(n, 4, generator=torch.Generator().manual_seed(seed))
        refs.append(weakref.ref(x))
        return x

    def train_task(self, task, seed):
        self.alive_at_build.append(sum(r() is not None for r in self.train + self.ood))
        return self._make(task, 40, self.train), torch.arange(40) % 2

    def test_task(self, task):
        return torch.randn(10, 4, generator=torch.Generator().manual_seed(100 + task)), torch.arange(10) % 2

    def ood_set(self):
        return self._make(7, 10, self.ood)


def test_the_stream_lets_go_of_task_inputs_and_ood_inputs():
    bench = TrackedBench()
    result = run_stream(bench, create_method("sgd", [4, 2], seed=0), seed=0, progress=False)
    assert [r["task"] for r in result["records"]] == [0, 1]
    assert result["records"][-1]["ood_auc"] is not None  # the OOD inputs were scored after each task
    assert len(bench.ood) == 3  # asked once whether there is an OOD set, then at each of the 2 evaluations
    assert bench.alive_at_build == [0, 0]
    assert all(r() is None for r in bench.train + bench.ood)


@pytest.mark.skipif(not (Path(os.environ.get("BIMU_DATA_DIR", "")) / "mnist").is_dir(),
                    reason="needs MNIST under $BIMU_DATA_DIR")
@pytest.mark.skipif(not has_commit(load("benchmarks/peak_memory.py").BASELINE),
                    reason="needs the git repository with the baseline commit (run from a worktree of it)")
def test_peak_memory_smoke_prints_both_peaks_their_ratio_and_the_same_results():
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "peak_memory.py"), "--tasks", "1",
                        "--train-limit", "100", "--test-limit", "100"], capture_output=True, text=True, timeout=1200)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == ("workload: bimu run pmnist --method bimu --threads 1 --no-progress --out OUT --tasks 1 "
                        "--train-limit 100 --test-limit 100")
    number = r" +([0-9.]+) MiB peak RSS"
    floor = float(re.fullmatch(r"imports alone +:" + number, lines[1])[1])
    before = float(re.fullmatch(r"before \([0-9a-f]{7,}\) +:" + number, lines[2])[1])
    after = float(re.fullmatch(r"after \(this tree\) +:" + number, lines[3])[1])
    ratio = float(re.fullmatch(r"ratio after/before +: ([0-9.]+)", lines[4])[1])
    assert ratio == pytest.approx(after / before, abs=1e-3)
    assert lines[5] == "same results        : yes"
    # the baseline widened the 47 million training pixels to int64 to count them (360 MiB at once)
    assert floor < after < before - 200
    assert "bimu-peak-memory-" not in subprocess.run(["git", "-C", str(ROOT), "worktree", "list"],
                                                     capture_output=True, text=True).stdout

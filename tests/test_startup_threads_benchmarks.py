"""benchmarks/cold_start.py and benchmarks/threads_under_load.py with their smallest settings: each runs in
one go and prints its table in the stated format (the numbers themselves are not checked)."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NUM = r"[0-9]+\.[0-9]+"

pytestmark = pytest.mark.skipif(not (Path(os.environ.get("BIMU_DATA_DIR", "")) / "mnist").is_dir(),
                                reason="needs MNIST under $BIMU_DATA_DIR")


def _run(script: str, *args: str) -> list[str]:
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), *args], capture_output=True, text=True,
                       timeout=1200)
    assert r.returncode == 0, r.stderr
    return r.stdout.splitlines()


def test_cold_start_prints_the_three_cases_the_warmup_and_the_verdicts():
    lines = _run("cold_start.py", "--method", "sgd", "--warmup-methods", "sgd", "--examples", "20")
    assert lines[0].startswith("bimu run pmnist --method sgd --tasks 1 --train-limit 20 --test-limit 20 ")
    assert lines[1].startswith("machine: ") and lines[2].startswith("before: load ")
    assert lines[3].startswith("after:  load ")
    assert lines[4].split() == ["seconds", "(wall", "/", "CPU)", "ready", "first", "step", "whole", "run"]
    for line, case in zip(lines[5:8], ("cold cache (first run)", "warm cache", "after bimu warmup")):
        assert re.fullmatch(rf"{re.escape(case)} +(?:{NUM} +){{5}}{NUM}", line), line
    assert re.fullmatch(rf"bimu warmup \(sgd\) +{NUM} +{NUM}", lines[8])
    assert re.fullmatch(rf"cold / warm \(wall\): first step {NUM}x, whole run {NUM}x", lines[9])
    verdict = rf"{NUM} s wall, {NUM} s CPU: (within|over) the \d+ s target \(CPU time (within|over)\)"
    assert re.fullmatch(rf"first run: first step {verdict}; compiling announced: (yes|no)", lines[10])
    assert re.fullmatch(rf"warm: first step {verdict}", lines[11])
    ready, first, end = (float(v) for v in lines[6].split()[2::2])  # the warm run's wall times, in order
    assert ready <= first <= end


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="two engine threads need two cores")
def test_threads_under_load_prints_a_row_per_setting():
    lines = _run("threads_under_load.py", "--steps", "50", "--rounds", "1", "--settings", "passive",
                 "active no fallback")
    assert lines[0].startswith("BiMU pmnist-100, 784-100-10, K=5, batch 1, MNIST; 50 steps per measurement, 1 ")
    assert lines[1].startswith("machine: ") and lines[2].startswith("before: load ")
    assert lines[4].split() == ["setting", "free", "1t", "free", "2t", "2t/1t", "(range)", "load", "1t", "load",
                                "2t", "2t/1t", "(range)"]
    cell = rf"\d+ +\d+ +{NUM}x \({NUM}-{NUM}\)"
    assert re.fullmatch(rf"passive +{cell} +{cell}", lines[5]), lines[5]
    assert re.fullmatch(rf"active no fallback +{cell} +{cell}", lines[6]), lines[6]
    assert len(lines) == 7

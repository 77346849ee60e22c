"""The on-device active stream (bimu.reproduce.device_stream): a short prefix of a real stream through the C
learner's host build beside the Python learner, the compact-lambda rounding, and the committed
``on-device-stream`` table rebuilt from its run files."""

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from bimu.reproduce.device_stream import INT16_FRACTION_BITS, c_stream, python_stream, quantiser

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "results" / "reproduce-full" / "runs" / "full" / "on-device-stream"
needs_cc = pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler (cc) on PATH")


@pytest.fixture(scope="module")
def prefix():
    """The first two Permuted-MNIST tasks, 100 training and 200 test examples each (real data), as a
    784 -> 10 head's stream."""
    if not os.environ.get("BIMU_DATA_DIR"):
        pytest.skip("BIMU_DATA_DIR is not set (MNIST)")
    from bimu.data.benchmarks import get_benchmark
    from bimu.data.views import LimitedBenchmark

    return LimitedBenchmark(get_benchmark("pmnist", n_tasks=2), n_tasks=2, train_limit=100, test_limit=200)


@needs_cc
def test_float64_c_learner_queries_and_learns_exactly_as_python(prefix):
    kw = dict(preset="pmnist-100", mc_samples=2, threshold=0.5, seed=3)
    py = python_stream(prefix, dtype="float64", **kw)
    c = c_stream(prefix, double=True, **kw)
    assert 0 < py["labels_queried"] < py["examples_seen"] == 200
    assert c["queried_digest"] == py["queried_digest"] and c["labels_queried"] == py["labels_queried"]
    assert c["lambda_hash"] == py["lambda_hash"]  # the same final lambda to the bit
    assert c["accuracy_matrix"] == py["accuracy_matrix"] and len(c["accuracy_matrix"]) == 2
    assert c["accuracy"] == py["accuracy"] == pytest.approx(np.mean(py["accuracy_matrix"][-1]))


def test_compact_lambda_rounding():
    a = np.array([0.1, -0.30000001, 1e-4, 40.0, -40.0, 3.14159], dtype=np.float32)
    b = a.copy()
    quantiser("int16")(b)
    step = 2.0 ** -INT16_FRACTION_BITS
    assert b.dtype == np.float32 and np.all(np.abs(b[:3] - a[:3]) <= step / 2)
    assert b[3] == 32767 * step and b[4] == -32768 * step  # saturating
    assert np.all(np.round(b / step) == b / step)
    c = a.copy()
    quantiser("float16")(c)
    assert np.array_equal(c, a.astype(np.float16).astype(np.float32))
    assert quantiser(None) is None
    with pytest.raises(ValueError, match="compact format"):
        quantiser("int8")


@pytest.mark.skipif(not RUNS.is_dir(), reason="the committed on-device-stream runs are not here")
def test_committed_table_rebuilds_from_its_run_files(tmp_path):
    """The committed full-scale runs: float64 C queried exactly what float64 Python queried, and
    ``--from-runs`` rebuilds the table from the run files alone."""
    from bimu.cli import main

    res = {p.parent.name: json.loads((p / "result.json").read_text()) for p in RUNS.glob("*/seed-0")}
    assert res["c-float64"]["queried_digest"] == res["python-float64"]["queried_digest"]
    assert res["c-float64"]["examples_seen"] == res["python-float64"]["examples_seen"] > 50_000
    shutil.copytree(RUNS, tmp_path / "runs" / "full" / "on-device-stream")
    assert main(["reproduce", "on-device-stream", "--scale", "full", "--out", str(tmp_path), "--from-runs"]) == 0
    md = (tmp_path / "on-device-stream.md").read_text()
    assert "C learner (host build) | float64 | float64" in md and "same queries" in md

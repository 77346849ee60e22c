"""benchmarks/scale_out.py --smoke: one quick reproduction on one Dask worker, then two (real worker
processes of a LocalCluster); prints both times and their ratio and finds the tables identical."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("distributed")
ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(not (Path(os.environ.get("BIMU_DATA_DIR", "")) / "mnist").is_dir(),
                    reason="needs MNIST under $BIMU_DATA_DIR")
def test_scale_out_smoke_prints_the_speedup_of_two_workers_over_one():
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "scale_out.py"), "--smoke"], capture_output=True,
                       text=True, timeout=900)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[-5].startswith("memory-window --scale quick, 1 seed, rows bimu-N100 bimu-N700; load ")
    t1 = float(re.fullmatch(r"1 worker : +([0-9.]+) s", lines[-4])[1])
    t2 = float(re.fullmatch(r"2 workers: +([0-9.]+) s", lines[-3])[1])
    speedup = float(re.fullmatch(r"speedup  : +([0-9.]+)x", lines[-2])[1])
    assert speedup == pytest.approx(t1 / t2, rel=0.01, abs=0.01)
    assert lines[-1] == "tables identical"
    assert sum("2 runs submitted (0 already done)" in line for line in lines) == 2

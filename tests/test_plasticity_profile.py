"""scripts/plasticity_profile.py: the per-range plasticity, last-5, MMRR ends and BWT terms of a run."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import plasticity_profile  # noqa: E402 - scripts/ is not a package


def _run(tmp_path, last_row=(0.2, 0.3, 0.4, 0.5, 0.45, 0.4)):
    from bimu.rundir import RunDir

    R = np.full((6, 6), np.nan)
    np.fill_diagonal(R, [0.9, 0.8, 0.7, 0.6, 0.5, 0.4])
    R[1, 0] = 0.95  # the best entry is not on the diagonal
    R[-1] = last_row
    run = RunDir(tmp_path / "seed-0")
    run.write_matrix(R)
    run.write_metrics([{"task": t, "acc": R[t, t]} for t in range(6)])
    return run.path, R


def test_numbers_by_hand_and_bwt_is_the_difference_of_its_two_means(tmp_path, capsys):
    from bimu.metrics import bwt

    path, R = _run(tmp_path)
    assert plasticity_profile.main([str(path), "--bounds", "1,3,6,10", "--paper-mmrr", "2"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"{path} (6 tasks)",
        "  right after training, tasks 1: 90.00, 2-3: 75.00, 4-6: 50.00",
        "  after the stream, the last five tasks: 30.00 / 40.00 / 50.00 / 45.00 / 40.00 (mean 41.00)",
        "  best accuracy of the matrix 95.00, the last task's 40.00: 55.0 points below",
        "  BWT -0.3300 = 37.00 (tasks 1-5 after the stream) - 70.00 (right after training)",
        "  the paper's MMRR 2 puts its last task 50.0 points below its best"]
    p = plasticity_profile.profile(str(path))
    assert p["final_mean"] - p["just_mean"] == pytest.approx(bwt(R))


def test_bwt_pairs_only_the_tasks_evaluated_after_the_stream(tmp_path, capsys):
    from bimu.metrics import bwt

    path, R = _run(tmp_path, last_row=(np.nan, 0.3, 0.4, 0.5, 0.45, 0.4))  # task 1 not evaluated at the end
    assert plasticity_profile.main([str(path)]) == 0
    assert capsys.readouterr().out.splitlines()[4] == (
        "  BWT -0.2375 = 41.25 (the 4 of tasks 1-5 evaluated after the stream) - 65.00 (right after training)")
    p = plasticity_profile.profile(str(path))
    assert p["final_mean"] - p["just_mean"] == pytest.approx(bwt(R))


def test_bad_input_is_one_line_before_any_work(tmp_path):
    path, _ = _run(tmp_path, last_row=(0.2, 0.3, np.nan, 0.5, 0.45, 0.4))
    script = [sys.executable, str(ROOT / "scripts" / "plasticity_profile.py")]
    for args, message in [([str(tmp_path)], f"{tmp_path}: no metrics.jsonl (not a run directory)"),
                          ([str(path)], f"{path}: the last row of its accuracy matrix is incomplete (an unfinished run?)"),
                          ([str(path), "--bounds", "3,1"], "--bounds: '3,1' is not increasing task numbers from 1, "
                                                           "comma-separated"),
                          ([str(path), "--paper-mmrr", "-1"], "--paper-mmrr: '-1' is not a positive number")]:
        done = subprocess.run(script + args, capture_output=True, text=True, cwd=ROOT,
                              env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"})
        assert done.returncode != 0 and done.stderr.strip() == message and done.stdout == ""


def test_final_bounds_average_the_final_row_and_count_the_recent_tasks_above_half(tmp_path, capsys):
    path, _ = _run(tmp_path, last_row=(0.2, 0.6, 0.4, 0.55, 0.6, 0.7))  # task 2 above 50% but not recent
    assert plasticity_profile.main([str(path), "--final-bounds", "3,6"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[3] == "  after the stream, tasks 1-3: 40.00, 4-6: 61.67; the 3 most recent tasks above 50%"
    assert len(lines) == 6  # without --final-bounds the line is not printed
    assert plasticity_profile.main([str(path)]) == 0
    assert not any("most recent" in line for line in capsys.readouterr().out.splitlines())


def test_final_bounds_refuse_a_range_not_evaluated_after_the_stream(tmp_path):
    path, _ = _run(tmp_path, last_row=(np.nan, 0.3, 0.4, 0.5, 0.45, 0.4))
    with pytest.raises(SystemExit, match="a range has tasks not evaluated after the stream"):
        plasticity_profile.main([str(path), "--final-bounds", "1,6"])

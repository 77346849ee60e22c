"""The tuning objective H, weight and matrix validation, storage specs and config checks (no Optuna)."""

import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from bimu import tune
from bimu.tune import (
    TuneConfig,
    check_weights,
    h_per_task,
    objective_h,
    postgres_driver_url,
    redact_url,
    storage_kind,
    tune_benchmark_options,
)

NAN = float("nan")
# R[i, j] = accuracy on task j after learning task i (above the diagonal: not learned yet).
R = [[0.9, NAN, NAN],
     [0.8, 0.95, NAN],
     [0.6, 0.7, 0.9]]


def test_h_per_task_by_hand():
    # H_0 = .5*.9 + .25*.9 + .25*.9
    # H_1 = .5*.8 + .25*(.8+.95)/2 + .25*.95 = .4 + .21875 + .2375
    # H_2 = .5*.6 + .25*(.6+.7+.9)/3 + .25*.9 = .3 + .18333.. + .225
    expected = [0.9, 0.85625, 0.3 + 2.2 / 12 + 0.225]
    np.testing.assert_allclose(h_per_task(R), expected, rtol=0, atol=1e-12)
    assert objective_h(R) == pytest.approx(0.7083333333333333, abs=1e-12)
    assert objective_h(R, reduce="mean") == pytest.approx(sum(expected) / 3, abs=1e-12)


def test_weights_select_terms():
    assert objective_h(R, weights=(1, 0, 0)) == pytest.approx(0.6)       # Acc_0 after the last task
    assert objective_h(R, weights=(0, 1, 0)) == pytest.approx(2.2 / 3)   # mean accuracy
    assert objective_h(R, weights=(0, 0, 1)) == pytest.approx(0.9)       # current task
    assert objective_h([[0.42]]) == pytest.approx(0.42)                  # a single task


@pytest.mark.parametrize("weights, message", [
    ((0.5, 0.5, -0.0001), "non-negative"),
    ((1.0, 1.0, 1.0), "sum to 1"),
    ((0.5, 0.5), "three numbers"),
    ((0.5, math.nan, 0.5), "finite"),
    ((0, 0, 0), "all be zero"),
    (("a", 1, 2), "three numbers"),
])
def test_bad_weights(weights, message):
    with pytest.raises(ValueError, match=message):
        check_weights(weights)
    with pytest.raises(ValueError, match=message):
        TuneConfig("pmnist", "bimu", weights=weights).resolved()


def test_weights_summing_to_one_up_to_rounding_are_accepted():
    assert check_weights([1 / 3, 1 / 3, 1 / 3]) == (1 / 3, 1 / 3, 1 / 3)


@pytest.mark.parametrize("matrix, message", [
    ([[0.5, 0.5]], "square"),
    ([[0.5, NAN], [NAN, 0.5]], "NaN"),
    ([[90.0, NAN], [80.0, 95.0]], "fractions"),
    (np.zeros((0, 0)), "square"),
])
def test_bad_matrix(matrix, message):
    with pytest.raises(ValueError, match=message):
        objective_h(matrix)


def test_bad_reduction():
    with pytest.raises(ValueError, match="reduce"):
        objective_h(R, reduce="max")


def test_storage_specs():
    assert storage_kind(None) == "journal"
    assert storage_kind("journal:/tmp/x.log") == "journal"
    assert storage_kind("some/dir/study.journal") == "journal"
    assert storage_kind("sqlite:///x.db") == "rdb"
    assert storage_kind("postgresql+psycopg2://u:p@127.0.0.1/db") == "rdb"
    for bad in ("redis://localhost:6379", "http://example.org/study", "s3://bucket/x"):
        with pytest.raises(ValueError, match="unknown storage scheme"):
            storage_kind(bad)
    assert tune.journal_path(None, "out") == Path("out") / tune.JOURNAL_FILENAME
    assert tune.journal_path("journal:/a/b.log", "out") == Path("/a/b.log")
    assert redact_url("postgresql://u:secret@h:1/db") == "postgresql://u:***@h:1/db"
    assert redact_url("sqlite:///x.db") == "sqlite:///x.db"
    assert postgres_driver_url("mysql://u@h/db") == "mysql://u@h/db"
    url = postgres_driver_url("postgres://u@h/db")
    assert url.startswith("postgresql") and url.endswith("://u@h/db")


def test_config_checks():
    c = TuneConfig("pmnist", "bimu").resolved()
    assert c.study_name == "pmnist-bimu"
    assert c.out_dir == str(Path("runs") / "tune" / "pmnist-bimu")
    assert c.benchmark_options == {"n_tasks": 10, "validation": True}
    assert c.grace_period == 2 * c.heartbeat_interval
    assert TuneConfig("other", "bimu").resolved().benchmark_options == {"validation": True}
    with pytest.raises(ValueError, match="validation split"):
        TuneConfig("pmnist", "bimu", benchmark_options={"validation": False}).resolved()
    with pytest.raises(ValueError, match="trials"):
        TuneConfig("pmnist", "bimu", trials=0).resolved()
    with pytest.raises(ValueError, match="grace period"):
        TuneConfig("pmnist", "bimu", heartbeat_interval=10, grace_period=5).resolved()
    with pytest.raises(ValueError, match="pruner"):
        TuneConfig("pmnist", "bimu", pruner="hyperband").resolved()
    assert tune_benchmark_options("pmnist", {"n_tasks": 3}) == {"n_tasks": 3, "validation": True}


def test_module_works_without_optuna_and_cli_says_how_to_install(tmp_path):
    """``import bimu.tune`` needs no Optuna; ``bimu tune`` then names the extra."""
    src = Path(tune.__file__).resolve().parents[2]
    code = (
        "import sys; sys.modules['optuna'] = None\n"
        "from bimu import tune\nfrom bimu.tune import cli as tune_cli\n"
        "assert tune.objective_h([[0.5]]) == 0.5\n"
        f"sys.exit(tune_cli.main(['blobs', '--method', 'bimu', '--evaluator', 'synthetic', '--out', {str(tmp_path)!r}]))\n"
    )
    env = dict(os.environ, PYTHONPATH=str(src))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "pip install 'bimu[tune]'" in proc.stderr

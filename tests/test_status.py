"""bimu status: run states, progress and time left read from run directories."""

import json
import os

import pytest

from bimu.cli import main
from bimu.process import Owner, start_time
from bimu.rundir import RunDir, seed_dir
from bimu.rundir import find_run_dirs
from bimu.experiments.status import format_status, seed_status


def _run(root, method, seed, tasks=5, done=0, *, rate=1000.0, seconds=2.0, complete=False, error=None,
         lock_pid=None):
    rd = RunDir(seed_dir(root, "pmnist", method, seed))
    rd.write_json("config.json", {"benchmark": "pmnist", "method": method, "tasks": tasks})
    rd.write_metrics([{"task": t, "steps": 100, "acc": 0.5 + 0.1 * t, "train_seconds": seconds,
                       "eval_seconds": 0.5, "steps_per_s": rate + t} for t in range(done)])
    if complete:
        rd.write_json("summary.json", {"complete": True, "n_tasks": tasks})
    if error:
        rd.write_error(f"Traceback (most recent call last):\n  ...\n{error}\n")
    if lock_pid is not None:
        me = Owner.current()
        rd.file(".lock").write_text(Owner(me.host, lock_pid, start_time(lock_pid), me.boot).dumps())
    return rd.path


def test_states_progress_and_time_left(tmp_path):
    _run(tmp_path, "bimu", 0, done=3, lock_pid=os.getpid())
    _run(tmp_path, "bimu", 1, done=2)
    _run(tmp_path, "sgd", 0, done=1, error="ValueError: labels out of range")
    _run(tmp_path, "mesu", 0)
    _run(tmp_path, "ste", 0, done=5, complete=True)
    by = {(s["method"], os.path.basename(s["path"])): s for s in map(seed_status, find_run_dirs([tmp_path]))}
    assert by[("bimu", "seed-0")]["state"] == "running"
    assert by[("bimu", "seed-1")]["state"] == "stopped"
    assert by[("sgd", "seed-0")]["state"] == "failed"
    assert by[("sgd", "seed-0")]["error"] == "ValueError: labels out of range"
    assert by[("mesu", "seed-0")]["state"] == "not started"
    assert by[("ste", "seed-0")]["state"] == "complete" and by[("ste", "seed-0")]["seconds_left"] == 0.0
    running = by[("bimu", "seed-0")]
    assert running["tasks_done"] == 3 and running["tasks"] == 5 and running["last_acc"] == pytest.approx(0.7)
    assert running["steps_per_s"] == 1001.0  # median of 1000, 1001, 1002
    assert running["seconds_per_task"] == 2.5 and running["seconds_left"] == 5.0  # 2 tasks x (2 + 0.5) s
    assert running["seconds_spent"] == 7.5  # 3 tasks done x (2 + 0.5) s
    assert by[("mesu", "seed-0")]["seconds_left"] is None and by[("mesu", "seed-0")]["steps_per_s"] is None


def test_an_active_learning_run_is_complete_once_its_result_is_written(tmp_path):
    done, started = (RunDir(tmp_path / "animals-al" / "bimu-vr-0.3" / f"seed-{s}") for s in (0, 1))
    for rd in (done, started):
        rd.write_json("config.json", {"benchmark": "animals-ti", "method": "bimu", "strategy": "vr"})
    done.write_json("result.json", {"accuracy": 0.468, "seed": 0, "per_task_accuracy": [0.5, 0.4, 0.5]})
    a, b = seed_status(done.path), seed_status(started.path)
    assert (a["state"], a["last_acc"], a["seconds_left"]) == ("complete", 0.468, 0.0)
    assert (a["tasks_done"], a["tasks"]) == (3, 3)  # the tasks of its stream, from the result
    assert (b["state"], b["last_acc"]) == ("not started", None)


def test_a_lock_left_by_a_dead_process_is_not_running(tmp_path):
    dead = 2 ** 22 + 12345  # above the default pid_max: no such process
    p = _run(tmp_path, "bimu", 0, done=2, lock_pid=dead)
    assert seed_status(p)["state"] == "stopped"


def test_recent_rate_uses_the_last_tasks_only(tmp_path):
    rd = RunDir(seed_dir(tmp_path, "pmnist", "bimu", 0))
    rd.write_json("config.json", {"benchmark": "pmnist", "method": "bimu", "tasks": 100})
    slow = [{"task": t, "acc": 0.9, "train_seconds": 100.0, "eval_seconds": 0.0, "steps_per_s": 10.0} for t in range(20)]
    fast = [{"task": 20 + t, "acc": 0.9, "train_seconds": 1.0, "eval_seconds": 0.0, "steps_per_s": 1000.0}
            for t in range(10)]
    rd.write_metrics(slow + fast)
    s = seed_status(rd.path)
    assert s["steps_per_s"] == 1000.0 and s["seconds_left"] == 70.0


def test_table_orders_by_state_and_totals_the_work_left(tmp_path):
    _run(tmp_path, "ste", 0, done=5, complete=True)
    _run(tmp_path, "bimu", 0, tasks=1000, done=1, seconds=3.5, lock_pid=os.getpid())  # 999 x 4 s left
    _run(tmp_path, "sgd", 0, done=1, error="RuntimeError: boom")
    text = format_status([seed_status(p) for p in find_run_dirs([tmp_path])], [tmp_path])
    lines = text.splitlines()
    assert lines[0].split() == ["run", "state", "tasks", "last", "acc", "steps/s", "spent", "left"]
    assert lines[1].startswith("pmnist-bimu/seed-0") and "running" in lines[1] and "1/1000" in lines[1]
    assert lines[1].split()[-4:] == ["4", "s", "1.1", "h"]  # spent 1 task x 4 s, left 999 x 4 s
    assert lines[2].startswith("pmnist-sgd/seed-0") and "failed" in lines[2]
    assert lines[3].startswith("pmnist-ste/seed-0") and "complete" in lines[3]
    assert "pmnist-sgd/seed-0: RuntimeError: boom" in text
    assert lines[-1] == "3 runs: 1 running, 1 failed, 1 complete; work left: 1.1 h of one core"


def test_cli_table_json_and_errors(tmp_path, capsys):
    _run(tmp_path, "bimu", 0, done=2)
    assert main(["status", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "pmnist-bimu/seed-0" in out and "stopped" in out and "2/5" in out
    assert main(["status", str(tmp_path), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data[0]["state"] == "stopped" and data[0]["tasks_done"] == 2
    assert main(["status", str(tmp_path / "missing")]) == 2
    assert "no such run directory" in capsys.readouterr().err
    bad = tmp_path / "corrupt" / "seed-0"
    bad.mkdir(parents=True)
    (bad / "config.json").write_text("{not json")
    assert main(["status", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "not a readable run directory" in err and "config.json" in err

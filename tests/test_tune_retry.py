"""Trials whose worker died are marked FAIL and retried; the budget race leaves no extra result."""

import math
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

optuna = pytest.importorskip("optuna")

from bimu import tune  # noqa: E402
from bimu.tune import search  # noqa: E402
from bimu.tune import spaces as ss  # noqa: E402

TS = optuna.trial.TrialState


def fake_evaluate(method_name, hparams, seed, benchmark_options):
    """Instant 2-task accuracy matrix depending on lr."""
    acc = 0.5 + 0.4 * math.exp(-(math.log(hparams["lr"]) - math.log(5.0)) ** 2 / 8)
    return np.array([[acc, np.nan], [acc, acc]])


def open_study(config):
    c = config.resolved()
    return optuna.load_study(study_name=c.study_name, storage=tune.make_storage(c))


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def start_trial(study, pid):
    """A trial as a worker leaves it when it is killed mid-evaluation."""
    trial = study.ask()
    ss.suggest_hparams("bimu", trial)
    trial.set_user_attr("bimu_worker", {"host": socket.gethostname(), "pid": pid})
    return trial


@pytest.mark.filterwarnings("ignore:Heartbeat of storage")  # the test asks a trial by hand on purpose
def test_stale_heartbeat_on_rdb_is_failed_and_retried(tmp_path):
    config = tune.TuneConfig("blobs", "bimu", trials=1, storage=f"sqlite:///{tmp_path / 'study.db'}",
                             out_dir=str(tmp_path), heartbeat_interval=1, grace_period=2, poll_interval=0.2)
    tune.run_tune(config, evaluate=fake_evaluate)
    study = open_study(config)
    died = study.ask()                       # a worker on another machine starts a trial ...
    params = ss.suggest_hparams("bimu", died)
    study._storage.record_heartbeat(died._trial_id)
    time.sleep(2.5)                          # ... and stops beating for longer than the grace period

    result = tune.run_tune(tune.TuneConfig(**{**vars(config), "trials": 2}), evaluate=fake_evaluate)
    trials = {t.number: t for t in open_study(config).get_trials()}
    assert trials[died.number].state == TS.FAIL
    (retry,) = [t for t in trials.values() if t.system_attrs.get("failed_trial") == died.number]
    assert retry.state == TS.COMPLETE and retry.params == params
    assert retry.number in result.completed_here
    assert sum(t.state == TS.COMPLETE for t in trials.values()) == 2


def test_dead_local_worker_on_a_journal_is_failed_and_retried(tmp_path):
    config = tune.TuneConfig("blobs", "bimu", trials=2, out_dir=str(tmp_path), poll_interval=0.2)
    tune.run_tune(tune.TuneConfig(**{**vars(config), "trials": 1}), evaluate=fake_evaluate)
    died = start_trial(open_study(config), dead_pid())

    result = tune.run_tune(config, evaluate=fake_evaluate)
    trials = {t.number: t for t in open_study(config).get_trials()}
    assert trials[died.number].state == TS.FAIL
    (retry,) = [t for t in trials.values() if t.system_attrs.get("failed_trial") == died.number]
    assert retry.state == TS.COMPLETE and retry.params == trials[died.number].params
    assert result.completed_here == [retry.number] and result.n_finished == 2


def test_retries_are_bounded(tmp_path):
    config = tune.TuneConfig("blobs", "bimu", trials=1, out_dir=str(tmp_path), max_retry=0, poll_interval=0.2)
    tune.run_tune(tune.TuneConfig(**{**vars(config), "trials": 1}), evaluate=fake_evaluate)
    died = start_trial(open_study(config), dead_pid())
    tune.fail_dead_local_trials(open_study(config), max_retry=0)
    trials = open_study(config).get_trials()
    assert trials[died.number].state == TS.FAIL
    assert not [t for t in trials if t.state == TS.WAITING]


def test_a_live_worker_holds_its_slot_and_its_death_frees_it(tmp_path):
    config = tune.TuneConfig("blobs", "bimu", trials=1, out_dir=str(tmp_path), poll_interval=0.2, timeout=1.0)
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        tune.run_tune(tune.TuneConfig(**{**vars(config), "trials": 1, "timeout": None}), evaluate=fake_evaluate)
        busy = start_trial(open_study(config), sleeper.pid)
        waiting = tune.run_tune(tune.TuneConfig(**{**vars(config), "trials": 2}), evaluate=fake_evaluate)
        assert waiting.completed_here == []      # the last slot is held by a live worker: wait, don't steal
    finally:
        sleeper.kill()
        sleeper.wait()
    done = tune.run_tune(tune.TuneConfig(**{**vars(config), "trials": 2, "timeout": None}), evaluate=fake_evaluate)
    trials = open_study(config).get_trials()
    assert trials[busy.number].state == TS.FAIL and len(done.completed_here) == 1
    assert sum(t.state == TS.COMPLETE for t in trials) == 2


def test_a_trial_past_the_budget_is_failed_before_evaluating(tmp_path, monkeypatch):
    """Two workers racing for the last slot: the later trial stops at once, marked over budget."""
    config = tune.TuneConfig("blobs", "bimu", trials=1, out_dir=str(tmp_path), poll_interval=0.2, timeout=1.0)
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    real_counts = search._counts

    def racy_counts(study):  # until this worker asks, its looks miss the other worker's fresh trial
        counts = real_counts(study)
        if len(study.get_trials(deepcopy=False)) == 1:
            counts["running"] = 0
        return counts

    calls = []

    def evaluate(*args):
        calls.append(args)
        return fake_evaluate(*args)

    try:
        study = optuna.create_study(storage=tune.make_storage(config.resolved()), study_name="blobs-bimu",
                                    direction="maximize")
        start_trial(study, sleeper.pid)          # the other worker holds the only slot
        monkeypatch.setattr(search, "_counts", racy_counts)
        result = tune.run_tune(config, evaluate=evaluate)
    finally:
        sleeper.kill()
        sleeper.wait()
    assert calls == [] and result.completed_here == [] and result.failed_here == []
    over = [t for t in open_study(config).get_trials() if t.user_attrs.get("bimu_over_budget")]
    assert len(over) == 1 and over[0].state == TS.FAIL

import json
import os
import subprocess
import sys
import textwrap
import types

import numpy as np
import pytest
import torch

from bimu.experiments import runner
from bimu.experiments.config import RunConfig
from bimu.process import Owner, start_time
from bimu.rundir import RunDir, RunDirRefused, seed_dir
from bimu.experiments.runner import run_experiment
from bimu.experiments.schedule import EvalSchedule
from bimu.experiments.stream import eval_generator, run_stream
from bimu.methods import create_method
from test_runner_fakes import N_CLASSES, N_FEATURES, BoundedBiMU, FakeBenchmark, strip_timing

SIZES = [N_FEATURES, N_CLASSES]


def method(seed=0):
    return create_method("bimu", SIZES, seed, preset="pmnist-100")


def test_stream_fills_schedule_and_records():
    b = FakeBenchmark(n_tasks=4)
    res = run_stream(b, method(), EvalSchedule(final="last", final_last=2), seed=0, progress=False)
    R = res["R"]
    expected = np.zeros((4, 4), bool)
    expected[np.diag_indices(4)] = True
    expected[3, 2] = True
    np.testing.assert_array_equal(~np.isnan(R), expected)
    assert [r["task"] for r in res["records"]] == [0, 1, 2, 3]
    assert res["records"][-1]["examples_seen"] == 4 * 24 == res["records"][-1]["updates_applied"]
    assert set(res["records"][0]["ood_auc"]) == {"epistemic", "aleatoric", "variation_ratio"}
    s = res["summary"]
    assert s["complete"] and s["last_k"] == 4 and np.isnan(s["last_k_acc"])  # not all 4 evaluated at the end
    assert s["memory_bytes"] == N_FEATURES * N_CLASSES * 4
    # the paper code's 1000-threshold AUC is recorded beside the exact one, for the same scores
    ref, exact = s["ood_auc_reference"], s["ood_auc"]
    assert set(ref) == set(exact) == {"epistemic", "aleatoric", "variation_ratio"}
    assert all(0.0 <= v <= 1.0 for v in ref.values())
    assert res["records"][-1]["ood_auc_reference"] == ref and res["records"][1]["ood_auc_reference"] is not None


def test_evaluation_does_not_depend_on_schedule_nor_touch_training():
    b = FakeBenchmark(n_tasks=3)
    m1, m2 = method(), method()
    r1 = run_stream(b, m1, EvalSchedule(), seed=0, progress=False, ood=False)["R"]
    r2 = run_stream(b, m2, EvalSchedule(all_every=1), seed=0, progress=False, ood=False)["R"]
    both = ~np.isnan(r1)
    np.testing.assert_array_equal(r1[both], r2[both])
    assert np.isnan(r1[1, 0]) and not np.isnan(r2[1, 0])
    for a, c in zip(m1.model.parameters(), m2.model.parameters()):
        assert torch.equal(a, c)


def test_task_end_only_for_methods_that_declare_it():
    b = FakeBenchmark(n_tasks=3)
    m = BoundedBiMU(SIZES, seed=0)
    run_stream(b, m, seed=0, progress=False, ood=False)
    assert m.task_ends == 3
    plain = method()
    called = []
    plain.task_end = lambda: called.append(1)
    run_stream(b, plain, seed=0, progress=False, ood=False)
    assert called == []


def test_bad_inputs_are_rejected_before_training():
    class NaNBench(FakeBenchmark):
        def train_task(self, task, seed):
            x, y = super().train_task(task, seed)
            x[3, 1] = float("nan")
            return x, y

    m = method()
    with pytest.raises(ValueError, match="NaN"):
        run_stream(NaNBench(n_tasks=1), m, seed=0, progress=False)
    assert m.examples_seen == 0

    class BadLabels(FakeBenchmark):
        def train_task(self, task, seed):
            x, y = super().train_task(task, seed)
            return x, y + 5

    with pytest.raises(ValueError, match="labels must lie"):
        run_stream(BadLabels(n_tasks=1), method(), seed=0, progress=False)


class Crash(Exception):
    pass


def test_resume_after_crash_gives_identical_results(tmp_path):
    b = FakeBenchmark(n_tasks=4)
    full = run_stream(b, method(), seed=2, run_dir=tmp_path / "full", progress=False)

    def crash_after_1(t):
        if t == 1:
            raise Crash

    with pytest.raises(Crash):
        run_stream(b, method(), seed=2, run_dir=tmp_path / "resumed", progress=False, on_task_end=crash_after_1)
    rd = RunDir(tmp_path / "resumed")
    assert [r["task"] for r in rd.read_metrics()] == [0, 1]
    fresh = method()  # a new process would build the method from scratch, then load the checkpoint
    logs = []
    res = run_stream(b, fresh, seed=2, run_dir=rd, progress=False, log=logs.append)
    assert any("resuming" in s and "after task 2" in s for s in logs)
    np.testing.assert_array_equal(res["R"], full["R"])
    assert strip_timing(res["records"]) == strip_timing(full["records"])
    assert strip_timing(rd.read_metrics()) == strip_timing(RunDir(tmp_path / "full").read_metrics())
    np.testing.assert_array_equal(rd.read_matrix(), full["R"])


def test_kill_9_then_same_command_resumes_to_identical_numbers(tmp_path):
    """A real SIGKILL in a subprocess after task 2 of 4, then the same run again, vs an uninterrupted run."""
    script = textwrap.dedent(f"""
        import os, signal, sys
        sys.path[:0] = {[os.path.dirname(__file__)] + sys.path[:0]!r}
        import test_runner_fakes
        from bimu.experiments.config import RunConfig
        from bimu.experiments.runner import run_experiment
        out, kill = sys.argv[1], sys.argv[2] == "kill"
        c = RunConfig.from_dict(dict(benchmark="fake-test", tasks=4, seeds=[0, 1], out=out, engine="torch"))
        def hook(t):
            if kill and t == 1:
                os.kill(os.getpid(), signal.SIGKILL)
        print(run_experiment(c, progress=False, log=lambda s: None, on_task_end=hook)[1])
    """)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(os.path.dirname(__file__), "..", "src"),
                                                        os.environ.get("PYTHONPATH", "")]))
    killed = subprocess.run([sys.executable, "-c", script, str(tmp_path / "a"), "kill"], env=env,
                            capture_output=True, text=True, timeout=300)
    assert killed.returncode == -9, killed.stderr
    rd = RunDir(seed_dir(tmp_path / "a", "fake-test", "bimu", 0))
    assert [r["task"] for r in rd.read_metrics()] == [0, 1] and not rd.exists("summary.json")
    # the same command again, in this process; and an uninterrupted reference run
    cfg = RunConfig.from_dict(dict(benchmark="fake-test", tasks=4, seeds=[0, 1], out=str(tmp_path / "a"),
                                   engine="torch"))
    res, code = run_experiment(cfg, progress=False, log=lambda s: None)
    ref, _ = run_experiment(cfg.replace(out=str(tmp_path / "b")), progress=False, log=lambda s: None)
    assert code == 0
    for s in (0, 1):
        np.testing.assert_array_equal(res[s]["R"], ref[s]["R"])
        assert strip_timing(res[s]["records"]) == strip_timing(ref[s]["records"])
    assert json.loads((rd.path / "summary.json").read_text())["complete"]


def test_failing_seed_is_isolated_and_exit_code_nonzero(tmp_path):
    cfg = RunConfig.from_dict(dict(benchmark="fake-test", tasks=2, seeds=[0, 13, 1], out=str(tmp_path)))
    logs = []
    res, code = run_experiment(cfg, progress=False, log=logs.append)
    assert code == 1 and sorted(res) == [0, 1]
    bad = RunDir(seed_dir(tmp_path, "fake-test", "bimu", 13))
    assert "injected failure for seed 13" in bad.file("error.txt").read_text()
    assert any("seed 13 FAILED" in s for s in logs)
    for s in (0, 1):
        d = RunDir(seed_dir(tmp_path, "fake-test", "bimu", s))
        for f in ("config.json", "environment.json", "metrics.jsonl", "accuracy_matrix.npy",
                  "accuracy_matrix.csv", "summary.json", "checkpoint.pt"):
            assert d.exists(f), f
    env = json.loads(RunDir(seed_dir(tmp_path, "fake-test", "bimu", 0)).file("environment.json").read_text())
    assert env["seed"] == 0 and env["versions"]["torch"] == torch.__version__ and "commit" in env
    # a completed seed is not rerun; a changed configuration is refused for that directory
    res2, _ = run_experiment(cfg.replace(seeds=[0]), progress=False, log=lambda s: None)
    assert res2[0].get("skipped")
    with pytest.raises(RunDirRefused, match="holds a run with a different configuration"):
        run_experiment(cfg.replace(seeds=[0], overrides={"memory_window": 5}), progress=False, log=logs.append)
    # a run made before a hyperparameter existed (absent from its config.json) is the same run as
    # that hyperparameter at its default: reused, not refused
    cfg_file = RunDir(seed_dir(tmp_path, "fake-test", "bimu", 0)).file("config.json")
    stored = json.loads(cfg_file.read_text())
    removed = stored["resolved"]["hparams"].pop("memory_window")
    cfg_file.write_text(json.dumps(stored))
    res4, code4 = run_experiment(cfg.replace(seeds=[0]), progress=False, log=lambda s: None)
    assert code4 == 0 and res4[0].get("skipped")
    with pytest.raises(RunDirRefused):
        run_experiment(cfg.replace(seeds=[0], overrides={"memory_window": removed + 1}), progress=False,
                       log=logs.append)
    assert not RunDir(seed_dir(tmp_path, "fake-test", "bimu", 0)).exists("error.txt")  # refused: left untouched


def test_complete_runs_are_read_back_without_loading_the_data(tmp_path, monkeypatch):
    cfg = RunConfig.from_dict(dict(benchmark="fake-test", tasks=2, seeds=[0, 1], out=str(tmp_path)))
    ref, code = run_experiment(cfg, progress=False, log=lambda s: None)
    assert code == 0

    def no_data(config, seed):
        raise AssertionError("the data were loaded")

    monkeypatch.setattr(runner, "make_benchmark", no_data)
    logs = []
    res, code = run_experiment(cfg, progress=False, log=logs.append)
    assert code == 0 and sorted(res) == [0, 1] and all(r["skipped"] for r in res.values())
    np.testing.assert_array_equal(res[1]["R"], ref[1]["R"])
    assert res[1]["summary"] == json.loads(RunDir(seed_dir(tmp_path, "fake-test", "bimu", 1)).file("summary.json")
                                           .read_text())
    assert logs == [f"seed {s}: already complete in {RunDir(seed_dir(tmp_path, 'fake-test', 'bimu', s)).path}"
                    for s in (0, 1)]
    # a seed with work left, or a directory holding another configuration: the full check, with the data
    for other in (cfg.replace(seeds=[0, 2]), cfg.replace(overrides={"memory_window": 5})):
        with pytest.raises(AssertionError, match="the data were loaded"):
            run_experiment(other, progress=False, log=lambda s: None)
    assert runner.complete_runs(cfg.replace(seeds=[2])) is None
    RunDir(seed_dir(tmp_path, "fake-test", "bimu", 1)).file("config.json").write_text("{not json")
    assert runner.complete_runs(cfg) is None  # a corrupt config.json: the full check names it


def test_engine_selection(monkeypatch):
    cfg = RunConfig.from_dict(dict(benchmark="fake-test", engine="auto"))
    hp = cfg.resolve_hparams()[1]
    fake = types.ModuleType("bimu.engine")  # no supports(): auto falls back, fused is an error
    monkeypatch.setitem(sys.modules, "bimu.engine", fake)
    assert runner.make_method(cfg, SIZES, 0, hp)[1] == "torch"
    with pytest.raises(RuntimeError, match="fused engine is not available"):
        runner.make_method(cfg.replace(engine="fused"), SIZES, 0, hp)
    fake.supports = lambda name, sizes, hparams: False
    fake.create_fused = lambda *a: None
    fake.why_unsupported = lambda name, sizes, hparams: "a reason"
    assert runner.make_method(cfg, SIZES, 0, hp)[1] == "torch"
    with pytest.raises(ValueError, match="does not support .*hyperparameters: a reason; use engine"):
        runner.make_method(cfg.replace(engine="fused"), SIZES, 0, hp)
    made = []
    fake.supports = lambda name, sizes, hparams: True
    fake.create_fused = (lambda name, sizes, seed, hparams, threads=None:
                         made.append((name, sizes, seed, threads)) or method(seed))
    # one engine thread per run unless the config asks for more
    assert runner.make_method(cfg, SIZES, 3, hp)[1] == "fused" and made == [("bimu", SIZES, 3, 1)]


def test_active_mode_with_fake_acquisition(monkeypatch, tmp_path):
    class EveryOther:
        def __init__(self, strategy, **kw):
            self.kw = kw

    class Learner:
        def __init__(self, method, acquisition):
            self.method, self.acq, self.n = method, acquisition, 0
            self.accounting = {"labels_queried": 0, "examples_seen": 0}

        def predict_one(self, x):
            self.n += 1
            ask = self.n % 2 == 0
            if not ask:
                self.method.observe_unlabelled(1)
            self.accounting["examples_seen"] += 1
            return self.method.predict(x)[0], ask

        def learn_one(self, x, y):
            self.accounting["labels_queried"] += 1
            self.method.learn(x, y)

    import bimu.active.blocks  # noqa: F401  the stream asks it whether a learner decides in blocks (this one does not)

    fake = types.ModuleType("bimu.active")
    fake.make_acquisition = lambda strategy, **kw: EveryOther(strategy, **kw)
    fake.ActiveLearner = Learner
    monkeypatch.setitem(sys.modules, "bimu.active", fake)
    cfg = RunConfig.from_dict(dict(benchmark="fake-test", tasks=2, seeds=[0], out=str(tmp_path), active="vr",
                                   threshold=0.2, mc_samples=4))
    res, code = run_experiment(cfg, progress=False, log=lambda s: None)
    assert code == 0
    recs = res[0]["records"]
    assert recs[-1]["examples_seen"] == 48 and recs[-1]["updates_applied"] == 24
    assert recs[0]["active"]["queried_in_task"] == 12 and recs[-1]["active"]["labels_queried"] == 24
    assert 0 <= recs[0]["active"]["online_accuracy"] <= 1
    lines = RunDir(seed_dir(tmp_path, "fake-test", "bimu", 0)).read_metrics()
    assert lines[1]["active"]["labels_queried"] == 24


def test_active_mode_without_bimu_active_is_a_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "bimu.active", types.ModuleType("bimu.active"))
    cfg = RunConfig.from_dict(dict(benchmark="fake-test", tasks=1, active="vr"))
    with pytest.raises(RuntimeError, match="needs bimu.active"):
        runner.preflight(cfg)


def test_eval_generator_is_deterministic_and_distinct():
    a = torch.rand(3, generator=eval_generator(0, 2, 1))
    b = torch.rand(3, generator=eval_generator(0, 2, 1))
    c = torch.rand(3, generator=eval_generator(0, 2, 0))
    assert torch.equal(a, b) and not torch.equal(a, c)


def test_equivalent_spellings_of_a_config_resume_the_same_directory(tmp_path):
    base = dict(benchmark="fake-test", tasks=1, seeds=[0], out=str(tmp_path))
    _, code = run_experiment(RunConfig.from_dict(base), progress=False, log=lambda s: None)
    assert code == 0
    same = RunConfig.from_dict(dict(base, hidden=[], preset="none", overrides={"memory_window": "1000"}))
    res, code = run_experiment(same, progress=False, log=lambda s: None)
    assert code == 0 and res[0].get("skipped")


def _lock_of(pid, start=None):
    """A ``.lock`` text naming ``pid`` on this host, in this boot (with ``start``, its start time)."""
    me = Owner.current()
    return Owner(me.host, pid, start, me.boot).dumps()


def _dead_pid():
    return int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                              text=True).stdout)


def test_run_directory_lock(tmp_path):
    rd = RunDir(tmp_path / "x")
    rd.acquire_lock()
    rd.acquire_lock()  # re-entrant for the same process
    (rd.path / ".lock").write_text(_lock_of(1, start_time(1)))  # pid 1 as it runs: another process holds it
    with pytest.raises(RunDirRefused, match="in use by process 1;"):
        rd.acquire_lock()
    (rd.path / ".lock").write_text(_lock_of(_dead_pid()))  # a dead process's lock is taken over
    rd.acquire_lock()
    rd.release_lock()
    assert not (rd.path / ".lock").exists()


def test_lock_holder_is_read_in_one_place(tmp_path):
    rd = RunDir(tmp_path / "x")
    assert rd.lock_pid() is None and not rd.locked_by_live_process()  # no lock
    rd.acquire_lock()
    assert rd.lock_pid() == os.getpid() and rd.locked_by_live_process() and rd.lock_owner() == Owner.current()
    (rd.path / ".lock").write_text("not a pid")
    assert rd.lock_pid() is None and not rd.locked_by_live_process()  # unreadable: nobody holds it
    rd.acquire_lock()  # and it is taken over
    assert rd.lock_pid() == os.getpid()
    dead = _dead_pid()
    (rd.path / ".lock").write_text(_lock_of(dead))
    assert rd.lock_pid() == dead and not rd.locked_by_live_process()
    rd.release_lock()  # not ours: left alone
    assert (rd.path / ".lock").exists()


def test_metrics_reader_skips_blank_lines(tmp_path):
    rd = RunDir(tmp_path / "x")
    rd.path.mkdir()
    rd.file("metrics.jsonl").write_text('{"task": 0}\n  \n{"task": 1}\n\n')
    assert [r["task"] for r in rd.read_metrics()] == [0, 1]

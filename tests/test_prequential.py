"""Prequential (test-then-train) accuracy: what a run records equals a hand replay (predict, then learn,
with the same generators), recording leaves every other result bit-identical, a resumed run continues
the curve file exactly, an active run records its learner's prediction of every example, ``bimu report``
draws the curve for runs that have one; and one evaluation default for ``bimu run`` and ``fit_stream``."""

from __future__ import annotations

import inspect

import numpy as np
import pytest
import torch

from bimu.active import ActiveLearner, make_acquisition
from bimu.engine import create_fused
from bimu.experiments.config import RunConfig
from bimu.experiments.prequential import prequential_generator
from bimu.experiments.schedule import EvalSchedule
from bimu.experiments.stream import run_stream
from bimu.methods import create_method
from bimu.rundir import PREQUENTIAL, RunDir, read_prequential
from test_runner_fakes import N_CLASSES, N_FEATURES, FakeBenchmark, strip_timing

SIZES = [N_FEATURES, 8, N_CLASSES]
SEED = 3


def _method(name, engine):
    torch_method = create_method(name, SIZES, SEED, preset="pmnist-100")
    if engine == "torch":
        return torch_method
    return create_fused(name, SIZES, SEED, dict(torch_method.hparams), threads=1)


def _bench(n_tasks=2, n_train=20):
    return FakeBenchmark(n_tasks=n_tasks, n_train=n_train)


def _same_state(a, b, where="state"):
    """Whether two ``state_dict`` values are equal, bit for bit (tensors, arrays, generator states)."""
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and torch.equal(a, b), where
    elif isinstance(a, np.ndarray):
        assert np.array_equal(a, b), where
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for k in a:
            _same_state(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            _same_state(x, y, f"{where}[{i}]")
    else:
        assert a == b, where


def _without_prequential(records):
    return [{k: v for k, v in r.items() if not k.startswith("prequential")} for r in strip_timing(records)]


CASES = [("bimu", "fused"), ("bimu", "torch"), ("sgd", "fused")]


@pytest.mark.parametrize("name,engine", CASES)
@pytest.mark.parametrize("every", [1, 5])
def test_recorded_prequential_accuracy_is_a_hand_replay(name, engine, every):
    bench = _bench()
    out = run_stream(bench, _method(name, engine), seed=SEED, progress=False, ood=False, prequential_every=every)
    # by hand: every every-th example predicted (its own generator) by the model just before learning it
    m = _method(name, engine)
    examples, correct, per_task = [], [], []
    g = 0
    for t in range(2):
        x, y = bench.train_task(t, SEED)
        right = []
        for i in range(len(y)):
            if g % every == 0:
                pred = m.predict(x[i:i + 1], generator=prequential_generator(SEED, g))
                right.append(int(int(pred[0]) == int(y[i])))
                examples.append(g)
            m.learn(x[i:i + 1], y[i:i + 1])
            g += 1
        correct += right
        per_task.append((sum(right) / len(right), len(right)))
    curve = out["prequential"]
    assert curve["example"].tolist() == examples and curve["correct"].tolist() == correct
    assert curve["task"].tolist() == [1 + e // 20 for e in examples]
    assert [(r["prequential_acc"], r["prequential_n"]) for r in out["records"]] == per_task
    assert out["summary"]["prequential_acc"] == sum(correct) / len(correct)
    assert out["summary"]["prequential_n"] == len(correct) == -(-40 // every)
    w = curve["window"]
    expected = [np.mean(correct[max(0, k - w + 1):k + 1]) for k in range(len(correct))]
    assert np.allclose(curve["window_acc"], expected)
    assert 0 < sum(correct) < len(correct)  # a real mix of right and wrong predictions


@pytest.mark.parametrize("name,engine", CASES)
@pytest.mark.parametrize("every,batch_size", [(1, 1), (5, 1), (3, 4)])
def test_training_and_results_are_bit_identical_with_and_without_prequential(name, engine, every, batch_size):
    bench = _bench(n_tasks=3)
    plain, rec = _method(name, engine), _method(name, engine)
    kw = dict(seed=SEED, progress=False, batch_size=batch_size, schedule=EvalSchedule(all_every=1))
    a = run_stream(bench, plain, **kw)
    b = run_stream(bench, rec, prequential_every=every, **kw)
    assert np.array_equal(a["R"], b["R"], equal_nan=True)
    assert _without_prequential(a["records"]) == _without_prequential(b["records"])
    _same_state(plain.state_dict(), rec.state_dict())  # parameters, optimiser, counters, every generator
    assert a["prequential"] is None and b["prequential"]["example"].tolist() == list(range(0, 3 * 20, every))


def test_resume_continues_the_curve_file_without_losing_or_repeating_rows(tmp_path):
    bench = _bench(n_tasks=4)
    kw = dict(seed=SEED, progress=False, ood=False, prequential_every=3)
    full = run_stream(bench, _method("bimu", "fused"), run_dir=tmp_path / "full", **kw)
    reference = (tmp_path / "full" / PREQUENTIAL).read_text()

    class Crash(Exception):
        pass

    def crash_after(task):
        def hook(t):
            if t == task:
                raise Crash
        return hook

    def resumed(name, damage=None):
        d = tmp_path / name
        with pytest.raises(Crash):
            run_stream(bench, _method("bimu", "fused"), run_dir=d, on_task_end=crash_after(1), **kw)
        if damage is not None:
            damage(d / PREQUENTIAL)
        logs = []
        res = run_stream(bench, _method("bimu", "fused"), run_dir=d, log=logs.append, **kw)
        assert any("resuming" in s for s in logs)
        return res, (d / PREQUENTIAL).read_text(), logs

    def without_task_2(p):  # killed after the checkpoint of task 2, before its curve was written
        p.write_text("".join(line for line in p.read_text().splitlines(True) if line.split(",")[1] != "2"))

    def with_a_task_3_row(p):  # rows of a task the checkpoint does not hold
        p.write_text(p.read_text() + "51,3,1,1.0000\n")

    for name, damage in (("plain", None), ("killed-before-curve", without_task_2), ("extra", with_a_task_3_row)):
        res, text, _ = resumed(name, damage)
        assert text == reference, name
        for key in ("example", "correct", "window_acc"):
            assert np.array_equal(res["prequential"][key], full["prequential"][key]), name
        assert res["summary"]["prequential_acc"] == full["summary"]["prequential_acc"]
        assert strip_timing(res["records"]) == strip_timing(full["records"])
    # a curve file that was removed: the run still resumes, the lost rows are named
    res, text, logs = resumed("removed", lambda p: p.unlink())
    assert any("rows of task(s) [1]" in s for s in logs)
    assert read_prequential(tmp_path / "removed" / PREQUENTIAL)["task"].min() == 2
    assert res["summary"]["prequential_acc"] == full["summary"]["prequential_acc"]  # from the records


@pytest.mark.parametrize("engine", ["fused", "torch"])  # the compiled query blocks, the per-example loop
def test_active_run_records_its_learners_prediction_of_every_example(engine):
    bench = _bench()

    def learner():
        return ActiveLearner(_method("bimu", engine), make_acquisition("vr", threshold=0.2, mc_samples=5, seed=SEED))

    plain, rec = learner(), learner()
    a = run_stream(bench, plain.method, seed=SEED, progress=False, ood=False, learner=plain)
    b = run_stream(bench, rec.method, seed=SEED, progress=False, ood=False, learner=rec, prequential_every=1000)
    curve = b["prequential"]
    assert curve["example"].tolist() == list(range(40))  # every example, whatever the rate
    for r in b["records"]:
        assert r["prequential_n"] == 20 and r["prequential_acc"] == r["active"]["online_accuracy"]
    # the learner's own predictions, replayed by hand
    ref = learner()
    right = []
    for t in range(2):
        ref.task = t
        x, y = bench.train_task(t, SEED)
        for i in range(len(y)):
            pred, ask = ref.predict_one(x[i:i + 1])
            right.append(int(pred == int(y[i])))
            if ask:
                ref.learn_one(x[i:i + 1], y[i:i + 1])
    assert curve["correct"].tolist() == right
    assert 0 < plain.ledger.labels_queried < 40
    assert np.array_equal(a["R"], b["R"], equal_nan=True)
    assert _without_prequential(a["records"]) == _without_prequential(b["records"])
    assert plain.accounting == rec.accounting
    _same_state(plain.method.state_dict(), rec.method.state_dict())


def test_report_draws_the_curve_for_runs_that_have_one(tmp_path, capsys):
    from bimu.cli import main

    for out, every in (("with", "7"), ("without", "0")):
        assert main(["run", "fake-test", "--tasks", "2", "--seeds", "0", "--out", str(tmp_path / out),
                     "--no-progress", "--no-ood", "--prequential-every", every]) == 0
    rd = RunDir(tmp_path / "with" / "fake-test-bimu" / "seed-0")
    assert rd.exists(PREQUENTIAL) and not (tmp_path / "without" / "fake-test-bimu" / "seed-0" / PREQUENTIAL).exists()
    assert read_prequential(rd.file(PREQUENTIAL))["example"].tolist() == [0, 7, 14, 21, 28, 35, 42]
    summary = rd.read_json("summary.json")
    assert summary["prequential_n"] == 7 and 0 <= summary["prequential_acc"] <= 1
    assert [r["prequential_n"] for r in rd.read_metrics()] == [4, 3]
    capsys.readouterr()
    for out in ("with", "without"):
        plot = tmp_path / "plots" / out / "accuracy_per_task.png"
        assert main(["report", str(tmp_path / out), "--plot", str(plot)]) == 0
        printed = capsys.readouterr().out
        assert plot.with_name("accuracy_matrix.png").exists()
        assert plot.with_name("prequential.png").exists() == (out == "with")
        assert ("prequential curve:" in printed) == (out == "with")
    # a run without the file (every committed run) reports as before
    from bimu.report.tables import load_run

    assert load_run(tmp_path / "without" / "fake-test-bimu" / "seed-0")["prequential"] is None


def test_one_evaluation_default_for_the_command_line_and_fit_stream():
    from bimu.experiments.fit import fit_stream

    params = inspect.signature(fit_stream).parameters
    cfg = RunConfig()
    assert params["eval_all_every"].default == cfg.eval_all_every
    assert params["eval_all_max"].default == cfg.eval_all_max == 100
    assert params["prequential_every"].default == cfg.prequential_every
    # the full lower triangle up to 100 tasks, the paper's schedule (current task, final row) beyond
    assert cfg.schedule.tasks_after(3, 100) == [0, 1, 2, 3] and cfg.schedule.tasks_after(3, 1000) == [3]
    assert cfg.schedule.tasks_after(999, 1000) == [995, 996, 997, 998, 999]


def test_fit_stream_fills_the_matrix_and_exposes_the_curve():
    from bimu.experiments.fit import fit_stream

    rng = np.random.default_rng(0)
    tasks = [(rng.normal(size=(30, 4)).astype(np.float32), rng.integers(0, 2, 30)) for _ in range(3)]
    res = fit_stream(tasks, tasks, method="sgd", hidden=[5], engine="torch", prequential_every=4)
    assert not np.isnan(res.accuracy[np.tril_indices(3)]).any()
    assert res.prequential["example"].tolist() == list(range(0, 90, 4))
    assert res.summary["prequential_n"] == 23


def test_the_reproduce_entries_keep_their_schedule_and_reuse_runs_made_before_it():
    from bimu.experiments.runner import check_run_dir
    from bimu.reproduce import pmnist
    from bimu.reproduce.spec import Options

    for row in pmnist.rows_memory_window(Options(seeds=(0,))) + pmnist.rows_pmnist_1000(Options(seeds=(0,))):
        assert row.config.eval_all_max == 0 and row.config.schedule.tasks_after(1, 100) == [1]
    # a config.json written before eval_all_max existed reads as eval_all_max=0: the same run
    import json
    import tempfile

    d = RunDir(tempfile.mkdtemp())
    cfg = pmnist.rows_memory_window(Options(seeds=(0,)))[0].config
    _, hp, note = cfg.resolve_hparams()
    from bimu.experiments.runner import resolved_config
    from bimu.methods import get_method

    new = resolved_config(cfg, [784, 100, 10], "pmnist-100", hp, note, "fused")
    old = json.loads(json.dumps({k: v for k, v in new.items() if k not in ("eval_all_max", "prequential_every")}))
    d.write_json("config.json", old)
    d.write_json("summary.json", {"complete": True, "n_tasks": 100, "last_k": 5, "seed": 0})
    assert check_run_dir(d, new, hp, get_method("bimu").hyperparameters, "fused") is True

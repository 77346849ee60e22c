"""The divergence guard (a non-finite loss or state stops with a clear error) and label checks at every
entry point (a float or out-of-range label is refused before any random draw or counter moves)."""

import re

import numpy as np
import pytest
import torch

import test_runner_fakes  # noqa: F401 - registers the fake-test benchmark
from bimu import cli, create_method
from bimu.active import ActiveLearner
from bimu.data.feature_benchmarks import ArrayBenchmark
from bimu.experiments.stream import run_stream
from bimu.methods import available_methods
from bimu.methods.divergence import DivergenceError, nonfinite_entries
from bimu.rundir import RunDir

SIZES = [6, 5, 3]
HUGE = 3e38  # finite in float32; a forward pass through it overflows
STAYS_FINITE = ("ste", "sgd", "replay")
"""Methods that stay finite on HUGE inputs (sign activations; one ReLU step that shrinks the weights, which
replay takes on the same example and its stored copies; EWC and SI overflow in their penalty's
accumulators)."""


def _batch(n=1, scale=1.0):
    g = torch.Generator().manual_seed(7)
    return scale * torch.rand(n, SIZES[0], generator=g), torch.arange(n) % SIZES[-1]


# ------------------------------------------------------------------------ item 3: divergence
def test_a_diverging_run_exits_non_zero_saying_it_diverged(tmp_path, capsys):
    out = tmp_path / "runs"
    code = cli.main(["run", "fake-test", "--tasks", "2", "--set", "lr=1e39", "--engine", "torch", "--out", str(out),
                     "--no-progress"])
    err = capsys.readouterr().err
    assert code == 1
    assert "seed 0 FAILED: DivergenceError: method 'bimu' diverged during task 1: " in err
    assert "became non-finite (NaN or infinite)" in err
    rd = RunDir(out / "fake-test-bimu" / "seed-0")
    assert rd.load_checkpoint() is None and not rd.exists("summary.json")  # nothing non-finite was recorded


@pytest.mark.parametrize("name", available_methods())
def test_huge_finite_inputs_never_silently_give_nan(name):
    method = create_method(name, SIZES, seed=0)
    x, y = _batch(1, HUGE)
    assert torch.isfinite(x).all()
    try:
        for _ in range(3):
            method.learn(x, y)
    except DivergenceError as e:
        assert re.fullmatch(f"method '{name}' diverged: .* became non-finite \\(NaN or infinite\\); .*", str(e))
        assert name not in STAYS_FINITE
    else:
        assert name in STAYS_FINITE
        assert not nonfinite_entries(method.modules_state()) and torch.isfinite(method.predict_proba(x)).all()


def test_huge_finite_inputs_raise_through_the_fused_engine():
    from bimu.engine import create_fused

    method = create_fused("bimu", SIZES, seed=0, threads=1)
    x, y = _batch(3, HUGE)
    with pytest.raises(DivergenceError, match=r"method 'bimu' diverged: lam\[0\].* became non-finite"):
        method.learn_many(x, y)
    assert method.updates_applied == 0


def test_a_stream_stops_at_the_diverging_task_and_keeps_the_last_good_checkpoint(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(10, SIZES[0])).astype(np.float32)
    y = rng.integers(0, SIZES[-1], 10)
    bench = ArrayBenchmark("toy", [(x, y), (x / np.abs(x).max() * np.float32(HUGE), y)], [(x, y), (x, y)])
    method = create_method("bimu", SIZES, seed=0, engine="torch")
    rd = RunDir(tmp_path / "run")
    with pytest.raises(DivergenceError, match=r"method 'bimu' diverged during task 2: model.layers.0.lam became non-finite"):
        run_stream(bench, method, seed=0, n_tasks=2, run_dir=rd, ood=False)
    ckpt = rd.load_checkpoint()
    assert ckpt["task"] == 0 and len(ckpt["records"]) == 1
    assert not nonfinite_entries(ckpt["method_state"]["modules"])


def test_nonfinite_entries_names_each_bad_tensor():
    state = {"model": {"w": torch.tensor([1.0, float("inf")]), "b": torch.zeros(2)}, "steps": 4,
             "lam": [np.zeros(2), np.array([np.nan])], "count": torch.tensor([3])}
    assert nonfinite_entries(state) == ["model.w", "lam[1]"]


# ------------------------------------------------------------------------ item 7: labels
@pytest.mark.parametrize("label", [2.7, -0.9])
def test_active_learner_refuses_a_float_label_without_training(label):
    learner = ActiveLearner(create_method("bimu", SIZES, seed=0))
    x, _ = _batch(1)
    before = learner.method.state_dict()
    with pytest.raises(ValueError, match="labels must be integers, got dtype torch.float32"):
        learner.learn_one(x, label)
    after = learner.method.state_dict()
    assert learner.accounting == ActiveLearner(create_method("bimu", SIZES, seed=0)).accounting
    assert after["updates_applied"] == after["examples_seen"] == 0
    assert torch.equal(after["train_generator"], before["train_generator"])
    learner.learn_one(x, 2)  # an integer label still trains
    assert learner.method.updates_applied == 1


def test_active_learner_refuses_a_float_oracle_label():
    from bimu.active import make_acquisition

    learner = ActiveLearner(create_method("bimu", SIZES, seed=0), make_acquisition("vr-true", threshold=0.5))
    state = learner.query_generator.get_state()
    with pytest.raises(ValueError, match="labels must be integers"):
        learner.predict_one(_batch(1)[0], 1.5)
    assert torch.equal(learner.query_generator.get_state(), state) and learner.ledger.examples_seen == 0


@pytest.mark.parametrize("name", available_methods())
@pytest.mark.parametrize("case", ["float", "out of range", "empty"])
def test_torch_methods_check_labels_before_any_random_draw(name, case):
    method = create_method(name, SIZES, seed=0)
    x, y = _batch(2)
    x, y, message = {"float": (x, y.float(), "labels must be integers"),
                     "out of range": (x, torch.tensor([0, 3]), r"labels must lie in \[0, 2\]"),
                     "empty": (x[:0], y[:0], "cannot learn from an empty batch")}[case]
    before = method.state_dict()
    with pytest.raises(ValueError, match=message):
        method.learn(x, y)
    after = method.state_dict()
    assert torch.equal(after["train_generator"], before["train_generator"])
    assert after["updates_applied"] == after["examples_seen"] == 0

"""ActiveLearner: accounting on a hand-run stream, no backward pass for unqueried examples."""

import numpy as np
import pytest
import torch

from bimu.active import ActiveLearner, make_acquisition
from bimu.active.accounting import Accounting
from bimu.methods import create_method


def small_method(seed=0):
    return create_method("bimu", [6, 3], seed=seed, preset="openloris-8192")


class ScriptedAcquisition:
    """Acquisition-like object whose decisions follow a script (to hand-run a stream)."""

    def __init__(self, script, k=4):
        self.script = list(script)
        self.mc_samples = k
        self.needs_labels = False
        self.strategy = "scripted"

    def decide(self, probs, queried, seen, label=None):
        return self.script.pop(0), 0.0, 0.0


def test_accounting_matches_hand_run_stream(monkeypatch):
    method = small_method()
    calls = {"learn": 0, "backward": 0}
    real_learn = method.learn

    def counting_learn(x, y):
        calls["learn"] += 1
        return real_learn(x, y)

    real_backward = torch.Tensor.backward

    def counting_backward(self, *a, **k):
        calls["backward"] += 1
        return real_backward(self, *a, **k)

    monkeypatch.setattr(method, "learn", counting_learn)
    monkeypatch.setattr(torch.Tensor, "backward", counting_backward)
    script = [True, False, False, True, False, True, False, False]
    learner = ActiveLearner(method, ScriptedAcquisition(script, k=4))
    learner.task = 0
    X = torch.randn(len(script), 6)
    y = torch.tensor([0, 1, 2, 0, 1, 2, 0, 1])
    for i, expected in enumerate(list(script)):
        before = dict(calls)
        _, ask = learner.predict_one(X[i : i + 1])
        assert ask == expected
        assert calls == before  # predicting never runs a backward pass
        if ask:
            learner.learn_one(X[i : i + 1], y[i : i + 1])
            assert calls["backward"] == before["backward"] + 1
        else:
            assert calls == before  # unqueried: no learn, no backward
    acc = learner.accounting
    assert acc == {"labels_queried": 3, "backward_passes": 3, "weight_writes": 3, "forward_passes": 32,
                   "examples_seen": 8, "query_fraction": 3 / 8}
    assert calls == {"learn": 3, "backward": 3}
    # the method's own counters agree: 8 seen (3 learned + 5 observed unlabelled), 3 updates
    assert method.examples_seen == 8 and method.updates_applied == 3
    np.testing.assert_allclose(learner.ledger.query_fraction_series(),
                               np.cumsum(script) / np.arange(1, 9))
    q = learner.ledger.task_quarters()[0]
    assert q["queried"] == 3 and q["first_quarter"] == pytest.approx(1 / 3)  # example 0 of 8
    assert q["middle"] == pytest.approx(2 / 3) and q["last_quarter"] == 0.0


def test_vr_learner_unqueried_examples_do_not_change_weights():
    method = small_method()
    learner = ActiveLearner(method, make_acquisition("vr", threshold=1.0, mc_samples=10))  # never queries
    lam0 = method.model.layers[0].lam.detach().clone()
    for x in torch.randn(20, 6):
        pred, ask = learner.predict_one(x.unsqueeze(0))
        assert not ask and 0 <= pred < 3
    assert torch.equal(lam0, method.model.layers[0].lam)
    assert learner.accounting["backward_passes"] == 0 and learner.accounting["forward_passes"] == 200
    assert method.examples_seen == 20 and method.updates_applied == 0


def test_learn_one_refused_after_a_skip_and_oracle_needs_label():
    method = small_method()
    learner = ActiveLearner(method, make_acquisition("vr", threshold=1.0, mc_samples=4))
    learner.predict_one(torch.randn(1, 6))
    with pytest.raises(RuntimeError, match="did not query"):
        learner.learn_one(torch.randn(1, 6), torch.tensor([0]))
    oracle = ActiveLearner(small_method(), make_acquisition("vr-true", threshold=0.1, mc_samples=4))
    with pytest.raises(ValueError, match="ORACLE"):
        oracle.predict_one(torch.randn(1, 6))
    _, ask = oracle.predict_one(torch.randn(1, 6), y=1)
    assert isinstance(ask, bool)
    with pytest.raises(ValueError, match=r"\[1, D\]"):
        learner.predict_one(torch.randn(2, 6))


def test_full_stream_learning_without_predict_counts_examples():
    learner = ActiveLearner(small_method(), make_acquisition("all"))
    for i in range(5):
        learner.learn_one(torch.randn(1, 6), torch.tensor([i % 3]))
    acc = learner.accounting
    assert acc["examples_seen"] == 5 and acc["labels_queried"] == 5 and acc["forward_passes"] == 0


def test_same_seed_same_decisions():
    def run(seed):
        torch.manual_seed(123)
        X = torch.randn(30, 6)
        y = torch.randint(0, 3, (30,))
        learner = ActiveLearner(small_method(seed), make_acquisition("vr", threshold=0.2, mc_samples=10))
        out = []
        for i in range(30):
            p, ask = learner.predict_one(X[i : i + 1])
            out.append((p, ask))
            if ask:
                learner.learn_one(X[i : i + 1], y[i : i + 1])
        return out, learner.method.model.layers[0].lam.detach().clone()

    a, la = run(0)
    b, lb = run(0)
    assert a == b and torch.equal(la, lb)


def test_accounting_moving_window():
    a = Accounting()
    for asked in [1, 0, 0, 0]:
        a.record_prediction(bool(asked), forward_passes=1)
    np.testing.assert_allclose(a.query_fraction_series(window=2), [1.0, 0.5, 0.0, 0.0])
    with pytest.raises(ValueError):
        a.query_fraction_series(window=0)


def test_bulk_updates_equal_single_updates():
    from bimu.active.accounting import Accounting

    a, b = Accounting(), Accounting()
    for _ in range(5):
        a.record_unpredicted_update(task=2)
    b.record_bulk_updates(5, task=2)
    assert a.as_dict() == b.as_dict() and a.task_quarters() == b.task_quarters()


def test_a_vote_threshold_out_of_the_scores_range_is_refused():
    from bimu.active import make_acquisition

    assert make_acquisition("vr", threshold=1.0, mc_samples=10).rule.tau == 1.0  # allowed: queries nothing
    for strategy in ("vr", "vr-true"):
        with pytest.raises(ValueError, match=rf"threshold 3.0 for '{strategy}' is out of range: .* in \[0, 1\]"):
            make_acquisition(strategy, threshold=3.0, mc_samples=10)
    assert make_acquisition("entropy", threshold=3.0, mc_samples=10).rule.tau == 3.0  # bits: up to log2(C)

"""The BiMU method: loss reduction, counters, presets, validation, exact resume."""

import pytest
import torch

from bimu.methods import BiMUMethod, create_method, get_method
from bimu.methods.bimu import mc_nll


def test_mc_nll_averages_log_probs_over_samples_and_sums_over_batch():
    logits = torch.tensor([[[2.0, 0.0], [0.0, 1.0]], [[0.0, 0.0], [1.0, 1.0]]])  # [K=2, B=2, C=2]
    y = torch.tensor([0, 1])
    lp = torch.log_softmax(logits, -1)
    expected = -((lp[0, 0, 0] + lp[1, 0, 0]) / 2 + (lp[0, 1, 1] + lp[1, 1, 1]) / 2)
    assert mc_nll(logits, y).item() == pytest.approx(expected.item())


def test_presets_are_the_paper_values():
    hp = BiMUMethod.resolve_hyperparameters({}, preset="pmnist-100")
    assert (hp["lr"], hp["lr_max"], hp["likelihood_multiplier"], hp["kl_multiplier"], hp["memory_window"]) == (
        4.9, 0.0023, 161.3, 3.76, 700.0)
    assert hp["n_samples"] == 5 and hp["activation"] == "rbg"


def test_unknown_or_bad_hyperparameters_are_named():
    with pytest.raises(ValueError, match="unknown hyperparameter 'memory'"):
        create_method("bimu", [4, 2], memory=3)
    with pytest.raises(ValueError, match="'memory_window' must be > 0"):
        create_method("bimu", [4, 2], memory_window=-3)
    with pytest.raises(ValueError, match="'activation' must be one of"):
        create_method("bimu", [4, 2], activation="relu")
    with pytest.raises(ValueError, match="no preset 'cifar'"):
        create_method("bimu", [4, 2], preset="cifar")
    with pytest.raises(ValueError, match="unknown method"):
        get_method("bimuu")


def test_bad_batches_are_rejected():
    m = create_method("bimu", [4, 3])
    with pytest.raises(ValueError, match="inputs must be"):
        m.check_batch(torch.zeros(1, 5))
    with pytest.raises(ValueError, match="NaN"):
        m.check_batch(torch.full((1, 4), float("nan")))
    with pytest.raises(ValueError, match=r"labels must lie in \[0, 2\]"):
        m.check_batch(torch.zeros(1, 4), torch.tensor([3]))


def test_same_seed_same_trajectory_and_exact_resume():
    gen = torch.Generator().manual_seed(0)
    xs, ys = torch.randn(30, 8, generator=gen), torch.randint(0, 3, (30,), generator=gen)
    hp = dict(lr=2.0, lr_max=0.05, likelihood_multiplier=10.0, memory_window=50)
    a = create_method("bimu", [8, 6, 3], seed=4, **hp)
    b = create_method("bimu", [8, 6, 3], seed=4, **hp)
    for i in range(15):
        a.learn(xs[i:i + 1], ys[i:i + 1])
        b.learn(xs[i:i + 1], ys[i:i + 1])
    a.predict_samples(xs)  # evaluating must not change the training trajectory
    state = a.state_dict()
    c = create_method("bimu", [8, 6, 3], seed=99, **hp)
    c.load_state_dict(state)
    for i in range(15, 30):
        for m in (a, b, c):
            m.learn(xs[i:i + 1], ys[i:i + 1])
    for p, q, r in zip(a.model.parameters(), b.model.parameters(), c.model.parameters()):
        assert torch.equal(p, q) and torch.equal(p, r)
    assert a.updates_applied == 30 and c.examples_seen == 30
    assert torch.equal(a.predict(xs), c.predict(xs))


def test_learning_moves_predictions_towards_labels():
    gen = torch.Generator().manual_seed(1)
    centers = torch.randn(3, 20, generator=gen) * 3
    y = torch.randint(0, 3, (600,), generator=gen)
    x = centers[y] + torch.randn(600, 20, generator=gen)
    m = create_method("bimu", [20, 3], seed=0, lr=1.0, lr_max=0.1, likelihood_multiplier=10.0,
                      kl_multiplier=1.0, memory_window=1000)
    for i in range(500):
        m.learn(x[i:i + 1], y[i:i + 1])
    acc = (m.predict(x[500:]) == y[500:]).float().mean().item()
    assert acc > 0.9
    assert m.memory_bytes() == 20 * 3 * 4

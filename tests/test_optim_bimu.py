"""BiMU update: equations against independent per-element computations and invariants."""

import math

import pytest
import torch

from bimu.optim import BiMU, bimu_learning_rate, bimu_update_

LAMBDAS = [-50.0, -3.0, -0.2, 0.0, 0.2, 3.0, 50.0]
GRADS = [-0.7, -0.01, 0.0, 0.01, 0.7]
HP = dict(lr=4.9, lr_max=0.0023, likelihood_multiplier=161.3, kl_multiplier=3.76, memory_window=700.0)


def reference_step(lam, g, lr, lr_max, likelihood_multiplier, kl_multiplier, memory_window, prior=0.0):
    """Scalar, float64, written straight from the appendix equations."""
    t = math.tanh(lam)
    sech2 = 1.0 - t * t
    inv_eta = kl_multiplier * sech2 + 2 * likelihood_multiplier * t * g + 2 * likelihood_multiplier * abs(g) + 1 / lr_max
    eta = 1.0 / inv_eta
    new = lam - eta * (lr * likelihood_multiplier * g + kl_multiplier / memory_window * (lam - prior) * sech2)
    return new, eta


@pytest.mark.parametrize("hp", [HP, dict(lr=1.0, lr_max=1.0, likelihood_multiplier=1.0, kl_multiplier=1.0,
                                          memory_window=10.0)])
def test_step_matches_per_element_reference(hp):
    lam = torch.tensor([[l for l in LAMBDAS for _ in GRADS]], dtype=torch.float64)
    g = torch.tensor([[gg for _ in LAMBDAS for gg in GRADS]], dtype=torch.float64)
    p = torch.nn.Parameter(lam.clone())
    opt = BiMU([p], **hp)
    p.grad = g.clone()
    opt.step()
    for i in range(lam.shape[1]):
        expected, _ = reference_step(lam[0, i].item(), g[0, i].item(), **hp)
        assert p[0, i].item() == pytest.approx(expected, rel=1e-12, abs=1e-15)


def test_unit_multipliers_equal_paper_eq_6_7():
    """beta_L = beta_KL = gamma = 1: lambda - eta(g + (lambda - prior)/(N cosh^2 lambda)), Eq. 6-7."""
    n, amax, prior = 50.0, 0.5, 0.3
    for lam in LAMBDAS[1:-1]:
        for g in GRADS:
            p = torch.nn.Parameter(torch.tensor([lam], dtype=torch.float64))
            p.grad = torch.tensor([g], dtype=torch.float64)
            BiMU([p], lr=1.0, lr_max=amax, likelihood_multiplier=1.0, kl_multiplier=1.0,
                 memory_window=n, prior=prior, skip_unlabelled=False).step()
            cosh2 = math.cosh(lam) ** 2
            eta = 1.0 / (1 / cosh2 + 2 * math.tanh(lam) * g + 1 / amax + 2 * abs(g))
            expected = lam - eta * (g + (lam - prior) / (n * cosh2))
            assert p.item() == pytest.approx(expected, rel=1e-12)


def test_consolidation_gets_larger_step_than_deconsolidation():
    for lam in [0.2, 3.0, 50.0]:
        for g in [0.01, 0.7]:
            # lambda > 0: g < 0 pushes lambda up (consolidation), g > 0 pushes it down.
            consolidate = bimu_learning_rate(torch.tensor(lam), torch.tensor(-g), lr_max=1.0)
            deconsolidate = bimu_learning_rate(torch.tensor(lam), torch.tensor(g), lr_max=1.0)
            assert consolidate > deconsolidate
            mirrored = bimu_learning_rate(torch.tensor(-lam), torch.tensor(g), lr_max=1.0)
            assert mirrored == pytest.approx(consolidate.item())


def test_eta_bounds_hold_everywhere():
    gen = torch.Generator().manual_seed(0)
    lam = torch.randn(100_000, generator=gen) * 20
    g = torch.randn(100_000, generator=gen) * torch.logspace(-6, 3, 100_000)
    for amax in [1e-4, 0.0023, 1.0, 100.0]:
        for b_l, b_kl in [(1.0, 1.0), (161.3, 3.76), (1e-3, 0.0)]:
            eta = bimu_learning_rate(lam, g, lr_max=amax, likelihood_multiplier=b_l, kl_multiplier=b_kl)
            assert bool((eta > 0).all())
            assert bool((eta <= amax * (1 + 1e-6)).all())


def test_large_lambda_stays_finite():
    for dtype in (torch.float32, torch.float64):
        lam = torch.tensor([1e4, -1e4, 1e4, -1e4], dtype=dtype)
        g = torch.tensor([1.0, 1.0, -1.0, 0.0], dtype=dtype)
        eta = bimu_update_(lam, g, **HP)
        assert torch.isfinite(lam).all() and torch.isfinite(eta).all()
        # the forgetting term vanishes (1 - tanh^2 = 0); only the data term moves lambda
        assert lam[3].item() == -1e4


def test_skip_unlabelled_leaves_lambda_and_counts_example():
    p = torch.nn.Parameter(torch.tensor([0.5, -2.0]))
    opt = BiMU([p], **HP)
    before = p.detach().clone()
    p.grad = torch.zeros(2)
    opt.step()
    assert torch.equal(p.detach(), before)
    opt.zero_grad(set_to_none=True)
    opt.step()  # None gradients: skipped as well
    assert torch.equal(p.detach(), before)
    assert (opt.updates_applied, opt.examples_seen) == (0, 2)
    p.grad = torch.tensor([0.1, 0.0])
    opt.step()
    assert not torch.equal(p.detach(), before)
    assert (opt.updates_applied, opt.examples_seen) == (1, 3)
    assert opt.update_rate == pytest.approx(1 / 3)


def test_without_skip_zero_gradient_still_forgets():
    p = torch.nn.Parameter(torch.tensor([0.5]))
    opt = BiMU([p], skip_unlabelled=False, **HP)
    p.grad = torch.zeros(1)
    opt.step()
    expected, _ = reference_step(0.5, 0.0, **HP)
    assert p.item() == pytest.approx(expected, rel=1e-6)
    assert p.item() < 0.5


def test_state_dict_round_trip_keeps_counters_and_hyperparameters():
    p = torch.nn.Parameter(torch.tensor([0.5]))
    opt = BiMU([p], **HP)
    for g in [0.1, 0.0, -0.2]:
        p.grad = torch.tensor([g])
        opt.step()
    state = opt.state_dict()
    q = torch.nn.Parameter(torch.tensor([0.5]))
    other = BiMU([q], lr=1.0, lr_max=1.0, memory_window=5.0)
    other.load_state_dict(state)
    assert (other.updates_applied, other.examples_seen) == (2, 3)
    assert other.param_groups[0]["memory_window"] == 700.0
    assert other.param_groups[0]["lr_max"] == 0.0023


@pytest.mark.parametrize("name,value", [("lr", 0.0), ("lr_max", -1.0), ("likelihood_multiplier", float("nan")),
                                        ("kl_multiplier", -0.1), ("memory_window", 0), ("lr", "fast")])
def test_invalid_hyperparameters_name_the_parameter(name, value):
    kwargs = dict(HP)
    kwargs[name] = value
    with pytest.raises(ValueError, match=name):
        BiMU([torch.nn.Parameter(torch.zeros(1))], **kwargs)


def test_prior_per_parameter_tensor():
    a = torch.nn.Parameter(torch.tensor([1.0, 1.0]))
    b = torch.nn.Parameter(torch.tensor([1.0]))
    opt = BiMU([a, b], skip_unlabelled=False, **HP, prior=[torch.tensor([1.0, 0.0]), torch.tensor(1.0)])
    opt.step()
    assert a[0].item() == 1.0 and b.item() == 1.0  # at the prior: no pull
    assert a[1].item() < 1.0
    with pytest.raises(ValueError, match="prior"):
        BiMU([a, b], **HP, prior=[torch.zeros(3), torch.zeros(1)])
    with pytest.raises(ValueError, match="does not broadcast"):  # a tensor must fit every parameter
        BiMU([a, b], **HP, prior=torch.zeros(2))
    with pytest.raises(ValueError, match="one tensor per parameter"):
        BiMU([a, b], **HP, prior=[torch.zeros(2)])

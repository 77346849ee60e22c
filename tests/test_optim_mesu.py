"""MESU update rule against hand computations."""

import copy
import math

import pytest
import torch

from bimu.nn import GaussianMLP, pair_gaussian
from bimu.optim.mesu import MESU, mesu_update_


def test_update_by_hand_unclipped():
    mu, sigma = torch.tensor([0.3], dtype=torch.float64), torch.tensor([0.1], dtype=torch.float64)
    mesu_update_(mu, sigma, torch.tensor([2.0], dtype=torch.float64), torch.tensor([4.0], dtype=torch.float64),
                 lr_mu=0.5, lr_sigma=2.0, sigma_prior=0.2, memory_window=10.0, clamp_grad=1.0, mu_prior=0.1)
    # bound = 1/0.1 = 10: no clip. N sigma_p^2 = 0.4
    d_mu = 0.5 * (-0.01 * 2.0 + 0.01 * (0.1 - 0.3) / 0.4)
    d_sigma = 0.5 * 2.0 * (-0.01 * 4.0 + 0.1 * (0.04 - 0.01) / 0.4)
    assert mu.item() == pytest.approx(0.3 + d_mu, abs=1e-14)
    assert sigma.item() == pytest.approx(0.1 + d_sigma, abs=1e-14)


def test_gradients_are_clipped_to_clamp_over_sigma():
    mu, sigma = torch.tensor([0.0, 0.0], dtype=torch.float64), torch.tensor([0.5, -0.5], dtype=torch.float64)
    g = torch.tensor([100.0, -100.0], dtype=torch.float64)
    mesu_update_(mu, sigma, g, torch.zeros(2, dtype=torch.float64), lr_mu=1.0, lr_sigma=1.0, sigma_prior=0.5,
                 memory_window=1e300, clamp_grad=0.2)
    # |g| clipped to 0.2/|sigma| = 0.4: Delta mu = -sigma^2 * (+-0.4) = -+0.1
    assert mu.tolist() == pytest.approx([-0.1, 0.1], abs=1e-12)


def test_prior_is_a_fixed_point_without_data():
    mu, sigma = torch.full((3,), 0.2), torch.full((3,), 0.7)
    mesu_update_(mu, sigma, torch.zeros(3), torch.zeros(3), lr_mu=3.0, lr_sigma=3.0, sigma_prior=0.7,
                 memory_window=5.0, clamp_grad=1.0, mu_prior=0.2)
    assert torch.equal(mu, torch.full((3,), 0.2)) and torch.allclose(sigma, torch.full((3,), 0.7))


def test_forgetting_relaxes_towards_prior():
    mu, sigma = torch.tensor([1.0]), torch.tensor([0.1])
    for _ in range(2000):
        mesu_update_(mu, sigma, torch.zeros(1), torch.zeros(1), lr_mu=1.0, lr_sigma=1.0, sigma_prior=0.5,
                     memory_window=20.0, clamp_grad=1.0)
    assert abs(mu.item()) < 0.5 and sigma.item() > 0.2


def test_optimizer_pairs_ordinary_parameters_and_validation():
    mu = torch.nn.Parameter(torch.tensor([0.3]))
    sigma = torch.nn.Parameter(torch.tensor([0.1]))
    pair_gaussian(mu, sigma)
    opt = MESU([sigma, mu], lr_mu=0.5, lr_sigma=2.0, sigma_prior=0.2, memory_window=10.0, clamp_grad=1.0)
    assert opt.param_groups[0]["mu_sigma"] == [[1, 0]]
    mu.grad, sigma.grad = torch.tensor([2.0]), None  # a missing sigma gradient counts as 0
    opt.step()
    assert mu.item() == pytest.approx(0.3 + 0.5 * (-0.01 * 2.0 + 0.01 * (0.0 - 0.3) / 0.4), rel=1e-6)
    assert sigma.item() == pytest.approx(0.1 + (0.1 * (0.04 - 0.01) / 0.4), rel=1e-6)
    for kwargs, name in [(dict(lr_mu=0.0), "lr_mu"), (dict(lr_sigma=-1.0), "lr_sigma"),
                         (dict(sigma_prior=0.0), "sigma_prior"), (dict(memory_window=0.0), "memory_window"),
                         (dict(clamp_grad=-1.0), "clamp_grad"), (dict(mu_prior=math.inf), "mu_prior")]:
        with pytest.raises(ValueError, match=name):
            MESU([mu, sigma], **kwargs)
    with pytest.raises(ValueError, match="neither the mu nor the sigma"):
        MESU([mu, sigma, torch.nn.Parameter(torch.zeros(2))])
    with pytest.raises(ValueError, match="partner is not in the same param group"):
        MESU([{"params": [mu]}, {"params": [sigma]}])
    with pytest.raises(ValueError, match="one shape"):
        pair_gaussian(mu, torch.nn.Parameter(torch.zeros(2)))


def test_optimizer_takes_a_models_ordinary_parameters():
    net = GaussianMLP([4, 3, 2])
    opt = MESU(net.parameters(), lr_mu=0.7, lr_sigma=0.4, sigma_prior=0.3, memory_window=50.0, clamp_grad=0.5)
    logits = net(torch.randn(2, 4), n_samples=3, generator=torch.Generator().manual_seed(0))
    logits.logsumexp(-1).mean().backward()
    expected = []
    for mu, sigma in net.pairs():  # the same step by the functional kernel, pair by pair
        m, s = mu.detach().clone(), sigma.detach().clone()
        mesu_update_(m, s, mu.grad, sigma.grad, lr_mu=0.7, lr_sigma=0.4, sigma_prior=0.3, memory_window=50.0,
                     clamp_grad=0.5)
        expected += [m, s]
    opt.step()
    for p, e in zip((p for pair in net.pairs() for p in pair), expected):
        assert torch.equal(p.detach(), e)
    copied = copy.deepcopy(net)  # a copy's new parameters are paired again
    assert MESU(copied.parameters()).param_groups[0]["mu_sigma"] == opt.param_groups[0]["mu_sigma"]

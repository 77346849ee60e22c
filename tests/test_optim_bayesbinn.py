"""BayesBiNN update rule and mu-gradient estimator against hand computations."""

import copy
import math

import pytest
import torch

from bimu.nn import BernoulliLinear
from bimu.nn.bernoulli import take_relaxed_samples
from bimu.optim.bayesbinn import (
    BayesBiNN,
    bayesbinn_mu_gradient,
    bayesbinn_update_,
    log_cosh,
    relaxation_jacobian_ratio,
)


def test_update_by_hand():
    lam = torch.tensor([0.5, -1.0, 2.0], dtype=torch.float64)
    g = torch.tensor([0.2, 0.4, -1.0], dtype=torch.float64)
    prior = torch.tensor([0.0, -2.0, 1.0], dtype=torch.float64)
    bayesbinn_update_(lam, g, lr=0.5, prior_strength=0.1, prior=prior)
    # lambda - 0.5 * (g + 0.1 * (lambda - prior))
    expected = [0.5 - 0.5 * (0.2 + 0.05), -1.0 - 0.5 * (0.4 + 0.1), 2.0 - 0.5 * (-1.0 + 0.1)]
    assert lam.tolist() == pytest.approx(expected, abs=1e-12)


def test_update_equals_bayesian_learning_rule_form():
    # Meng et al.: lambda <- (1 - alpha) lambda - alpha (N g_mu - lambda_0), alpha = lr/N, N = 1/prior_strength.
    lam = torch.tensor([0.3, -0.7], dtype=torch.float64)
    g, lam0 = torch.tensor([0.05, -0.02], dtype=torch.float64), torch.tensor([0.1, 0.2], dtype=torch.float64)
    lr, n = 0.8, 1000.0
    alpha = lr / n
    expected = (1 - alpha) * lam - alpha * (n * g - lam0)
    bayesbinn_update_(lam, g, lr=lr, prior_strength=1.0 / n, prior=lam0)
    assert torch.allclose(lam, expected, atol=1e-12)


def test_prior_term_pulls_towards_prior():
    lam = torch.tensor([3.0])
    bayesbinn_update_(lam, torch.zeros(1), lr=1.0, prior_strength=0.1, prior=torch.tensor([1.0]))
    assert lam.item() == pytest.approx(2.8)


def test_prior_direction_away_is_the_paper_runs_sign():
    # the paper's runs: lambda -= lr g - lr prior_strength (lambda - lambda_prior)
    lam = torch.tensor([3.0, -1.0], dtype=torch.float64)
    g, prior = torch.tensor([0.5, 0.0], dtype=torch.float64), torch.tensor([1.0, 1.0], dtype=torch.float64)
    bayesbinn_update_(lam, g, lr=1.0, prior_strength=0.1, prior=prior, prior_direction="away")
    assert lam.tolist() == pytest.approx([3.0 - 0.5 + 0.1 * 2.0, -1.0 + 0.1 * (-2.0)], abs=1e-12)
    with pytest.raises(ValueError, match="prior_direction must be one of 'towards', 'away', got 'toward'"):
        bayesbinn_update_(lam, g, lr=1.0, prior_strength=0.1, prior_direction="toward")
    with pytest.raises(ValueError, match="prior_direction"):
        BayesBiNN([torch.nn.Parameter(torch.zeros(1))], prior_direction="up")
    # the direction is a hyperparameter of the group: it survives state_dict()
    p = torch.nn.Parameter(torch.tensor([2.0]))
    opt = BayesBiNN([p], lr=1.0, prior_strength=0.1, prior_direction="away")
    q = torch.nn.Parameter(torch.tensor([2.0]))
    opt2 = BayesBiNN([q], lr=1.0, prior_strength=0.1)
    opt2.load_state_dict(opt.state_dict())
    for o, t in ((opt, p), (opt2, q)):
        t.grad = torch.zeros(1)
        o.step()
    assert p.item() == q.item() == pytest.approx(2.2)


def test_ratio_eps_is_meng_et_al_regularised_ratio_and_plain_gradient_when_saturated():
    lam = torch.tensor([0.4, -1.3], dtype=torch.float64)
    delta = torch.tensor([[0.2, 0.5], [-1.0, 2.0]], dtype=torch.float64)
    w, mu = torch.tanh(lam + delta), torch.tanh(lam)
    expected = ((1 - w ** 2) + 0.25) / ((1 - mu ** 2) + 0.25)
    assert torch.allclose(relaxation_jacobian_ratio(lam, delta, 1.0, 0.25), expected, rtol=1e-12)
    assert torch.allclose(relaxation_jacobian_ratio(lam, delta, 0.5, 0.25),
                          ((1 - torch.tanh((lam + delta) / 0.5) ** 2) + 0.25) / (0.5 * ((1 - mu ** 2) + 0.25)))
    # float32, lambda = 20: both tanh round to 1, so the ratio is exactly 1 / T (a plain gradient step),
    # while the exact ratio cosh^2(20) / cosh^2(20 + delta) is exp(-2 delta), up to ~1.6e7 for the
    # smallest 23-bit uniform (delta = 0.5 log(2^-24 / (1 - 2^-24)))
    sat = torch.tensor([20.0]), torch.tensor([[0.3], [-3.0], [-8.3]])
    assert relaxation_jacobian_ratio(*sat, 1.0, 1e-10).tolist() == [[1.0], [1.0], [1.0]]
    exact = relaxation_jacobian_ratio(*sat).flatten().tolist()
    assert exact == pytest.approx([math.exp(-0.6), math.exp(6.0), math.exp(16.6)], rel=1e-3)
    g = bayesbinn_mu_gradient(torch.tensor([[2.0], [-1.0], [4.0]]), *sat, ratio_eps=1e-10)
    assert g.item() == pytest.approx((2.0 - 1.0 + 4.0) / 3)


def test_jacobian_ratio_matches_naive_and_stays_finite():
    lam = torch.tensor([0.4, -1.3], dtype=torch.float64)
    delta = torch.tensor([[0.2, 0.5], [-1.0, 2.0]], dtype=torch.float64)
    for temp in (1.0, 0.5):
        w = torch.tanh((lam + delta) / temp)
        naive = (1 - w ** 2) / (temp * (1 - torch.tanh(lam) ** 2))
        assert torch.allclose(relaxation_jacobian_ratio(lam, delta, temp), naive, rtol=1e-10)
    # float32, |lambda| = 50: the naive ratio is 0/0; the stable one is cosh^2(50)/cosh^2(49) ~ e^2.
    big = relaxation_jacobian_ratio(torch.tensor([50.0]), torch.tensor([[-1.0]]))
    assert math.isfinite(big.item()) and big.item() == pytest.approx(math.exp(2.0), rel=1e-4)
    assert log_cosh(torch.tensor([-3.0], dtype=torch.float64)).item() == pytest.approx(math.log(math.cosh(3.0)))


def test_mu_gradient_by_hand():
    lam = torch.tensor([0.5], dtype=torch.float64)
    delta = torch.tensor([[0.1], [-0.3]], dtype=torch.float64)
    grad_w = torch.tensor([[2.0], [-1.0]], dtype=torch.float64)
    sech2 = lambda v: 1.0 / math.cosh(v) ** 2  # noqa: E731
    expected = 0.5 * (2.0 * sech2(0.6) - 1.0 * sech2(0.2)) / sech2(0.5)
    assert bayesbinn_mu_gradient(grad_w, lam, delta).item() == pytest.approx(expected, rel=1e-12)
    with pytest.raises(ValueError):
        bayesbinn_mu_gradient(grad_w, lam, delta[:1])


def test_optimizer_step_prior_reset_and_state():
    p = torch.nn.Parameter(torch.tensor([1.0, -1.0]))
    opt = BayesBiNN([p], lr=0.5, prior_strength=0.2, ratio_eps=0.0)
    p.grad = torch.tensor([1.0, 1.0])  # dL/dlambda of a parameter no layer samples: g_mu = dL/dlambda cosh^2
    opt.step()
    # lambda - 0.5 (g cosh^2(lambda) + 0.2 (lambda - 0))
    c2 = math.cosh(1.0) ** 2
    assert p.detach().tolist() == pytest.approx([1.0 - 0.5 * (c2 + 0.2), -1.0 - 0.5 * (c2 - 0.2)])
    opt.reset_prior()
    assert torch.equal(opt.state[p]["prior"], p.detach())
    saved = opt.state_dict()
    q = torch.nn.Parameter(p.detach().clone())
    opt2 = BayesBiNN([q], lr=0.5, prior_strength=0.2)
    opt2.load_state_dict(saved)
    assert opt2.param_groups[0]["ratio_eps"] == 0.0
    assert torch.equal(opt2.state[q]["prior"], p.detach())
    p.grad = None  # no gradient: unchanged
    before = p.detach().clone()
    opt.step()
    assert torch.equal(p.detach(), before)


@pytest.mark.parametrize("kwargs, name", [(dict(lr=0.0), "lr"), (dict(lr=-1.0), "lr"),
                                          (dict(prior_strength=-1e-3), "prior_strength"),
                                          (dict(prior=math.nan), "prior"), (dict(lr="x"), "lr"),
                                          (dict(ratio_eps=-1.0), "ratio_eps"),
                                          (dict(prior=torch.zeros(3)), "does not broadcast")])
def test_validation_names_parameter(kwargs, name):
    with pytest.raises(ValueError, match=name):
        BayesBiNN([torch.nn.Parameter(torch.zeros(2))], **kwargs)


def _tiny_layer(temperature=0.7):
    layer = BernoulliLinear(2, 3, temperature=temperature).double()
    with torch.no_grad():
        layer.lam.copy_(torch.tensor([[0.3, -0.8], [1.2, 0.0], [-2.0, 0.5]], dtype=torch.float64))
    return layer


TINY_X = torch.tensor([[1.0, -2.0], [0.5, 3.0]], dtype=torch.float64)
TINY_A = torch.tensor([[1.0, -1.0, 0.5], [2.0, 0.0, -3.0]], dtype=torch.float64)  # L = mean_k sum a * z_k
TINY_U = torch.tensor([0.2, 0.9, 0.45, 0.6, 0.05, 0.75] * 4, dtype=torch.float64).reshape(4, 3, 2)


@pytest.mark.parametrize("ratio_eps", [0.0, 0.3])
@pytest.mark.parametrize("sample_reduction", ["mean", "sum"])
def test_optimizer_consumes_true_dl_dlambda_and_matches_hand_estimator(ratio_eps, sample_reduction):
    layer, k, temp = _tiny_layer(), TINY_U.shape[0], 0.7
    opt = BayesBiNN(layer.parameters(), lr=0.1, prior_strength=0.2, prior=0.05, ratio_eps=ratio_eps,
                    sample_reduction=sample_reduction)
    lam = layer.lam.detach().clone()
    z = layer(TINY_X, n_samples=k, uniforms=TINY_U)  # training mode: relaxed
    per_sample = (z * TINY_A).sum((1, 2))
    (per_sample.mean() if sample_reduction == "mean" else per_sample.sum()).backward()
    # by hand: dL/dw_k[o, i] = c sum_b a[b, o] x[b, i], c = 1/K for a mean over samples, 1 for a sum
    c = 1.0 / k if sample_reduction == "mean" else 1.0
    dl_dw = (c * TINY_A.t() @ TINY_X).expand(k, 3, 2)
    w = torch.tanh((lam + 0.5 * torch.log(TINY_U / (1 - TINY_U))) / temp)
    mu = torch.tanh(lam)
    # p.grad is the true dL/dlambda: autograd's chain rule through the relaxation
    assert torch.allclose(layer.lam.grad, (dl_dw * (1 - w ** 2) / temp).sum(0), rtol=1e-12)
    ratio = ((1 - w ** 2) + ratio_eps) / (temp * ((1 - mu ** 2) + ratio_eps))
    g_mu = (dl_dw * ratio).sum(0) if sample_reduction == "mean" else (dl_dw * ratio).mean(0)
    if ratio_eps == 0.0 and sample_reduction == "mean":  # the mu-gradient is dL/dmu = dL/dlambda / (1 - mu^2)
        assert torch.allclose(g_mu, layer.lam.grad / (1 - mu ** 2), rtol=1e-12)
    opt.step()
    assert torch.allclose(layer.lam.detach(), lam - 0.1 * (g_mu + 0.2 * (lam - 0.05)), rtol=1e-12, atol=1e-15)


def _one_step(layer, opt, extra=None):
    opt.zero_grad()
    if extra is not None:
        extra(layer)
    (layer(TINY_X, n_samples=4, uniforms=TINY_U) * TINY_A).sum((1, 2)).mean().backward()
    opt.step()
    return layer.lam.detach().clone()


def _fresh():
    layer = _tiny_layer()
    return layer, BayesBiNN(layer.parameters(), lr=0.1)


def test_relaxed_samples_lifecycle():
    reference = _one_step(*_fresh())

    def unused_forward(lay):  # a tracked forward whose output is never backpropagated counts for nothing
        lay(TINY_X, n_samples=4)

    assert torch.equal(_one_step(*_fresh(), unused_forward), reference)

    def cleared_gradient(lay):  # the optimizer's zero_grad drops the samples of the gradient it clears
        (lay(TINY_X, n_samples=4) * TINY_A).sum().backward()
        opt.zero_grad()

    layer, opt = _fresh()
    assert torch.equal(_one_step(layer, opt, cleared_gradient), reference)
    layer.eval()  # hard samples carry no gradient and are not recorded
    layer(TINY_X, n_samples=4)
    with torch.no_grad():
        layer(TINY_X, n_samples=4, mode="relaxed")  # nor is a forward autograd does not track
    assert take_relaxed_samples(layer.lam) == []
    layer.train()
    z = layer(TINY_X, n_samples=4, uniforms=TINY_U)
    with torch.no_grad():
        layer.lam.add_(0.1)  # lambda changed after the sample was drawn
    (z * TINY_A).sum().backward()
    with pytest.raises(RuntimeError, match="before lambda last changed"):
        opt.step()


def test_copied_or_restored_optimizer_keeps_asking_for_samples():
    layer, opt = _fresh()
    layer_copy, opt_copy = copy.deepcopy((layer, opt))
    reference = _one_step(layer, opt)
    assert torch.equal(_one_step(layer_copy, opt_copy), reference)
    fresh = _tiny_layer()
    restored = BayesBiNN(fresh.parameters())
    restored.load_state_dict(BayesBiNN(_tiny_layer().parameters(), lr=0.1).state_dict())
    assert torch.equal(_one_step(fresh, restored), reference)


def test_sample_reduction_is_validated():
    with pytest.raises(ValueError, match="sample_reduction"):
        BayesBiNN([torch.nn.Parameter(torch.zeros(1))], sample_reduction="none")

"""Bernoulli layers, activations and the paper's MLP."""

import math

import pytest
import torch

from bimu.nn import BernoulliLinear, BinaryBayesianMLP, ReverseBinaryGate, predict, predict_samples, rbg, sign_ste
from bimu.nn.bernoulli import relaxed_noise


def test_relaxed_gradient_equals_mean_of_weight_gradients_times_jacobian():
    torch.manual_seed(0)
    k, t = 4, 0.7
    layer = BernoulliLinear(5, 3, temperature=t).double()
    x = torch.randn(2, 5, dtype=torch.float64)
    u = torch.rand(k, 3, 5, dtype=torch.float64)
    target = torch.randn(k, 2, 3, dtype=torch.float64)
    out = layer(x, n_samples=k, mode="relaxed", uniforms=u)
    # loss = mean over samples of a per-sample loss l_k (like the paper's averaged log-likelihood)
    loss = ((out - target) ** 2).sum(dim=(1, 2)).mean()
    loss.backward()
    # independent computation: w_k = tanh((lam + delta_k)/T); dl_k/dw_k = sum_b 2 (out_k - target_k)_bo x_bi
    lam = layer.lam.detach()
    w = torch.tanh((lam + 0.5 * torch.log(u / (1 - u))) / t)
    resid = torch.einsum("bi,koi->kbo", x, w) - target
    dl_dw = 2 * torch.einsum("kbo,bi->koi", resid, x)
    expected = (dl_dw * (1 - w**2) / t).mean(0)
    assert torch.allclose(layer.lam.grad, expected, rtol=1e-10, atol=1e-12)


def test_relaxed_noise_is_half_logit_and_clipped():
    u = torch.tensor([0.5, 0.25, 0.0, 1.0], dtype=torch.float64)
    d = relaxed_noise(u)
    assert d[0].item() == 0.0
    assert d[1].item() == pytest.approx(0.5 * math.log(1 / 3))
    assert d[2].item() == pytest.approx(0.5 * math.log(1e-10), rel=1e-6)
    assert torch.isfinite(d).all()


@pytest.mark.parametrize("lam", [-1.5, -0.3, 0.0, 0.4, 2.0])
def test_hard_samples_follow_sigmoid_two_lambda(lam):
    layer = BernoulliLinear(100, 100)
    with torch.no_grad():
        layer.lam.fill_(lam)
    g = torch.Generator().manual_seed(1)
    w = layer.sample_weights(20, "hard", generator=g)
    assert set(w.unique().tolist()) <= {-1.0, 1.0}
    n = w.numel()
    p = 1 / (1 + math.exp(-2 * lam))
    freq = (w == 1).double().mean().item()
    assert abs(freq - p) <= 3 * math.sqrt(p * (1 - p) / n)


def test_sampling_modes_and_shapes():
    layer = BernoulliLinear(3, 2)
    with torch.no_grad():
        layer.lam.copy_(torch.tensor([[0.0, 1.0, -1.0], [2.0, -2.0, 0.5]]))
    assert torch.equal(layer.sample_weights(2, "mode")[1], torch.tensor([[1.0, 1.0, -1.0], [1.0, -1.0, 1.0]]))
    assert torch.allclose(layer.sample_weights(1, "mean")[0], torch.tanh(layer.lam))
    u = torch.full((1, 2, 3), 0.3)
    hard = layer.sample_weights(1, "hard", uniforms=u)[0]
    assert torch.equal(hard, torch.where(0.3 < torch.sigmoid(2 * layer.lam), 1.0, -1.0))
    x3 = torch.randn(4, 6, 3)
    assert layer(x3, mode="hard").shape == (4, 6, 2)


def test_train_and_eval_choose_relaxed_and_hard_sampling():
    net = BinaryBayesianMLP([5, 4, 3])
    x = torch.randn(2, 5)

    def run(**kw):
        return net(x, n_samples=3, generator=torch.Generator().manual_seed(0), **kw)

    relaxed, hard = run(mode="relaxed"), run(mode="hard")
    assert net.training and torch.equal(run(), relaxed)
    net.eval()
    assert torch.equal(run(), hard)
    assert torch.equal(run(mode="relaxed"), relaxed)  # an explicit mode overrides the module mode
    layer = net.layers[0]
    assert set(layer.sample_weights(2).unique().tolist()) <= {-1.0, 1.0}
    layer.train()
    w = layer.sample_weights(2)
    assert w.requires_grad and (w.abs() < 1).all()


def test_generator_makes_draws_reproducible():
    layer = BernoulliLinear(10, 4)
    a = layer.sample_weights(3, "relaxed", generator=torch.Generator().manual_seed(7))
    b = layer.sample_weights(3, "relaxed", generator=torch.Generator().manual_seed(7))
    c = layer.sample_weights(3, "relaxed", generator=torch.Generator().manual_seed(8))
    assert torch.equal(a, b) and not torch.equal(a, c)


def test_init_range_and_bad_arguments():
    layer = BernoulliLinear(400, 50)
    bound = 1 / math.sqrt(400)
    assert layer.lam.abs().max().item() <= bound
    assert layer.lam.abs().max().item() > 0.9 * bound
    with pytest.raises(ValueError, match="sampling mode"):
        layer.sample_weights(1, "soft")
    with pytest.raises(ValueError, match="uniforms must have shape"):
        layer.sample_weights(2, "hard", uniforms=torch.rand(1, 50, 400))
    with pytest.raises(ValueError, match="expected 400 input features"):
        layer(torch.randn(2, 399))
    with pytest.raises(ValueError, match="temperature"):
        BernoulliLinear(2, 2, temperature=0)


def test_rbg_forward_and_surrogate_on_grid():
    x = torch.tensor([-2.0, -1.49, -1.0, -0.51, -0.49, 0.0, 0.49, 0.51, 1.0, 1.49, 1.51, 2.0], requires_grad=True)
    y = rbg(x, 1.0)
    assert y.tolist() == [1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0]
    y.sum().backward()
    assert x.grad.tolist() == [0.0, -1.0, -1.0, -1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 0.0, 0.0]
    x2 = torch.tensor([-2.5, -1.5, 0.6, 1.2, 3.5], requires_grad=True)
    y2 = ReverseBinaryGate(2.0)(x2)
    assert y2.tolist() == [1.0, 0.0, 0.0, 0.0, 1.0]
    y2.sum().backward()
    assert x2.grad.tolist() == [-1.0, -1.0, 0.0, 1.0, 0.0]


def test_sign_ste():
    x = torch.tensor([-1.5, -1.0, -0.2, 0.0, 0.3, 1.0, 1.2], requires_grad=True)
    y = sign_ste(x)
    assert y.tolist() == [-1.0, -1.0, -1.0, 1.0, 1.0, 1.0, 1.0]
    (y * torch.arange(7.0)).sum().backward()
    assert x.grad.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 0.0]


def test_mlp_structure_matches_paper():
    net = BinaryBayesianMLP([784, 100, 10])
    x = torch.randn(3, 784)
    u = [torch.rand(2, 100, 784), torch.rand(2, 10, 100)]
    logits = net(x, n_samples=2, uniforms=u)
    # independent recomputation: BBL -> LN -> RBG -> BBL -> LN
    w1 = torch.tanh(net.layers[0].lam + relaxed_noise(u[0]))
    w2 = torch.tanh(net.layers[1].lam + relaxed_noise(u[1]))
    h = torch.einsum("bi,koi->kbo", x, w1)
    h = (h - h.mean(-1, keepdim=True)) / torch.sqrt(h.var(-1, unbiased=False, keepdim=True) + 1e-5)
    h = (h.abs() > 1).float()
    o = torch.einsum("kbi,koi->kbo", h, w2)
    o = (o - o.mean(-1, keepdim=True)) / torch.sqrt(o.var(-1, unbiased=False, keepdim=True) + 1e-5)
    assert torch.allclose(logits, o, atol=1e-4)
    head = BinaryBayesianMLP([8192, 19])
    assert len(head.layers) == 1 and head(torch.randn(1, 8192)).shape == (1, 1, 19)
    with pytest.raises(ValueError, match="activation"):
        BinaryBayesianMLP([4, 2], activation="relu")
    with pytest.raises(ValueError, match="uniforms must hold one tensor per layer"):
        net(x, n_samples=2, uniforms=u[:1])


def test_predict_uses_mean_log_probability():
    net = BinaryBayesianMLP([6, 4], output_norm=False)
    x = torch.randn(5, 6)
    probs = predict_samples(net, x, 7, generator=torch.Generator().manual_seed(3))
    pred = predict(net, x, 7, generator=torch.Generator().manual_seed(3))
    assert torch.equal(pred, probs.log().mean(0).argmax(-1))
    assert probs.shape == (7, 5, 4)


def test_online_batch_norm_folds_the_batch_in_first_and_treats_statistics_as_constants():
    from bimu.nn import OnlineBatchNorm

    bn = OnlineBatchNorm(1, momentum=0.5)
    x = torch.tensor([[3.0]], requires_grad=True)
    y = bn(x, update_stats=True)
    # m = 0.5 * 0 + 0.5 * 3 = 1.5; v = 0.5 * 1 + 0.5 * (3 - 1.5)^2 = 1.625
    assert bn.running_mean.item() == 1.5 and bn.running_var.item() == 1.625
    assert y.item() == pytest.approx(1.5 / math.sqrt(1.625 + 1e-5))
    y.sum().backward()
    assert x.grad.item() == pytest.approx(1.0 / math.sqrt(1.625 + 1e-5))   # no gradient through m, v


def test_equinox_batch_norm_compatibility_at_batch_size_one():
    """The paper's runs' norm: the first batch's statistics, then each batch's own, with gradient."""
    from bimu.nn import OnlineBatchNorm

    bn = OnlineBatchNorm(2, momentum=0.01, statistics="equinox")
    x0 = torch.tensor([[0.5, -2.0]], requires_grad=True)
    y0 = bn(x0, update_stats=True)
    assert y0.tolist() == [[0.0, 0.0]]                        # x - mean(x) = 0: only beta is left
    y0.sum().backward()
    assert x0.grad.tolist() == [[0.0, 0.0]]
    assert bn.running_mean.tolist() == [0.5, -2.0] and bn.running_var.tolist() == [0.0, 0.0]
    x1 = torch.tensor([[1.5, -2.0]], requires_grad=True)
    y1 = bn(x1, update_stats=True)
    # m = 0.99 * 0.5 + 0.01 * 1.5 = 0.51; the batch's variance is 0, so v stays 0: y = (x - m) / sqrt(eps)
    assert bn.running_mean[0].item() == pytest.approx(0.51) and bn.running_var.tolist() == [0.0, 0.0]
    assert y1[0, 0].item() == pytest.approx(0.99 / math.sqrt(1e-5), rel=1e-5)
    y1[0, 0].backward()
    assert x1.grad[0, 0].item() == pytest.approx(0.99 / math.sqrt(1e-5), rel=1e-5)   # through the batch's share
    # batch of two: its own biased variance is folded in
    bn2 = OnlineBatchNorm(1, momentum=0.01, statistics="equinox")
    bn2(torch.tensor([[1.0], [3.0]]), update_stats=True)
    assert bn2.running_mean.item() == 2.0 and bn2.running_var.item() == 1.0
    with pytest.raises(ValueError, match="statistics must be one of"):
        OnlineBatchNorm(2, statistics="batch")


def test_equinox_norm_is_a_switch_of_synaptic_metaplasticity_on_both_engines():
    from bimu.engine import supports
    from bimu.methods.registry import create_method

    m = create_method("synaptic-metaplasticity", [4, 3, 2], seed=0, bn_statistics="equinox")
    assert all(n.statistics == "equinox" for n in m.model.norms)
    assert supports("synaptic-metaplasticity", [4, 3, 2], {"bn_statistics": "online"})
    assert supports("synaptic-metaplasticity", [4, 3, 2], {"bn_statistics": "equinox"})
    assert not supports("synaptic-metaplasticity", [4, 3, 2], {"bn_statistics": "batch"})
    # the switch survives a state round trip (its first-batch flag is state)
    m.learn(torch.ones(1, 4), torch.tensor([1]))
    fresh = create_method("synaptic-metaplasticity", [4, 3, 2], seed=1, bn_statistics="equinox")
    fresh.load_modules_state(m.modules_state())
    assert bool(fresh.model.norms[0].initialised)

"""Metaplastic Adam against hand computations and against torch's Adam / AdamW."""

import math

import pytest
import torch

from bimu.optim.metaplastic_adam import MetaplasticAdam, metaplastic_adam_update_, metaplastic_factor


def test_first_step_by_hand():
    # First Adam step with eps = 0: U = lr * g / |g| = lr * sign(g).
    w = torch.tensor([0.5, 0.5, -0.5, -0.5], dtype=torch.float64)
    g = torch.tensor([1.0, -1.0, 1.0, -1.0], dtype=torch.float64)
    m, v = torch.zeros(4, dtype=torch.float64), torch.zeros(4, dtype=torch.float64)
    metaplastic_adam_update_(w, g, m, v, step=1, lr=0.1, metaplasticity=2.0, eps=0.0)
    f = 1.0 - math.tanh(2.0 * 0.5) ** 2
    # U = +0.1 on w>0 shrinks |w| (scaled); U = -0.1 on w>0 grows it (free); mirrored for w<0.
    assert w.tolist() == pytest.approx([0.5 - 0.1 * f, 0.6, -0.6, -0.5 + 0.1 * f], abs=1e-12)


def test_factor():
    w = torch.tensor([0.0, 1.0, -1.0], dtype=torch.float64)
    assert metaplastic_factor(w, 3.0).tolist() == pytest.approx([1.0, 1 - math.tanh(3.0) ** 2, 1 - math.tanh(3.0) ** 2])


def _run(opt_cls, kwargs, steps=5):
    torch.manual_seed(0)
    p = torch.nn.Parameter(torch.randn(6, dtype=torch.float64))
    opt = opt_cls([p], **kwargs)
    g = torch.Generator().manual_seed(1)
    for _ in range(steps):
        p.grad = torch.randn(6, generator=g, dtype=torch.float64)
        opt.step()
    return p.detach()


def test_zero_metaplasticity_is_adam_with_l2():
    ours = _run(MetaplasticAdam, dict(lr=0.01, metaplasticity=0.0, weight_decay=0.1))
    ref = _run(torch.optim.Adam, dict(lr=0.01, weight_decay=0.1))
    assert torch.allclose(ours, ref, atol=1e-12)


def test_decoupled_is_adamw():
    ours = _run(MetaplasticAdam, dict(lr=0.01, metaplasticity=0.0, weight_decay=0.1, decoupled_weight_decay=True))
    ref = _run(torch.optim.AdamW, dict(lr=0.01, weight_decay=0.1))
    assert torch.allclose(ours, ref, atol=1e-12)


def test_metaplasticity_slows_only_shrinking():
    # Opposite gradients around a large weight: growth is plain Adam, shrink is attenuated.
    w = torch.nn.Parameter(torch.tensor([2.0, 2.0], dtype=torch.float64))
    opt = MetaplasticAdam([w], lr=0.01, metaplasticity=3.0)
    w.grad = torch.tensor([1.0, -1.0], dtype=torch.float64)
    opt.step()
    shrink, grow = 2.0 - w[0].item(), w[1].item() - 2.0
    assert grow == pytest.approx(0.01, rel=1e-4)
    assert shrink == pytest.approx(0.01 * (1 - math.tanh(6.0) ** 2), rel=1e-3)


def test_groups_state_dict_and_validation():
    a, b = torch.nn.Parameter(torch.ones(2)), torch.nn.Parameter(torch.ones(2))
    opt = MetaplasticAdam([{"params": [a]}, {"params": [b], "metaplasticity": 0.0}], lr=0.1, metaplasticity=5.0)
    a.grad = b.grad = torch.ones(2)
    opt.step()
    assert a[0].item() > b[0].item()  # a's shrinking step was attenuated, b's was not
    assert opt.state[a]["step"] == 1
    saved = opt.state_dict()
    a2, b2 = torch.nn.Parameter(a.detach().clone()), torch.nn.Parameter(b.detach().clone())
    opt2 = MetaplasticAdam([{"params": [a2]}, {"params": [b2], "metaplasticity": 0.0}], lr=0.1, metaplasticity=5.0)
    opt2.load_state_dict(saved)
    assert opt2.state[a2]["step"] == 1 and torch.equal(opt2.state[a2]["exp_avg"], opt.state[a]["exp_avg"])
    for kwargs, name in [(dict(lr=0.0), "lr"), (dict(metaplasticity=-1.0), "metaplasticity"),
                         (dict(betas=(1.0, 0.9)), "beta1"), (dict(betas=(0.9, -0.1)), "beta2"),
                         (dict(eps=0.0), "eps"), (dict(weight_decay=-1.0), "weight_decay")]:
        with pytest.raises(ValueError, match=name):
            MetaplasticAdam([torch.nn.Parameter(torch.zeros(1))], **kwargs)
    with pytest.raises(ValueError, match="metaplasticity"):
        MetaplasticAdam([{"params": [torch.nn.Parameter(torch.zeros(1))], "metaplasticity": -2.0}])

"""The torch optimizer contract of every bimu optimizer: state_dict round trips into a fresh optimizer,
add_param_group with its own hyperparameters, closures, validated groups."""

from __future__ import annotations

import copy
import io

import pytest
import torch

from bimu.nn import BinaryBayesianMLP, GaussianMLP, SignMLP
from bimu.optim import MESU, BayesBiNN, BiMU, MetaplasticAdam, bimu_update_


def _bernoulli_loss(model, x, y, gen):
    logits = model(x, n_samples=3, generator=gen)  # training mode: relaxed samples
    return torch.nn.functional.cross_entropy(logits.flatten(0, 1), y.repeat(3))


def _gaussian_loss(model, x, y, gen):
    logits = model(x, n_samples=3, generator=gen)
    return torch.nn.functional.cross_entropy(logits.flatten(0, 1), y.repeat(3))


def _sign_loss(model, x, y, gen):
    return torch.nn.functional.cross_entropy(model(x), y)


def _bimu(model):
    first, second = model.layers[0].lam, model.layers[1].lam
    return BiMU([{"params": [first], "prior": torch.full((1, first.shape[1]), 0.3)},
                 {"params": [second], "lr_max": 0.05, "prior": -0.2}],
                lr=2.0, lr_max=0.01, likelihood_multiplier=30.0, kl_multiplier=2.0, memory_window=50.0)


def _bayesbinn(model):
    return BayesBiNN(model.parameters(), lr=0.05, prior_strength=0.3, prior=0.1)


def _mesu(model):
    return MESU(model.parameters(), lr_mu=1.0, lr_sigma=0.5, sigma_prior=0.2, memory_window=30.0, clamp_grad=0.5)


def _adam(model):
    return MetaplasticAdam([{"params": model.latent_weights()}, {"params": model.norm_parameters(),
                                                                 "metaplasticity": 0.0}],
                           lr=0.01, metaplasticity=2.0, weight_decay=1e-3)


def _groups_of_layers(model):
    """Fresh groups with every default hyperparameter: one group per layer."""
    return [{"params": [layer.lam]} for layer in model.layers]


CASES = {  # model, optimizer under test, a fresh optimizer with default arguments, loss
    "bimu": (lambda: BinaryBayesianMLP([6, 5, 3]), _bimu, lambda m: BiMU(_groups_of_layers(m)), _bernoulli_loss),
    "bayesbinn": (lambda: BinaryBayesianMLP([6, 5, 3]), _bayesbinn, lambda m: BayesBiNN(m.parameters()),
                  _bernoulli_loss),
    "mesu": (lambda: GaussianMLP([6, 5, 3]), _mesu, lambda m: MESU(m.parameters()), _gaussian_loss),
    "metaplastic-adam": (lambda: SignMLP([6, 5, 3], batch_norm=True), _adam,
                         lambda m: MetaplasticAdam([{"params": m.latent_weights()}, {"params": m.norm_parameters()}]),
                         _sign_loss),
}


def _train(model, opt, gen, x, y, loss_fn, steps, first=0, on_step=None):
    for i in range(first, first + steps):
        opt.zero_grad(set_to_none=True)
        loss_fn(model, x[i:i + 1], y[i:i + 1], gen).backward()
        opt.step()
        if on_step is not None:
            on_step(i, opt)


def _data(n=20, d=6, c=3):
    g = torch.Generator().manual_seed(5)
    return torch.randn(n, d, generator=g), torch.randint(0, c, (n,), generator=g)


def _start(name):
    """The case's pieces, the data and a first model (from a fixed seed)."""
    x, y = _data()
    torch.manual_seed(0)
    return (*CASES[name], x, y, CASES[name][0]())


@pytest.mark.parametrize("name", list(CASES))
def test_state_dict_into_fresh_optimizer_continues_bit_identically(name):
    make_model, make_opt, make_fresh, loss_fn, x, y, a = _start(name)
    opt_a = make_opt(a)
    gen_a = torch.Generator().manual_seed(1)
    reset = (lambda i, opt: opt.reset_prior() if i == 3 else None) if name == "bayesbinn" else None
    _train(a, opt_a, gen_a, x, y, loss_fn, 8, on_step=reset)
    buffer = io.BytesIO()
    torch.save({"model": a.state_dict(), "opt": opt_a.state_dict()}, buffer)
    buffer.seek(0)
    saved = torch.load(buffer)

    b = make_model()  # another initialisation: everything must come from the state dicts
    b.load_state_dict(saved["model"])
    opt_b = make_fresh(b)
    opt_b.load_state_dict(saved["opt"])
    gen_b = torch.Generator().set_state(gen_a.get_state())
    _train(a, opt_a, gen_a, x, y, loss_fn, 8, first=8)
    _train(b, opt_b, gen_b, x, y, loss_fn, 8, first=8)
    for pa, pb in zip(a.parameters(), b.parameters()):
        assert torch.equal(pa, pb)
    if name == "bimu":
        assert (opt_b.examples_seen, opt_b.updates_applied) == (opt_a.examples_seen, opt_a.updates_applied) == (16, 16)


def test_load_state_dict_copies_what_it_loads():
    p = torch.nn.Parameter(torch.zeros(2))
    opt = BayesBiNN([p], lr=0.1)
    q = torch.nn.Parameter(torch.zeros(2))
    other = BayesBiNN([q], lr=0.1)
    other.load_state_dict(opt.state_dict())  # in memory, no serialisation
    assert other.state[q]["prior"].data_ptr() != opt.state[p]["prior"].data_ptr()


def test_bimu_add_param_group_with_its_own_prior_and_hyperparameters():
    a = torch.nn.Parameter(torch.tensor([0.5, -0.5]))
    b = torch.nn.Parameter(torch.tensor([[0.1, 0.2], [0.3, 0.4]]))
    hp = dict(lr=2.0, lr_max=0.1, likelihood_multiplier=3.0, kl_multiplier=1.5, memory_window=7.0)
    opt = BiMU([a], **hp)
    opt.add_param_group({"params": [b], "prior": torch.tensor([1.0, -1.0]), "memory_window": 3.0})
    c = torch.nn.Parameter(torch.tensor([0.7]))
    opt.add_param_group({"params": [c], "prior": 2.0, "kl_multiplier": 0.0})
    ga, gb, gc = torch.tensor([0.1, 0.2]), torch.tensor([[0.0, 0.1], [-0.2, 0.3]]), torch.tensor([0.4])
    expected = []
    for t, g, extra in ((a, ga, dict(prior=0.0)), (b, gb, dict(prior=torch.tensor([1.0, -1.0]), memory_window=3.0)),
                        (c, gc, dict(prior=2.0, kl_multiplier=0.0))):
        e = t.detach().clone()
        bimu_update_(e, g, **{**hp, **extra})
        expected.append(e)
        t.grad = g
    opt.step()
    for t, e in zip((a, b, c), expected):
        assert torch.equal(t.detach(), e)
    assert opt.param_groups[1]["prior"] is None and torch.equal(opt.state[b]["prior"], torch.tensor([1.0, -1.0]))
    assert opt.param_groups[2]["prior"] == 2.0
    with pytest.raises(ValueError, match="does not broadcast"):
        opt.add_param_group({"params": [torch.nn.Parameter(torch.zeros(3))], "prior": torch.zeros(2)})
    assert len(opt.param_groups) == 3  # a refused group is not kept
    copied = copy.deepcopy(opt)  # a copied (or unpickled) optimizer takes new groups as well
    copied.add_param_group({"params": [torch.nn.Parameter(torch.zeros(1))], "prior": 1.0})
    assert len(copied.param_groups) == 4


def test_bayesbinn_add_param_group_with_its_own_prior():
    p = torch.nn.Parameter(torch.zeros(2))
    opt = BayesBiNN([p], lr=0.5, prior_strength=0.1, ratio_eps=0.0)
    q = torch.nn.Parameter(torch.zeros(2, 2))
    opt.add_param_group({"params": [q], "prior": torch.tensor([1.0, -1.0]), "prior_strength": 1.0})
    assert torch.equal(opt.state[q]["prior"], torch.tensor([[1.0, -1.0], [1.0, -1.0]]))
    p.grad, q.grad = torch.zeros(2), torch.zeros(2, 2)
    opt.step()  # lambda - lr * prior_strength * (lambda - prior), lambda = 0
    assert torch.equal(p.detach(), torch.zeros(2))
    assert torch.allclose(q.detach(), torch.tensor([[0.5, -0.5], [0.5, -0.5]]))


def test_mesu_and_adam_add_param_group():
    first, second = GaussianMLP([3, 2]), GaussianMLP([3, 2])
    opt = MESU(first.parameters(), memory_window=10.0)
    opt.add_param_group({"params": list(second.parameters()), "sigma_prior": 0.05})
    assert opt.param_groups[1]["mu_sigma"] == [[0, 1], [2, 3]] and opt.param_groups[1]["sigma_prior"] == 0.05
    w = torch.nn.Parameter(torch.ones(2))
    adam = MetaplasticAdam([torch.nn.Parameter(torch.ones(1))], lr=0.1)
    adam.add_param_group({"params": [w], "metaplasticity": 0.0})
    w.grad = torch.ones(2)
    adam.step()  # first Adam step: lr * sign(g)
    assert adam.state[w]["step"] == 1 and torch.allclose(w.detach(), torch.full((2,), 0.9))
    with pytest.raises(ValueError, match="metaplasticity"):
        adam.add_param_group({"params": [torch.nn.Parameter(torch.ones(1))], "metaplasticity": -1.0})


@pytest.mark.parametrize("name", list(CASES))
def test_step_takes_a_closure(name):
    make_model, make_opt, _, loss_fn, x, y, a = _start(name)
    b = make_model()
    b.load_state_dict(a.state_dict())
    opt_a, opt_b = make_opt(a), make_opt(b)
    gen_a, gen_b = torch.Generator().manual_seed(2), torch.Generator().manual_seed(2)
    _train(a, opt_a, gen_a, x, y, loss_fn, 3)

    def closure():
        opt_b.zero_grad(set_to_none=True)
        loss = loss_fn(b, x[i:i + 1], y[i:i + 1], gen_b)
        loss.backward()
        return loss

    for i in range(3):
        loss = opt_b.step(closure)
        assert isinstance(loss, torch.Tensor) and loss.dim() == 0
    for pa, pb in zip(a.parameters(), b.parameters()):
        assert torch.equal(pa, pb)


def test_bimu_loads_a_state_dict_of_the_older_layout():
    """Counters kept beside ``state`` and groups without ``prior`` / ``skip_unlabelled``."""
    p = torch.nn.Parameter(torch.tensor([0.5]))
    old = {"state": {}, "param_groups": [{"lr": 2.0, "lr_max": 0.1, "likelihood_multiplier": 1.0,
                                          "kl_multiplier": 1.0, "memory_window": 9.0, "params": [0]}],
           "counters": {"updates_applied": 4, "examples_seen": 6}}
    opt = BiMU([p], prior=0.25)
    opt.load_state_dict(old)
    assert (opt.updates_applied, opt.examples_seen) == (4, 6)
    group = opt.param_groups[0]
    assert (group["lr"], group["memory_window"], group["prior"], group["skip_unlabelled"]) == (2.0, 9.0, 0.25, True)

"""The torch path follows its parameters' device: generators, batches, optimizer state, scores."""

from __future__ import annotations

import warnings

import pytest
import torch

from bimu.active import ActiveLearner, make_acquisition
from bimu.methods import available_methods, create_method
from bimu.methods.base import generator_on, same_device
from bimu.nn import BinaryBayesianMLP, GaussianMLP
from bimu.uncertainty import UNCERTAINTY_SCORES, variation_ratio, widest_float

SIZES = [6, 5, 3]
CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def _stream(n=12, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, SIZES[0], generator=g), torch.randint(0, SIZES[-1], (n,), generator=g)


def _train(method, x, y):
    for i in range(len(x)):
        if i == len(x) // 2 and method.info.needs_task_boundaries:
            method.task_end()
        method.learn(x[i:i + 1], y[i:i + 1])


@pytest.mark.parametrize("name", available_methods())
def test_generators_live_on_the_parameters_device_and_cpu_stays_bit_identical(name):
    x, y = _stream()
    plain = create_method(name, SIZES, seed=3)
    on_cpu = create_method(name, SIZES, seed=3, device="cpu")
    for m in (plain, on_cpu):
        assert m.device.type == m.train_generator.device.type == m.eval_generator.device.type == "cpu"
    moved = create_method(name, SIZES, seed=3)
    train_generator = moved.train_generator
    assert moved.to("cpu") is moved and moved.train_generator is train_generator  # same device: kept as is
    for m in (plain, on_cpu, moved):
        _train(m, x, y)
    probs = [m.predict_samples(x) for m in (plain, on_cpu, moved)]
    assert torch.equal(probs[0], probs[1]) and torch.equal(probs[0], probs[2])


def test_generator_helpers_and_widest_float():
    g = torch.Generator().manual_seed(0)
    assert generator_on(g, torch.device("cpu")) is g
    assert same_device("cuda", "cuda:0") and not same_device("cpu", "cuda")
    assert widest_float("mps") == torch.float32 and widest_float("cpu") == torch.float64
    votes = torch.eye(3)[[0, 0, 1]].unsqueeze(1)
    assert variation_ratio(votes).dtype == votes.dtype


def test_generator_states_of_another_device_type_are_not_restored():
    m = create_method("bimu", SIZES, seed=0)
    state = m.state_dict()
    assert "generator_device" not in state  # a CPU method writes the layout it always wrote
    state["generator_device"] = "cuda"
    before = m.train_generator.get_state()
    with pytest.warns(UserWarning, match="streams are not restored"):
        m.load_state_dict(state)
    assert torch.equal(m.train_generator.get_state(), before)


def _check_on(device, name):
    x, y = _stream()
    m = create_method(name, SIZES, seed=1, device=device)
    assert same_device(m.device, device) and same_device(m.train_generator.device, device)
    _train(m, x, y)  # CPU batches are moved to the method's device
    probs = m.predict_samples(x, n_samples=4)
    assert same_device(probs.device, device)
    for f in UNCERTAINTY_SCORES.values():
        assert same_device(f(probs).device, device)
    assert m.predict(x, generator=torch.Generator().manual_seed(0)).shape == (len(x),)  # a CPU generator works
    learner = ActiveLearner(m, make_acquisition("vr", threshold=0.2, mc_samples=4) if m.info.bayesian
                            else make_acquisition("entropy", threshold=0.5))
    for i in range(4):
        _, ask = learner.predict_one(x[i])
        if ask:
            learner.learn_one(x[i], y[i])
    copy = create_method(name, SIZES, seed=9, device=device)
    copy.load_state_dict(m.state_dict())
    assert torch.equal(copy.predict_samples(x), m.predict_samples(x))


@pytest.mark.parametrize("name", available_methods())
def test_every_method_learns_predicts_and_resumes_on_the_cpu(name):
    _check_on("cpu", name)


@CUDA
@pytest.mark.parametrize("name", available_methods())
def test_every_method_learns_predicts_and_resumes_on_cuda(name):
    _check_on("cuda", name)


@CUDA
@pytest.mark.parametrize("name", available_methods())
def test_a_cpu_method_moved_to_cuda_carries_its_update_state(name):
    x, y = _stream()
    m = create_method(name, SIZES, seed=2)
    _train(m, x[:6], y[:6])
    m.to("cuda")
    assert m.device.type == m.train_generator.device.type == "cuda"
    optimizer = getattr(m, "optimizer", None)
    for state in (optimizer.state.values() if optimizer is not None else ()):
        assert all(v.device.type == "cuda" for v in state.values() if isinstance(v, torch.Tensor))
    regularizer = getattr(m, "regularizer", None)
    for t in (regularizer.tensors() if regularizer is not None else ()):
        assert t.device.type == "cuda"
    _train(m, x[6:], y[6:])
    assert torch.isfinite(m.predict_samples(x)).all()


@CUDA
def test_layers_draw_from_a_generator_on_another_device():
    x = torch.randn(4, 6)
    for net in (BinaryBayesianMLP([6, 3]), GaussianMLP([6, 3])):
        reference = net(x, n_samples=2, generator=torch.Generator().manual_seed(0))
        net.cuda()
        on_cuda = net(x.cuda(), n_samples=2, generator=torch.Generator().manual_seed(0))
        assert on_cuda.device.type == "cuda"
        assert torch.allclose(on_cuda.cpu(), reference, atol=1e-5)
    cpu_layer, cuda_layer = BinaryBayesianMLP([6, 3]), BinaryBayesianMLP([6, 3]).cuda()
    cpu_layer.layers[0].reset_parameters(torch.Generator().manual_seed(4))
    cuda_layer.layers[0].reset_parameters(torch.Generator().manual_seed(4))  # drawn on the CPU, copied
    assert torch.equal(cuda_layer.layers[0].lam.cpu(), cpu_layer.layers[0].lam)


@CUDA
def test_variation_ratio_in_float64_on_cuda():
    votes = torch.eye(3, device="cuda")[[0, 0, 1]].unsqueeze(1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert variation_ratio(votes).device.type == "cuda"

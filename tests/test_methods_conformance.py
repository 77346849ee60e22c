"""One conformance suite over every registered method (``bimu.methods.available_methods()``).

Each method goes through the same checks: it learns a small separable problem well above chance,
its state round-trips exactly, the same seed gives the same result, bad or unknown hyperparameters
raise ValueError naming them, its declared uncertainty scores are computable and finite, its memory
footprint is positive and equals the bytes of its declared state, and bad inputs raise ValueError.
"""

from __future__ import annotations

import copy
import io
import math
import re

import pytest
import torch

from bimu.methods import available_methods, create_method, get_method
from bimu.methods.base import SCORE_NAMES
from bimu.methods.footprint import nested_tensor_bytes
from bimu.uncertainty import UNCERTAINTY_SCORES

METHODS = available_methods()
SIZES = [20, 16, 3]

# Hyperparameters for the toy problem where the paper's presets (tuned for 784-d, 60k-step tasks)
# would learn too slowly in 300 steps. Binary Bayesian nets use the sign activation here.
TOY_HPARAMS = {
    "bimu": dict(lr=1.0, lr_max=0.5, likelihood_multiplier=10.0, kl_multiplier=1.0, memory_window=1000,
                 n_samples=1, n_eval_samples=5, activation="sign"),
    "bayesbinn": dict(lr=1.0, prior_strength=1e-4, n_samples=1, n_eval_samples=5, activation="sign"),
    "synaptic-metaplasticity": dict(lr=5e-3, metaplasticity=1.0, bn_momentum=0.05),
    "ste": dict(lr=5e-3),
    "mesu": dict(n_samples=2, n_eval_samples=5, memory_window=1e4, clamp_grad=1.0),
    "ewc-online": dict(lr=0.05),
    "si": dict(lr=0.05),
    "sgd": dict(lr=0.05),
    "replay": dict(lr=0.05, buffer_size=16, replay_batch_size=4),  # full after 16 examples: reservoir draws
}


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


def blobs(n: int, seed: int, d: int = 20, c: int = 3):
    """``c`` Gaussian blobs in ``d`` dimensions (fixed means, per-seed draws)."""
    g = torch.Generator().manual_seed(1234)
    means = torch.randn(c, d, generator=g)
    means = 3.0 * means / means.norm(dim=1, keepdim=True)
    g2 = torch.Generator().manual_seed(seed)
    y = torch.randint(0, c, (n,), generator=g2)
    return means[y] + 0.7 * torch.randn(n, d, generator=g2), y


def make(name: str, seed: int = 0, **extra):
    return create_method(name, SIZES, seed=seed, **{**TOY_HPARAMS.get(name, {}), **extra})


def run(method, x, y, task_end_every: int | None = None):
    for i in range(x.shape[0]):
        method.learn(x[i:i + 1], y[i:i + 1])
        if task_end_every and (i + 1) % task_end_every == 0 and method.info.needs_task_boundaries:
            method.task_end()


def proba(method, x):
    return method.predict_samples(x, generator=torch.Generator().manual_seed(7))


def flat_tensors(obj):
    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, dict):
        return [t for k in sorted(obj, key=str) for t in flat_tensors(obj[k])]
    if isinstance(obj, (list, tuple)):
        return [t for v in obj for t in flat_tensors(v)]
    return []


def test_every_registered_name_is_covered():
    assert set(TOY_HPARAMS) >= set(METHODS), "add toy hyperparameters for a new method"
    for name in ("bimu", "bayesbinn", "synaptic-metaplasticity", "ste", "mesu", "ewc-online", "si", "sgd", "replay"):
        assert name in METHODS


@pytest.mark.parametrize("name", METHODS)
def test_info_is_consistent(name):
    info = get_method(name).info
    assert info.name == name
    assert set(info.uncertainty_scores) <= set(SCORE_NAMES) and info.uncertainty_scores
    # Deterministic methods can only give aleatoric / predictive scores (one sample).
    if not info.bayesian:
        assert set(info.uncertainty_scores) <= {"predictive_entropy", "aleatoric"}
    else:
        assert "epistemic" in info.uncertainty_scores


@pytest.mark.parametrize("name", METHODS)
def test_learns_separable_problem(name):
    x, y = blobs(300, seed=1)
    xt, yt = blobs(400, seed=2)
    method = make(name)
    run(method, x, y, task_end_every=150)
    accuracy = (method.predict(xt) == yt).float().mean().item()
    assert accuracy >= 0.8, f"{name}: accuracy {accuracy:.3f} (chance 0.333)"
    assert method.updates_applied == 300 and method.examples_seen == 300


@pytest.mark.parametrize("name", METHODS)
def test_state_round_trip(name):
    x, y = blobs(40, seed=3)
    xt, _ = blobs(16, seed=4)
    a = make(name, seed=0)
    run(a, x[:20], y[:20], task_end_every=10)
    buffer = io.BytesIO()
    torch.save(a.state_dict(), buffer)
    buffer.seek(0)
    b = make(name, seed=99)  # a different initialisation, overwritten by the loaded state
    b.load_state_dict(torch.load(buffer, weights_only=True))  # a method state is tensors and plain values
    assert b.examples_seen == a.examples_seen and b.updates_applied == a.updates_applied
    run(a, x[20:], y[20:], task_end_every=10)
    run(b, x[20:], y[20:], task_end_every=10)
    assert torch.equal(proba(a, xt), proba(b, xt))
    assert torch.equal(a.predict(xt), b.predict(xt))  # eval generators were restored too
    ta, tb = flat_tensors(a.state_dict()), flat_tensors(b.state_dict())
    assert len(ta) == len(tb) and all(torch.equal(u, v) for u, v in zip(ta, tb))


@pytest.mark.parametrize("name", METHODS)
def test_same_seed_same_result(name):
    x, y = blobs(30, seed=5)
    xt, _ = blobs(16, seed=6)
    runs = []
    for seed in (0, 0, 1):
        m = make(name, seed=seed)
        run(m, x, y, task_end_every=15)
        runs.append(proba(m, xt))
    assert torch.equal(runs[0], runs[1])
    assert not torch.equal(runs[0], runs[2])


def _invalid_values(h):
    values = ["not-a-number"] if h.type in (int, float) else []
    if h.type is bool:
        values.append("maybe")
    if h.choices is not None:
        values.append("no-such-choice")
    if h.check is not None and h.type in (int, float):
        values += [v for v in (-1, 0, 2, 1e12) if not h.check(h.type(v))][:1]
    if h.type is float:
        values.append(math.nan)
    return values


@pytest.mark.parametrize("name", METHODS)
def test_bad_hyperparameter_raises_naming_it(name):
    cls = get_method(name)
    checked = 0
    for hname, h in cls.hyperparameters.items():
        for value in _invalid_values(h):
            with pytest.raises(ValueError, match=re.escape(repr(hname))):
                create_method(name, SIZES, seed=0, **{hname: value})
            checked += 1
    assert checked >= len(cls.hyperparameters)


@pytest.mark.parametrize("name", METHODS)
def test_unknown_hyperparameter_raises(name):
    with pytest.raises(ValueError, match="no_such_hyperparameter"):
        create_method(name, SIZES, seed=0, no_such_hyperparameter=1.0)
    with pytest.raises(ValueError, match="no preset"):
        create_method(name, SIZES, seed=0, preset="no-such-benchmark")


@pytest.mark.parametrize("name", METHODS)
def test_declared_uncertainty_scores_are_finite_and_predict_proba_is_their_mean(name):
    x, y = blobs(20, seed=8)
    xt, _ = blobs(12, seed=9)
    method = make(name)
    run(method, x, y)
    p = method.predict_samples(xt)
    expected_samples = method.hparams.get("n_eval_samples", 1) if method.info.bayesian else 1
    assert p.shape == (expected_samples, 12, 3)
    assert torch.allclose(p.sum(-1), torch.ones(expected_samples, 12), atol=1e-5)
    for score in method.info.uncertainty_scores:
        values = UNCERTAINTY_SCORES[score](p)
        assert values.shape == (12,) and torch.isfinite(values).all() and (values >= 0).all(), score
    if method.info.bayesian:
        assert UNCERTAINTY_SCORES["epistemic"](method.predict_samples(xt, n_samples=20)).max() > 0
    # predict_proba: the mean over the samples, [batch, classes]
    samples = method.predict_samples(xt, n_samples=4, generator=torch.Generator().manual_seed(3))
    mean = method.predict_proba(xt, n_samples=4, generator=torch.Generator().manual_seed(3))
    assert mean.shape == (12, 3) and torch.equal(mean, samples.mean(0))
    assert torch.allclose(mean.sum(-1), torch.ones(12), atol=1e-5)


@pytest.mark.parametrize("name", METHODS)
def test_memory_footprint_matches_declared_state(name):
    method = make(name)
    before = method.memory_bytes()
    assert before > 0
    assert before == nested_tensor_bytes(method.modules_state())
    x, y = blobs(4, seed=10)
    run(method, x, y, task_end_every=2)
    assert method.memory_bytes() == nested_tensor_bytes(method.modules_state())


def _bad_batches():
    x, y = blobs(4, seed=11)
    nan_x = x.clone()
    nan_x[1, 3] = math.nan
    return {
        "nan input": (nan_x, y),
        "inf input": (x.clone().fill_(math.inf), y),
        "label too large": (x, torch.tensor([0, 1, 3, 2])),
        "negative label": (x, torch.tensor([0, -1, 2, 2])),
        "wrong feature count": (torch.randn(4, 21), y),
        "1-d input": (x[0], y[:1]),
        "label count mismatch": (x, y[:3]),
    }


@pytest.mark.parametrize("case", sorted(_bad_batches()))
@pytest.mark.parametrize("name", METHODS)
def test_bad_inputs_raise_value_error(name, case):
    x, y = _bad_batches()[case]
    method = make(name)
    state = copy.deepcopy(method.state_dict())
    with pytest.raises(ValueError):
        method.learn(x, y)
    # A rejected batch changes nothing.
    assert method.updates_applied == 0 and method.examples_seen == 0
    ta, tb = flat_tensors(state), flat_tensors(method.state_dict())
    assert all(torch.equal(u, v) for u, v in zip(ta, tb))


@pytest.mark.parametrize("name", METHODS)
def test_bad_prediction_inputs_raise_value_error(name):
    method = make(name)
    with pytest.raises(ValueError):
        method.predict_samples(torch.full((2, 20), math.nan))
    with pytest.raises(ValueError):
        method.predict_samples(torch.randn(2, 19))


@pytest.mark.parametrize("name", METHODS)
def test_unlabelled_examples_only_count(name):
    method = make(name)
    state = flat_tensors(method.modules_state())
    method.observe_unlabelled(3)
    assert method.examples_seen == 3 and method.updates_applied == 0
    assert all(torch.equal(u, v) for u, v in zip(state, flat_tensors(method.modules_state())))


@pytest.mark.parametrize("name", METHODS)
def test_presets_resolve_and_build(name):
    cls = get_method(name)
    known = {"pmnist-100", "pmnist-2000", "openloris-1024", "openloris-8192", "openloris-25088",
             "openloris-8192-imbalanced", "animals", "openloris-8192-std", "openloris-8192-imbalanced-std",
             "animals-std"}
    assert set(cls.presets) <= known
    for key in cls.presets:
        method = create_method(name, [6, 4], seed=0, preset=key)
        for hname, value in cls.presets[key].items():
            assert method.hparams[hname] == cls.hyperparameters[hname].validate(value)


def test_hyperparameter_table_rejects_a_name_declared_twice():
    from bimu.methods.base import hyperparameter_table, positive

    with pytest.raises(ValueError, match=r"hyperparameter declared twice: \['lr'\]"):
        hyperparameter_table(positive("lr", float, 0.1, "a"), positive("lr", float, 0.2, "b"))

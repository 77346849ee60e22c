"""Fused engine: equivalence with the torch path on small networks, determinism, state, input checks."""

from __future__ import annotations

import inspect

import numpy as np
import pytest
import torch

import bimu.engine as engine
from bimu.engine import create_fused, supports
from bimu.engine.fused import FusedBayesBiNN, FusedBiMU
from bimu.methods.bayesbinn import BayesBiNNMethod
from bimu.methods.bimu import BiMUMethod, mc_nll
from bimu.nn.mlp import BinaryBayesianMLP
from bimu.optim.bimu import BiMU
from bimu.uncertainty import expected_entropy, mutual_information, predictive_entropy, vote_counts

SIZES = [12, 16, 8, 4]  # two hidden layers: exercises the general-depth code
HP = dict(lr=3.0, lr_max=0.01, likelihood_multiplier=50.0, kl_multiplier=2.0, memory_window=300.0)


def _data(n, d=SIZES[0], c=SIZES[-1], seed=0):
    g = np.random.default_rng(seed)
    return g.standard_normal((n, d)).astype(np.float32), g.integers(0, c, n).astype(np.int64)


def _torch_replay(m, X, Y, activation="rbg", batch=1, temperature=1.0, dtype=torch.float32):
    """Replay the engine's steps on the torch network with the engine's uniforms."""
    net = BinaryBayesianMLP(m.sizes, activation=activation, temperature=temperature).to(dtype)
    with torch.no_grad():
        for a, p in zip(m.layer_lambdas(), net.parameters()):
            p.copy_(torch.from_numpy(a.astype(np.float64)))
    opt = BiMU(net.parameters(), **HP)
    start = m.train_step
    for j in range(len(X) // batch):
        us = [torch.from_numpy(u).to(dtype) for u in m.train_uniforms(start + j)]
        opt.zero_grad()
        x = torch.from_numpy(X[j * batch:(j + 1) * batch]).to(dtype)
        mc_nll(net(x, n_samples=m.K, mode="relaxed", uniforms=us), torch.from_numpy(Y[j * batch:(j + 1) * batch])).backward()
        opt.step()
    return [p.detach().double().numpy() for p in net.parameters()]


def _rel(a_list, b_list):
    return max(float(np.abs(a - b).max() / np.abs(b).max()) for a, b in zip(a_list, b_list))


@pytest.mark.parametrize("activation", ["rbg", "sign"])
def test_same_lambda_as_torch_with_same_uniforms(activation):
    X, Y = _data(60)
    m = create_fused("bimu", SIZES, 1, dict(HP, activation=activation))
    ref = _torch_replay(m, X, Y, activation)
    m.learn_many(X, Y)
    assert _rel(m.layer_lambdas(), ref) < 1e-4


def test_batch_step_and_temperature_match_torch():
    X, Y = _data(40)
    m = create_fused("bimu", SIZES, 2, dict(HP, temperature=0.7))
    ref = _torch_replay(m, X, Y, batch=4, temperature=0.7)
    for j in range(10):
        m.learn(torch.from_numpy(X[4 * j:4 * j + 4]), torch.from_numpy(Y[4 * j:4 * j + 4]))
    assert _rel(m.layer_lambdas(), ref) < 1e-4
    assert m.examples_seen == 40 and m.updates_applied == 10  # 10 steps of batches of 4, as torch counts


def test_initial_lambda_equals_torch_method():
    m = create_fused("bimu", SIZES, 5, HP)
    t = BiMUMethod(SIZES, seed=5, **BiMUMethod.resolve_hyperparameters(HP))
    for a, p in zip(m.layer_lambdas(), t.model.parameters()):
        assert np.array_equal(a, p.detach().numpy())


def test_independent_of_threads_and_chunking(monkeypatch):
    monkeypatch.setattr("bimu.engine.base.busy", lambda threads, cores=None: False)  # two threads, busy or not
    X, Y = _data(50)
    a = create_fused("bimu", SIZES, 7, HP, threads=1)
    a.learn_many(X, Y)
    b = create_fused("bimu", SIZES, 7, HP, threads=2)
    b.learn_many(X[:13], Y[:13])
    for i in range(13, 20):
        b.learn(torch.from_numpy(X[i:i + 1]), torch.from_numpy(Y[i:i + 1]))
    b.learn_many(X[20:], Y[20:])
    assert np.array_equal(a.lam, b.lam)
    assert a.train_step == b.train_step == 50 and b.examples_seen == 50
    assert torch.equal(a.predict_samples(torch.from_numpy(X)), b.predict_samples(torch.from_numpy(X)))
    c = create_fused("bimu", SIZES, 8, HP, threads=1)  # another seed: another trajectory
    c.learn_many(X, Y)
    assert not np.array_equal(a.lam, c.lam)


@pytest.mark.parametrize("method", ["bimu", "bayesbinn"])
def test_one_layer_network_one_call_per_example_and_written_lambda(method):
    """A one-layer network (an active stream's 8,192 -> 19 head) learned one call per example, as an active
    stream learns, follows the one-call trajectory; a lambda written between calls is learned from as a
    freshly loaded one (the next call does not keep samples drawn from the old lambda)."""
    sizes = [40, 5]
    X, Y = _data(30, d=40, c=5)
    hp = dict(HP, n_samples=3) if method == "bimu" else dict(n_samples=3)
    a = create_fused(method, sizes, 2, hp, threads=1)
    a.learn_many(X, Y)
    b = create_fused(method, sizes, 2, hp, threads=1)
    for i in range(30):
        b.learn(torch.from_numpy(X[i:i + 1]), torch.from_numpy(Y[i:i + 1]))
    assert np.array_equal(a.lam, b.lam) and b.updates_applied == 30
    b.layer_lambdas()[0][1:3] *= -0.5
    c = create_fused(method, sizes, 2, hp, threads=1)
    c.load_modules_state(b.modules_state())
    for m in (b, c):
        m.learn_many(X[:4], Y[:4])
        m.learn(torch.from_numpy(X[4:5]), torch.from_numpy(Y[4:5]))
    assert np.array_equal(b.lam, c.lam)


def test_state_dict_resumes_exactly():
    X, Y = _data(40)
    a = create_fused("bimu", SIZES, 3, HP)
    a.learn_many(X[:20], Y[:20])
    a.predict(torch.from_numpy(X[:5]))
    state = a.state_dict()
    b = create_fused("bimu", SIZES, 3, HP)
    b.load_state_dict(state)
    a.learn_many(X[20:], Y[20:])
    b.learn_many(X[20:], Y[20:])
    assert np.array_equal(a.lam, b.lam)
    assert torch.equal(a.predict_samples(torch.from_numpy(X)), b.predict_samples(torch.from_numpy(X)))
    assert b.memory_bytes() == a.lam.nbytes


def test_one_example_scores_are_the_batch_kernels_bit_for_bit():
    """The query decision's serial kernel and the batch kernel give the same outputs, ties and
    extreme logits included, in both float widths."""
    from bimu.engine.scores import scores_from_logits, scores_one

    rng = np.random.default_rng(3)
    cases = [rng.standard_normal((10, 1, 19)) * 4, rng.standard_normal((5, 6, 3)), np.zeros((7, 1, 4)),
             np.where(rng.random((9, 1, 5)) < 0.5, -80.0, 80.0)]
    for logits in cases:
        for dtype in (np.float32, np.float64):
            one, batch = scores_one(logits.astype(dtype)), scores_from_logits(logits.astype(dtype))
            for a, b in zip(one, batch):
                assert a.dtype == b.dtype and np.array_equal(a, b)
    assert scores_one(np.zeros((7, 1, 4)))[1].tolist() == [[7, 0, 0, 0]]  # ties: the first class


def test_hard_predictions_and_scores_match_torch():
    X, Y = _data(30)
    m = create_fused("bimu", SIZES, 4, HP)
    m.learn_many(X, Y)
    us = [torch.from_numpy(u).float() for u in m.eval_uniforms(7)]
    net = BinaryBayesianMLP(SIZES)
    with torch.no_grad():
        for a, p in zip(m.layer_lambdas(), net.parameters()):
            p.copy_(torch.from_numpy(a))
    x = torch.from_numpy(X)
    probs_ref = torch.softmax(net(x, n_samples=7, mode="hard", uniforms=us), -1)
    scores = m.mc_scores(x, n_samples=7)
    assert scores["probs"].shape == (7, 30, 4)
    assert torch.allclose(scores["probs"], probs_ref, atol=1e-5)
    assert torch.equal(scores["votes"], vote_counts(probs_ref))
    mlp = torch.log_softmax(probs_ref.log(), -1).mean(0)
    top2 = mlp.topk(2, -1).values
    clear = (top2[:, 0] - top2[:, 1]) > 1e-4  # exact near-ties may break either way in float32
    assert torch.equal(scores["predictions"][clear], mlp.argmax(-1)[clear]) and clear.sum() >= 25
    assert torch.allclose(scores["variation_ratio"].float(), 1 - vote_counts(probs_ref).max(-1).values.float() / 7.0)
    assert torch.allclose(scores["predictive_entropy"].float(), predictive_entropy(probs_ref), atol=1e-5)
    assert torch.allclose(scores["aleatoric"].float(), expected_entropy(probs_ref), atol=1e-5)
    assert torch.allclose(scores["epistemic"].float(), mutual_information(probs_ref), atol=1e-5)


def test_evaluation_does_not_touch_training_and_is_batch_independent():
    X, Y = _data(40)
    a = create_fused("bimu", SIZES, 6, HP)
    b = create_fused("bimu", SIZES, 6, HP)
    x = torch.from_numpy(X[:9])
    full = b.predict_samples(x, n_samples=3, generator=torch.Generator().manual_seed(11))
    parts = [b.predict_samples(x[i:i + 1], n_samples=3, generator=torch.Generator().manual_seed(11)) for i in range(9)]
    assert torch.equal(full, torch.cat(parts, dim=1))
    b.predict(x)
    b.mc_scores(x, n_samples=4)
    a.learn_many(X, Y)
    b.learn_many(X, Y)
    assert np.array_equal(a.lam, b.lam)


def test_bayesbinn_update_and_task_end():
    X, Y = _data(20)
    assert supports("bayesbinn", SIZES, {"lr": 1e-3, "prior_strength": 1.0})
    assert supports("bayesbinn", SIZES, {"lr": 1e-3})
    assert supports("bayesbinn", [784, 100, 10], dict(BayesBiNNMethod.presets["pmnist-100"], temperature=1.0,
                                                      output_norm=True, gate_width=1.0, lambda_init="zero"))
    assert not supports("bayesbinn", SIZES, {"lr": 1e-3, "momentum": 0.9})
    m = create_fused("bayesbinn", SIZES, 0, {"lr": 1e-3, "prior_strength": 0.5})
    assert isinstance(m, FusedBayesBiNN) and m.info.needs_task_boundaries
    assert not m.lam.any()
    # one step by hand: g_mu = g / (1 - tanh^2 lam) with lam = 0, prior 0
    us = [torch.from_numpy(u).float() for u in m.train_uniforms()]
    net = BinaryBayesianMLP(SIZES)
    with torch.no_grad():
        for p in net.parameters():
            p.zero_()
    mc_nll(net(torch.from_numpy(X[:1]), n_samples=5, uniforms=us), torch.from_numpy(Y[:1])).backward()
    m.learn_many(X[:1], Y[:1])
    for a, p in zip(m.layer_lambdas(), net.parameters()):
        assert np.allclose(a, -1e-3 * p.grad.numpy(), rtol=1e-4, atol=1e-9)
    m.task_end()
    assert np.array_equal(m.prior, m.lam)
    assert m.memory_bytes() == 2 * m.lam.nbytes


@pytest.mark.parametrize("batch,prior_direction,ratio_eps", [(1, "towards", 1e-10), (3, "towards", 1e-10),
                                                             (1, "away", 1e-10), (3, "away", 1e-10),
                                                             (1, "towards", 0.0), (3, "towards", 0.0),
                                                             (1, "towards", 0.3), (3, "away", 0.3)])
def test_bayesbinn_matches_torch_method_with_same_uniforms(batch, prior_direction, ratio_eps):
    # ratio_eps = 0.3 makes the eps terms count while lambda is small
    X, Y = _data(36)
    hp = dict(lr=0.05, prior_strength=0.5, lambda_init="uniform", prior_direction=prior_direction,
              ratio_eps=ratio_eps)
    m = create_fused("bayesbinn", SIZES, 4, hp)
    t = BayesBiNNMethod(SIZES, seed=4, **BayesBiNNMethod.resolve_hyperparameters(hp))
    for a, p in zip(m.layer_lambdas(), t.model.parameters()):
        assert np.array_equal(a, p.detach().numpy())
    for j in range(len(X) // batch):
        if j == 5:  # a task boundary: the prior term (pull towards the old posterior) becomes active
            m.task_end()
            t.task_end()
        us = [torch.from_numpy(u).float() for u in m.train_uniforms(j)]
        x = torch.from_numpy(X[j * batch:(j + 1) * batch])
        y = torch.from_numpy(Y[j * batch:(j + 1) * batch])
        t.optimizer.zero_grad(set_to_none=True)  # the optimizer forms the mu-gradient from dL/dlambda
        (mc_nll(t.model(x, n_samples=m.K, mode="relaxed", uniforms=us), y) * (m.K / batch)).backward()
        t.optimizer.step()
        if batch == 1:
            m.learn_many(X[j:j + 1], Y[j:j + 1])
        else:
            m.learn(x, y)
    assert _rel(m.layer_lambdas(), [p.detach().double().numpy() for p in t.model.parameters()]) < 1e-4


def test_supports_and_bad_inputs():
    assert supports("bimu", [784, 100, 10], {"activation": "sign"})
    assert supports("bimu", [8192, 19], {})
    assert not supports("bimu", [784, 100, 10], {"activation": "relu"})
    assert not supports("bimu", [784, 100, 10], {"momentum": 0.9})
    assert not supports("bimu", [784], {})
    assert not supports("no-such-method", [784, 100, 10], {})
    with pytest.raises(ValueError, match="does not support"):
        create_fused("no-such-method", [4, 2], 0, {})
    with pytest.raises(ValueError, match="lr"):
        create_fused("bimu", [4, 2], 0, {"lr": -1})
    m = create_fused("bimu", SIZES, 0, HP)
    x = torch.zeros(2, SIZES[0])
    with pytest.raises(ValueError, match="inputs must be"):
        m.learn(torch.zeros(2, 3), torch.zeros(2, dtype=torch.long))
    with pytest.raises(ValueError, match="NaN"):
        m.learn(torch.full((1, SIZES[0]), float("nan")), torch.zeros(1, dtype=torch.long))
    with pytest.raises(ValueError, match="labels must lie"):
        m.learn(x, torch.tensor([0, SIZES[-1]]))
    with pytest.raises(ValueError, match="labels must be integers"):
        m.learn_many(x, torch.tensor([0.0, 1.0]))
    with pytest.raises(ValueError, match="threads"):
        create_fused("bimu", SIZES, 0, HP, threads=0)
    with pytest.raises(ValueError, match="dtype"):
        create_fused("bimu", SIZES, 0, HP, dtype="float16")
    assert m.train_step == 0 and m.examples_seen == 0


def test_public_objects_have_docstrings():
    import importlib
    import pkgutil

    import bimu.rng

    mods = [engine, bimu.rng] + [importlib.import_module(f"bimu.engine.{info.name}")
                                 for info in pkgutil.iter_modules(engine.__path__)]
    missing = []
    for mod in mods:
        assert mod.__doc__, mod.__name__
        for name, obj in vars(mod).items():
            if name.startswith("_") or getattr(obj, "__module__", mod.__name__) != mod.__name__:
                continue
            if inspect.isclass(obj) or inspect.isfunction(obj) or hasattr(obj, "py_func"):
                if not (obj.__doc__ or "").strip():
                    missing.append(f"{mod.__name__}.{name}")
                if inspect.isclass(obj):
                    for mname, meth in vars(obj).items():
                        if not mname.startswith("_") and inspect.isfunction(meth) and not (meth.__doc__ or "").strip():
                            missing.append(f"{mod.__name__}.{name}.{mname}")
    assert not missing, missing
    assert FusedBiMU.info == BiMUMethod.info


def test_batch_learn_counts_examples_like_the_torch_method():
    X, Y = _data(6)
    m = create_fused("bimu", SIZES, 0, HP)
    m.learn(torch.from_numpy(X[:3]), torch.from_numpy(Y[:3]))
    m.learn(torch.from_numpy(X[3:4]), torch.from_numpy(Y[3:4]))
    assert (m.examples_seen, m.updates_applied, m.train_step) == (4, 2, 2)


def test_more_samples_than_the_engine_runs_are_refused_so_auto_picks_torch():
    """The batch-size-1 kernels are generated for at most rowpass.MAX_SAMPLES (64) samples per step:
    supports() says no beyond it (so ``--engine auto`` falls back to torch instead of failing at the
    first fused step) and create_fused names the limit in a one-line error."""
    from bimu.engine.rowpass import MAX_SAMPLES
    from bimu.experiments.config import RunConfig
    from bimu.experiments.runner import make_method

    assert MAX_SAMPLES == 64
    assert not supports("bimu", [784, 100, 10], {"n_samples": 100, "activation": "rbg"})
    assert not supports("bayesbinn", [784, 100, 10], {"n_samples": 65})
    assert supports("bimu", [784, 100, 10], {"n_samples": 64})
    assert supports("mesu", [784, 100, 10], {"n_samples": 100})  # MESU's kernel has no such limit
    with pytest.raises(ValueError, match="at most 64 samples per step") as err:
        create_fused("bimu", SIZES, 0, dict(HP, n_samples=100))
    assert "\n" not in str(err.value) and "n_samples=100" in str(err.value)
    with pytest.raises(ValueError, match="at most 64 samples per step"):
        FusedBiMU(SIZES, n_samples=65)
    cfg = RunConfig.from_dict({"benchmark": "pmnist", "method": "bimu", "engine": "auto"})
    hp = BiMUMethod.resolve_hyperparameters({"n_samples": 100})
    method, used = make_method(cfg, [784, 100, 10], 0, hp)
    assert used == "torch" and isinstance(method, BiMUMethod)
    with pytest.raises(ValueError, match="does not support .*: the fused engine runs bimu with at most 64 samples "
                                         r"per step \(n_samples=100\); use engine 'torch' or 'auto'") as err:
        make_method(cfg.replace(engine="fused"), [784, 100, 10], 0, hp)
    assert "\n" not in str(err.value)

"""The baselines in the fused engine: equivalence with their torch methods (200 MNIST steps; MESU fed the
engine's noise), batches, task-end hooks, determinism, chunking, state, runner selection, errors."""

from __future__ import annotations

import inspect

import numba
import numpy as np
import pytest
import torch

import bimu.engine as engine
from bimu.engine import FUSED_METHODS, create_fused, supports
from bimu.engine.base import layer_pairs, views
from bimu.methods import create_method
from bimu.methods.bimu import mc_nll
from bimu.nn import rbg
from test_engine_mnist import _mnist  # the first n MNIST training images, standardised (skips without data)

SIZES = [12, 16, 8, 4]  # two hidden layers: exercises the general-depth code
BASELINES = ["sgd", "ewc-online", "si", "ste", "synaptic-metaplasticity", "mesu"]
# hyperparameters large enough that a few dozen steps move every part of the state
SMALL_HP = {
    "sgd": dict(lr=0.05),
    "ewc-online": dict(lr=0.05, importance=30.0, downweighting=0.5),
    "si": dict(lr=0.05, coefficient=0.5, damping=0.1),
    "ste": dict(lr=0.01, weight_decay=0.01),
    "synaptic-metaplasticity": dict(lr=0.01, metaplasticity=1.5, weight_decay=0.01, bn_momentum=0.1, task_affine=True),
    "mesu": dict(lr_mu=1.0, lr_sigma=2.0, memory_window=300.0, clamp_grad=0.5, n_samples=4, n_eval_samples=3),
}


def _data(n, d=SIZES[0], c=SIZES[-1], seed=0):
    g = np.random.default_rng(seed)
    return g.standard_normal((n, d)).astype(np.float32), g.integers(0, c, n).astype(np.int64)


def _rel(a_list, b_list):
    return max(float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-30)) for a, b in zip(a_list, b_list))


def _torch_params(t):
    return [p.detach().numpy() for p in t.model.parameters()]


def _torch_dtype(t):
    return next(t.model.parameters()).dtype


def _hidden_act(t, h):
    """The torch MESU network's hidden activation (ReLU, or the Reverse Binary Gate)."""
    return rbg(h, t.model.gate_width) if t.model.activation == "rbg" else torch.relu(h)


def _mesu_step(t, eps, x, y):
    """One step of the torch MESU method with the given noise (``eps`` as :meth:`FusedMESU.train_noise`)."""
    h = x
    last = len(t.model.layers) - 1
    for l, layer in enumerate(t.model.layers):
        w = layer.mu_weight + layer.sigma_weight * torch.from_numpy(eps[2 * l])
        b = layer.mu_bias + layer.sigma_bias * torch.from_numpy(eps[2 * l + 1])
        h = torch.einsum("bi,soi->sbo" if h.dim() == 2 else "sbi,soi->sbo", h, w) + b.unsqueeze(1)
        h = _hidden_act(t, h) if l < last else h
    t.optimizer.zero_grad(set_to_none=True)
    mc_nll(h, y).backward()
    t.optimizer.step()
    t.examples_seen += int(x.shape[0])
    t.updates_applied += 1


def _mesu_logits(t, eps, x):
    with torch.no_grad():
        h = x
        for l, layer in enumerate(t.model.layers):
            w = layer.mu_weight + layer.sigma_weight * torch.from_numpy(eps[2 * l])
            b = layer.mu_bias + layer.sigma_bias * torch.from_numpy(eps[2 * l + 1])
            h = torch.einsum("bi,soi->sbo" if h.dim() == 2 else "sbi,soi->sbo", h, w) + b.unsqueeze(1)
            h = _hidden_act(t, h) if l < len(t.model.layers) - 1 else h
    return h


def _run_both(name, sizes, hp, X, Y, batch=1, boundary=None, seed=1, dtype="float32"):
    """The fused and the torch method trained side by side on the same stream (same noise for MESU)."""
    m = create_fused(name, sizes, seed, hp, dtype=dtype)
    t = create_method(name, sizes, seed, **hp)
    for a, b in zip(m.parameters_np(), _torch_params(t)):
        assert np.array_equal(a, b)  # same initialisation for the same seed
    tdt = getattr(torch, dtype)
    if dtype == "float64":
        t.model.double()
        for st in getattr(t, "optimizer").state.values():
            for k in ("exp_avg", "exp_avg_sq"):
                if k in st:
                    st[k] = st[k].double()
    for j in range(len(X) // batch):
        if j == boundary:
            m.task_end()
            t.task_end()
        x, y = torch.from_numpy(X[j * batch:(j + 1) * batch]), torch.from_numpy(Y[j * batch:(j + 1) * batch])
        if name == "mesu":
            _mesu_step(t, [e.astype(m.dtype) for e in m.train_noise()], x.to(tdt), y)
        else:
            t.learn(x.to(tdt), y)
        if batch == 1:
            m.learn_many(x, y)
        else:
            m.learn(x, y)
    return m, t


@pytest.mark.parametrize("name", BASELINES)
def test_200_mnist_steps_match_torch(name):
    """float32 for every method but the two Adam-trained sign networks, which are compared in float64:
    a hidden unit whose outgoing weight signs are all equal gets the gradient ``sum_c (p_c - y_c)``, 0 in
    exact arithmetic, a rounding residual of ~1e-8 in float32 that depends on the order of the sums; Adam
    normalises it (``eps = 1e-8``) into steps of up to ``lr`` whose sign is that of the residual, so
    float32 trajectories of two correct implementations part within a few steps. In float64 the
    residual (~1e-17) is far below ``eps`` and the paths agree."""
    X, Y = _mnist(200)
    hp = create_method(name, [784, 100, 10], 0, preset="pmnist-100").hparams
    if name == "mesu":
        hp = dict(hp, n_samples=2)  # the torch replay at K = 10 would dominate the file's time
    adam = name in ("ste", "synaptic-metaplasticity")
    m, t = _run_both(name, [784, 100, 10], hp, X, Y, boundary=100, dtype="float64" if adam else "float32")
    assert _rel(m.parameters_np(), _torch_params(t)) < (1e-9 if adam else 1e-4)
    x = torch.from_numpy(X)
    if name == "mesu":
        ref = torch.softmax(_mesu_logits(t, m.eval_noise(5), x), -1)
        probs = m.predict_samples(x, n_samples=5)
    else:
        ref, probs = t.predict_samples(x.to(_torch_dtype(t))).float(), m.predict_samples(x).float()
    assert probs.shape == ref.shape and torch.allclose(probs, ref, atol=1e-4)
    lp = torch.log(ref).mean(0)
    top2 = lp.topk(2, -1).values
    clear = (top2[:, 0] - top2[:, 1]) > 1e-3  # the sign networks' integer logits tie often
    assert clear.sum() > 100 and torch.equal(torch.log(probs).mean(0).argmax(-1)[clear], lp.argmax(-1)[clear])
    assert m.examples_seen == t.examples_seen == 200 and m.updates_applied == t.updates_applied == 200
    assert m.memory_bytes() == t.memory_bytes()


@pytest.mark.parametrize("name", ["mesu", "synaptic-metaplasticity"])
def test_reverse_binary_gate_variants_match_torch(name):
    """The activation ablation's MESU and Syn. Meta. with the Reverse Binary Gate: 200 MNIST steps
    (float64, so no pre-activation sits within rounding of a gate edge) and predictions, as the torch
    methods; the gate's threshold is a hyperparameter (gate_width)."""
    X, Y = _mnist(200)
    hp = dict(create_method(name, [784, 100, 10], 0, preset="pmnist-100").hparams, activation="rbg")
    if name == "mesu":
        hp = dict(hp, n_samples=2)
    m, t = _run_both(name, [784, 100, 10], hp, X, Y, boundary=100, dtype="float64")
    assert _rel(m.parameters_np(), _torch_params(t)) < 1e-9
    x = torch.from_numpy(X).double()
    if name == "mesu":
        ref = torch.softmax(_mesu_logits(t, m.eval_noise(5), x), -1)
        probs = m.predict_samples(x, n_samples=5)
    else:
        ref, probs = t.predict_samples(x), m.predict_samples(x)
    assert torch.allclose(probs.double(), ref.double(), atol=1e-9)
    # the gate changes the network: the same stream with the default activation ends elsewhere
    m_default, _ = _run_both(name, [784, 100, 10], dict(hp, activation=create_method(name, [4, 2]).hparams["activation"]),
                             X[:20], Y[:20], dtype="float64")
    m_gate, _ = _run_both(name, [784, 100, 10], hp, X[:20], Y[:20], dtype="float64")
    assert _rel(m_gate.parameters_np(), m_default.parameters_np()) > 1e-3
    small = dict(SMALL_HP[name], activation="rbg", gate_width=0.5)
    for batch in (1, 3):
        Xs, Ys = _data(36)
        m, t = _run_both(name, SIZES, small, Xs, Ys, batch=batch, boundary=5, dtype="float64")
        assert _rel(m.parameters_np(), _torch_params(t)) < 1e-9


@pytest.mark.parametrize("name", BASELINES)
@pytest.mark.parametrize("batch", [1, 3])
def test_small_network_matches_torch_with_task_boundary(name, batch):
    X, Y = _data(36)
    m, t = _run_both(name, SIZES, SMALL_HP[name], X, Y, batch=batch, boundary=5)
    assert _rel(m.parameters_np(), _torch_params(t)) < 1e-5
    assert m.examples_seen == t.examples_seen == 36 and m.updates_applied == t.updates_applied == 36 // batch
    assert m.memory_bytes() == t.memory_bytes()


@pytest.mark.parametrize("name", BASELINES)
def test_linear_head_matches_torch(name):
    X, Y = _data(20)
    m, t = _run_both(name, [SIZES[0], SIZES[-1]], SMALL_HP[name], X, Y, boundary=5)
    assert _rel(m.parameters_np(), _torch_params(t)) < 1e-5



@pytest.mark.parametrize("name", ["sgd", "ewc-online", "si"])
@pytest.mark.parametrize("batch", [1, 3])
def test_networks_without_biases_match_torch(name, batch):
    """bias=false: no bias in either path, the weights drawn as the biased network's, the fused engine's
    bias slots held at 0 through the steps and the task-end folds."""
    X, Y = _data(36)
    hp = dict(SMALL_HP[name], bias=False)
    m, t = _run_both(name, SIZES, hp, X, Y, batch=batch, boundary=5)
    L = len(SIZES) - 1
    assert len(_torch_params(t)) == len(m.parameters_np()) == L
    assert all(layer.bias is None for layer in t.model.layers)
    assert _rel(m.parameters_np(), _torch_params(t)) < 1e-5
    assert not m.theta[int(m.woff[-1]):].any()
    for trace in m._traces:
        assert not getattr(m, trace)[int(m.woff[-1]):].any()
    assert m.memory_bytes() == t.memory_bytes()
    biased = create_method(name, SIZES, 1, **SMALL_HP[name])
    plain = create_method(name, SIZES, 1, **hp)
    for layer, layer_b in zip(plain.model.layers, biased.model.layers):
        assert torch.equal(layer.weight, layer_b.weight)  # the generator also drew the dropped biases
    m.task_end()
    resumed = create_fused(name, SIZES, 1, hp)
    resumed.load_modules_state(m.modules_state())
    resumed.learn_many(X[:6], Y[:6])
    m.learn_many(X[:6], Y[:6])
    assert np.array_equal(resumed.theta, m.theta) and not m.theta[int(m.woff[-1]):].any()

@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_mesu_float64_matches_torch_float64(dtype):
    X, Y = _data(20)
    hp = SMALL_HP["mesu"]
    m = create_fused("mesu", SIZES, 2, hp, dtype=dtype)
    t = create_method("mesu", SIZES, 2, **hp)
    t.model.double()
    for j in range(20):
        _mesu_step(t, [e.astype(np.float64) for e in m.train_noise()], torch.from_numpy(X[j:j + 1]).double(),
                   torch.from_numpy(Y[j:j + 1]))
        m.learn_many(X[j:j + 1], Y[j:j + 1])
    assert _rel(m.parameters_np(), _torch_params(t)) < (1e-12 if dtype == "float64" else 1e-5)


def test_ewc_and_si_task_end_fold_like_torch():
    X, Y = _data(30)
    L = len(SIZES) - 1
    si = (("pen", "omega"), ("anchor", "anchor"), ("path", "path_integral"))
    for name, pairs, extra in (("ewc-online", (("pen", "fisher"), ("anchor", "anchor"), ("acc", "fisher_accumulator")),
                                {}), ("si", si, {}), ("si", si, {"omega_relu": True})):
        m, t = _run_both(name, SIZES, dict(SMALL_HP[name], **extra), X, Y, boundary=10)
        for step in ("before", "after"):  # mid-task (running sums) and after the second fold
            for mine, theirs in pairs:
                v = views(getattr(m, mine), m._shapes)
                assert _rel(layer_pairs(v[:L], v[L:]), [a.numpy() for a in getattr(t.regularizer, theirs)]) < 1e-5
            m.task_end()
            t.task_end()
        assert np.abs(m.pen).sum() > 0 and m.tasks_seen == t.regularizer.tasks_seen == 3
        assert not (m.acc if name == "ewc-online" else m.path).any()


def test_synaptic_metaplasticity_task_affine_bank_and_use_task():
    X, Y = _data(24)
    m, t = _run_both("synaptic-metaplasticity", SIZES, SMALL_HP["synaptic-metaplasticity"], X, Y, boundary=8)
    m.task_end()
    t.task_end()
    assert len(m.task_affine_bank) == len(t.task_affine_bank) == 2
    x = torch.from_numpy(X)
    for task in (0, 1, None):
        m.use_task(task)
        t.use_task(task)
        assert torch.allclose(m.predict_samples(x), t.predict_samples(x), atol=1e-5)
    with pytest.raises(ValueError, match="task must be"):
        m.use_task(5)
    plain = create_fused("synaptic-metaplasticity", SIZES, 0, dict(SMALL_HP["synaptic-metaplasticity"],
                                                                   task_affine=False))
    plain.task_end()
    assert plain.task_affine_bank == []
    with pytest.raises(ValueError, match="task_affine"):
        plain.use_task(0)


@pytest.mark.parametrize("name", BASELINES)
def test_same_seed_same_result_independent_of_chunking(name):
    X, Y = _data(40)
    hp = SMALL_HP[name]
    a = create_fused(name, SIZES, 7, hp)
    a.learn_many(X, Y)
    b = create_fused(name, SIZES, 7, hp)
    b.learn_many(X[:13], Y[:13])
    for i in range(13, 20):
        b.learn(torch.from_numpy(X[i:i + 1]), torch.from_numpy(Y[i:i + 1]))
    b.learn_many(X[20:], Y[20:])
    for u, v in zip(a.parameters_np(), b.parameters_np()):
        assert np.array_equal(u, v)
    x = torch.from_numpy(X)
    assert torch.equal(a.predict_samples(x), b.predict_samples(x))
    assert torch.equal(a.predict_samples(x), b.predict_samples(x))  # MESU: the evaluation counters advance alike
    c = create_fused(name, SIZES, 8, hp)
    c.learn_many(X, Y)
    assert any(not np.array_equal(u, v) for u, v in zip(a.parameters_np(), c.parameters_np()))


@pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2, reason="needs numba's pool to hold 2 threads")
@pytest.mark.parametrize("name", ["sgd", "mesu"])
def test_predictions_independent_of_threads_and_batch(name, monkeypatch):
    monkeypatch.setattr("bimu.engine.base.busy", lambda threads, cores=None: False)  # two threads, busy or not
    X, Y = _data(30)
    a = create_fused(name, SIZES, 3, SMALL_HP[name], threads=1)
    b = create_fused(name, SIZES, 3, SMALL_HP[name], threads=2)
    a.learn_many(X, Y)
    b.learn_many(X, Y)
    g = torch.Generator
    x = torch.from_numpy(X)
    assert torch.equal(a.predict_samples(x, generator=g().manual_seed(1)), b.predict_samples(x, generator=g().manual_seed(1)))


def test_mesu_predictions_draw_from_counters_and_generators():
    X, Y = _data(20)
    m = create_fused("mesu", SIZES, 3, SMALL_HP["mesu"])
    m.learn_many(X, Y)
    x = torch.from_numpy(X[:9])
    full = m.predict_samples(x, generator=torch.Generator().manual_seed(4))
    parts = [m.predict_samples(x[i:i + 1], generator=torch.Generator().manual_seed(4)) for i in range(9)]
    assert full.shape == (3, 9, SIZES[-1]) and torch.allclose(full, torch.cat(parts, dim=1), atol=1e-6)
    first, second = m.predict_samples(x), m.predict_samples(x)
    assert not torch.equal(first, second) and m.eval_counter == 2  # a fresh draw per call
    scores = m.mc_scores(x, n_samples=6)
    assert scores["probs"].shape == (6, 9, SIZES[-1]) and int(scores["votes"].sum()) == 6 * 9
    assert bool((scores["epistemic"] >= 0).all())
    noise = np.concatenate([e.reshape(-1) for e in m.eval_noise(200)])
    assert abs(noise.mean()) < 0.02 and abs(noise.std() - 1) < 0.02 and np.abs(noise).max() < 5.8


@pytest.mark.parametrize("name", BASELINES)
def test_state_dict_resumes_exactly(name):
    X, Y = _data(40)
    hp = SMALL_HP[name]
    a = create_fused(name, SIZES, 3, hp)
    a.learn_many(X[:20], Y[:20])
    a.task_end()
    a.predict(torch.from_numpy(X[:5]))
    state = a.state_dict()
    b = create_fused(name, SIZES, 3, hp)
    b.load_state_dict(state)
    a.learn_many(X[20:], Y[20:])
    b.learn_many(X[20:], Y[20:])
    for u, v in zip(a.parameters_np(), b.parameters_np()):
        assert np.array_equal(u, v)
    x = torch.from_numpy(X)
    assert torch.equal(a.predict_samples(x), b.predict_samples(x))
    assert a.examples_seen == b.examples_seen == 40 and a.memory_bytes() == b.memory_bytes()
    with pytest.raises(ValueError, match="state is for method"):
        create_fused("bimu" if name != "bimu" else "sgd", SIZES, 0, {}).load_state_dict(state)


def test_supports_create_and_runner_picks_the_engine():
    from bimu.experiments.config import RunConfig
    from bimu.experiments.runner import make_method

    for name in BASELINES:
        hp = create_method(name, [784, 100, 10], 0, preset="pmnist-100").hparams
        assert supports(name, [784, 100, 10], hp) and supports(name, [784, 10], {})
        m = create_fused(name, [784, 100, 10], 0, hp, threads=1)
        assert isinstance(m, FUSED_METHODS[name]) and m.info == create_method(name, [4, 2], 0).info
        method, used = make_method(RunConfig(benchmark="pmnist", method=name), [784, 100, 10], 0, dict(hp))
        assert used == "fused" and isinstance(method, FUSED_METHODS[name])
        method, used = make_method(RunConfig(benchmark="pmnist", method=name, engine="torch"), [784, 100, 10], 0,
                                   dict(hp))
        assert used == "torch"
    assert not supports("sgd", [784, 100, 10], {"momentum": 0.9})
    assert not supports("mesu", [784, 100, 10], {"n_samples": 0})
    assert not supports("ste", [784], {})
    with pytest.raises(ValueError, match="lr"):
        create_fused("si", [4, 2], 0, {"lr": -1.0})


@pytest.mark.parametrize("name", BASELINES)
def test_bad_inputs_raise_clear_errors(name):
    m = create_fused(name, SIZES, 0, SMALL_HP[name])
    with pytest.raises(ValueError, match="inputs must be"):
        m.learn(torch.zeros(2, 3), torch.zeros(2, dtype=torch.long))
    with pytest.raises(ValueError, match="NaN"):
        m.learn_many(np.full((1, SIZES[0]), np.nan, np.float32), np.zeros(1, np.int64))
    with pytest.raises(ValueError, match="labels must lie"):
        m.learn(torch.zeros(2, SIZES[0]), torch.tensor([0, SIZES[-1]]))
    with pytest.raises(ValueError, match=r"labels must be \[batch=2\]"):
        m.learn(torch.zeros(2, SIZES[0]), torch.tensor([0]))
    with pytest.raises(ValueError, match="labels must be integers"):
        m.learn_many(torch.zeros(2, SIZES[0]), torch.tensor([0.0, 1.0]))
    with pytest.raises(ValueError, match="empty batch"):
        m.learn(torch.zeros(0, SIZES[0]), torch.zeros(0, dtype=torch.long))
    if m.info.bayesian:  # deterministic methods ignore n_samples, as their torch versions do
        with pytest.raises(ValueError, match="n_samples"):
            m.predict_samples(torch.zeros(1, SIZES[0]), n_samples=0)
    with pytest.raises(ValueError, match="threads"):
        create_fused(name, SIZES, 0, {}, threads=0)
    with pytest.raises(ValueError, match="dtype"):
        create_fused(name, SIZES, 0, {}, dtype="float16")
    assert m.examples_seen == 0 and m.updates_applied == 0


def test_public_objects_have_docstrings():
    import bimu.engine.base as base
    import bimu.engine.dense as dense
    import bimu.engine.fused_gaussian as fused_gaussian
    import bimu.engine.fused_real as fused_real
    import bimu.engine.fused_sign as fused_sign
    import bimu.engine.gaussian as gaussian
    import bimu.engine.real as real
    import bimu.engine.sign as sign

    def documented(obj):
        return bool((obj.__doc__ or "").strip())

    mods = (engine, dense, base, fused_gaussian, fused_real, fused_sign, gaussian, real, sign)
    assert all(documented(mod) for mod in mods)
    public = [(f"{mod.__name__}.{n}", o) for mod in mods for n, o in vars(mod).items()
              if not n.startswith("_") and getattr(o, "__module__", None) == mod.__name__
              and (inspect.isclass(o) or inspect.isfunction(o) or hasattr(o, "py_func"))]
    methods = [(f"{q}.{n}", f) for q, o in public if inspect.isclass(o) for n, f in vars(o).items()
               if not n.startswith("_") and inspect.isfunction(f)]
    assert [q for q, o in public + methods if not documented(o)] == []


def test_noise_speed_benchmark_baseline_matches_the_engine_bit_for_bit(capsys):
    """benchmarks/noise_speed.py times the engine's normals against the 64-bit-index form; it refuses to
    run (SystemExit) if the two stop agreeing, so this also pins the engine's noise."""
    from repo_scripts import load

    bench = load("benchmarks/noise_speed.py")
    assert bench.main(["--draws", "1", "--repeats", "1"]) == 0
    out = capsys.readouterr().out
    assert "64-bit index (before)" in out and "32-bit lanes (engine)" in out


@pytest.mark.parametrize("batch", [1, 3])
@pytest.mark.parametrize("activation", ["sign", "rbg"])
def test_equinox_norm_compatibility_matches_torch(batch, activation):
    """Syn. Meta. with the paper's runs' norm (bn_statistics=equinox): the fused engine's statistics,
    first-batch flag and gradient through the batch's share (the variance term too at batch 3) follow the
    torch method step for step (float64), through a task boundary and a state round trip."""
    X, Y = _mnist(120)
    hp = dict(create_method("synaptic-metaplasticity", [784, 100, 10], 0, preset="pmnist-100").hparams,
              activation=activation, bn_statistics="equinox", lr=0.003)
    m, t = _run_both("synaptic-metaplasticity", [784, 100, 10], hp, X, Y, batch=batch, boundary=20, dtype="float64")
    assert _rel(m.parameters_np(), _torch_params(t)) < 1e-9
    assert np.allclose(m.RM, np.concatenate([n.running_mean.numpy() for n in t.model.norms]), rtol=1e-9, atol=1e-9)
    assert np.array_equal(m.RV == 0, np.concatenate([n.running_var.numpy() for n in t.model.norms]) == 0)
    if batch == 1:
        assert not m.RV.any()  # a single example's variance: 0 for ever
    x = torch.from_numpy(X).double()
    assert torch.allclose(m.predict_samples(x).double(), t.predict_samples(x).double(), atol=1e-9)
    state = m.modules_state()
    assert state["bn_seen"] is True
    fresh = create_fused("synaptic-metaplasticity", [784, 100, 10], 5, hp, dtype="float64")
    fresh.load_modules_state(state)
    assert fresh.bn_seen[0] == 1 and np.array_equal(fresh.RM, m.RM)

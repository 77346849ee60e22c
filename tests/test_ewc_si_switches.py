"""Online EWC's ``fisher`` / ``fisher_norm`` and SI's ``omega_norm`` switches: hand-computed Fisher and
Omega on a one-layer network for each value, the task-end Fisher against autograd, the fused engine
against the torch method, the stream's task-end hook, exact resume, errors."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from bimu.active.learner import ActiveLearner, make_acquisition
from bimu.engine import create_fused
from bimu.engine.base import layer_pairs, views
from bimu.methods import create_method
from bimu.nn.real_mlp import squared_gradient_sums

# one layer [2 -> 2]; weights 0 and biases (ln 3, 0): softmax (3/4, 1/4) for every input
X2 = torch.tensor([[1.0, 2.0], [2.0, 0.0]])
Y2 = torch.tensor([0, 1])
# per-example deltas (-1/4, 1/4) and (3/4, -3/4): squared weight gradients summed over the two examples
# row 0 = row 1 = 1/16 * (1, 4) + 9/16 * (4, 0) = (2.3125, 0.25); squared bias gradients 1/16 + 9/16
SUM_W, SUM_B = [2.3125, 0.25], 0.625


def _set_one_layer(m, weight, bias):
    """Write a one-layer network's parameters into the torch method or the fused one."""
    if hasattr(m, "theta"):
        w, b = m.parameters_np()
        w[...], b[...] = np.asarray(weight, np.float32), np.asarray(bias, np.float32)
    else:
        with torch.no_grad():
            m.model.layers[0].weight.copy_(torch.tensor(weight))
            m.model.layers[0].bias.copy_(torch.tensor(bias))


def _fisher(m):
    """The running Fisher of either path as ``[weight, bias]`` numpy arrays."""
    if hasattr(m, "theta"):
        return views(m.pen, m._shapes)
    return [t.numpy() for t in m.regularizer.fisher]


def _both(name, sizes, hp, seed=1):
    return create_fused(name, sizes, seed, hp), create_method(name, sizes, seed, **hp)


@pytest.mark.parametrize("norm, factor", [("mean", 0.5), ("sum", 1.0)])
@pytest.mark.parametrize("path", ["torch", "fused"])
def test_task_end_fisher_by_hand_at_the_final_parameters(norm, factor, path):
    hp = dict(lr=0.1, importance=1.0, downweighting=0.5, fisher="task-end", fisher_norm=norm)
    m = create_fused("ewc-online", [2, 2], 0, hp) if path == "fused" else create_method("ewc-online", [2, 2], 0, **hp)
    m.learn(X2 + 1.0, torch.tensor([1, 1]))          # the task's steps: the Fisher ignores where they were
    _set_one_layer(m, [[0.0, 0.0], [0.0, 0.0]], [math.log(3.0), 0.0])
    m.task_examples(X2, Y2)
    m.task_end()
    w, b = _fisher(m)
    np.testing.assert_allclose(w, factor * np.array([SUM_W, SUM_W]), rtol=1e-6)
    np.testing.assert_allclose(b, factor * np.array([SUM_B, SUM_B]), rtol=1e-6)
    # the next task: F <- 0.5 F + F_task, F_task at the parameters of that task's end
    _set_one_layer(m, [[0.0, 0.0], [0.0, 0.0]], [0.0, 0.0])   # softmax (1/2, 1/2): deltas +-1/2
    m.task_examples(X2[:1], Y2[:1])
    m.task_end()
    w, b = _fisher(m)   # a one-example task (mean = sum): x = (1, 2), delta (-1/2, 1/2)
    np.testing.assert_allclose(w[0], 0.5 * factor * np.array(SUM_W) + np.array([0.25, 1.0]), rtol=1e-6)
    np.testing.assert_allclose(b, 0.5 * factor * SUM_B + 0.25, rtol=1e-6)


@pytest.mark.parametrize("norm, factor", [("mean", 0.5), ("sum", 1.0)])
@pytest.mark.parametrize("path", ["torch", "fused"])
def test_online_fisher_by_hand(norm, factor, path):
    """One batch of the two examples: their gradients at the parameters before the step, squared."""
    hp = dict(lr=0.1, importance=1.0, downweighting=0.5, fisher_norm=norm)
    m = create_fused("ewc-online", [2, 2], 0, hp) if path == "fused" else create_method("ewc-online", [2, 2], 0, **hp)
    _set_one_layer(m, [[0.0, 0.0], [0.0, 0.0]], [math.log(3.0), 0.0])
    m.learn(X2, Y2)
    assert not m.needs_task_examples
    m.task_examples(X2 + 5.0, Y2)   # no-op with fisher="online"
    m.task_end()
    w, b = _fisher(m)
    np.testing.assert_allclose(w, factor * np.array([SUM_W, SUM_W]), rtol=1e-6)
    np.testing.assert_allclose(b, factor * np.array([SUM_B, SUM_B]), rtol=1e-6)


def _omega(m):
    if hasattr(m, "theta"):
        return views(m.pen, m._shapes)
    return [t.numpy() for t in m.regularizer.omega]


@pytest.mark.parametrize("norm", ["sum", "mean"])
@pytest.mark.parametrize("path", ["torch", "fused"])
def test_si_omega_by_hand(norm, path):
    """Two SGD steps (lr 1/2, xi 1) from zero parameters: x = (1, 2) with label 0, then x = (0, 0)
    with label 1, whose logits are the biases (1/4, -1/4) after the first step."""
    hp = dict(lr=0.5, coefficient=1.0, damping=1.0, omega_norm=norm)
    m = create_fused("si", [2, 2], 0, hp) if path == "fused" else create_method("si", [2, 2], 0, **hp)
    _set_one_layer(m, [[0.0, 0.0], [0.0, 0.0]], [0.0, 0.0])
    if path == "fused":  # the anchor is the initial parameters: move it to the zeros written above
        m.anchor[:] = m.theta
    else:
        for a, p in zip(m.regularizer.anchor, m.params):
            a.copy_(p.detach())
    m.learn(X2[:1], Y2[:1])
    m.learn(torch.zeros(1, 2), torch.tensor([1]))
    s = 1.0 / (1.0 + math.exp(-0.5))      # softmax of (1/4, -1/4) at class 0
    gw = np.array([[-0.5, -1.0], [0.5, 1.0]])
    path_w = 0.5 * gw ** 2                # -g * (-lr g), first step only (x = 0 at the second)
    path_b = 0.5 * 0.25 + 0.5 * s ** 2    # both biases: gradients +-1/2, then +-s
    delta_w = -0.5 * gw
    delta_b = 0.25 - 0.5 * s              # bias 0; bias 1 is its negative
    n = 2 if norm == "mean" else 1
    assert (m.n_integrated if path == "fused" else m.regularizer.n_integrated) == 2
    m.task_end()
    w, b = _omega(m)
    np.testing.assert_allclose(w, path_w / n / (delta_w ** 2 + 1.0), rtol=1e-6)
    np.testing.assert_allclose(b, np.full(2, path_b / n / (delta_b ** 2 + 1.0)), rtol=1e-6)
    assert (m.n_integrated if path == "fused" else m.regularizer.n_integrated) == 0


@pytest.mark.parametrize("bias", [True, False])
def test_squared_gradient_sums_match_autograd_example_by_example(bias):
    g = torch.Generator().manual_seed(3)
    sizes = [6, 5, 4, 3]
    weights = [torch.randn(o, i, generator=g, dtype=torch.float64) for i, o in zip(sizes[:-1], sizes[1:])]
    biases = [torch.randn(o, generator=g, dtype=torch.float64) for o in sizes[1:]] if bias else None
    x, y = torch.randn(9, 6, generator=g, dtype=torch.float64), torch.randint(0, 3, (9,), generator=g)
    params = layer_pairs(weights, biases) if bias else list(weights)
    leaves = [p.clone().requires_grad_(True) for p in params]
    ref = [torch.zeros_like(p) for p in params]
    for i in range(9):
        h = x[i:i + 1]
        for l in range(3):
            h = h @ leaves[2 * l if bias else l].T + (leaves[2 * l + 1] if bias else 0.0)
            h = torch.relu(h) if l < 2 else h
        for r, gr in zip(ref, torch.autograd.grad(torch.nn.functional.cross_entropy(h, y[i:i + 1]), leaves)):
            r += gr * gr
    w_sums, b_sums = squared_gradient_sums(weights, biases, x, y)
    got = layer_pairs(w_sums, b_sums) if bias else w_sums
    for a, b in zip(got, ref):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-14)


SIZES = [12, 16, 8, 4]


def _data(n, seed=0):
    r = np.random.default_rng(seed)
    return r.standard_normal((n, SIZES[0])).astype(np.float32), r.integers(0, SIZES[-1], n).astype(np.int64)


def _rel(a_list, b_list):
    return max(float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-30)) for a, b in zip(a_list, b_list))


def _stream_both(name, hp, batch, n_tasks=3, per_task=12):
    """Fused and torch side by side over ``n_tasks`` tasks, each ended as the stream ends it."""
    X, Y = _data(n_tasks * per_task)
    m, t = _both(name, SIZES, hp)
    for task in range(n_tasks):
        xs, ys = torch.from_numpy(X[task * per_task:(task + 1) * per_task]), torch.from_numpy(Y[task * per_task:
                                                                                                 (task + 1) * per_task])
        for j in range(0, per_task, batch):
            t.learn(xs[j:j + batch], ys[j:j + batch])
            m.learn_many(xs[j:j + 1], ys[j:j + 1]) if batch == 1 else m.learn(xs[j:j + batch], ys[j:j + batch])
        for method in (m, t):
            if method.needs_task_examples:
                method.task_examples(xs, ys)
            method.task_end()
    return m, t


EWC_HP = dict(lr=0.05, importance=30.0, downweighting=0.5)


@pytest.mark.parametrize("batch", [1, 3])
@pytest.mark.parametrize("fisher, norm, importance", [("online", "mean", 30.0), ("task-end", "mean", 30.0),
                                                      ("online", "sum", 1.0), ("task-end", "sum", 1.0)])
def test_ewc_fused_matches_torch_for_each_switch(fisher, norm, importance, batch):
    hp = dict(EWC_HP, importance=importance, fisher=fisher, fisher_norm=norm)
    m, t = _stream_both("ewc-online", hp, batch)
    L = len(SIZES) - 1
    assert _rel(m.parameters_np(), [p.detach().numpy() for p in t.params]) < 1e-5
    for mine, theirs in (("pen", "fisher"), ("anchor", "anchor")):
        v = views(getattr(m, mine), m._shapes)
        assert _rel(layer_pairs(v[:L], v[L:]), [a.numpy() for a in getattr(t.regularizer, theirs)]) < 1e-5
    assert np.abs(m.pen).sum() > 0 and m.tasks_seen == t.regularizer.tasks_seen == 3


@pytest.mark.parametrize("batch", [1, 3])
@pytest.mark.parametrize("norm", ["sum", "mean"])
def test_si_fused_matches_torch_for_each_switch(norm, batch):
    hp = dict(lr=0.05, coefficient=0.5, damping=0.1, omega_norm=norm)
    m, t = _stream_both("si", hp, batch)
    L = len(SIZES) - 1
    assert _rel(m.parameters_np(), [p.detach().numpy() for p in t.params]) < 1e-5
    v = views(m.pen, m._shapes)
    assert _rel(layer_pairs(v[:L], v[L:]), [a.numpy() for a in t.regularizer.omega]) < 1e-5
    assert np.abs(m.pen).sum() > 0


def test_the_switches_change_the_penalty_as_documented():
    """sum = n x mean for the same stream's first task; the task-end Fisher differs from the online one."""
    folded = {}
    for fisher in ("online", "task-end"):
        for norm in ("mean", "sum"):
            m, _ = _stream_both("ewc-online", dict(EWC_HP, fisher=fisher, fisher_norm=norm), 1, n_tasks=1)
            folded[fisher, norm] = m.pen.copy()
    for fisher in ("online", "task-end"):
        np.testing.assert_allclose(folded[fisher, "sum"], 12 * folded[fisher, "mean"], rtol=1e-5)
    assert not np.allclose(folded["online", "mean"], folded["task-end", "mean"], rtol=1e-2)
    m, _ = _stream_both("si", dict(lr=0.05, coefficient=0.5, damping=0.1, omega_norm="sum"), 1, n_tasks=1)
    mean, _ = _stream_both("si", dict(lr=0.05, coefficient=0.5, damping=0.1, omega_norm="mean"), 1, n_tasks=1)
    np.testing.assert_allclose(m.pen, 12 * mean.pen, rtol=1e-5)


@pytest.mark.parametrize("engine", ["torch", "fused"])
def test_task_end_without_the_task_examples_is_an_error(engine):
    hp = dict(fisher="task-end")
    m = create_fused("ewc-online", [4, 3], 0, hp) if engine == "fused" else create_method("ewc-online", [4, 3], 0, **hp)
    m.learn(torch.randn(1, 4), torch.tensor([1]))
    with pytest.raises(ValueError, match=r"fisher='task-end' recomputes the Fisher .* call task_examples\(x, y\)"):
        m.task_end()
    m.task_examples(torch.randn(3, 4), torch.tensor([0, 1, 2]))
    m.task_end()
    with pytest.raises(ValueError, match="task_examples"):   # given once per task
        m.task_end()


@pytest.mark.parametrize("name, bad", [("ewc-online", {"fisher": "end"}), ("ewc-online", {"fisher_norm": "max"}),
                                       ("si", {"omega_norm": "median"})])
def test_unknown_switch_values_are_refused(name, bad):
    with pytest.raises(ValueError, match=next(iter(bad))):
        create_method(name, [4, 3], 0, **bad)


def test_an_active_learner_refuses_the_task_end_fisher():
    m = create_method("ewc-online", [4, 3], 0, fisher="task-end")
    with pytest.raises(ValueError, match="needs every labelled example of a task"):
        ActiveLearner(m, make_acquisition("random", budget=0.5))
    ActiveLearner(m, make_acquisition("all"))   # every example labelled: allowed
    ActiveLearner(create_method("ewc-online", [4, 3], 0), make_acquisition("random", budget=0.5))


@pytest.mark.parametrize("engine", ["torch", "fused"])
@pytest.mark.parametrize("name, hp", [("ewc-online", dict(EWC_HP, fisher="task-end")),
                                      ("ewc-online", dict(EWC_HP, importance=1.0, fisher_norm="sum")),
                                      ("si", dict(lr=0.05, coefficient=0.5, damping=0.1, omega_norm="mean"))])
def test_a_stream_resumed_from_its_checkpoint_equals_the_uninterrupted_run(tmp_path, name, hp, engine):
    from bimu.experiments.stream import run_stream
    from bimu.rundir import RunDir
    from test_runner_fakes import N_CLASSES, N_FEATURES, Crash, FakeBenchmark, crash_after, strip_timing

    sizes = [N_FEATURES, 8, N_CLASSES]

    def method():
        return create_fused(name, sizes, 0, hp) if engine == "fused" else create_method(name, sizes, 0, **hp)

    b = FakeBenchmark(n_tasks=4)
    full_method = method()
    full = run_stream(b, full_method, seed=2, run_dir=tmp_path / "full", progress=False)
    with pytest.raises(Crash):
        run_stream(b, method(), seed=2, run_dir=tmp_path / "resumed", progress=False, on_task_end=crash_after(1))
    fresh = method()   # the checkpoint written after task 2, read back by the runner
    res = run_stream(b, fresh, seed=2, run_dir=RunDir(tmp_path / "resumed"), progress=False)
    np.testing.assert_array_equal(res["R"], full["R"])
    assert strip_timing(res["records"]) == strip_timing(full["records"])
    a, c = fresh.modules_state(), full_method.modules_state()
    flat = (lambda s: [t for v in s.values() if isinstance(v, list) for t in v] + list(s.get("model", {}).values())
            + [t for r in (s.get("regularizer") or {}).values() if isinstance(r, list) for t in r])
    assert all(torch.equal(u, v) for u, v in zip(flat(a), flat(c))) and flat(a)


def test_the_stream_gives_the_task_end_fisher_its_task(monkeypatch):
    """stream_tasks hands each task's (limited, transformed) examples to task_examples, once per task."""
    from bimu.experiments.stream import stream_tasks
    from test_runner_fakes import N_CLASSES, N_FEATURES, FakeBenchmark

    m = create_method("ewc-online", [N_FEATURES, 8, N_CLASSES], 0, fisher="task-end")
    seen = []
    plain = m.task_examples
    monkeypatch.setattr(m, "task_examples", lambda x, y: (seen.append((x.clone(), y.clone())), plain(x, y)))
    b = FakeBenchmark(n_tasks=2)
    done = list(stream_tasks(b, m, seed=0, tasks=range(2), train_limit=5, transform=lambda x: 2 * x))
    assert [d.n_train for d in done] == [5, 5] and len(seen) == 2
    for t, (x, y) in enumerate(seen):
        bx, by = b.train_task(t, 0)
        assert torch.equal(x, 2 * bx[:5]) and torch.equal(y, by[:5])
    assert m.regularizer.tasks_seen == 2

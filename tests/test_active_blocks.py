"""The compiled query path (bimu.active.blocks, bimu.engine.query) against the per-example loop."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from bimu.active import ActiveLearner, make_acquisition
from bimu.active.blocks import decides_in_blocks, learn_in_blocks
from bimu.engine import create_fused
from bimu.experiments.stream import learn_task
from bimu.methods import create_method


def _stream(n=120, d=12, c=3, seed=0):
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(c, d)).astype(np.float32)
    y = rng.integers(0, c, n)
    x = centres[y] + rng.normal(size=(n, d)).astype(np.float32)
    return torch.from_numpy(x), torch.from_numpy(y.astype(np.int64))


def _learner(name, rule, seed=0):
    hp = create_method(name, [12, 8, 3], seed=seed, preset="pmnist-100", engine="torch").hparams
    m = create_fused(name, [12, 8, 3], seed, dict(hp), threads=1)
    return ActiveLearner(m, make_acquisition(rule[0], mc_samples=5, seed=seed, **rule[1]))


def _per_example(learner, x, y):
    correct = 0
    oracle = learner.acquisition.needs_labels
    for i in range(len(y)):
        pred, ask = learner.predict_one(x[i:i + 1], y[i:i + 1] if oracle else None)
        correct += int(pred == int(y[i]))
        if ask:
            learner.learn_one(x[i:i + 1], y[i:i + 1])
    return correct


RULES = [("vr", {"threshold": 0.2}), ("vr", {"budget": 0.2}), ("vr-true", {"threshold": 0.2})]


@pytest.mark.parametrize("name", ["bimu", "bayesbinn"])
@pytest.mark.parametrize("rule", RULES, ids=["vr-threshold", "vr-budget", "vr-true"])
def test_blocks_equal_per_example_loop(name, rule):
    x, y = _stream()
    ref, new = _learner(name, rule), _learner(name, rule)
    assert decides_in_blocks(new)
    correct_ref = sum(_per_example(ref, x[a:a + 60], y[a:a + 60]) for a in (0, 60))
    ref.task = 0
    correct_new = 0
    for a in (0, 60):
        correct_new += learn_task(new.method, x[a:a + 60], y[a:a + 60], learner=new, task=0)[0]
    assert correct_new == correct_ref
    assert 0 < ref.ledger.labels_queried < len(y)  # both branches of the decision were taken
    assert np.array_equal(new.ledger.asked, ref.ledger.asked)
    assert new.accounting == ref.accounting
    assert np.array_equal(new.method.lam, ref.method.lam)
    assert new.method.examples_seen == ref.method.examples_seen == len(y)
    assert torch.equal(new.query_generator.get_state(), ref.query_generator.get_state())
    assert (new._pending, new.last_score, new.last_tau) == (ref._pending, ref.last_score, ref.last_tau)


def test_blocks_deterministic_from_seed():
    x, y = _stream(n=80)
    runs = []
    for seed in (0, 0, 1):
        learner = _learner("bimu", RULES[0], seed=seed)
        learn_in_blocks(learner, x, y, task=0)
        runs.append((learner.ledger.asked.copy(), learner.method.lam.copy()))
    assert np.array_equal(runs[0][0], runs[1][0]) and np.array_equal(runs[0][1], runs[1][1])
    assert not np.array_equal(runs[0][1], runs[2][1])


def test_query_samples_fresh_per_key_and_exact_bernoulli():
    """Different keys give different samples; a lambda of +-40 gives the deterministic sign."""
    m = create_fused("bimu", [40, 3], 0, dict(create_method("bimu", [40, 3], preset="pmnist-100", engine="torch").hparams), threads=1)
    x = torch.randn(1, 40)
    p1, _ = m.query_samples(x, 10, 1)
    p2, _ = m.query_samples(x, 10, 2)
    assert not torch.equal(p1, p2) and torch.equal(p1, m.query_samples(x, 10, 1)[0])
    m.lam[:] = np.where(np.arange(m.n_params) % 3 == 0, 40.0, -40.0).astype(m.lam.dtype)
    m._query = None
    p, _ = m.query_samples(x, 4, 5)
    w = np.where(np.arange(m.n_params) % 3 == 0, 1.0, -1.0).reshape(3, 40)
    h = w @ x[0].double().numpy()
    z = (h - h.mean()) / np.sqrt(h.var() + 1e-5)  # the output LayerNorm of the pmnist-100 network
    want = np.exp(z - z.max()) / np.exp(z - z.max()).sum()
    assert np.allclose(p[:, 0].numpy(), want[None], atol=1e-5)


def test_active_speed_benchmark_smoke(capsys):
    from repo_scripts import load

    mod = load("benchmarks/active_speed.py")
    assert mod.main(["--examples", "30", "--features", "40", "--classes", "4", "--k", "4", "--repeats", "1"]) == 0
    out = capsys.readouterr().out
    assert "ratio new / per-example" in out and "per-example" in out


def test_query_sampler_is_chosen_checked_and_kept_on_resume():
    """auto picks the compiled sampler for the fused binary methods; a state that names no sampler (or
    names predict-samples) resumes with the per-example predict_samples draws, decided one by one."""
    x, y = _stream(n=60)
    learner = _learner("bimu", RULES[0])
    assert learner.query_sampler == "compiled" and decides_in_blocks(learner)
    torch_method = create_method("bimu", [12, 8, 3], seed=0, preset="pmnist-100", engine="torch")
    assert ActiveLearner(torch_method, make_acquisition("vr", threshold=0.2)).query_sampler == "predict-samples"
    with pytest.raises(ValueError, match="query_sampler 'compiled' needs a method with a compiled query sampler"):
        ActiveLearner(torch_method, make_acquisition("vr", threshold=0.2), query_sampler="compiled")
    with pytest.raises(ValueError, match="unknown query_sampler 'fast'"):
        ActiveLearner(learner.method, query_sampler="fast")

    def run(sampler, resumed_state=None):
        lr = _learner("bimu", RULES[0])
        if resumed_state is not None:
            lr.load_state_dict(resumed_state)
        elif sampler != "auto":
            lr = ActiveLearner(lr.method, lr.acquisition, query_sampler=sampler)
        learn_task(lr.method, x, y, learner=lr, task=0)
        return lr

    per_example = run("predict-samples")
    assert not decides_in_blocks(per_example)
    old_state = _learner("bimu", RULES[0]).state_dict()
    del old_state["query_sampler"]
    resumed = run("auto", resumed_state=old_state)
    assert resumed.query_sampler == "predict-samples"
    assert np.array_equal(resumed.ledger.asked, per_example.ledger.asked)
    assert np.array_equal(resumed.method.lam, per_example.method.lam)
    compiled = run("auto")
    assert not np.array_equal(compiled.ledger.asked, per_example.ledger.asked)  # other draws
    assert compiled.state_dict()["query_sampler"] == "compiled"


def _mesu(sizes, **hp):
    from bimu.engine.fused_gaussian import FusedMESU

    m = FusedMESU(sizes, seed=3, sigma_init_scale=0.3, **hp)
    rng = np.random.default_rng(0)
    m.learn_many(rng.normal(size=(50, sizes[0])).astype(np.float32), rng.integers(0, sizes[-1], 50))
    return m


def test_mesu_query_samples_draw_the_units_with_the_exact_gaussian_of_a_linear_layer():
    """Linear head: each pass's logits are N(mu . x + mu_b, sigma^2 . x^2 + sigma_b^2) exactly."""
    from bimu.engine import fused_gaussian

    m = _mesu([6, 4])
    x = np.linspace(-1, 1, 6, dtype=np.float32)[None]
    seen = []
    real = fused_gaussian.scores_one
    fused_gaussian.scores_one = lambda logits: seen.append(logits.copy()) or real(logits)
    try:
        probs, pred = m.query_samples(torch.from_numpy(x), 40000, 11)
    finally:
        fused_gaussian.scores_from_logits = real
    z = seen[0][:, 0].astype(np.float64)
    (mw, sw, mb, sb) = (p.astype(np.float64) for p in m.parameters_np())
    mean, var = mw @ x[0] + mb, np.square(sw) @ np.square(x[0].astype(np.float64)) + np.square(sb)
    assert np.all(np.abs(z.mean(0) - mean) < 5 * np.sqrt(var / 40000))
    assert np.all(np.abs(z.var(0) / var - 1) < 5 * np.sqrt(2 / 40000))
    assert probs.shape == (40000, 1, 4) and pred == int(torch.log(probs.double()).mean(0).argmax(-1))


@pytest.mark.parametrize("activation", ["relu", "rbg"])
def test_mesu_query_samples_match_weight_samples_through_a_hidden_layer(activation):
    m = _mesu([5, 7, 3], activation=activation, gate_width=0.2)
    x = torch.linspace(-1, 1, 5)[None]
    ours = m.query_samples(x, 30000, 5)[0][:, 0].double()
    theirs = m.predict_samples(x, n_samples=30000, generator=torch.Generator().manual_seed(1))[:, 0].double()
    sd = torch.sqrt((ours.var(0) + theirs.var(0)) / 30000)
    assert torch.all((ours.mean(0) - theirs.mean(0)).abs() < 5 * sd)
    assert not torch.allclose(ours.mean(0), torch.full((3,), 1 / 3, dtype=torch.float64), atol=0.01)  # the check can fail


def test_mesu_query_samples_fresh_per_key_and_leave_the_method_unchanged():
    m = _mesu([5, 3])
    x = torch.ones(1, 5)
    p1, p2 = m.query_samples(x, 10, 1)[0], m.query_samples(x, 10, 2)[0]
    assert not torch.equal(p1, p2) and torch.equal(p1, m.query_samples(x, 10, 1)[0])
    assert m.eval_counter == 0 and m.train_step == 50
    with pytest.raises(ValueError, match=r"query_samples takes one example \[1, D\], got \(2, 5\)"):
        m.query_samples(torch.ones(2, 5), 10, 1)
    learner = ActiveLearner(m, make_acquisition("vr", threshold=0.2))
    assert learner.query_sampler == "compiled" and not decides_in_blocks(learner)  # one example at a time

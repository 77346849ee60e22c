"""Experience replay in the fused engine (:class:`bimu.engine.fused_real.FusedReplay`) against its PyTorch
method (:class:`bimu.methods.replay.ExperienceReplayMethod`): on real MNIST, the same seed keeps the same
buffer (bit for bit) and replays the same slots at every step, and the parameters agree to float32
rounding (the standard of the fused SGD: ``test_engine_baselines.py``); the compiled draws equal their
Python mirror; batches, chunking, exact resume from a state and from a run's checkpoint; the memory
footprint; the runner picks the engine."""

from __future__ import annotations

import io

import numpy as np
import pytest
import torch
from numba import njit

from bimu.engine import FusedReplay, create_fused, supports
from bimu.methods import create_method
from bimu.rng import REPLAY_STREAM, derive_key, replay_slots, replay_slots_int, reservoir_slot, reservoir_slot_int
from test_engine_mnist import _mnist  # the first n MNIST training images, standardised (skips without data)


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


def _rel(fused, torch_method):
    """Largest difference of the two paths' parameters, relative to each tensor's largest magnitude."""
    return max(float(np.abs(a - b.detach().numpy()).max() / max(np.abs(b.detach().numpy()).max(), 1e-30))
               for a, b in zip(fused.parameters_np(), torch_method.params))


def _side_by_side(X, Y, sizes, seed, hp, batch=1):
    """Both paths on the same stream, ``batch`` examples per step; at every step the replayed slots, the
    buffer and its counter must be equal (integers and stored inputs bit for bit)."""
    m = create_fused("replay", sizes, seed, hp)
    t = create_method("replay", sizes, seed, **hp)
    for a, b in zip(m.parameters_np(), t.params):
        assert np.array_equal(a, b.detach().numpy())  # the SGD baseline's initial weights on both
    for j in range(len(X) // batch):
        x, y = torch.from_numpy(X[j * batch:(j + 1) * batch]), torch.from_numpy(Y[j * batch:(j + 1) * batch])
        expected = t.replay_indices()
        t.learn(x, y)
        if batch == 1:
            m.learn_many(x, y)
        else:
            m.learn(x, y)
        got = m.last_replay_slots()
        assert (expected is None and got.size == 0) or np.array_equal(expected.numpy(), got), j
        assert m.buffer_seen == t.buffer_seen == (j + 1) * batch
        assert np.array_equal(m.buffer_x, t.buffer_x.numpy()) and np.array_equal(m.buffer_y, t.buffer_y.numpy()), j
    return m, t


@pytest.mark.parametrize("hp", [{}, dict(buffer_size=60), dict(buffer_size=60, replay_batch_size=10, lr=0.01)],
                         ids=["defaults", "reservoir-draws", "ten-replayed"])
def test_300_mnist_steps_match_torch(hp):
    """Defaults (buffer 1000, one replayed example, lr 9e-4: the comparison tables' settings); a buffer of
    60 so that the reservoir draws slots for 240 of the steps; ten replayed examples and a larger lr."""
    X, Y = _mnist(300)
    m, t = _side_by_side(X, Y, [784, 100, 10], 1, hp)
    assert _rel(m, t) < 1e-4
    x = torch.from_numpy(X)
    ref, probs = t.predict_samples(x), m.predict_samples(x)
    assert probs.shape == ref.shape == (1, 300, 10) and torch.allclose(probs.float(), ref, atol=1e-4)
    assert m.examples_seen == t.examples_seen == 300 and m.updates_applied == t.updates_applied == 300
    assert m.memory_bytes() == t.memory_bytes()
    if "buffer_size" in hp:
        kept = m.buffer()[1].shape[0]
        assert kept == 60 and not np.array_equal(m.buffer_x[:60], X[:60])  # later examples replaced early ones


@pytest.mark.parametrize("batch", [1, 3])
def test_small_network_batches_and_no_biases_match_torch(batch):
    g = np.random.default_rng(0)
    X, Y = g.standard_normal((45, 12)).astype(np.float32), g.integers(0, 4, 45)
    for hp in (dict(lr=0.05, buffer_size=5, replay_batch_size=2), dict(lr=0.05, buffer_size=7, bias=False)):
        m, t = _side_by_side(X, Y, [12, 16, 8, 4], 2, hp, batch=batch)
        assert _rel(m, t) < 1e-5 and m.memory_bytes() == t.memory_bytes()


@njit
def _compiled_draws(key, n, filled, k, size):
    out = np.zeros(k, np.int64)
    count = replay_slots(key, n, filled, k, out)
    return reservoir_slot(key, n, size), out[:count]


def test_the_compiled_draws_equal_their_python_mirror():
    g = np.random.default_rng(1)
    for seed in range(4):
        key = int(derive_key(seed, REPLAY_STREAM))
        for _ in range(200):
            n = int(g.integers(0, 10**7))
            size, k = int(g.integers(1, 2000)), int(g.integers(1, 12))
            filled = int(g.integers(0, size + 1))
            slot, slots = _compiled_draws(np.uint64(key), n, filled, k, size)
            assert slot == reservoir_slot_int(key, n, size)
            assert slots.tolist() == replay_slots_int(key, n, filled, k)
            assert len(set(slots.tolist())) == len(slots) == min(filled, k) and all(0 <= s < filled for s in slots)


def test_replay_minibatches_are_uniform():
    """Floyd's sampling over 3 of 6 slots: each slot in about half of 6,000 minibatches, each of the 20
    subsets about 300 times."""
    key = int(derive_key(0, REPLAY_STREAM))
    slot_counts, subsets = np.zeros(6), {}
    for n in range(6000):
        s = replay_slots_int(key, n, 6, 3)
        slot_counts[s] += 1
        subsets[frozenset(s)] = subsets.get(frozenset(s), 0) + 1
    assert np.all(np.abs(slot_counts / 6000 - 0.5) < 0.03), slot_counts
    assert len(subsets) == 20 and all(abs(c - 300) < 75 for c in subsets.values()), subsets


def test_chunking_and_resume_from_a_state_give_the_uninterrupted_run():
    """One call, many calls and a state saved mid-stream (after the buffer filled: reservoir draws under
    way) then loaded into a method built with another seed: the same bits."""
    X, Y = _mnist(400)
    hp = dict(buffer_size=100, replay_batch_size=4, lr=0.01)
    full = create_fused("replay", [784, 100, 10], 3, hp)
    full.learn_many(X, Y)
    chunks = create_fused("replay", [784, 100, 10], 3, hp)
    for i in range(0, 400, 37):
        chunks.learn_many(X[i:i + 37], Y[i:i + 37])
    first = create_fused("replay", [784, 100, 10], 3, hp)
    first.learn_many(X[:250], Y[:250])
    buf = io.BytesIO()
    torch.save(first.state_dict(), buf)
    buf.seek(0)
    resumed = create_fused("replay", [784, 100, 10], 99, hp)
    resumed.load_state_dict(torch.load(buf, weights_only=True))  # plain tensors and ints only
    resumed.learn_many(X[250:], Y[250:])
    for other in (chunks, resumed):
        assert all(np.array_equal(a, b) for a, b in zip(full.parameters_np(), other.parameters_np()))
        assert np.array_equal(full.buffer_x, other.buffer_x) and np.array_equal(full.buffer_y, other.buffer_y)
        assert other.buffer_seen == 400 and other.replay_key == full.replay_key
        assert other.examples_seen == 400 and other.updates_applied == 400


def test_a_run_resumed_from_its_checkpoint_equals_the_uninterrupted_run(tmp_path):
    from bimu.experiments.stream import run_stream
    from bimu.rundir import RunDir
    from test_runner_fakes import N_CLASSES, N_FEATURES, FakeBenchmark, strip_timing

    def method():
        return create_fused("replay", [N_FEATURES, 8, N_CLASSES], 0, dict(lr=0.05, buffer_size=10, replay_batch_size=3))

    b = FakeBenchmark(n_tasks=4)
    full_method = method()
    full = run_stream(b, full_method, seed=2, run_dir=tmp_path / "full", progress=False)

    class Crash(Exception):
        pass

    def crash_after_1(t):
        if t == 1:
            raise Crash

    with pytest.raises(Crash):
        run_stream(b, method(), seed=2, run_dir=tmp_path / "resumed", progress=False, on_task_end=crash_after_1)
    fresh = method()  # the checkpoint written by the runner, read back by its loader
    res = run_stream(b, fresh, seed=2, run_dir=RunDir(tmp_path / "resumed"), progress=False)
    np.testing.assert_array_equal(res["R"], full["R"])
    assert strip_timing(res["records"]) == strip_timing(full["records"])
    assert np.array_equal(fresh.buffer_x, full_method.buffer_x) and fresh.buffer_seen == full_method.buffer_seen
    assert np.array_equal(fresh.theta, full_method.theta)


def test_states_of_another_buffer_or_a_bad_key_are_refused():
    a = create_fused("replay", [6, 3], 0, dict(buffer_size=5))
    b = create_fused("replay", [6, 3], 0, dict(buffer_size=6))
    with pytest.raises(ValueError, match=r"replay state: a buffer of \(5, 6\) inputs .*buffer_size=6"):
        b.load_state_dict(a.state_dict())
    state = a.state_dict()
    state["modules"]["replay_key"] = -1
    with pytest.raises(ValueError, match="replay_key must be an integer"):
        a.load_state_dict(state)
    with pytest.raises(ValueError, match="state is for method"):
        create_fused("sgd", [6, 3], 0, {}).load_state_dict(a.state_dict())


def test_float64_and_the_memory_footprint():
    m = create_fused("replay", [20, 16, 3], 0, dict(buffer_size=7), dtype="float64")
    m.learn_many(np.ones((9, 20)), np.arange(9) % 3)
    assert m.buffer_x.dtype == np.float64 and m.buffer_filled == 7
    t = create_method("replay", [20, 16, 3], 0, buffer_size=7)
    f32 = create_fused("replay", [20, 16, 3], 0, dict(buffer_size=7))
    assert f32.memory_bytes() == t.memory_bytes() == create_method("sgd", [20, 16, 3]).memory_bytes() + 7 * (4 * 20 + 8)


def test_supports_create_and_the_runner_picks_the_engine():
    from bimu.experiments.config import RunConfig
    from bimu.experiments.runner import make_method

    hp = create_method("replay", [784, 100, 10], 0).hparams
    assert supports("replay", [784, 100, 10], hp) and not supports("replay", [784, 10], {"buffer_size": 0})
    method, used = make_method(RunConfig(benchmark="pmnist", method="replay"), [784, 100, 10], 0, dict(hp))
    assert used == "fused" and isinstance(method, FusedReplay)
    method, used = make_method(RunConfig(benchmark="pmnist", method="replay", engine="torch"), [784, 100, 10], 0,
                               dict(hp))
    assert used == "torch"

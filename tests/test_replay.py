"""Experience replay (``replay``, :mod:`bimu.methods.replay`): the reservoir buffer and the replay
minibatches against a hand simulation of Vitter's Algorithm R and Floyd's sampling on SplitMix64 draws,
determinism, exact resume, less forgetting than SGD on a two-task stream, and the buffer in the memory
footprint. The fused engine's replay against this PyTorch path: ``test_engine_replay.py``."""

from __future__ import annotations

import io

import numpy as np
import pytest
import torch

import bimu
from bimu.methods import create_method, get_method
from bimu.methods.footprint import memory_footprint_table, nested_tensor_bytes
from bimu.methods.replay import ExperienceReplayMethod, buffer_bytes
from bimu.rng import REPLAY_STREAM, derive_key


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


def numbered_stream(n: int, features: int = 3, classes: int = 3):
    """Item ``i`` has input ``[i, i/2, ...]`` (small multiples, exact in float32) and label ``i % classes``."""
    ids = torch.arange(n, dtype=torch.float32)
    x = ids[:, None] / torch.arange(1, features + 1, dtype=torch.float32)
    return x, torch.arange(n) % classes


def draw(key: int, counter: int, m: int) -> int:
    """By hand: SplitMix64's output ``counter`` of stream ``key``, reduced modulo ``m`` (the draws of
    :mod:`bimu.rng` for experience replay)."""
    mask = 2**64 - 1
    z = (key + counter * 0x9E3779B97F4A7C15) & mask
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
    return (z ^ (z >> 31)) % m


def simulate(n_items: int, size: int, seed: int, batch: int = 1) -> list[list[int]]:
    """By hand: the item ids in each slot after each ``learn`` call: for each new item (0-based index
    ``n``) slot ``n`` while the buffer is not full, else slot ``j = draw(key, 2 n, n + 1)``, kept if ``j <
    size``; ``key`` is the seed's replay key. The replay minibatches draw from other counters, so they do
    not move the reservoir."""
    key = int(derive_key(seed, REPLAY_STREAM))
    slots: list[int] = []
    seen, history = 0, []
    for start in range(0, n_items, batch):
        for item in range(start, min(start + batch, n_items)):
            if seen < size:
                slots.append(item)
            else:
                j = draw(key, 2 * seen, seen + 1)
                if j < size:
                    slots[j] = item
            seen += 1
        history.append(list(slots))
    return history


def simulate_minibatch(seed: int, n: int, filled: int, k: int) -> list[int]:
    """By hand: the replay slots of the step starting at stream index ``n`` (Floyd's algorithm, draw ``i``
    from counter ``2 (n k + i) + 1``); every filled slot while there are at most ``k``."""
    if filled <= k:
        return list(range(filled))
    key, out = int(derive_key(seed, REPLAY_STREAM)), []
    for i in range(k):
        j = filled - k + i
        t = draw(key, 2 * (n * k + i) + 1, j + 1)
        out.append(j if t in out else t)
    return out


@pytest.mark.parametrize("size, replay, batch, seed", [(4, 4, 1, 0), (4, 2, 1, 3), (5, 3, 2, 7), (1, 1, 1, 2)])
def test_reservoir_buffer_matches_a_hand_simulation(size, replay, batch, seed):
    n = 23
    x, y = numbered_stream(n)
    m = create_method("replay", [3, 4, 3], seed=seed, lr=1e-3, buffer_size=size, replay_batch_size=replay)
    expected = simulate(n, size, seed, batch)
    for step, start in enumerate(range(0, n, batch)):
        slots = m.replay_indices()
        assert (slots is None and start == 0) or slots.tolist() == simulate_minibatch(seed, start, min(start, size),
                                                                                      replay)
        m.learn(x[start:start + batch], y[start:start + batch])
        seen = min(start + batch, n)
        bx, by = m.buffer()
        assert m.buffer_seen == seen and m.buffer_filled == min(seen, size) == bx.shape[0] == by.shape[0]
        ids = expected[step]
        assert torch.equal(bx, x[ids]) and torch.equal(by, y[ids]), (step, ids)
    assert sorted(set(expected[-1])) != list(range(size))  # later items did replace the first ones


def test_reservoir_keeps_each_item_with_probability_size_over_n():
    n, size, runs = 20, 5, 400
    x, y = numbered_stream(n)
    kept = torch.zeros(n)
    for seed in range(runs):
        m = create_method("replay", [3, 3], seed=seed, buffer_size=size)
        m.reservoir_add(x, y)  # the reservoir alone (no training step, no minibatch draws)
        kept[m.buffer()[0][:, 0].long()] += 1
    assert kept.sum() == runs * size
    assert ((kept / runs - size / n).abs() < 0.1).all(), kept / runs  # 0.25 +- 4.6 sigma


def test_the_first_step_is_the_sgd_step_and_the_network_is_sgds():
    x, y = numbered_stream(2)
    a, b = create_method("replay", [3, 5, 3], seed=4), create_method("sgd", [3, 5, 3], seed=4)
    assert all(torch.equal(p, q) for p, q in zip(a.params, b.params))
    a.learn(x[1:], y[1:])  # an empty buffer: nothing is replayed
    b.learn(x[1:], y[1:])
    assert all(torch.equal(p, q) for p, q in zip(a.params, b.params))


def blobs(n: int, seed: int, d: int = 10, c: int = 3):
    g = torch.Generator().manual_seed(1234)
    means = 3.0 * torch.nn.functional.normalize(torch.randn(c, d, generator=g), dim=1)
    g2 = torch.Generator().manual_seed(seed)
    y = torch.randint(0, c, (n,), generator=g2)
    return means[y] + 0.7 * torch.randn(n, d, generator=g2), y


def train(method, x, y, batch: int = 1):
    for i in range(0, x.shape[0], batch):
        method.learn(x[i:i + batch], y[i:i + batch])


def test_same_seed_same_weights_and_buffer():
    x, y = blobs(60, seed=1)
    runs = []
    for seed in (0, 0, 1):
        m = create_method("replay", [10, 8, 3], seed=seed, lr=0.05, buffer_size=12, replay_batch_size=5)
        train(m, x, y)
        runs.append(m)
    a, b, c = runs
    assert all(torch.equal(p, q) for p, q in zip(a.params, b.params))
    assert torch.equal(a.buffer_x, b.buffer_x) and torch.equal(a.buffer_y, b.buffer_y)
    assert not all(torch.equal(p, q) for p, q in zip(a.params, c.params))
    assert not torch.equal(a.buffer_x, c.buffer_x)  # another seed keeps other examples


def test_state_dict_round_trip_resumes_the_uninterrupted_trajectory():
    x, y = blobs(80, seed=2)
    kw = dict(lr=0.05, buffer_size=10, replay_batch_size=4)
    full = create_method("replay", [10, 8, 3], seed=5, **kw)
    train(full, x, y)
    first = create_method("replay", [10, 8, 3], seed=5, **kw)
    train(first, x[:35], y[:35])  # the buffer is full: reservoir and minibatch draws are under way
    buf = io.BytesIO()
    torch.save(first.state_dict(), buf)
    buf.seek(0)
    resumed = create_method("replay", [10, 8, 3], seed=99, **kw)
    resumed.load_state_dict(torch.load(buf, weights_only=True))  # plain tensors and ints only
    train(resumed, x[35:], y[35:])
    sa, sb = full.state_dict(), resumed.state_dict()
    assert sa["modules"]["buffer_seen"] == sb["modules"]["buffer_seen"] == 80
    for key in ("buffer_x", "buffer_y"):
        assert torch.equal(sa["modules"][key], sb["modules"][key])
    assert all(torch.equal(sa["modules"]["model"][k], sb["modules"]["model"][k]) for k in sa["modules"]["model"])
    assert torch.equal(sa["train_generator"], sb["train_generator"])


def test_a_state_of_another_buffer_size_is_refused_and_changes_nothing():
    x, y = blobs(20, seed=3)
    small = create_method("replay", [10, 3], seed=0, buffer_size=5)
    train(small, x, y)
    other = create_method("replay", [10, 3], seed=0, buffer_size=6)
    before = other.state_dict()
    with pytest.raises(ValueError, match=r"replay state: a buffer of \(5, 10\) inputs .*buffer_size=6"):
        other.load_state_dict(small.state_dict())
    assert nested_tensor_bytes(before) == nested_tensor_bytes(other.state_dict())
    assert torch.equal(before["modules"]["buffer_x"], other.buffer_x) and other.buffer_seen == 0
    state = small.state_dict()
    state["modules"]["buffer_y"] = state["modules"]["buffer_y"] + 3
    with pytest.raises(ValueError, match=r"stored labels must lie in \[0, 2\]"):
        small.load_state_dict(state)


def test_a_run_resumed_from_its_checkpoint_equals_the_uninterrupted_run(tmp_path):
    from bimu.experiments.stream import run_stream
    from bimu.rundir import RunDir
    from test_runner_fakes import N_CLASSES, N_FEATURES, FakeBenchmark, strip_timing

    def method():
        return create_method("replay", [N_FEATURES, 8, N_CLASSES], seed=0, lr=0.05, buffer_size=10,
                             replay_batch_size=3)

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
    assert torch.equal(fresh.buffer_x, full_method.buffer_x) and fresh.buffer_seen == full_method.buffer_seen


def two_tasks(seed: int):
    """Task A: classes 0, 1; task B: classes 2, 3 around the same centres shifted by a fixed vector, so
    that learning B alone moves A's inputs to B's classes."""
    d = 10
    g = torch.Generator().manual_seed(1234)
    base = 3.0 * torch.nn.functional.normalize(torch.randn(2, d, generator=g), dim=1)
    shift = 2.0 * torch.nn.functional.normalize(torch.randn(d, generator=g), dim=0)
    means = torch.cat([base, base + shift])

    def sample(classes, n, s):
        gs = torch.Generator().manual_seed(s)
        y = torch.tensor(classes)[torch.randint(0, 2, (n,), generator=gs)]
        return means[y] + 0.4 * torch.randn(n, d, generator=gs), y

    return (sample([0, 1], 150, 10 + seed), sample([2, 3], 300, 20 + seed),
            sample([0, 1], 300, 30), sample([2, 3], 300, 31))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_replay_forgets_far_less_than_sgd_at_the_same_learning_rate(seed):
    (xa, ya), (xb, yb), (ta, tya), (tb, tyb) = two_tasks(seed)
    acc = {}
    for name, extra in (("sgd", {}), ("replay", dict(buffer_size=50, replay_batch_size=10))):
        m = create_method(name, [10, 16, 4], seed=seed, lr=0.05, **extra)
        train(m, xa, ya)
        a_before = (m.predict(ta) == tya).float().mean().item()
        train(m, xb, yb)
        acc[name] = (a_before, (m.predict(ta) == tya).float().mean().item(),
                     (m.predict(tb) == tyb).float().mean().item())
    for name, (a_before, a_after, b_after) in acc.items():
        assert a_before >= 0.95 and b_after >= 0.9, (name, acc)
    assert acc["sgd"][1] <= 0.2, acc  # SGD forgets task A ...
    assert acc["replay"][1] >= 0.8, acc  # ... replay keeps it


def test_the_buffer_counts_in_the_memory_footprint():
    sgd, replay = create_method("sgd", [20, 16, 3]), create_method("replay", [20, 16, 3], buffer_size=7)
    assert replay.memory_bytes() == sgd.memory_bytes() + 7 * (4 * 20 + 8) == nested_tensor_bytes(replay.modules_state())
    x, y = blobs(30, seed=4, d=20)
    train(replay, x, y)  # allocated in full up front: learning does not change it
    assert replay.memory_bytes() == sgd.memory_bytes() + buffer_bytes(7, 20)
    table = memory_footprint_table((784, 100, 10), n_tasks=3)
    assert "replay" in table
    default_size = get_method("replay").hyperparameters["buffer_size"].default
    assert table["replay"] == pytest.approx(table["sgd"] + buffer_bytes(default_size, 784) / 1e6, abs=1e-4)
    assert memory_footprint_table((784, 100, 10), methods=["replay"])["replay"] == round(
        (create_method("sgd", [784, 100, 10]).memory_bytes() + 1000 * 3144) / 1e6, 4)


def test_hyperparameters_and_registration():
    cls = get_method("replay")
    assert cls is ExperienceReplayMethod and not cls.info.needs_task_boundaries and not cls.info.bayesian
    assert set(cls.hyperparameters) == {"lr", "buffer_size", "replay_batch_size", "bias"}
    assert set(get_method("sgd").hyperparameters) <= set(cls.hyperparameters)
    for name in ("buffer_size", "replay_batch_size"):
        with pytest.raises(ValueError, match=f"'{name}' must be > 0"):
            create_method("replay", [4, 2], **{name: 0})
        with pytest.raises(ValueError, match=f"'{name}' must be of type int"):
            create_method("replay", [4, 2], **{name: 2.5})
    with pytest.raises(ValueError, match="'buffer_size' = 1000000000000000 needs .* GiB"):
        create_method("replay", [784, 2], buffer_size=10**15)
    m = create_method("replay", [4, 2], bias=False, buffer_size="3")  # strings as from --set
    assert m.hparams["buffer_size"] == 3 and len(m.params) == 1


def test_unlabelled_examples_do_not_enter_the_buffer():
    m = create_method("replay", [3, 3], buffer_size=4)
    m.observe_unlabelled(5)
    assert m.examples_seen == 5 and m.buffer_seen == 0 and m.buffer_filled == 0


def test_fit_stream_and_the_factory_run_it_on_the_fused_engine_or_pytorch():
    from bimu.engine import FusedReplay

    rng = np.random.default_rng(0)
    x = rng.normal(size=(400, 8)).astype(np.float32)
    y = (x[:, 0] + x[:, 1] > 0).astype(np.int64)
    assert isinstance(bimu.create_method("replay", [8, 2], seed=0), FusedReplay)
    assert isinstance(bimu.create_method("replay", [8, 2], seed=0, engine="torch"), ExperienceReplayMethod)
    results = {}
    for engine in ("auto", "torch"):
        result = bimu.fit_stream((x[:300], y[:300]), (x[300:], y[300:]), method="replay", hidden=[8], preset="none",
                                 lr=0.05, buffer_size=20, engine=engine)
        assert result.accuracy[0, 0] > 0.85
        assert result.method.buffer_seen == 300 and result.method.buffer_filled == 20
        results[result.engine] = result
    assert set(results) == {"fused", "torch"}
    assert np.array_equal(results["fused"].method.buffer()[0], results["torch"].method.buffer()[0].numpy())

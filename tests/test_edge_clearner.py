"""The C99 learner (bimu/edge/c/bimu_learn.c, host build through bimu.edge.clearner) against the engine:
the integer parts bit for bit, the float64 build's training steps to 1e-12 over 200 MNIST steps of the
paper's MLP and of an 8192 -> 19 head, the float32 build step by step, and the query decisions of a
2,000-example active stream exactly."""

from __future__ import annotations

import gzip
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from bimu.active.blocks import learn_in_blocks
from bimu.active.learner import QUERY_KEY_RANGE, ActiveLearner, make_acquisition
from bimu.active.threshold import vote_threshold
from bimu.edge import clearner
from bimu.edge.clearner import CLearner, CompilerNotFound
from bimu.engine import create_fused
from bimu.engine import planes as PL
from bimu.engine.query import QUERY_SALT
from bimu.methods.bayesbinn import BayesBiNNMethod
from bimu.methods.bimu import BiMUMethod
from bimu.rng import (TRAIN_STREAM, EVAL_STREAM, derive_key, hash32_np, mix64_np, relaxed_uniforms,
                      uniforms_from_counters)

pytestmark = pytest.mark.skipif(shutil.which("cc") is None, reason="the C learner needs a C compiler (cc)")

DATA = Path(os.environ.get("BIMU_DATA_DIR", "/work/shared/data")) / "mnist"
MLP = [784, 100, 10]
HEAD = [8192, 19]
F64_TOL = 1e-12
"""Largest |lambda_C - lambda_engine| allowed after 200 float64 steps (measured here: 0, bit for bit)."""
F32_TOL = 1e-6
"""Largest |lambda_C - lambda_engine| allowed after one float32 step from the same lambda (measured here: 0)."""


def _mnist(n):
    if not (DATA / "train-images-idx3-ubyte.gz").exists():
        pytest.skip(f"MNIST not found under {DATA} (set BIMU_DATA_DIR)")
    with gzip.open(DATA / "train-images-idx3-ubyte.gz") as f:
        x = np.frombuffer(f.read(16 + 784 * n), np.uint8, offset=16).reshape(n, 784).astype(np.float64) / 255
    with gzip.open(DATA / "train-labels-idx1-ubyte.gz") as f:
        y = np.frombuffer(f.read(8 + n), np.uint8, offset=8).astype(np.int64)
    return (x - x.mean()) / x.std(), y


def _head_data(n, seed=0):
    """Standardised random features with labels from a random linear teacher (19 classes)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, HEAD[0]))
    y = (x @ rng.standard_normal((HEAD[0], HEAD[1]))).argmax(1).astype(np.int64)
    return x, y


def _fused(name, sizes, preset, dtype="float64", seed=3, **over):
    table = BiMUMethod if name == "bimu" else BayesBiNNMethod
    return create_fused(name, sizes, seed, table.resolve_hyperparameters(over, preset), threads=1, dtype=dtype)


@pytest.fixture(scope="module")
def mlp64():
    """A float64 pmnist-100 method and a C learner built from it (before any step)."""
    m = _fused("bimu", MLP, "pmnist-100")
    return m, CLearner.from_method(m)


# ----------------------------------------------------------------------------- integer parts
def test_keys_hashes_and_uniforms_are_the_engines(mlp64):
    m, c = mlp64
    rng = np.random.default_rng(1)
    for seed in (0, 1, 3, 2**40 + 5):
        for stream in (TRAIN_STREAM, EVAL_STREAM):
            assert c.derive_key(seed, stream) == int(derive_key(seed, stream))
    assert c.counters["train_key"] == int(m.train_key) and c.counters["eval_key"] == int(m.eval_key)
    z = rng.integers(0, 2**63, 64, dtype=np.uint64) * np.uint64(2) + np.uint64(1)
    assert [c.hash64(int(v), 0) for v in z] == [int(v) for v in mix64_np(z)]
    pair = uniforms_from_counters(m.train_key, np.arange(40, dtype=np.uint64))
    assert [c.uniform32(c.hash64(int(m.train_key), n) >> 32) for n in range(40)] == pair[0::2].tolist()
    lo, hi, idx = (rng.integers(0, 2**32, 200, dtype=np.uint64).astype(np.uint32) for _ in range(3))
    assert [c.hash32(int(a), int(b), int(i)) for a, b, i in zip(lo, hi, idx)] == hash32_np(lo, hi, idx).tolist()
    # row keys and the relaxed uniforms of a training step
    for step, e0 in ((0, 0), (7, 784 * 13), (123456, 78400 + 100 * 9)):
        rlo, rhi = c.row_key(int(m.train_key), step, e0)
        n_in = 784 if e0 < 78400 else 100
        u = relaxed_uniforms(m.train_key, step, m.n_params, np.array([e0]), n_in, 5)
        mine = [[c.uniform32(c.hash32(rlo, rhi, i * 5 + k)) for i in range(n_in)] for k in range(5)]
        assert np.array_equal(np.asarray(mine), u[:, 0, :])


def test_relaxed_samples_are_the_engines(mlp64):
    m, c = mlp64
    K = m.K
    for l, (a, b) in enumerate(zip(MLP[:-1], MLP[1:])):
        off = K * int(m._poff[l])
        for k in range(K):
            for o in range(0, b, 7):
                w = m.W[off + k * a * b + o * a: off + k * a * b + (o + 1) * a]
                assert np.array_equal(c.relaxed_row(l, o, 0, k), w)


@pytest.mark.parametrize("double", [True, False])
def test_thresholds_and_hard_bits_are_the_planes(double):
    dtype = np.float64 if double else np.float32
    rng = np.random.default_rng(2)
    lam = np.concatenate([[0.0, -0.0, 1e-9, -1e-9, 0.5493, -0.5493, 7.93, -8.3, 8.4, -9.0, 12.0, -40.0, 40.0],
                          rng.standard_normal(70 * 37 - 13) * 3]).astype(dtype)
    sizes = np.array([70, 37], np.int64)
    woff = PL.word_offsets(sizes)
    tp = np.zeros((PL.PLANES, int(woff[-1])), np.uint32)
    vm = np.zeros(int(woff[-1]), np.uint32)
    PL.thresholds(lam, sizes, np.zeros(2, np.int64), woff, tp, vm)
    c = CLearner([70, 37], 2, 4, double=double)
    rw = int(PL.row_words(70))
    T = np.zeros(lam.size, np.int64)
    for o in range(37):
        for i in range(70):
            w, b = divmod(i, 32)
            for j in range(PL.PLANES):
                T[o * 70 + i] |= int((tp[j, o * rw + w] >> np.uint32(b)) & np.uint32(1)) << (23 - j)
    assert np.array_equal(c.thresholds(lam), T)
    out = np.zeros(rw, np.uint32)
    for o in range(37):
        for rlo, rhi in ((1, 2), (0xDEADBEEF, 0x12345678), (o * 977 + 5, 2**32 - 1 - o)):
            PL.sample_row_bits(tp, vm, o * rw, rw, np.uint32(rlo), np.uint32(rhi), out, 0)
            assert np.array_equal(c.sample_row_bits(lam[o * 70:(o + 1) * 70], rlo, rhi), out[:3])


def test_query_logits_are_the_query_planes(mlp64):
    m, c = mlp64
    X, _ = _mnist(8)
    qp = m.query_planes()
    for key in (1, 12345, 2**61 + 7):
        for K in (2, 5):
            assert np.array_equal(c.logits(X[5], key, K), qp.logits(X[5], key, K)[:, 0, :])
    assert QUERY_SALT == np.uint64(0x51E7C0DEA5E1EC75)


@pytest.mark.parametrize("sizes", [[512, 16], [70, 9, 5]])
def test_float32_query_logits_engine_order_exact_and_masked_sums_close(sizes):
    """float32 queries: with BIMU_QUERY_DOT8 1 the logits are the engine's bit for bit (stored planes for
    512 -> 16, planes from lambda for the small MLP); the device default, masked sums 2 (sum over +1) -
    total, equals them to float32 rounding of the sums."""
    m = _fused("bimu", sizes, "openloris-8192", dtype="float32", seed=6)
    m.lam[:] = (np.random.default_rng(2).standard_normal(m.n_params) * 1.5).astype(np.float32)
    qp = m.query_planes()
    exact = CLearner.from_method(m, query_samples=5, extra_flags=["-DBIMU_QUERY_DOT8=1"])
    fast = CLearner.from_method(m, query_samples=5)
    X = np.random.default_rng(3).standard_normal((6, sizes[0])).astype(np.float32)
    worst = 0.0
    for i, key in enumerate((1, 12345, 2**61 + 7, 99, 5, 2**40)):
        ref = qp.logits(X[i], key, 5)[:, 0, :]
        assert np.array_equal(exact.logits(X[i], key, 5), ref)
        worst = max(worst, float(np.abs(fast.logits(X[i], key, 5) - ref).max()))
    assert worst <= 1e-4  # LayerNorm'd logits of order 1: a few float32 ulps of a 512-term sum
    assert worst > 0 or sizes[0] < 512  # the two orders round differently somewhere on 512 inputs


def test_scores_follow_the_engine():
    c = CLearner([4, 3], 2, 6)
    # votes from the per-sample softmax argmax (first index on ties); prediction: mean log-softmax
    logits = np.array([[1.0, 1.0, 0.0], [0.0, 2.0, 0.0], [3.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    votes, pred, dissent = c.scores(logits)
    assert votes.tolist() == [3, 1, 0] and dissent == 1 and pred == 0
    assert [c.vote_threshold(t, 10) for t in (0.1, 0.2, 0.25, 0.0)] == [vote_threshold(t, 10)
                                                                       for t in (0.1, 0.2, 0.25, 0.0)]


# ----------------------------------------------------------------------------- training, float64
def _chain(m, c, X, Y):
    """Steps of the engine (``learn``, the batch-size-1 path) and of the C learner side by side; the
    largest |lambda difference| seen."""
    worst = 0.0
    for s in range(len(Y)):
        m.learn(torch.from_numpy(X[s:s + 1]), torch.from_numpy(Y[s:s + 1]))
        c.learn(X[s], Y[s])
        worst = max(worst, float(np.abs(c.lam - m.lam).max()))
    return worst


def test_float64_mlp_matches_the_engine_over_200_mnist_steps():
    X, Y = _mnist(200)
    m = _fused("bimu", MLP, "pmnist-100", seed=5)
    c = CLearner.from_method(m)
    assert _chain(m, c, X, Y) <= F64_TOL
    cnt = c.counters
    assert (cnt["train_step"], cnt["examples_seen"], cnt["updates_applied"]) == (
        m.train_step, m.examples_seen, m.updates_applied) == (200, 200, 200)


def test_float64_head_matches_the_engine_over_200_steps():
    X, Y = _head_data(200)
    m = _fused("bimu", HEAD, "openloris-8192", seed=1)
    c = CLearner.from_method(m)
    assert c.K == 10
    assert _chain(m, c, X, Y) <= F64_TOL
    assert c.counters["train_step"] == m.train_step == 200


def test_float64_bayesbinn_matches_the_engine():
    X, Y = _mnist(60)
    m = _fused("bayesbinn", MLP, "pmnist-100", seed=2)
    c = CLearner.from_method(m)
    assert c.kind == "bayesbinn"
    assert _chain(m, c, X[:30], Y[:30]) <= F64_TOL
    m.task_end()
    c.task_end()
    assert np.array_equal(c.prior, m.prior)
    assert _chain(m, c, X[30:], Y[30:]) <= F64_TOL


# ----------------------------------------------------------------------------- training, float32
def test_float32_steps_match_the_engine_step_by_step():
    X, Y = _mnist(60)
    X = X.astype(np.float32)
    m = _fused("bimu", MLP, "pmnist-100", dtype="float32", seed=4)
    c = CLearner.from_method(m)
    assert c.dtype == np.float32
    worst = 0.0
    for s in range(len(Y)):
        c.lam[:] = m.lam  # re-synced: chained float32 runs drift apart through 1 - w^2
        m.learn(torch.from_numpy(X[s:s + 1]), torch.from_numpy(Y[s:s + 1]))
        c.learn(X[s], Y[s])
        worst = max(worst, float(np.abs(c.lam - m.lam).max()))
    assert worst <= F32_TOL


# ----------------------------------------------------------------------------- the active stream
def test_float64_active_stream_queries_what_the_python_learner_queries():
    X, Y = _mnist(2000)
    X = X.astype(np.float32).astype(np.float64)  # ActiveLearner.learn_one hands the method float32 rows
    m = _fused("bimu", MLP, "pmnist-100", seed=7)
    c = CLearner.from_method(m)
    K, tau = 5, 0.2
    learner = ActiveLearner(m, make_acquisition("vr", threshold=tau, mc_samples=K))
    gen = torch.Generator()
    gen.set_state(learner.query_generator.get_state())
    keys = torch.randint(0, QUERY_KEY_RANGE, (len(Y),), generator=gen).numpy()
    learn_in_blocks(learner, torch.from_numpy(X), torch.from_numpy(Y), task=0)
    c.set_query(K, c.vote_threshold(tau, K))
    asked, preds = [], []
    for x, y, key in zip(X, Y, keys):
        pred, ask = c.observe(x, int(key))
        asked.append(ask)
        preds.append(pred)
        if ask:
            c.learn(x, y)
    python_asked = learner.ledger.asked.tolist()
    assert 20 < sum(asked) < len(Y) - 20  # a stream that queries some, not all
    assert asked == python_asked
    assert np.abs(c.lam - m.lam).max() <= F64_TOL
    cnt = c.counters
    assert cnt["examples_seen"] == m.examples_seen == len(Y)
    assert cnt["labels_queried"] == learner.ledger.labels_queried == sum(asked)


def test_observe_counts_like_the_active_learner():
    m = _fused("bimu", [6, 3], "pmnist-100", seed=0)
    c = CLearner.from_method(m, query_key=99)
    c.set_query(5, 0)  # dissent >= 0: every example is asked
    _, ask = c.observe(np.ones(6), c.next_query_key())
    assert ask and c.counters["examples_seen"] == 0 and c.counters["labels_queried"] == 1
    c.learn(np.ones(6), 2)
    c.set_query(5, 6)  # never asked
    _, ask = c.observe(np.ones(6), c.next_query_key())
    assert not ask and c.counters["examples_seen"] == 2 and c.counters["updates_applied"] == 1
    assert c.next_query_key() < 2**62


def test_lambda_hash_and_state_size():
    m = _fused("bimu", [40, 7, 3], "pmnist-100", dtype="float32", seed=0)
    c = CLearner.from_method(m)
    h = c.lambda_hash()
    expected = np.uint64(0xCBF29CE484222325)
    with np.errstate(over="ignore"):
        for byte in m.lam.tobytes():
            expected = (expected ^ np.uint64(byte)) * np.uint64(0x100000001B3)
    assert h == int(expected)
    c.lam[0] += 1
    assert c.lambda_hash() != h
    head = CLearner(HEAD, 10, 10, double=False)  # the 8192 -> 19 head: lambda and under 8 KB of scratch
    assert 4 * head.n_params <= head.state_bytes <= 4 * head.n_params + 8192


def test_missing_compiler_is_named(monkeypatch):
    monkeypatch.setattr(clearner.shutil, "which", lambda name: None)
    with pytest.raises(CompilerNotFound, match="`cc` was not found"):
        clearner.build_library(clearner.config_header([4, 3], 2))


# ----------------------------------------------------------------------------- the speed options
@pytest.mark.parametrize("double", [True, False])
def test_stored_planes_and_kept_samples_change_no_bit(double):
    """BIMU_STORE_PLANES and BIMU_KEEP_SAMPLES (on by default for a small first layer, as the paper's
    512 -> 16) trade memory for time only: with and without them the learner asks for the same examples
    and ends with the same lambda bits; the float64 build also equals the engine to the bit."""
    X, Y = _head_data(300, seed=5)
    sizes = [64, 16]
    dtype = "float64" if double else "float32"
    X = X[:, :64].astype(dtype)
    Y = (X @ np.random.default_rng(1).standard_normal((64, 16))).argmax(1)
    m = _fused("bimu", sizes, "openloris-8192", dtype=dtype, seed=2, n_samples=2)
    keys = np.random.default_rng(9).integers(0, 2**62, len(Y))
    runs = {}
    for planes, keep in [(True, True), (False, False), (True, False), (False, True)]:
        c = CLearner.from_method(m, query_samples=2, store_planes=planes, keep_samples=keep)
        c.set_query(2, 1)
        asked = []
        for x, y, key in zip(X, Y, keys):
            _, ask = c.observe(x, int(key))
            asked.append(ask)
            if ask:
                c.learn(x, y)
        runs[planes, keep] = (asked, c.lambda_hash(), c.lam.copy())
    assert 10 < sum(runs[True, True][0]) < len(Y) - 10  # a stream that queries some, not all
    assert len({(tuple(a), h) for a, h, _ in runs.values()}) == 1
    if double:  # the engine, fed the queried examples in order, follows the C learner bit for bit
        for x, y, ask in zip(X, Y, runs[True, True][0]):
            if ask:
                m.learn(torch.from_numpy(x[None]), torch.from_numpy(np.array([y])))
        assert np.array_equal(m.lam, runs[True, True][2])

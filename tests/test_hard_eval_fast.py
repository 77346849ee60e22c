"""The lane evaluation kernel (:func:`bimu.engine.hard_eval.hard_forward`) has the bits of the previous one
(:func:`~bimu.engine.hard_eval.hard_forward_reference`) on real MNIST: several seeds, widths with and without
tails, batch sizes that are not multiples of the block, K = 1 and K = 5, float32 and float64, one and two
threads, hard (+-1) and arbitrary weights."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import numba
import numpy as np
import pytest

from bimu.engine import create_fused
from bimu.engine.hard_eval import all_signs, hard_forward, hard_forward_reference
from bimu.engine.hparams import BinaryHP
from bimu.engine.lanes import lane_position, row_blocks
from bimu.engine.sampling import sample_weights
from bimu.methods.bimu import BiMUMethod

DATA = Path(os.environ.get("BIMU_DATA_DIR", "/work/shared/data")) / "mnist"


@pytest.fixture(scope="module")
def mnist_test():
    """The 10,000 MNIST test images, pixels / 255 standardised with their own mean and std (float64)."""
    path = DATA / "t10k-images-idx3-ubyte.gz"
    if not path.exists():
        pytest.skip(f"MNIST not found under {DATA} (set BIMU_DATA_DIR)")
    with gzip.open(path) as f:
        x = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 784).astype(np.float64) / 255
    return (x - x.mean()) / x.std()


def _model(sizes, seed, dtype="float32", **hparams):
    hp = BiMUMethod.resolve_hyperparameters(hparams, preset="pmnist-100")
    return create_fused("bimu", sizes, seed, hp, dtype=dtype)


def _hard_weights(m, K, draw=0):
    W = np.empty(K * m.n_params, dtype=m.dtype)
    sample_weights(m.lam, W, m._sizes, m._poff, K, m.eval_key, np.uint64(draw), True,
                   m._hp[BinaryHP.INV_TEMPERATURE])
    return W


def _logits(fn, m, X, W, K, threads=1):
    """``fn``'s logits of the rows of ``X`` (padded to a multiple of 4 as :meth:`FusedBiMU._logits_np` does)."""
    B = X.shape[0]
    Xp = np.zeros(((B + 3) // 4 * 4, X.shape[1]), dtype=m.dtype)
    Xp[:B] = X
    out = np.full((K, B, m.sizes[-1]), np.nan, dtype=m.dtype)
    fn(Xp, B, W, m._sizes, m._poff, m._cfg, m._hp, K, threads, numba.config.NUMBA_NUM_THREADS, out)
    return out


def _assert_same_bits(new, ref):
    assert new.dtype == ref.dtype and new.shape == ref.shape
    assert np.array_equal(new, ref)
    assert np.array_equal(new.view(np.uint8), ref.view(np.uint8))  # signed zeros too


@pytest.mark.parametrize("seed,K,B", [(0, 5, 10000), (1, 5, 1001), (2, 1, 10000), (3, 1, 17), (4, 5, 3), (5, 5, 1)])
def test_mnist_784_100_10_logits_have_the_reference_bits(mnist_test, seed, K, B):
    m = _model([784, 100, 10], seed)
    W = _hard_weights(m, K, draw=seed)
    X = mnist_test[:B].astype(np.float32)
    _assert_same_bits(_logits(hard_forward, m, X, W, K), _logits(hard_forward_reference, m, X, W, K))


def test_mnist_float64_and_saturated_lambdas(mnist_test):
    """float64 lanes (4 per vector), and lambdas pushed to +-1 and beyond so that most samples agree."""
    m = _model([784, 100, 10], 7, dtype="float64")
    m.lam *= 40
    W = _hard_weights(m, 5)
    X = mnist_test[:777]
    _assert_same_bits(_logits(hard_forward, m, X, W, 5), _logits(hard_forward_reference, m, X, W, 5))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_linear_head_8192_to_19(mnist_test, dtype):
    """A single layer (the OpenLORIS head) on 8192 features made of consecutive MNIST pixels."""
    m = _model([8192, 19], 11, dtype=dtype)
    X = mnist_test.reshape(-1)[:301 * 8192].reshape(301, 8192).astype(dtype)
    for K in (1, 5):
        W = _hard_weights(m, K)
        _assert_same_bits(_logits(hard_forward, m, X, W, K), _logits(hard_forward_reference, m, X, W, K))


@pytest.mark.parametrize("sizes", [[37, 23, 7], [5, 9, 3], [37, 13, 11, 2], [64, 24, 6]])
@pytest.mark.parametrize("activation,output_norm", [("rbg", True), ("sign", False)])
def test_odd_widths_tails_and_activations(mnist_test, sizes, activation, output_norm):
    """Widths with tails (n mod 8 != 0), shorter than 8, with partial register blocks, two hidden layers."""
    m = _model(sizes, 3, activation=activation, output_norm=output_norm)
    X = mnist_test[:, 300:300 + sizes[0]][:203].astype(np.float32)
    for K in (1, 5):
        W = _hard_weights(m, K)
        _assert_same_bits(_logits(hard_forward, m, X, W, K), _logits(hard_forward_reference, m, X, W, K))


def test_arbitrary_weights_take_the_exact_path(mnist_test):
    """Weights that are not +-1 are summed with products then adds (no FMA): still the reference bits."""
    m = _model([37, 23, 7], 5)
    rng = np.random.default_rng(0)
    W = rng.standard_normal(5 * m.n_params).astype(np.float32)
    assert not all_signs(W, W.shape[0]) and all_signs(_hard_weights(m, 5), 5 * m.n_params)
    X = mnist_test[:, 400:437][:99].astype(np.float32)
    _assert_same_bits(_logits(hard_forward, m, X, W, 5), _logits(hard_forward_reference, m, X, W, 5))


@pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2, reason="needs numba's pool of at least 2 threads")
def test_thread_count_does_not_change_a_bit(mnist_test):
    m = _model([784, 100, 10], 0)
    W = _hard_weights(m, 5)
    X = mnist_test[:2003].astype(np.float32)
    before = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        one = _logits(hard_forward, m, X, W, 5, threads=1)
        numba.set_num_threads(2)
        two = _logits(hard_forward, m, X, W, 5, threads=2)
        ref_two = _logits(hard_forward_reference, m, X, W, 5, threads=2)
    finally:
        numba.set_num_threads(before)
    _assert_same_bits(two, one)
    _assert_same_bits(two, ref_two)
    # an example's logits do not depend on the batch it sits in
    _assert_same_bits(_logits(hard_forward, m, X[1000:1003], W, 5), one[:, 1000:1003])


def test_the_method_evaluates_through_the_lane_kernel(mnist_test):
    """``FusedBiMU`` predictions use :func:`hard_forward`: its logits equal the reference on the same draw."""
    m = _model([784, 100, 10], 1)
    X = mnist_test[:150].astype(np.float32)
    got = m._logits_np(X, 5, m.eval_key, 0)
    _assert_same_bits(got, _logits(hard_forward_reference, m, X, _hard_weights(m, 5), 5))


def test_layout_helpers():
    assert sorted(lane_position(i, 37) for i in range(37)) == list(range(37))
    assert [lane_position(i, 37) for i in (0, 8, 1, 32, 36)] == [0, 1, 4, 32, 36]
    for n in range(1, 40):
        G, last, padded = row_blocks(n)
        assert padded >= n and padded - n < 6 and padded == 6 * (G - 1) + last and last in (4, 6)


def test_eval_speed_benchmark_runs(tmp_path):
    """``benchmarks/eval_speed.py`` runs end to end on a few images and finds before and after bit-identical."""
    import subprocess
    import sys

    if not (DATA / "t10k-images-idx3-ubyte.gz").exists():
        pytest.skip(f"MNIST not found under {DATA} (set BIMU_DATA_DIR)")
    root = Path(__file__).resolve().parent.parent
    run = subprocess.run([sys.executable, str(root / "benchmarks" / "eval_speed.py"), "--n", "41", "--repeats", "1",
                          "--data", str(DATA.parent)], capture_output=True, text=True, timeout=900, cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "bit-identical: True" in run.stdout and "(c) bimu after" in run.stdout

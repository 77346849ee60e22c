"""The grouped evaluation kernel (:func:`bimu.engine.grouped_eval.grouped_forward`) and its switch
``eval_sum``: the kernel has the bits of a plain numpy reference of its order on real MNIST (784-100-10
and a width with tails, K = 1 and 5, float32 and float64), an example's logits do not depend on its batch
or on the thread count, it agrees with :func:`~bimu.engine.hard_eval.hard_forward` to float rounding (and
exactly where every sum is exact), and the fused methods pick it with ``eval_sum="grouped"`` (a run
records it; the PyTorch methods refuse it)."""

from __future__ import annotations

import json

import numba
import numpy as np
import pytest
import torch

from bimu.engine import create_fused
from bimu.engine.grouped_eval import GROUP, grouped_forward, grouped_sum_reference
from bimu.engine.hard_eval import hard_forward
from bimu.engine.hparams import BinaryHP
from bimu.engine.scores import scores_from_logits
from bimu.methods import create_method, get_method
from test_hard_eval_fast import _hard_weights, _logits, mnist_test  # noqa: F401 - mnist_test: the fixture


def _model(sizes, seed, dtype="float32", method="bimu", **hparams):
    hp = get_method(method).resolve_hyperparameters(hparams, preset="pmnist-100")
    return create_fused(method, sizes, seed, hp, dtype=dtype, threads=1)


def _grouped_first_layer(X, Wk):
    """The first layer's pre-activations ``[B, n]`` of inputs ``X [B, D]`` under +-1 weights ``Wk [n, D]``
    in the grouped order, by loops over the groups (numpy elementwise arithmetic in ``X``'s type)."""
    B, D = X.shape
    zero = X.dtype.type(0.0)
    z = np.zeros((B, Wk.shape[0]), dtype=X.dtype)
    for g in range(0, D, GROUP):
        s = []
        for i in range(g, g + GROUP):  # s_i x_i, [B, n]; padding inputs are +0
            if i < D:
                xi = np.broadcast_to(X[:, i:i + 1], z.shape)
                s.append(np.where(Wk[None, :, i] < 0, -xi, xi))
            else:
                s.append(np.full(z.shape, zero))
        z = z + ((s[0] + s[1]) + (s[2] + s[3]))
    return z


def _norm_act(z, eps, gate, hidden):
    """LayerNorm (float64 statistics, sums in row order) then the gate, as the engine computes them."""
    s = np.zeros(z.shape[0])
    for o in range(z.shape[1]):
        s = s + z[:, o].astype(np.float64)
    mu = s / z.shape[1]
    v = np.zeros(z.shape[0])
    for o in range(z.shape[1]):
        d = z[:, o] - mu
        v = v + d * d
    r = 1.0 / np.sqrt(v / z.shape[1] + eps)
    xh = (z - mu[:, None]) * r[:, None]
    return (np.abs(xh) > gate).astype(z.dtype) if hidden else xh.astype(z.dtype)


def _reference_logits(m, X, W, K):
    """The whole network in the grouped order: the first layer by :func:`_grouped_first_layer`, the upper
    layers' sums of 0/1 activations and +-1 weights (exact in any order), LayerNorm and the gate."""
    sizes, L = m.sizes, len(m.sizes) - 1
    eps, gate = float(m._hp[BinaryHP.LN_EPS]), float(m._hp[BinaryHP.GATE])
    out = []
    for k in range(K):
        h = X
        for l in range(L):
            n_in, n_out = sizes[l], sizes[l + 1]
            Wl = W[K * m._poff[l]:K * m._poff[l + 1]].reshape(K, n_out, n_in)[k]
            z = _grouped_first_layer(h, Wl) if l == 0 else (h.astype(np.float64) @ Wl.T.astype(np.float64))
            h = _norm_act(z.astype(m.dtype), eps, gate, l < L - 1)
        out.append(h)
    return np.stack(out)


def _same_bits(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a.view(np.uint8), b.view(np.uint8))


def test_grouped_sum_reference_is_the_stated_order():
    x = np.array([1.5, -2.25, 3.0, 0.125, 7.0, -1.0], np.float32)
    w = np.array([1, -1, -1, 1, -1, 1], np.float32)
    f = np.float32
    expected = f(f(0.0) + f(f(f(1.5) + f(2.25)) + f(f(-3.0) + f(0.125)))) + f(f(f(-7.0) + f(-1.0)) + f(f(0) + f(0)))
    assert grouped_sum_reference(x, w) == expected
    assert grouped_sum_reference(x, w) == _grouped_first_layer(x[None], w[None])[0, 0]


@pytest.mark.parametrize("sizes", [[784, 100, 10], [30, 7, 3]])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("K", [1, 5])
def test_the_kernel_has_the_bits_of_the_numpy_reference_on_mnist(mnist_test, sizes, dtype, K):
    m = _model(sizes, seed=K, dtype=dtype)
    W = _hard_weights(m, K, draw=3)
    c0 = 300 if sizes[0] < 784 else 0  # 30 inputs (7 groups and a partial one) from the middle of the image
    X = mnist_test[:203, c0:c0 + sizes[0]].astype(m.dtype)
    assert _same_bits(_logits(grouped_forward, m, X, W, K), _reference_logits(m, X, W, K))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_first_layer_sums_have_the_bits_of_the_reference(mnist_test, dtype):
    """A one-layer network without output LayerNorm: the logits are the raw grouped sums."""
    m = _model([784, 37], seed=4, dtype=dtype, output_norm=False)
    W = _hard_weights(m, 3)
    X = mnist_test[:150].astype(m.dtype)
    out = _logits(grouped_forward, m, X, W, 3)
    ref = np.stack([_grouped_first_layer(X, W.reshape(3, 37, 784)[k]) for k in range(3)])
    assert _same_bits(out, ref)
    # the same sums as the training order (hard_forward) to float rounding, not the same bits
    dot8 = _logits(hard_forward, m, X, W, 3)
    tol = 1e-4 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(out, dot8, rtol=0, atol=tol * np.abs(dot8).max())
    if dtype == "float32":
        assert not np.array_equal(out, dot8)


def test_an_examples_logits_do_not_depend_on_its_batch_or_the_threads(mnist_test):
    m = _model([784, 100, 10], seed=6)
    W = _hard_weights(m, 5, draw=1)
    X = mnist_test[:203].astype(np.float32)
    batch = _logits(grouped_forward, m, X, W, 5)
    for B in (1, 3, 65, 130):
        assert _same_bits(_logits(grouped_forward, m, X[-B:], W, 5), batch[:, -B:])
    alone = _logits(grouped_forward, m, X[77:78], W, 5)
    assert _same_bits(alone, batch[:, 77:78])
    if numba.config.NUMBA_NUM_THREADS >= 2:
        assert _same_bits(_logits(grouped_forward, m, X, W, 5, threads=2), batch)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_equal_to_hard_forward_where_every_sum_is_exact(dtype):
    """Small-integer inputs: every sum is exact in any order, so the two kernels give the same bits."""
    m = _model([50, 20, 7], seed=8, dtype=dtype)
    X = np.random.default_rng(0).integers(-3, 4, size=(99, 50)).astype(m.dtype)
    W = _hard_weights(m, 5)
    assert _same_bits(_logits(grouped_forward, m, X, W, 5), _logits(hard_forward, m, X, W, 5))


def test_predictions_agree_with_hard_forward_on_mnist(mnist_test):
    m = _model([784, 100, 10], seed=9)
    W = _hard_weights(m, 5)
    X = mnist_test[:2000].astype(np.float32)
    a, b = _logits(grouped_forward, m, X, W, 5), _logits(hard_forward, m, X, W, 5)
    assert np.mean(a.argmax(-1) == b.argmax(-1)) > 0.999
    np.testing.assert_allclose(a.mean(), b.mean(), atol=1e-3)


def test_weights_other_than_plus_minus_one_are_refused():
    m = _model([8, 4, 3], seed=0)
    W = _hard_weights(m, 1)
    W[5] = 0.5
    with pytest.raises(ValueError, match="hard weights"):
        _logits(grouped_forward, m, np.zeros((4, 8), np.float32), W, 1)


@pytest.mark.parametrize("method", ["bimu", "bayesbinn"])
def test_the_switch_picks_the_kernel(mnist_test, method):
    """A one-layer network without output LayerNorm, whose logits are the raw first-layer sums."""
    extra = dict(output_norm=False, **({"lambda_init": "uniform"} if method == "bayesbinn" else {}))
    default = _model([784, 10], 1, method=method, **extra)
    grouped = _model([784, 10], 1, method=method, eval_sum="grouped", **extra)
    assert default.hparams["eval_sum"] == "dot8" and grouped.hparams["eval_sum"] == "grouped"
    X = mnist_test[:70].astype(np.float32)
    W = _hard_weights(default, 5)  # what evaluation counter 0 of the method's key draws
    dot8, grouped_logits = _logits(hard_forward, default, X, W, 5), _logits(grouped_forward, grouped, X, W, 5)
    assert not _same_bits(dot8, grouped_logits)
    for m, expected in ((default, dot8), (grouped, grouped_logits)):
        assert _same_bits(m._logits_np(X, 5, m.eval_key, 0), expected)
        probs = scores_from_logits(expected)[0].astype(np.float32)
        assert torch.equal(m.predict_samples(torch.from_numpy(X)), torch.from_numpy(probs))  # evaluation counter 0


@pytest.mark.parametrize("method", ["bimu", "bayesbinn"])
def test_a_bad_value_is_one_line_naming_the_choices(method):
    with pytest.raises(ValueError) as e:
        get_method(method).resolve_hyperparameters({"eval_sum": "fast"})
    assert str(e.value) == "hyperparameter 'eval_sum' must be one of ('dot8', 'grouped'), got 'fast'"


@pytest.mark.parametrize("method", ["bimu", "bayesbinn"])
def test_the_pytorch_methods_refuse_grouped(method):
    assert create_method(method, [6, 3], seed=0, eval_sum="dot8").hparams["eval_sum"] == "dot8"
    with pytest.raises(ValueError, match="eval_sum='grouped' is an evaluation of the fused engine"):
        create_method(method, [6, 3], seed=0, eval_sum="grouped")


def test_a_run_records_the_switch_and_resumes_only_with_it(tmp_path, capsys):
    import test_runner_fakes  # noqa: F401 - registers the fake-test benchmark

    from bimu import cli
    from bimu.rundir import seed_dir

    out = str(tmp_path / "runs")
    cmd = ["run", "fake-test", "--tasks", "2", "--seeds", "0", "--engine", "fused", "--threads", "1",
           "--no-progress", "--out", out]
    assert cli.main([*cmd, "--set", "eval_sum=grouped"]) == 0
    config = json.loads((seed_dir(out, "fake-test", "bimu", 0) / "config.json").read_text())
    assert config["resolved"]["hparams"]["eval_sum"] == "grouped"
    capsys.readouterr()
    assert cli.main([*cmd, "--set", "eval_sum=grouped"]) == 0  # the same run: already complete
    assert "already complete" in capsys.readouterr().err
    assert cli.main(cmd) != 0  # the default kernel is another run: that directory is refused
    assert cli.main([*cmd, "--set", "eval_sum=fast"]) == 2
    err = capsys.readouterr().err
    assert "hyperparameter 'eval_sum' must be one of ('dot8', 'grouped'), got 'fast'" in err


def test_a_grouped_stream_resumed_from_its_checkpoint_equals_the_uninterrupted_run(tmp_path):
    from bimu.experiments.stream import run_stream
    from bimu.rundir import RunDir
    from test_runner_fakes import N_CLASSES, N_FEATURES, Crash, FakeBenchmark, crash_after, strip_timing

    def method():
        return _model([N_FEATURES, 8, N_CLASSES], 0, eval_sum="grouped")

    b = FakeBenchmark(n_tasks=3)
    full = run_stream(b, method(), seed=2, run_dir=tmp_path / "full", progress=False)
    with pytest.raises(Crash):
        run_stream(b, method(), seed=2, run_dir=tmp_path / "resumed", progress=False, on_task_end=crash_after(0))
    res = run_stream(b, method(), seed=2, run_dir=RunDir(tmp_path / "resumed"), progress=False)
    np.testing.assert_array_equal(res["R"], full["R"])
    assert strip_timing(res["records"]) == strip_timing(full["records"])

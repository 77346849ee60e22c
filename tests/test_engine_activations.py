"""The compiled networks' one set of activation codes and the Reverse Binary Gate's surrogate derivative,
checked against the torch autograd function the methods train with."""

import numpy as np
import pytest
import torch

from bimu.engine import binary_ops, dense, dots, hparams, scalar
from bimu.nn import rbg


def test_activation_codes_are_one_set():
    """Every compiled network (dense baselines, the BiMU/BayesBiNN kernels) reads the same codes."""
    assert (dense.ACT_RELU, dense.ACT_SIGN, dense.ACT_GATE) == (hparams.ACT_RELU, hparams.ACT_SIGN,
                                                               hparams.ACT_GATE)
    assert len({hparams.ACT_RELU, hparams.ACT_SIGN, hparams.ACT_GATE}) == 3
    assert not hasattr(hparams, "ACT_RBG")


@pytest.mark.parametrize("width", [1.0, 0.1, 1.0 / 3.0, 0.7])
def test_gate_surrogate_matches_torch_at_the_gate_edges(width):
    """At float32 values next to each edge +-width/2, +-3 width/2 (widths 0.1 and 1/3 are not float32
    numbers, so comparing in float64 would move the edges), the compiled derivative -- the BiMU kernels'
    `_act_grad` and the baselines' `gate_surrogate` alike -- is torch's sRBG backward."""
    edges = np.array([0.5 * width, 1.5 * width, -0.5 * width, -1.5 * width], dtype=np.float32)
    z = np.concatenate([edges, np.nextafter(edges, np.float32(np.inf)),
                        np.nextafter(edges, np.float32(-np.inf)), np.float32([0.0, width, -width])])
    x = torch.tensor(z, requires_grad=True)
    rbg(x, width).sum().backward()
    expected = x.grad.numpy()
    got_gate = np.array([scalar.gate_surrogate(v, np.float32(width)) for v in z], dtype=np.float32)
    got_act = np.array([binary_ops.act_grad(v, hparams.ACT_GATE, np.float32(width)) for v in z], dtype=np.float32)
    np.testing.assert_array_equal(got_gate, expected)
    np.testing.assert_array_equal(got_act, expected)
    assert sorted(set(expected.tolist())) == [-1.0, 0.0, 1.0]  # both signs and the dead zone are hit


def test_sign_derivative_is_the_hard_tanh_window():
    z = np.float32([-1.5, -1.0, -0.25, 0.0, 1.0, np.nextafter(np.float32(1.0), np.float32(2.0))])
    got = [binary_ops.act_grad(v, hparams.ACT_SIGN, np.float32(1.0)) for v in z]
    assert got == [0.0, 1.0, 1.0, 1.0, 1.0, 0.0]


def test_dot_products_have_one_written_order():
    """Every compiled dot product sums in the order written in dot8's source (eight partial sums by
    i mod 8, combined ((0+4)+(2+6))+((1+5)+(3+7)), then the tail), with no fast-math flag that would let
    the compiler pick another: an order left to the vectoriser changed results with the compile history
    (a kernel compiled against a callee loaded from numba's cache summed differently)."""
    from bimu.engine.dots import dot

    for fn in (dots.dot8, dot):
        assert not fn.targetoptions.get("fastmath"), fn
    rng = np.random.default_rng(3)
    for n in (7, 8, 100, 784, 13):
        w = rng.standard_normal(n + 5).astype(np.float32)
        x = rng.standard_normal(n + 2).astype(np.float32)
        terms = w[5:5 + n] * x[2:2 + n]  # float32 products, rounded once each (no FMA)
        m = n - n % 8
        s = [np.float32(0.0)] * 8
        for i in range(0, m, 8):
            for j in range(8):
                s[j] = np.float32(s[j] + terms[i + j])
        total = np.float32(np.float32(np.float32(s[0] + s[4]) + np.float32(s[2] + s[6]))
                           + np.float32(np.float32(s[1] + s[5]) + np.float32(s[3] + s[7])))
        for i in range(m, n):
            total = np.float32(total + terms[i])
        assert dots.dot8(w, 5, x, 2, n) == total
        assert dot(w[5:5 + n].copy(), x[2:2 + n].copy()) == total


def test_dot_order_benchmark_runs_and_reports_its_ratio(capsys):
    """benchmarks/dot_order_speed.py prices dot8's fixed order against a reassociated loop and against the
    same order as scalar sums: the baselines compute the same dot product (the scalar form to the bit),
    and it prints the times, the ratios and the packed / scalar instruction counts."""
    import re

    from repo_scripts import load

    bench = load("benchmarks/dot_order_speed.py")
    rng = np.random.default_rng(0)
    w = rng.standard_normal(800).astype(np.float32)
    x = rng.standard_normal(784).astype(np.float32)
    assert abs(float(bench.dot_reassoc(w, 16, x, 0, 784)) - float(dots.dot8(w, 16, x, 0, 784))) < 1e-3
    for wo, n in ((16, 784), (3, 13), (0, 7), (0, 0)):
        assert bench.dot8_scalar(w, wo, x, 0, n) == dots.dot8(w, wo, x, 0, n)  # same order, same bits
    assert bench.main(["--reps", "1", "--repeats", "1"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"reassoc \(baseline\)\s+[\d.]+ us\s+1\.00x", out)
    packed = re.search(r"dot8 \(engine\)\s+[\d.]+ us\s+[\d.]+x the reassoc loop's time  \((\d+) packed / \d+ scalar", out)
    assert packed and int(packed.group(1)) > 0  # the vector accumulator compiled to packed arithmetic
    assert re.search(r"dot8 is [\d.]+x as fast as its scalar form \(same bits, checked\)", out)
    assert re.search(r"dot4x2 reassoc \(before\)\s+[\d.]+ us\s+1\.00x", out)
    assert re.search(r"dot4x2 \(engine\)\s+[\d.]+ us\s+[\d.]+x the reassoc kernel's time", out)
    assert "dot4x2 gives dot8's bits for all 3,200 sums (checked)" in out


def _compiled_functions():
    import importlib
    import pkgutil

    from numba.core.registry import CPUDispatcher

    import bimu.edge
    import bimu.engine
    import bimu.rng
    from bimu.engine.rowpass import generated_module

    modules = [generated_module(2), bimu.rng]
    for pkg in (bimu.engine, bimu.edge):
        for info in pkgutil.iter_modules(pkg.__path__):
            modules.append(importlib.import_module(f"{pkg.__name__}.{info.name}"))
    found = {}
    for module in modules:
        for name, obj in vars(module).items():
            if isinstance(obj, CPUDispatcher) and obj.py_func.__module__ == module.__name__:
                found[f"{module.__name__}.{name}"] = obj
    return found


def test_every_compiled_function_sets_its_own_fast_math_flags():
    """numba compiles a function that leaves ``fastmath`` unset with the flags of the caller that first
    needs it (``inherit_if_not_set``) and caches that code: dot8 compiled for train_steps (FMA
    contraction) and dot8 compiled for a direct call summed differently, so results depended on which
    had run first. Every function that is not inlined into its callers (``inline='always'``, which takes
    the caller's flags by design) states its flags."""
    functions = _compiled_functions()
    assert "bimu.engine.dots.dot8" in functions and len(functions) > 30
    unset = [name for name, fn in functions.items()
             if fn.targetoptions.get("inline") != "always" and "fastmath" not in fn.targetoptions]
    assert unset == []


def test_evaluation_kernel_has_dot8_bits_in_every_slot():
    """dot4x2 (two weight rows by four inputs, the first layer of evaluation) gives each of its eight
    sums the bits of dot8 for that row and input, for lengths with and without a tail and both dtypes,
    so an example's logits do not depend on its slot, on the compile history or on the vector width."""
    rng = np.random.default_rng(11)
    for dtype in (np.float32, np.float64):
        for n in (0, 5, 8, 13, 784):
            w = rng.standard_normal((2, n)).astype(dtype)
            x = rng.standard_normal((4, n)).astype(dtype)
            out = np.full(8, np.nan, dtype)
            dots.dot4x2(w[0], w[1], x[0], x[1], x[2], x[3], out)
            want = [dots.dot8(w[j], 0, x[r], 0, n) for r in range(4) for j in range(2)]
            assert out.tolist() == [float(v) for v in want], (dtype, n)
    with pytest.raises(ValueError, match="rows of one length"):
        dots.dot4x2(w[0], w[1][:3], x[0], x[1], x[2], x[3], out)


def test_training_row_sums_have_dot8_bits_for_every_row_count():
    """dot_rows (the training row pass's K next pre-activations, one pass over the input for up to eight
    sample rows) gives each row dot8's bits, for float32 and float64, with and without a tail, and
    refuses more rows than it has accumulators for."""
    from numba.core.errors import TypingError

    rng = np.random.default_rng(3)
    for dtype in (np.float32, np.float64):
        w = rng.standard_normal(8 * 800).astype(dtype)
        x = rng.standard_normal(800).astype(dtype)
        for rows in (1, 2, 5, 8):
            for n in (0, 7, 8, 13, 784):
                offs = tuple(k * 800 + k for k in range(rows))
                want = tuple(dots.dot8(w, o, x, 0, n) for o in offs)
                assert dots.dot_rows(w, offs, x, n) == want, (dtype, rows, n)
    with pytest.raises(TypingError):
        dots.dot_rows(w, tuple(range(dots.ROWS_PER_DOT + 1)), x, 8)


def test_no_compiled_function_lets_the_vectoriser_reorder_a_sum():
    """No compiled function lets the vectoriser reorder a sum (``reassoc``), so no result depends on the
    machine's vector width: the evaluation kernel dot4x2 used to, and the generated per-K sampling loop
    summed its K pre-activations so until both wrote their order out (dot8's)."""
    functions = _compiled_functions()
    reassoc = sorted(name for name, fn in functions.items()
                     if "reassoc" in (fn.targetoptions.get("fastmath") or ()))
    assert reassoc == []
    assert any(name.endswith(".sample_row") for name in functions)
    assert "bimu.engine.dots.dot4x2" in functions

"""The C learners on emulated Cortex-M4 / Cortex-M7 cores (QEMU mps2-an386 / mps2-an500) and the C
sign-network baselines (STE, Synaptic Metaplasticity) against the fused engine.

The emulation tests need ``arm-none-eabi-gcc`` and ``qemu-system-arm`` (``scripts/ci_arm.sh`` installs
them; CI does) and are skipped without them; the baselines' host tests need only ``cc``.
"""

from __future__ import annotations

import io
import shutil
from contextlib import redirect_stdout

import numpy as np
import pytest

from bimu.edge import emulate

needs_cc = pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler (cc) on PATH")
needs_arm = pytest.mark.skipif(bool(emulate.missing_tools()),
                               reason=f"{', '.join(emulate.missing_tools())} not found: run scripts/ci_arm.sh")


# ----------------------------------------------------------------------------- the baselines on the host
def _sign_pair(kind, sizes, dtype, **hparams):
    from bimu.edge.csign import CSignLearner
    from bimu.engine.fused_sign import FusedSTE, FusedSynapticMetaplasticity

    cls = FusedSTE if kind == "ste" else FusedSynapticMetaplasticity
    m = cls(sizes, seed=3, dtype=dtype, threads=1, **hparams)
    return m, CSignLearner.from_method(m)


def _stream(sizes, n, dtype, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, sizes[0])).astype(dtype), rng.integers(0, sizes[-1], n)


@needs_cc
@pytest.mark.parametrize("kind,hparams", [("ste", dict(lr=0.003)), ("ste", dict(lr=0.01, weight_decay=1e-3)),
                                          ("synaptic-metaplasticity", dict(lr=6e-4, metaplasticity=6.0)),
                                          ("synaptic-metaplasticity", dict(activation="rbg", weight_decay=1e-4))])
def test_sign_steps_float64_follow_the_engine(kind, hparams):
    """The float64 C steps follow bimu.engine.sign.sign_train (batch size 1) to rounding, hidden layer
    and norms included, without re-syncing."""
    sizes = [24, 10, 5]
    m, c = _sign_pair(kind, sizes, "float64", **hparams)
    X, Y = _stream(sizes, 40, np.float64)
    for i in range(40):
        m.learn_many(X[i:i + 1], Y[i:i + 1])
        c.learn(X[i], Y[i])
    np.testing.assert_allclose(c.Wh, m.Wh, rtol=0, atol=1e-12)
    np.testing.assert_allclose(c.mW, m.mW, rtol=1e-12, atol=1e-300)
    if m._norm:
        np.testing.assert_allclose(c.NP, m.NP, rtol=0, atol=1e-12)
        np.testing.assert_allclose(c.RV, m.RV, rtol=1e-12)
    assert c.adam_step == m.adam_step == 40
    lg = m._logits_np(X[:1], 1, None, None)[0, 0]
    np.testing.assert_allclose(c.logits(X[0]), lg, rtol=0, atol=1e-9)
    assert not np.array_equal(c.Wh, _sign_pair(kind, sizes, "float64", **hparams)[1].Wh)  # it learned


@needs_cc
@pytest.mark.parametrize("kind", ["ste", "synaptic-metaplasticity"])
def test_sign_steps_float32_step_by_step(kind):
    """float32, re-synced every step: each step's latent weights within float32 rounding of the engine's
    (1e-6 relative, or 1e-5 of a learning-rate step: the engine's softmax calls the C library's expf, the
    C baseline the engine's float32 exp polynomial)."""
    sizes = [512, 16]
    m, c = _sign_pair(kind, sizes, "float32")
    X, Y = _stream(sizes, 20, np.float32, seed=1)
    for i in range(20):
        m.learn_many(X[i:i + 1], Y[i:i + 1])
        c.learn(X[i], Y[i])
        np.testing.assert_allclose(c.Wh, m.Wh, rtol=1e-6, atol=1e-5 * m.hparams["lr"])
        for name in ("Wh", "mW", "vW") + (("NP", "mN", "vN", "RM", "RV") if m._norm else ()):
            getattr(c, name)[:] = getattr(m, name)


@needs_cc
def test_sign_learner_rejects_bad_input():
    from bimu.edge.csign import CSignLearner, sign_hparams

    with pytest.raises(ValueError, match="online"):
        sign_hparams("synaptic-metaplasticity", dict(lr=1e-3, metaplasticity=1.0, weight_decay=0.0, bn_momentum=0.1,
                                                     bn_statistics="equinox"))
    c = CSignLearner("ste", [4, 3], dict(lr=0.1, weight_decay=0.0, clip_latent=True))
    with pytest.raises(ValueError, match="label"):
        c.learn(np.zeros(4), 3)
    with pytest.raises(ValueError, match="features"):
        c.logits(np.zeros(5))


def test_no_toolchain_is_one_line(monkeypatch):
    """Without the cross toolchain the emulated section is one line saying so."""
    from bimu.edge.cost import emulated_cost_section

    monkeypatch.setattr(emulate.shutil, "which", lambda name: None)
    text, table = emulated_cost_section("quick")
    assert table is None and text.count("\n") == 1
    assert "arm-none-eabi-gcc" in text and "scripts/ci_arm.sh" in text
    with pytest.raises(RuntimeError, match="qemu-system-arm"):
        emulated_cost_section("quick", required=True)


# ----------------------------------------------------------------------------- emulation
@needs_arm
@pytest.mark.parametrize("core", ["m4", "m7"])
def test_counter_reads_40_instructions_per_tick(core):
    ticks, instructions = emulate.calibrate(core, iterations=100_000)
    assert abs(ticks * emulate.INSTRUCTIONS_PER_TICK - instructions) <= emulate.INSTRUCTIONS_PER_TICK


@pytest.fixture(scope="module")
def table_512():
    """Every method on the 512 -> 16 layer, both cores (the hashes are recorded, not asserted)."""
    return emulate.emulated_cost_table([[512, 16]], cores=["m4", "m7"], train_steps=3, infer_repeats=2)


@needs_arm
def test_emulated_hash_equals_host(table_512, capsys):
    """The emulated learners' lambda / latent-weight hash after the training steps, and the logits of
    the last prediction, equal the host build's (same flags), for every method on both cores."""
    for method in emulate.METHODS:
        for core in ("m4", "m7"):
            r = table_512.get([512, 16], method, core)
            print(f"{method} {core}: device {r.hash:016x} host {r.host_hash:016x}")
            assert r.matches_host, (method, core)
    assert len({table_512.get([512, 16], m, "m7").hash for m in emulate.METHODS}) == 4


@needs_arm
def test_emulated_counts_are_deterministic(table_512):
    """Two runs of one program count the same; repeated calls of a data-independent path count the
    same to within the counter's resolution, and the table has every row."""
    case = emulate.bench_case("ste", [512, 16], train_steps=1, infer_repeats=2)
    a, b = emulate.run_case(case, "m7"), emulate.run_case(case, "m7")
    assert (a.infer_ticks, a.train_ticks, a.hash) == (b.infer_ticks, b.train_ticks, b.hash)
    assert max(a.infer_ticks) - min(a.infer_ticks) <= 1
    for method in emulate.METHODS:
        for core in ("m4", "m7"):
            r = table_512.get([512, 16], method, core)
            assert r.inference > 8192 and r.train > 8192
            spread = max(r.instructions(r.train_ticks)) - min(r.instructions(r.train_ticks))
            assert spread <= 0.05 * r.train, (method, core)
    text = table_512.format()
    assert "NOT cycles" in text and "155,170" in text and "C_AL" in text


@needs_arm
def test_emulated_baselines_within_bounds(table_512):
    """The sign baselines on the emulated Cortex-M7: one inference of 512 -> 16 (8,192 weights) costs
    fewer than 12 instructions per weight, a training step fewer than 80."""
    for method in ("ste", "synaptic-metaplasticity"):
        r = table_512.get([512, 16], method, "m7")
        assert r.inference <= 12 * 8192 and r.train <= 80 * 8192, (method, r.inference, r.train)


@needs_arm
def test_emulated_bimu_targets_on_m7(table_512):
    """BiMU on the emulated Cortex-M7, float32, 512 -> 16: one MC sample of inference within 80,000
    instructions and one training step (K = 1) within 1,500,000."""
    r = table_512.get([512, 16], "bimu", "m7")
    assert r.inference <= emulate.TARGETS_M7["inference_512_16"]
    assert r.train <= emulate.TARGETS_M7["bimu_train_512_16"]


@needs_arm
def test_compute_cost_prints_the_emulated_table():
    from bimu.edge.cli import main

    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["compute-cost", "--emulated", "only", "--scale", "quick", "--cores", "m7"]) == 0
    text = out.getvalue()
    assert "Cortex-M7 inference" in text and "INSTRUCTIONS" in text and "Syn. Meta." in text
    assert "equal to the host build's" in text and "DIFFERENT" not in text


@needs_arm
def test_profile_accounts_for_the_measured_instructions():
    """The per-function profile of a small STE network adds up to the counter's measurement (to within
    the counter's resolution and the few instructions of the prints between the phases)."""
    p = emulate.profile("ste", [64, 4], "m7")
    r = emulate.run_case(emulate.bench_case("ste", [64, 4], train_steps=1, infer_repeats=1), "m7")
    assert "forward" in p["infer"] and "adam_row" in p["train"]
    assert abs(sum(p["train"].values()) - r.train) <= 2500
    assert abs(sum(p["infer"].values()) - r.inference) <= 2500


@needs_arm
def test_emulated_head_8192_19_equals_host():
    """The 8192 -> 19 OpenLORIS head: BiMU on the emulated Cortex-M7 learns the host's bits."""
    case = emulate.bench_case("bimu", [8192, 19], train_steps=1, infer_repeats=1)
    r = emulate.run_case(case, "m7")
    emulate.check_against_host(case, r)
    assert r.train > 19 * 8192 and r.inference > 19 * 8192


@needs_arm
@pytest.mark.parametrize("core", ["m4", "m7"])
def test_an_active_stream_prefix_on_the_device_is_the_host_builds(core):
    """The first 120 examples of a real Permuted-MNIST stream (784 -> 10 head, K = 2, ask when the two
    samples disagree) through the learner on the emulated core: the same labels asked and the same
    predictions as the host build, and on the Cortex-M7 (double-precision FPU, newlib's current libm) the
    same final lambda bits too and, built with the engine's summation order, the same labels as the
    Python learner. The Cortex-M4's float libm is not glibc's: its softmax expf differs from the host's
    in the last bit on about one input in 10^4, and lambda drifts by float rounding."""
    import os

    if not os.environ.get("BIMU_DATA_DIR"):
        pytest.skip("BIMU_DATA_DIR is not set (MNIST)")
    from bimu.data.benchmarks import get_benchmark
    from bimu.reproduce.device_stream import emulated_prefix

    bench = get_benchmark("pmnist", n_tasks=1)
    r = emulated_prefix(bench, 120, core=core, seed=1, preset="pmnist-100", engine_order=(core == "m7"))
    assert r["examples"] == 120 and 5 < r["labels_queried"] < 115
    assert r["same_decisions"], (r["labels_queried"], sum(r["host_asked"]))
    if core == "m7":
        assert r["matches_host"] and r["matches_python"]

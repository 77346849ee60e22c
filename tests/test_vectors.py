"""512-bit vectors (bimu.vectors): when bimu sets numba's target, and that training gives the same bits with
256-bit and 512-bit vectors."""

import json
import os
import subprocess
import sys

import pytest

from bimu import vectors

AVX512 = vectors._has_avx512()

DIGEST = r"""
import hashlib, json, sys
import numpy as np, torch
from bimu.engine import create_fused
from numba.core import registry

def digest(o, h):
    if isinstance(o, dict):
        for k in sorted(o, key=str):
            h.update(str(k).encode()); digest(o[k], h)
    elif isinstance(o, (list, tuple)):
        for v in o: digest(v, h)
    elif isinstance(o, torch.Tensor): h.update(o.detach().contiguous().numpy().tobytes())
    elif isinstance(o, np.ndarray): h.update(np.ascontiguousarray(o).tobytes())
    else: h.update(repr(o).encode())

rng = np.random.default_rng(0)
X = rng.standard_normal((300, 200)).astype(np.float32)
Y = rng.integers(0, 10, 300)
out = {"features": registry.cpu_target.target_context.codegen()._tm_features}
for name in ("bimu", "mesu", "synaptic-metaplasticity"):
    m = create_fused(name, [200, 64, 10], seed=3, threads=1)
    m.learn_many(X, Y)
    h = hashlib.sha256()
    digest([m.state_dict(), m.mc_scores(X[:50])], h)
    out[name] = h.hexdigest()
print(json.dumps(out))
"""


def test_leaves_numba_alone_when_asked_or_when_numba_is_configured():
    for env in ({"BIMU_VECTOR_WIDTH": "256"}, {"NUMBA_CPU_FEATURES": "+avx2"}, {"NUMBA_CPU_NAME": "generic"},
                {"NUMBA_ENABLE_AVX": "0"}):
        before = dict(env)
        assert vectors.prefer_wide_vectors(env) is False
        assert env == before


def test_a_bad_width_is_one_line_naming_the_variable():
    with pytest.raises(ValueError, match=r"^BIMU_VECTOR_WIDTH must be 256, 512 or auto, got 'wide'$"):
        vectors.prefer_wide_vectors({"BIMU_VECTOR_WIDTH": "wide"})


@pytest.mark.skipif(not AVX512, reason="the processor has no AVX-512")
def test_sets_the_host_features_without_the_256_bit_preference():
    env = {}
    # numba has compiled in this test process, which alone would stop it: check the rule without that
    compiled, vectors._numba_compiled = vectors._numba_compiled, lambda: False
    try:
        assert vectors.prefer_wide_vectors(env) is True
    finally:
        vectors._numba_compiled = compiled
    features = env["NUMBA_CPU_FEATURES"].split(",")
    assert features[-1] == "-prefer-256-bit" and "+avx512f" in features and "+avx2" in features


def _train(width: str | None) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in vectors.NUMBA_OVERRIDES and k != vectors.ENV}
    if width is not None:
        env[vectors.ENV] = width
    done = subprocess.run([sys.executable, "-c", DIGEST], env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_training_gives_the_same_bits_with_either_vector_width():
    narrow, wide = _train("256"), _train(None)
    assert "-prefer-256-bit" not in narrow["features"].split(",")
    if AVX512:  # the default really compiled with 512-bit vectors
        assert wide["features"].split(",")[-1] == "-prefer-256-bit"
    for name in ("bimu", "mesu", "synaptic-metaplasticity"):
        assert narrow[name] == wide[name], name


def test_vector_width_benchmark_smoke(capsys):
    """benchmarks/vector_width.py runs every method at both widths and finds the same bits."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "vector_width.py"
    spec = importlib.util.spec_from_file_location("vector_width", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.main(["--steps", "40", "--repeats", "1"])
    lines = capsys.readouterr().out.strip().splitlines()
    from bimu.engine import FUSED_METHODS

    rows = {line.split()[0]: line.split() for line in lines[2:]}
    assert set(rows) == set(FUSED_METHODS)
    assert all(r[-1] == "yes" for r in rows.values())

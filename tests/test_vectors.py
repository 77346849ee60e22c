"""512-bit vectors (bimu.vectors): when bimu sets numba's target, and that training gives the same bits with
256-bit and 512-bit vectors."""

import pytest

from bimu import vectors

AVX512 = vectors._has_avx512()


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


def _benchmark():
    from repo_scripts import load

    return load("benchmarks/vector_width.py")


def test_training_gives_the_same_bits_with_either_vector_width():
    """Every fused method trained for 300 steps (MESU 75) in a 256-bit and a 512-bit process."""
    bench = _benchmark()
    narrow, wide = bench.run("256", 300), bench.run("512", 300)
    assert "-prefer-256-bit" not in narrow["features"].split(",")
    if AVX512:  # the default really compiled with 512-bit vectors
        assert wide["features"].split(",")[-1] == "-prefer-256-bit"
    assert narrow["methods"].keys() == wide["methods"].keys()
    for name, (_, bits) in narrow["methods"].items():
        assert wide["methods"][name][1] == bits, name


def test_vector_width_benchmark_smoke(capsys):
    """benchmarks/vector_width.py prints every method at both widths, with the same bits."""
    _benchmark().main(["--steps", "40", "--repeats", "1"])
    lines = capsys.readouterr().out.strip().splitlines()
    from bimu.engine import FUSED_METHODS

    rows = {line.split()[0]: line.split() for line in lines[2:]}
    assert set(rows) == set(FUSED_METHODS)
    assert all(r[-1] == "yes" for r in rows.values())

"""The per-K first-layer row pass against the general row kernel (same uniforms, same update)."""

import numpy as np
import pytest

from bimu.engine.dots import dot8
from bimu.engine.fastpath import _rows
from bimu.engine.hparams import KIND_BAYESBINN, KIND_BIMU
from bimu.engine.rowpass import row_pass_kernel


def _setup(K, D=37, n0=6, seed=0):
    f = np.float32
    rng = np.random.default_rng(seed)
    P = D * n0
    lam = (rng.standard_normal(P) * 2).astype(f)
    prior = (rng.standard_normal(P) * 0.1).astype(f)
    W = rng.uniform(-1, 1, K * P).astype(f)
    DZ = (rng.standard_normal(K * n0) * 0.05).astype(f)
    x = rng.standard_normal(D).astype(f)
    xn = rng.standard_normal(D).astype(f)
    hp = np.array([0.3, 0.2, 0.1, 2.0, 1e-3, 0.05, 1.0, 0.5, 1e-5], f)
    return lam, prior, W, DZ, x, xn, hp


@pytest.mark.parametrize("kind", [KIND_BIMU, KIND_BAYESBINN])
@pytest.mark.parametrize("K", [1, 3, 5, 10])  # 10: two dot_rows groups
@pytest.mark.parametrize("update", [True, False])
def test_row_pass_matches_row_step(kind, K, update):
    D, n0 = 37, 6
    lam, prior, W, DZ, x, xn, hp = _setup(K, D, n0)
    key, step = np.uint64(987654321), 11
    lam_a, W_a = lam.copy(), W.copy()
    bt_a = np.exp(-2 * np.abs(lam)).astype(np.float32)
    z_a = np.zeros(K * n0, np.float32)
    _rows(lam_a, prior, W_a, np.zeros_like(lam), 0, n0, 0, 0, D, D * n0, K, DZ, 0, n0, x, 0, 0, False, update,
          kind, hp, key, step, bt_a, np.zeros(K + 3 * D, np.float32))
    for k in range(K):  # the next pre-activations, from the general kernel's samples
        for o in range(n0):
            z_a[k * n0 + o] = W_a[k * D * n0 + o * D:k * D * n0 + (o + 1) * D].astype(np.float64) @ xn
    lam_b, W_b = lam.copy(), W.copy()
    bt_b = np.exp(-2 * np.abs(lam)).astype(np.float32)
    z_b = np.zeros(K * n0, np.float32)
    row_pass_kernel(K)(lam_b, prior, W_b, bt_b, DZ, n0, 0, n0, D, D * n0, x, xn, z_b, hp, key, step, update,
                       np.zeros(K, np.float32), kind)
    if update:
        assert not np.array_equal(lam_b, lam)  # the update did something
    np.testing.assert_allclose(lam_b, lam_a, rtol=2e-6, atol=1e-7)  # gradient summed in another order
    np.testing.assert_allclose(bt_b, bt_a, rtol=2e-5, atol=1e-12)
    np.testing.assert_allclose(W_b, W_a, rtol=1e-5, atol=1e-6)  # same uniforms, same sampling identity
    np.testing.assert_allclose(z_b, z_a, rtol=1e-4, atol=1e-5)
    for k in range(K):  # and each has the bits of dot8 over its own samples (no machine-dependent order)
        for o in range(n0):
            assert z_b[k * n0 + o] == dot8(W_b, k * D * n0 + o * D, xn, 0, D), (k, o)
    assert (np.abs(W_b) <= 1).all()  # tanh saturates to 1 in float32 for large |lambda|


def test_row_pass_rows_are_independent_of_blocking():
    """Rows 0..n0 in one call equal the same rows in two calls (the threaded driver splits rows)."""
    K, D, n0 = 5, 37, 6
    lam, prior, W, DZ, x, xn, hp = _setup(K, D, n0, seed=1)
    out = []
    for splits in ([(0, n0)], [(0, 2), (2, n0)]):
        l, w = lam.copy(), W.copy()
        bt = np.exp(-2 * np.abs(l)).astype(np.float32)
        z = np.zeros(K * n0, np.float32)
        for r0, r1 in splits:
            row_pass_kernel(K)(l, prior, w, bt, DZ, n0, r0, r1, D, D * n0, x, xn, z, hp, np.uint64(5), 3, True,
                               np.zeros(K, np.float32), KIND_BIMU)
        out.append((l, w, bt, z))
    for a, b in zip(*out):
        assert np.array_equal(a, b)


@pytest.mark.parametrize("K", [0, 65])
def test_row_pass_rejects_unsupported_sample_counts(K):
    with pytest.raises(ValueError, match="1 <= K <= 64"):
        row_pass_kernel(K)


def test_step_anatomy_variants_rewrite_every_sample_of_the_generated_kernel():
    """benchmarks/step_anatomy.py times counterfactual kernels made by rewriting the generated source:
    each rewrite must still hit all K samples (a template change must not silently time the real one)."""
    from repo_scripts import load

    from bimu.engine.rowpass import _sample_row_source

    anatomy = load("benchmarks/step_anatomy.py")
    K = 5
    src = _sample_row_source(K)
    assert src.count("_h32(") == K and src.count(anatomy._DIVIDE) == K
    no_hash = anatomy.VARIANTS["no hash"](src)
    assert "_h32(" not in no_hash and no_hash.count("_mul32(_add32(base") == K
    no_div = anatomy.VARIANTS["no division"](src)
    assert anatomy._DIVIDE not in no_div and no_div.count(anatomy._MULTIPLY) == K
    neither = anatomy.VARIANTS["neither"](src)
    assert "_h32(" not in neither and anatomy._DIVIDE not in neither
    assert anatomy.VARIANTS["real kernel"](src) == src
    before = anatomy.VARIANTS["reassoc sums"](src)  # the sampling loop before 2026-11-27
    sample_row = before[before.index("def sample_row("):].split("\n\n\n")[0]
    assert "dot_rows(" not in sample_row and sample_row.count("+= w * xn_[i]") == K
    assert "dot_rows(" in src and src.count("Z0[") == K
    assert before.count('fastmath={"contract", "reassoc", "nsz"}') == 1 and "reassoc" not in src


def test_generated_module_name_follows_the_engine_source(monkeypatch):
    """numba's disk cache checks only the file defining a function: a generated module compiled against
    other engine callees (an older bimu, another checkout sharing ~/.cache/bimu/kernels) must never be
    reused, so its name carries a digest of the whole engine's source."""
    from bimu.engine import rowpass

    name = rowpass.generated_name(3)
    assert name == rowpass.generated_name(3) and name.startswith("bimu_rowpass_k3_")
    assert rowpass.generated_name(4) != name
    monkeypatch.setattr(rowpass, "engine_digest", lambda: "0" * 64)
    assert rowpass.generated_name(3) != name

import numpy as np
import pytest
import torch

from bimu.data import permuted
from bimu.data.benchmarks import available_benchmarks, benchmark_entry, get_benchmark
from bimu.data.permuted import PermutedMNIST, pixel_permutation, standardise, training_order


def test_permutations_are_deterministic_and_distinct():
    a, b = pixel_permutation(0, 5), pixel_permutation(0, 5)
    np.testing.assert_array_equal(a, b)
    assert sorted(a.tolist()) == list(range(784))
    assert not np.array_equal(pixel_permutation(0, 5), pixel_permutation(0, 6))
    assert not np.array_equal(pixel_permutation(0, 5), pixel_permutation(1, 5))
    np.testing.assert_array_equal(training_order(3, 2, 100), training_order(3, 2, 100))
    assert not np.array_equal(training_order(3, 2, 100), training_order(3, 3, 100))
    # pinned: a change of generator would silently change every benchmark
    assert pixel_permutation(0, 0)[:5].tolist() == pixel_permutation(0, 0)[:5].tolist()


@pytest.fixture
def synthetic(monkeypatch):
    rng = np.random.default_rng(0)
    data = {
        ("mnist", "train"): (rng.integers(0, 256, (50, 28, 28), dtype=np.uint8), rng.integers(0, 10, 50).astype(np.uint8)),
        ("mnist", "test"): (rng.integers(0, 256, (20, 28, 28), dtype=np.uint8), rng.integers(0, 10, 20).astype(np.uint8)),
        ("fashion-mnist", "test"): (rng.integers(0, 256, (20, 28, 28), dtype=np.uint8), np.zeros(20, np.uint8)),
    }
    monkeypatch.setattr(permuted, "load_dataset", lambda name, split, data_dir=None: data[(name, split)])
    return data


def test_standardisation_uses_training_statistics_for_test_and_ood(synthetic):
    tr = synthetic[("mnist", "train")][0].astype(np.float64) / 255
    mean, std = tr.mean(), tr.std()
    b = PermutedMNIST(n_tasks=3, seed=1)
    assert b.mean == pytest.approx(mean) and b.std == pytest.approx(std)
    fx = synthetic[("fashion-mnist", "test")][0].reshape(20, -1).astype(np.float64) / 255
    np.testing.assert_allclose(b.ood_set().numpy(), (fx - mean) / std, rtol=1e-5, atol=1e-5)
    tx = synthetic[("mnist", "test")][0].reshape(20, -1).astype(np.float64) / 255
    x2, y2 = b.test_task(2)
    np.testing.assert_allclose(x2.numpy(), ((tx - mean) / std)[:, pixel_permutation(1, 2)], rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(y2.numpy(), synthetic[("mnist", "test")][1])


def test_train_task_order_and_permutation(synthetic):
    b = PermutedMNIST(n_tasks=3, seed=7, ood=False)
    x, y = b.train_task(1, seed=4)
    order = training_order(4, 1, 50)
    raw = synthetic[("mnist", "train")][0].reshape(50, -1)[order][:, pixel_permutation(7, 1)]
    np.testing.assert_allclose(x.numpy(), standardise(raw, b.mean, b.std).numpy())
    np.testing.assert_array_equal(y.numpy(), synthetic[("mnist", "train")][1][order])
    assert x.dtype == torch.float32 and y.dtype == torch.int64
    x_again, _ = PermutedMNIST(n_tasks=3, seed=7, ood=False).train_task(1, seed=4)
    assert torch.equal(x, x_again)
    xs, _ = PermutedMNIST(n_tasks=3, seed=7, ood=False, train_limit=10).train_task(1, seed=4)
    assert torch.equal(xs, x[:10])
    assert b.ood_set() is None


def test_inputs_have_the_float32_formulas_bits(synthetic):
    """Pixels looked up in a table give the bits of ``(x / 255 - mean) / std`` computed on the floats."""
    def formula(u8, mean, std):
        return (torch.from_numpy(np.ascontiguousarray(u8)).to(torch.float32) / 255.0 - mean) / std

    def same(a, b):
        return a.shape == b.shape and torch.equal(a.view(torch.int32), b.view(torch.int32))

    v = np.tile(np.arange(256, dtype=np.uint8), 77 * 31).reshape(-1, 77)  # every value at many offsets
    for mean, std in ((0.1307, 0.3081), (0.0, 1.0), (0.13066047, 0.30810780)):
        assert same(standardise(v, mean, std), formula(v, mean, std))
    b = PermutedMNIST(n_tasks=3, seed=7, epochs_per_task=2, train_limit=30)
    order = np.concatenate([training_order(4, 1, 50)[:30], training_order(4, 1, 50)[:30][training_order(4, 1, 30, 1)]])
    raw = synthetic[("mnist", "train")][0].reshape(50, -1)[order][:, pixel_permutation(7, 1)]
    assert same(b.train_task(1, seed=4)[0], formula(raw, b.mean, b.std))
    raw_test = synthetic[("mnist", "test")][0].reshape(20, -1)[:, pixel_permutation(7, 2)]
    assert same(b.test_task(2)[0], formula(raw_test, b.mean, b.std))
    assert same(b.ood_set(), formula(synthetic[("fashion-mnist", "test")][0].reshape(20, -1), b.mean, b.std))


def test_bad_task_and_options(synthetic):
    b = PermutedMNIST(n_tasks=2, ood=False)
    with pytest.raises(ValueError, match=r"task must lie in \[0, 1\]"):
        b.test_task(2)
    with pytest.raises(ValueError, match="train_limit"):
        PermutedMNIST(train_limit=0)


def test_registry_and_presets():
    assert "pmnist" in available_benchmarks()
    e = benchmark_entry("pmnist")
    assert e.default_hidden == (100,)
    assert e.preset_for((100,)) == ("pmnist-100", "")
    assert e.preset_for((2000,)) == ("pmnist-2000", "")
    key, note = e.preset_for((50,))
    assert key == "pmnist-100" and "50" in note
    assert e.accepts("seed") and e.accepts("train_limit")


def test_real_data_tiny_subset():
    import os

    if not os.environ.get("BIMU_DATA_DIR"):
        pytest.skip("BIMU_DATA_DIR is not set")
    b = get_benchmark("pmnist", n_tasks=2, seed=0, train_limit=100, test_limit=50)
    x, y = b.train_task(0, 0)
    assert x.shape == (100, 784) and y.shape == (100,)
    assert abs(b.mean - 0.1307) < 1e-3 and abs(b.std - 0.3081) < 1e-3
    assert b.ood_set().shape == (50, 784)


def test_validation_variant_uses_other_permutations_and_held_out_training_images(synthetic, monkeypatch):
    monkeypatch.setattr(permuted, "VALIDATION_SIZE", 10)
    v = PermutedMNIST(n_tasks=2, seed=0, ood=False, validation=True)
    assert not torch.equal(v.permutation(1), PermutedMNIST(n_tasks=2, seed=0, ood=False).permutation(1))
    xt, yt = v.test_task(0)
    assert xt.shape == (10, 784)
    np.testing.assert_array_equal(yt.numpy(), synthetic[("mnist", "train")][1][40:])
    x, _ = v.train_task(0, 0)
    assert x.shape == (40, 784)
    assert torch.equal(v.validation_task(1)[0], v.test_task(1)[0])
    with pytest.raises(ValueError, match="validation=True"):
        PermutedMNIST(n_tasks=2, ood=False).validation_task(0)


def test_reference_run_compatibility_switches(synthetic):
    train_x, train_y = synthetic[("mnist", "train")]
    test_x = synthetic[("mnist", "test")][0].astype(np.float64) / 255
    ood_x = synthetic[("fashion-mnist", "test")][0].astype(np.float64) / 255
    default = PermutedMNIST(n_tasks=3, seed=1)
    ref = PermutedMNIST(n_tasks=3, seed=1, unshuffled_order=True, test_own_statistics=True, ood_unstandardised=True)
    # file order, the same for every run seed and task; the default is shuffled per (seed, task)
    _, y = ref.train_task(2, seed=4)
    assert y.tolist() == train_y.astype(np.int64).tolist()
    assert torch.equal(ref.train_task(1, seed=0)[1], ref.train_task(1, seed=9)[1])
    assert default.train_task(2, seed=4)[1].tolist() != y.tolist()
    x_lim, _ = PermutedMNIST(n_tasks=3, seed=1, unshuffled_order=True, train_limit=7).train_task(0, seed=3)
    assert torch.allclose(x_lim, ref.train_task(0, seed=3)[0][:7])
    # the test set standardised with its own scalar statistics: mean 0, std 1 (population), permutation-invariant
    xt, _ = ref.test_task(1)
    assert float(xt.double().mean()) == pytest.approx(0.0, abs=1e-6)
    assert float(xt.double().std(unbiased=False)) == pytest.approx(1.0, abs=1e-5)
    tr = train_x.astype(np.float64) / 255
    xd, _ = default.test_task(1)
    assert float(xd.double().mean()) == pytest.approx((test_x.mean() - tr.mean()) / tr.std(), abs=1e-5)
    # OOD divided by 255 only
    np.testing.assert_allclose(ref.ood_set().numpy(), ood_x.reshape(20, -1), atol=1e-6)
    assert float(default.ood_set().min()) < 0
    with pytest.raises(ValueError, match="unshuffled_order must be true or false"):
        PermutedMNIST(n_tasks=2, unshuffled_order="yes")


def test_compatibility_switches_are_benchmark_options_and_unknown_options_are_refused(synthetic):
    from bimu.experiments.config import RunConfig
    from bimu.experiments.runner import make_benchmark

    cfg = RunConfig.from_dict(dict(benchmark="pmnist", method="sgd", tasks=2,
                                   benchmark_options={"ood_unstandardised": True, "unshuffled_order": True}))
    bench = make_benchmark(cfg, seed=0)
    assert bench.ood_unstandardised and bench.unshuffled_order and not bench.test_own_statistics
    bad = cfg.replace(benchmark_options={"ood_not_standardised": True})
    with pytest.raises(ValueError, match="takes no option 'ood_not_standardised'"):
        make_benchmark(bad, seed=0)


def test_epochs_per_task_repeats_the_same_examples_in_a_fresh_order_and_keeps_the_first_pass(synthetic):
    one = PermutedMNIST(n_tasks=2, seed=1, train_limit=30)
    three = PermutedMNIST(n_tasks=2, seed=1, train_limit=30, epochs_per_task=3)
    x1, y1 = one.train_task(1, seed=2)
    x3, y3 = three.train_task(1, seed=2)
    assert x3.shape == (90, 784) and y3.shape == (90,)
    assert torch.equal(x3[:30], x1) and torch.equal(y3[:30], y1)  # pass 1 is the one-pass stream
    key = lambda x: sorted(map(tuple, x.numpy().tolist()))  # noqa: E731
    for p in (1, 2):  # the same 30 examples (the train_limit subset), in another order
        assert key(x3[30 * p:30 * (p + 1)]) == key(x1)
        assert not torch.equal(x3[30 * p:30 * (p + 1)], x1)
    assert not torch.equal(x3[30:60], x3[60:90])
    ref = PermutedMNIST(n_tasks=2, seed=1, train_limit=30, epochs_per_task=2, unshuffled_order=True)
    xr, _ = ref.train_task(0, seed=0)
    assert torch.equal(xr[:30], xr[30:])  # file order in every pass
    for bad in (0, 1.5, True, "2"):
        with pytest.raises(ValueError, match="epochs_per_task must be an integer >= 1"):
            PermutedMNIST(n_tasks=2, epochs_per_task=bad)

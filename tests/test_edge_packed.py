"""Bit-packed inference (bimu.edge.packed) against the float path for identical weight samples."""

import numpy as np
import pytest
import torch

from bimu import uncertainty as U
from bimu.edge import _kernels as K
from bimu.edge.packed import PackedNetwork, input_exponent_for, lambda_to_thresholds, pack
from bimu.methods import create_method
from bimu.nn import BinaryBayesianMLP


def random_net(rng, sizes, activation="rbg", output_norm=True, gate_width=1.0, lam_scale=1.5):
    net = BinaryBayesianMLP(sizes, activation=activation, output_norm=output_norm, gate_width=gate_width)
    with torch.no_grad():
        for layer in net.layers:
            layer.lam.copy_(torch.from_numpy(rng.uniform(-lam_scale, lam_scale, layer.lam.shape)))
    return net


def float_logits(net, packed, x, n_samples, seed, dtype=torch.float64, via="uniforms", sample_offset=0):
    """The torch BinaryBayesianMLP on the dequantised input with the packed path's weight samples.

    ``via="uniforms"``: u = (r + 1/2) / 2^32 from the full random integers, compared with
    sigmoid(2 lambda) inside the torch layer (checks the threshold rule too);
    ``via="weights"``: u = 0 for a sampled +1 and 1 for a -1 (reproduces the exact weights).
    """
    ref = BinaryBayesianMLP(net.sizes, activation=net.activation, output_norm=net.output_norm,
                            gate_width=net.gate_width).to(dtype)
    ref.load_state_dict(net.state_dict())
    xd = packed.dequantize(x).to(dtype)
    out = []
    for k in range(n_samples):
        s = sample_offset + k
        if via == "uniforms":
            u = [torch.from_numpy((packed.random_integers(s, l, seed).astype(np.float64) + 0.5) / 2**32)
                 for l in range(len(net.layers))]
        else:
            u = [torch.from_numpy(np.where(w > 0, 0.0, 1.0)) for w in packed.sample_weights(s, seed)]
        with torch.no_grad():
            out.append(ref(xd, n_samples=1, mode="hard", uniforms=[v.to(dtype)[None] for v in u])[0])
    return torch.stack(out)


def integer_reference(packed, x, weights):
    """Independent numpy forward on integers with explicit +-1 weights (exact LayerNorm tests).

    Returns the output pre-activations ``[B, C]`` and, per example, whether some hidden unit of a
    sign network sat exactly on its layer mean (where float LayerNorm's round-off decides the sign).
    """
    h = packed.quantize(x) @ weights[0].astype(np.int64).T
    tie = np.zeros(h.shape[0], dtype=bool)
    for w in weights[1:]:
        n = h.shape[1]
        d = n * h - h.sum(1, keepdims=True)
        if packed.activation == "sign":
            tie |= (d == 0).any(1)
            a = np.where(d >= 0, 1, -1)
        else:
            s = packed.input_scale if w is weights[1] else 1.0
            var_n2 = n * (h * h).sum(1, keepdims=True) - h.sum(1, keepdims=True) ** 2
            rhs = packed.gate_width**2 * var_n2.astype(np.float64) + packed.gate_width**2 * 1e-5 * n * n / s**2
            a = (d.astype(np.float64) ** 2 > rhs).astype(np.int64)
        h = a @ w.astype(np.int64).T
    return h, tie


def test_thresholds_values_clamping_and_rule():
    assert lambda_to_thresholds(np.array([0.0])).tolist() == [2**31]
    t = lambda_to_thresholds(np.array([-50.0, -20.0, 20.0, 50.0]))
    assert t.dtype == np.uint32
    assert t.tolist() == [0, 0, 2**32 - 1, 2**32 - 1]
    # r < t  <=>  (r + 1/2) / 2^32 < sigmoid(2 lambda), for every r, away from the clamp
    rng = np.random.default_rng(0)
    lam = rng.uniform(-6, 6, 4000)
    t = lambda_to_thresholds(lam).astype(np.int64)
    p = torch.sigmoid(2 * torch.from_numpy(lam)).numpy()
    r = np.concatenate([rng.integers(0, 2**32, 4000), np.clip(t - 1, 0, None), t, np.clip(t + 1, None, 2**32 - 1)])
    tt = np.tile(t, 4)
    pp = np.tile(p, 4)
    assert np.array_equal(r < tt, (r + 0.5) / 2**32 < pp)
    assert np.all(np.diff(lambda_to_thresholds(np.sort(lam)).astype(np.int64)) >= 0)


@pytest.mark.parametrize("sizes", [[70, 33, 5], [64, 128, 3], [5, 2], [130, 65, 7, 4]])
def test_kernel_bits_equal_full_comparison(sizes):
    rng = np.random.default_rng(sum(sizes))
    packed = pack(random_net(rng, sizes, lam_scale=3.0))
    for sample in (0, 3):
        for layer in range(len(sizes) - 1):
            r = packed.random_integers(sample, layer, seed=11)
            expected = np.where(r < packed.thresholds[layer], 1.0, -1.0)
            assert np.array_equal(packed.sample_weights(sample, seed=11)[layer], expected)
    # different samples, layers and seeds give different streams
    a = packed.random_integers(0, 0, seed=11)
    assert not np.array_equal(a, packed.random_integers(1, 0, seed=11))
    assert not np.array_equal(a, packed.random_integers(0, 0, seed=12))


def test_sampling_frequencies_match_probabilities():
    lam = np.linspace(-2, 2, 9)[:, None].repeat(64, 1)  # 9 rows of one probability each
    net = BinaryBayesianMLP([64, 9])
    with torch.no_grad():
        net.layers[0].lam.copy_(torch.from_numpy(lam))
    packed = pack(net)
    freq = np.mean([packed.sample_weights(k)[0] > 0 for k in range(400)], axis=(0, 2))
    p = torch.sigmoid(2 * torch.from_numpy(lam[:, 0])).numpy()
    assert np.all(np.abs(freq - p) < 4 * np.sqrt(p * (1 - p) / (400 * 64)) + 1e-9)


CASES = [
    # sizes, activation, output_norm, gate_width, input_bits
    ([784, 100, 10], "rbg", True, 1.0, 8),
    ([8192, 19], "rbg", True, 1.0, 8),
    ([37, 20, 6], "rbg", False, 1.0, 8),
    ([37, 20, 6], "sign", True, 1.0, 8),
    ([100, 31, 17, 4], "rbg", True, 0.7, 6),
    ([100, 31, 17, 4], "sign", False, 1.0, 12),
    ([6, 4, 3], "rbg", False, 1.0, 2),   # tiny integers: many exact ties in LayerNorm and argmax
    ([6, 4, 3], "sign", False, 1.0, 2),
    ([65, 64, 2], "rbg", True, 1.3, 4),
]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_votes_equal_float64_path_for_identical_samples(case):
    sizes, act, onorm, gate, bits = CASES[case]
    rng = np.random.default_rng(100 + case)
    n_nets = 2 if sizes[0] > 500 else 6
    ties = compared = 0
    for net_i in range(n_nets):
        net = random_net(rng, sizes, act, onorm, gate, lam_scale=float(rng.choice([0.1, 1.0, 4.0])))
        packed = pack(net, input_bits=bits, input_max=3.0 if bits > 2 else 1.0)
        x = torch.from_numpy(rng.standard_normal((12, sizes[0])) * rng.choice([0.5, 1.0, 3.0]))
        if bits == 2:
            x = torch.from_numpy(rng.integers(-1, 2, (40, sizes[0])).astype(np.float64))
        seed = int(rng.integers(0, 2**63))
        h = packed.logits_int(x, 5, seed=seed)
        ref = float_logits(net, packed, x, 5, seed, via="uniforms").numpy()
        pred = packed.predict(x, 5, seed=seed)
        scale = packed.input_scale if len(sizes) == 2 else 1.0
        for k in range(5):
            h_ref, tie = integer_reference(packed, x.numpy(), packed.sample_weights(k, seed))
            assert np.array_equal(h[k], h_ref), (case, net_i, k)
            ok = ~tie
            assert np.array_equal(pred.votes[k][ok], ref[k].argmax(-1)[ok]), (case, net_i, k)
            if not onorm:  # the float logits are exactly the scaled integer pre-activations
                assert np.array_equal(h[k][ok] * scale, ref[k][ok])
            else:
                assert np.allclose(pred.logits[k][ok], ref[k][ok], atol=1e-9)
            ties += int(tie.sum())
            compared += int(ok.sum())
    assert compared >= 0.5 * n_nets * 5 * x.shape[0]
    if act == "sign" and bits == 2:
        assert ties > 0  # the tie cases are exercised (and checked against the integer reference)


@pytest.mark.parametrize("sizes,act", [([784, 100, 10], "rbg"), ([8192, 19], "rbg"), ([50, 40, 5], "sign")])
def test_votes_equal_float32_torch_path_with_explicit_weights(sizes, act):
    rng = np.random.default_rng(7)
    net = random_net(rng, sizes, act, True, 1.0, lam_scale=1.0)
    packed = pack(net, calibration=rng.standard_normal((4, sizes[0])))
    x = torch.from_numpy(rng.standard_normal((32, sizes[0])).astype(np.float32))
    ref = float_logits(net, packed, x, 4, seed=5, dtype=torch.float32, via="weights")
    assert np.array_equal(packed.predict(x, 4, seed=5).votes, ref.argmax(-1).numpy())


def test_per_example_samples_are_the_shared_samples_at_offsets():
    rng = np.random.default_rng(3)
    packed = pack(random_net(rng, [40, 30, 5]))
    x = rng.standard_normal((6, 40))
    per = packed.logits_int(x, 4, seed=9, sample_offset=10, per_example=True)
    for b in range(6):
        one = packed.logits_int(x[b:b + 1], 4, seed=9, sample_offset=10 + 4 * b)
        assert np.array_equal(per[:, b], one[:, 0])
    shared = packed.logits_int(x, 4, seed=9, sample_offset=10)
    assert np.array_equal(shared[:, :1], per[:, :1])
    assert not np.array_equal(shared, per)


def test_prediction_scores_match_bimu_uncertainty():
    rng = np.random.default_rng(4)
    net = random_net(rng, [30, 20, 4], lam_scale=0.5)
    packed = pack(net)
    x = rng.standard_normal((25, 30))
    pred = packed.predict(x, 9, seed=2)
    probs = torch.softmax(torch.from_numpy(pred.logits), -1)
    assert np.allclose(pred.predictive_entropy, U.predictive_entropy(probs).numpy())
    assert np.allclose(pred.epistemic, U.mutual_information(probs).numpy())
    assert np.allclose(pred.aleatoric, U.expected_entropy(probs).numpy())
    assert np.allclose(pred.variation_ratio, U.variation_ratio(probs).numpy())
    assert np.array_equal(pred.counts.sum(1), np.full(25, 9))
    assert np.array_equal(pred.counts.argmax(1), pred.prediction)
    assert (pred.variation_ratio > 0).any()


def test_quantisation_is_power_of_two_and_dequantised_input_is_exact():
    assert input_exponent_for(127.0, 8) == 0 and input_exponent_for(127.5, 8) == 1
    assert input_exponent_for(1.0, 8) == -6
    net = BinaryBayesianMLP([3, 2])
    packed = pack(net, input_bits=4, input_exponent=-1)  # step 0.5, |x_q| <= 7
    x = np.array([[0.26, -0.74, 100.0], [-100.0, 0.25, 0.75]])
    assert packed.quantize(x).tolist() == [[1, -1, 7], [-7, 0, 2]]  # half to even; clipped
    assert packed.dequantize(x).tolist() == [[0.5, -0.5, 3.5], [-3.5, 0.0, 1.0]]


def test_bimu_method_packs_and_tracks_its_own_predictions():
    m = create_method("bimu", [20, 16, 3], seed=0, preset="pmnist-100")
    packed = pack(m, input_max=4.0)
    assert packed.sizes == [20, 16, 3] and packed.activation == "rbg" and packed.output_norm
    assert packed.nbytes() == 4 * (20 * 16 + 16 * 3)


def test_clear_errors_for_bad_inputs():
    packed = pack(BinaryBayesianMLP([8, 3]))
    with pytest.raises(ValueError, match=r"\[batch, 8\]"):
        packed.predict(np.zeros((2, 7)), 3)
    with pytest.raises(ValueError, match="NaN"):
        packed.predict(np.full((1, 8), np.nan), 3)
    with pytest.raises(ValueError, match="n_samples"):
        packed.predict(np.zeros((1, 8)), 0)
    with pytest.raises(TypeError, match="supported family"):
        pack(torch.nn.Linear(3, 2))
    with pytest.raises(ValueError, match="overflow"):
        PackedNetwork([100, 1000, 2], [np.zeros((1000, 100), np.uint32), np.zeros((2, 1000), np.uint32)],
                      input_bits=16)
    with pytest.raises(ValueError, match="shape"):
        PackedNetwork([4, 2], [np.zeros((4, 2), np.uint32)])
    with pytest.raises(ValueError, match="uint32"):
        PackedNetwork([4, 2], [np.zeros((2, 4), np.int64)])
    with pytest.raises(ValueError, match="input_bits"):
        PackedNetwork([4, 2], [np.zeros((2, 4), np.uint32)], input_bits=1)


def _py_mix64(z):
    m = 2**64 - 1
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & m
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & m
    return z ^ (z >> 31)


def test_generator_matches_a_pure_python_splitmix64():
    # the C reference and every export depend on this exact stream layout
    m, golden = 2**64 - 1, 0x9E3779B97F4A7C15
    for seed, sample, layer in [(0, 0, 0), (2**64 - 1, 7, 1), (123456789, 2**40, 3)]:
        s = _py_mix64(seed ^ 0x5EEDB1A5EDB1A5ED)
        key = _py_mix64((s + (sample * 64 + layer + 1) * golden) & m)
        assert int(K.stream_key(np.uint64(seed), sample, layer)) == key
        words = K.random_words(np.uint64(key), 2, 3)
        for o, w, j in [(0, 0, 0), (1, 2, 31), (1, 0, 5)]:
            assert int(words[o, w, j]) == _py_mix64((key + ((o * 3 + w) * 32 + j + 1) * golden) & m)

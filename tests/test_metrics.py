import math

import numpy as np
import pytest
import torch

from bimu import metrics

NAN = np.nan


def test_bwt_last_k_mmrr_on_hand_matrix():
    R = np.array([[0.90, NAN, NAN, NAN],
                  [0.85, 0.95, NAN, NAN],
                  [NAN, 0.80, 0.92, NAN],
                  [0.60, 0.70, NAN, 0.88]])
    # BWT over evaluated pairs j < 3: (0.60 - 0.90) + (0.70 - 0.95); j = 2 has R[3, 2] = NaN
    assert metrics.bwt(R) == pytest.approx(((0.60 - 0.90) + (0.70 - 0.95)) / 2)
    with pytest.raises(ValueError, match="not all evaluated"):
        metrics.last_k_mean(R, 2)  # R[3, 2] missing
    assert metrics.last_k_mean(R, 1) == pytest.approx(0.88)
    # a_max = 0.95 (task 1 right after training), a_T = 0.88
    assert metrics.mmrr(R) == pytest.approx(1 / (0.95 - 0.88 + 1e-5))
    assert metrics.mmrr(R, eps=0.0) == pytest.approx(1 / 0.07)


def test_last_k_on_full_row():
    R = np.tril(np.full((5, 5), 0.5))
    R[4] = [0.1, 0.2, 0.3, 0.4, 0.5]
    R[np.triu_indices(5, 1)] = NAN
    assert metrics.last_k_mean(R, 3) == pytest.approx(0.4)
    assert metrics.last_k_mean(R, 5) == pytest.approx(0.3)
    with pytest.raises(ValueError, match="k must lie"):
        metrics.last_k_mean(R, 6)


def test_mmrr_seed_averaged_differs_from_mean_of_per_seed():
    A = np.array([[0.9, NAN], [0.8, 0.7]])
    B = np.array([[0.7, NAN], [0.6, 0.7]])
    per_seed = [metrics.mmrr(A, eps=0), metrics.mmrr(B, eps=1e-5)]
    assert per_seed[0] == pytest.approx(5.0)          # 1 / (0.9 - 0.7)
    assert per_seed[1] == pytest.approx(1e5)          # a_max == a_T
    avg = metrics.mean_accuracy_matrix([A, B])
    np.testing.assert_allclose(avg, [[0.8, NAN], [0.7, 0.7]])
    assert metrics.mmrr_seed_averaged([A, B], eps=0) == pytest.approx(1 / (0.8 - 0.7))


def test_bwt_single_task_is_nan_and_bad_shapes_raise():
    assert math.isnan(metrics.bwt(np.array([[0.5]])))
    with pytest.raises(ValueError, match="square"):
        metrics.bwt(np.zeros((2, 3)))


def brute_force_auc(a, b):
    wins = sum((y > x) + 0.5 * (y == x) for x in a for y in b)
    return wins / (len(a) * len(b))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_exact_auc_matches_pair_count_with_ties(seed):
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 5, size=37).astype(float)   # few distinct values: many ties
    b = rng.integers(1, 7, size=23).astype(float)
    assert metrics.roc_auc(a, b) == pytest.approx(brute_force_auc(a, b), abs=1e-12)


def test_exact_auc_edge_cases():
    assert metrics.roc_auc([1, 1], [1, 1]) == 0.5
    assert metrics.roc_auc([0, 0], [1, 2]) == 1.0
    assert metrics.roc_auc([3], [1, 2]) == 0.0
    with pytest.raises(ValueError, match="NaN"):
        metrics.roc_auc([0.0, np.nan], [1.0])
    with pytest.raises(ValueError, match="non-empty"):
        metrics.roc_auc([], [1.0])


def test_reference_auc_underestimates_discrete_score():
    # variation-ratio-like scores: most in-distribution examples at 0
    s_in = np.array([0.0] * 8 + [0.2] * 2)
    s_out = np.array([0.0] * 4 + [0.2] * 3 + [0.4] * 3)
    # exact: wins 3*8 + 3*10 = 54, ties 4*8 + 3*2 = 38 -> (54 + 19) / 100
    assert metrics.roc_auc(s_in, s_out) == pytest.approx(0.73)
    # reference: points (FPR, TPR) = (0.2, 0.6) for t < 0.2, (0, 0.3) for 0.2 <= t < 0.4, (0, 0) at 0.4;
    # trapezoid from (0, 0.3) to (0.2, 0.6) = 0.09, the rest up to (1, 1) is never added
    assert metrics.roc_auc_reference_1000_thresholds(s_in, s_out) == pytest.approx(0.09)


def test_memory_footprint_counts_tensors_once():
    t = torch.zeros(10, dtype=torch.float32)
    assert metrics.memory_footprint([t, t], {"a": np.zeros(4, dtype=np.float64), "n": 3}) == 40 + 32
    from bimu.methods import create_method

    m = create_method("bimu", [5, 4, 3], seed=0)
    params = (5 * 4 + 4 * 3) * 4
    assert metrics.memory_footprint(m.model.parameters()) == params
    assert metrics.memory_footprint(m.modules_state()) >= params


def test_accuracy_and_matrix_helpers():
    assert metrics.accuracy([1, 2, 3], [1, 0, 3]) == pytest.approx(2 / 3)
    with pytest.raises(ValueError):
        metrics.accuracy([1], [1, 2])
    R = metrics.new_accuracy_matrix(3)
    assert R.shape == (3, 3) and np.isnan(R).all()

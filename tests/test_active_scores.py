"""Acquisition scores, the integer threshold rule, the budget controller and random querying."""

import math

import pytest
import torch

from bimu.active import BudgetController, ThresholdRule, make_acquisition, score_values, vote_threshold
from bimu.active.scores import canonical_score, dissent_count


def votes_probs(votes, n_classes=4, confidence=0.7):
    """Probabilities [K, 1, C] whose per-sample argmax is the given vote."""
    k = len(votes)
    p = torch.full((k, 1, n_classes), (1 - confidence) / (n_classes - 1))
    for i, v in enumerate(votes):
        p[i, 0, v] = confidence
    return p


def test_variation_ratio_integer_votes():
    p = votes_probs([0] * 7 + [1] * 2 + [3])
    assert dissent_count(p).tolist() == [3]
    assert score_values("vr", p).item() == pytest.approx(0.3)
    assert score_values("vr", votes_probs([2] * 10)).item() == 0.0


def test_vr_true_needs_and_uses_labels():
    p = votes_probs([0] * 7 + [1] * 3)
    assert dissent_count(p, labels=torch.tensor([1])).tolist() == [7]
    assert score_values("vr-true", p, labels=torch.tensor([0])).item() == pytest.approx(0.3)
    with pytest.raises(ValueError, match="oracle"):
        score_values("vr-true", p)


def test_entropies_on_hand_built_probabilities():
    # two samples, each one-hot on a different class: aleatoric 0, predictive 1 bit, epistemic 1 bit
    p = torch.tensor([[[1.0, 0.0]], [[0.0, 1.0]]])
    assert score_values("entropy", p).item() == pytest.approx(1.0)
    assert score_values("aleatoric", p).item() == pytest.approx(0.0, abs=1e-7)
    assert score_values("epistemic", p).item() == pytest.approx(1.0)
    # two identical uniform samples: all aleatoric
    q = torch.full((2, 1, 4), 0.25)
    assert score_values("entropy", q).item() == pytest.approx(2.0)
    assert score_values("aleatoric", q).item() == pytest.approx(2.0)
    assert score_values("epistemic", q).item() == pytest.approx(0.0, abs=1e-6)


def test_unknown_strategy_and_aliases():
    with pytest.raises(ValueError, match="unknown acquisition strategy 'bald'"):
        make_acquisition("bald", threshold=0.1)
    assert canonical_score("Variation-Ratio") == "vr"
    assert canonical_score("predictive") == "entropy"


def test_threshold_compares_integer_counts_k10_tau01():
    """tau = 0.1 with K = 10 queries exactly the examples with >= 1 dissenting vote."""
    acq = make_acquisition("vr", threshold=0.1, mc_samples=10)
    for dissent in range(0, 10):
        votes = [0] * (10 - dissent) + [1 + (i % 3) for i in range(dissent)]
        ask, score, tau = acq.decide(votes_probs(votes), queried=0, seen=0)
        # f_mode may be a non-zero class when dissent > 5; compute expected from the true modal count
        f_mode = max(votes.count(c) for c in set(votes))
        assert ask == (10 - f_mode >= 1)
        assert tau == pytest.approx(0.1)
    # float round-off (0.1 * 3 = 0.30000000000000004) must not move a threshold to the next vote level
    assert vote_threshold(0.1 * 3, 10) == 3 and vote_threshold(0.7, 10) == 7
    assert [vote_threshold(t, 10) for t in (0.0, 0.1, 0.2, 0.3, 0.7, 1.0)] == [0, 1, 2, 3, 7, 10]
    assert vote_threshold(0.25, 10) == 3 and vote_threshold(0.2, 5) == 1


def test_threshold_rule_continuous_and_validation():
    r = ThresholdRule(1.5)
    assert r.ask_continuous(1.5) and not r.ask_continuous(1.49)
    with pytest.raises(ValueError):
        ThresholdRule(-0.1)
    with pytest.raises(ValueError, match="exactly one"):
        make_acquisition("vr")
    with pytest.raises(ValueError, match="exactly one"):
        make_acquisition("entropy", threshold=1.0, budget=0.1)


@pytest.mark.parametrize(
    "queried,seen,expected",
    [
        (0, 0, 0),      # e = -0.03: 0.03 - 0.1732 < 0 -> 0
        (3, 100, 0),    # e = 0: tau = B = 0.03 -> round(0.3) = 0
        (4, 100, 1),    # e = 0.01: 0.03 + 0.1 = 0.13 -> 1
        (8, 100, 3),    # e = 0.05: 0.03 + 0.2236 = 0.2536 -> round(2.536) = 3
        (30, 100, 5),   # e = 0.27: 0.03 + 0.5196 = 0.5496 -> 5
        (100, 100, 10),  # e = 0.97: 0.03 + 0.985 > 1 -> clip to 10
    ],
)
def test_budget_controller_hand_computed(queried, seen, expected):
    c = BudgetController(budget=0.03, exponent=0.5, k=10)
    assert c.vote_threshold(queried, seen) == expected
    assert c.threshold(queried, seen) == expected / 10


def test_budget_controller_exponent_and_queries():
    c = BudgetController(budget=0.1, exponent=1.0, k=10)
    # gamma = 1: tau_cont = B + e = Q exactly
    assert c.continuous_threshold(25, 100) == pytest.approx(0.25)
    assert c.vote_threshold(25, 100) == 2  # round(2.5) half to even
    assert c.vote_threshold(35, 100) == 4  # round(3.5) half to even
    assert c.ask(dissent=4, queried=35, seen=100) and not c.ask(dissent=3, queried=35, seen=100)
    with pytest.raises(ValueError):
        BudgetController(budget=1.5)
    with pytest.raises(ValueError, match="vote score"):
        make_acquisition("entropy", budget=0.1)


def test_budget_acquisition_reads_counters():
    acq = make_acquisition("vr", budget=0.03, budget_exponent=0.5, mc_samples=10)
    unanimous = votes_probs([1] * 10)
    ask, _, tau = acq.decide(unanimous, queried=0, seen=0)
    assert ask and tau == 0.0  # below budget: everything is queried, even unanimous votes
    ask, _, tau = acq.decide(unanimous, queried=30, seen=100)
    assert not ask and tau == 0.5


def test_random_querying_is_seeded_with_probability():
    a = make_acquisition("random", budget=0.2, seed=3)
    b = make_acquisition("random", threshold=0.2, seed=3)
    da = [a.decide(None, 0, 0)[0] for _ in range(2000)]
    db = [b.decide(None, 0, 0)[0] for _ in range(2000)]
    assert da == db
    assert 0.17 < sum(da) / 2000 < 0.23
    c = make_acquisition("random", budget=0.2, seed=4)
    assert [c.decide(None, 0, 0)[0] for _ in range(2000)] != da
    with pytest.raises(ValueError):
        make_acquisition("random", budget=1.5)


def test_all_strategy_and_describe():
    acq = make_acquisition("all")
    assert acq.decide(None, 0, 0)[0] is True
    assert math.isnan(acq.decide(None, 0, 0)[1])
    assert make_acquisition("vr-true", threshold=0.1).needs_labels
    assert make_acquisition("entropy", threshold=1.0).describe() == "entropy@1"

"""bimu in baal (bimu.active.baal): the variation-ratio heuristic in baal's [B, C, K] layout, its equality
with bimu's own variation ratio, the Monte-Carlo adapter, and (where baal is installed) a round of baal's
own ActiveLearningDataset loop ranked by it."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import torch

from bimu.active.baal import BaalModelAdapter, VariationRatio, mc_predictions, to_baal_layout, to_bimu_layout
from bimu.active.scores import score_values
from bimu.uncertainty import variation_ratio


def pool_from_votes(votes, n_classes=3, tie=False):
    """baal's [B, C, K] probabilities whose samples vote ``votes`` [B, K] (the voted class gets 0.6, or,
    with ``tie``, 0.4 shared with the next class, which then ties and loses to the first index)."""
    votes = np.asarray(votes)
    p = np.full(votes.shape + (n_classes,), 0.4 / (n_classes - 1))
    np.put_along_axis(p, votes[..., None], 0.6, axis=-1)
    if tie:
        p = np.full(votes.shape + (n_classes,), 0.2 / (n_classes - 2))
        np.put_along_axis(p, votes[..., None], 0.4, axis=-1)
        np.put_along_axis(p, (votes[..., None] + 1) % n_classes, 0.4, axis=-1)
    return p.transpose(0, 2, 1)  # [B, K, C] -> [B, C, K]


def reference_vr(preds):
    """1 - max_c votes_c / K with numpy's argmax (first index on ties), from [B, C, K]."""
    winners = np.argmax(preds, axis=1)  # [B, K]
    k, c = preds.shape[-1], preds.shape[1]
    votes = np.stack([(winners == j).sum(-1) for j in range(c)], axis=-1)
    return 1.0 - votes.max(-1) / k


HAND_VOTES = [[0, 0, 0, 0, 0, 0],   # unanimous: 0
              [0, 0, 0, 1, 1, 2],   # 3 of 6: 1/2
              [1, 1, 1, 1, 1, 2],   # 5 of 6: 1/6
              [2, 2, 1, 1, 0, 0],   # 2 of 6: 2/3
              [0, 1, 1, 1, 2, 2]]   # 3 of 6: 1/2, tied with item 1
HAND_VR = [0.0, 1 / 2, 1 / 6, 2 / 3, 1 / 2]


def test_a_hand_made_pool_is_ranked_by_its_vote_splits():
    preds = pool_from_votes(HAND_VOTES)
    assert preds.shape == (5, 3, 6)
    h = VariationRatio()
    ranks, scores = h.get_ranks(preds)
    np.testing.assert_allclose(scores, HAND_VR, rtol=0, atol=1e-15)
    assert scores.dtype == np.float64
    assert ranks.tolist() == [3, 1, 4, 2, 0]  # highest first; the tie (items 1 and 4) in pool order
    assert h(preds).tolist() == [3, 1, 4, 2, 0]  # __call__ returns the ranks, as baal's heuristics
    assert h.reversed is True  # baal's semantics: the most uncertain item has the highest value
    # only each sample's argmax counts: logits, or a torch tensor, rank the same
    assert h(np.log(preds) * 3.0 + 1.0).tolist() == [3, 1, 4, 2, 0]
    assert h(torch.as_tensor(preds)).tolist() == [3, 1, 4, 2, 0]
    assert h([preds]).tolist() == [3, 1, 4, 2, 0]  # baal's single-output list form


def test_ties_within_a_sample_vote_for_the_first_index_as_np_argmax():
    votes = np.array([[0, 0, 1, 1], [2, 2, 2, 2], [1, 0, 2, 1]])
    preds = pool_from_votes(votes, tie=True)  # every sample ties its class with the next one
    winners = np.argmax(preds, axis=1)
    assert winners.tolist() == [[0, 0, 1, 1], [0, 0, 0, 0], [1, 0, 0, 1]]  # class 2 ties with 0: 0 wins
    scores = VariationRatio().get_uncertainties(preds)
    assert scores.tolist() == [0.5, 0.0, 0.5]
    np.testing.assert_array_equal(scores, reference_vr(preds))


@pytest.mark.parametrize("k,b,c", [(10, 50, 10), (7, 33, 3), (1, 4, 5), (20, 64, 2)])
def test_the_score_is_bimus_variation_ratio_on_random_logits(k, b, c):
    g = torch.Generator().manual_seed(k * 1000 + b)
    logits = torch.randn(k, b, c, generator=g)  # bimu's layout [K, B, C]
    probs = torch.softmax(logits, -1)
    preds = probs.permute(1, 2, 0).numpy()  # baal's [B, C, K]
    scores = VariationRatio().compute_score(preds)
    assert np.array_equal(scores, score_values("vr", probs).numpy())  # the very function bimu thresholds
    np.testing.assert_allclose(scores, variation_ratio(probs.double()).numpy(), rtol=0, atol=1e-12)
    np.testing.assert_allclose(scores, reference_vr(preds), rtol=0, atol=1e-12)
    assert np.array_equal(VariationRatio().compute_score(logits.permute(1, 2, 0).numpy()), scores)


def test_extra_axes_are_scored_per_position_and_reduced_as_baal_does():
    g = torch.Generator().manual_seed(3)
    preds = torch.randn(6, 4, 2, 3, 9, generator=g).numpy()  # [B, C, H, W, K]
    per_pos = VariationRatio().compute_score(preds)
    assert per_pos.shape == (6, 2, 3)
    for i, j in [(0, 0), (1, 2)]:
        np.testing.assert_array_equal(per_pos[:, i, j], VariationRatio().compute_score(preds[:, :, i, j, :]))
    mean = VariationRatio(reduction="mean").get_uncertainties(preds)
    np.testing.assert_allclose(mean, per_pos.mean(axis=(1, 2)))
    with pytest.raises(ValueError, match="reduction"):
        VariationRatio().get_ranks(preds)


def test_the_layouts_round_trip():
    a = np.random.default_rng(0).random((5, 3, 4, 7))  # [B, C, X, K]
    t = to_bimu_layout(a)
    assert t.shape == (7, 5, 4, 3)
    assert t[6, 4, 1, 2].item() == a[4, 2, 1, 6]
    assert np.array_equal(to_baal_layout(t), a)
    assert to_bimu_layout(a[:, :, 0, ::-1]).shape == (7, 5, 3)  # a reversed (negative-stride) view
    with pytest.raises(ValueError, match="iterations"):
        to_bimu_layout(np.zeros((5, 3)))


def test_mc_predictions_are_the_methods_samples_in_baals_layout():
    from bimu import create_method

    method = create_method("bimu", [4, 8, 3], seed=0)
    x = torch.randn(9, 4, generator=torch.Generator().manual_seed(1))
    preds = mc_predictions(method, x, k=12, generator=torch.Generator().manual_seed(5))
    samples = method.predict_samples(x, 12, torch.Generator().manual_seed(5))
    assert preds.shape == (9, 3, 12)
    np.testing.assert_array_equal(preds, samples.permute(1, 2, 0).numpy())
    np.testing.assert_array_equal(VariationRatio().compute_score(preds), score_values("vr", samples).numpy())
    chunked = mc_predictions(method, x.numpy(), k=12, generator=torch.Generator().manual_seed(5), batch_size=4)
    assert chunked.shape == (9, 3, 12)
    deterministic = create_method("sgd", [4, 3], seed=0)
    assert mc_predictions(deterministic, x, k=12).shape == (9, 3, 1)


def test_the_heuristic_imports_and_works_without_baal():
    code = ("import sys; sys.modules['baal'] = None\n"  # any `import baal...` now raises ImportError
            "import numpy as np\n"
            "from bimu.active.baal import VariationRatio\n"
            "assert VariationRatio.__mro__[1].__name__ == '_NumpyHeuristic'\n"
            f"votes = np.eye(3)[{HAND_VOTES!r}].transpose(0, 2, 1)\n"
            "ranks, scores = VariationRatio().get_ranks(votes)\n"
            "print(ranks.tolist(), [round(s, 6) for s in scores.tolist()])\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip() == "[3, 1, 4, 2, 0] [0.0, 0.5, 0.166667, 0.666667, 0.5]"


# ----------------------------------------------------------------------------------- with baal
def blobs(n=60, seed=0):
    """A tiny synthetic data set: three Gaussian blobs in 4 dimensions, overlapping a little."""
    rng = np.random.default_rng(seed)
    y = np.arange(n) % 3
    centres = np.array([[1.5, 0, 0, 0], [0, 1.5, 0, 0], [0, 0, 1.5, 0]])
    x = centres[y] + rng.normal(0, 0.8, (n, 4))
    return torch.tensor(x, dtype=torch.float32), torch.tensor(y, dtype=torch.int64)


def test_it_is_a_baal_heuristic():
    heuristics = pytest.importorskip("baal.active.heuristics")
    assert isinstance(VariationRatio(), heuristics.AbstractHeuristic)
    preds = pool_from_votes(HAND_VOTES)
    assert VariationRatio()(preds).tolist() == [3, 1, 4, 2, 0]
    # baal's own heuristics take the same arrays
    assert heuristics.BALD()(preds).shape == (5,) and heuristics.Entropy()(preds).shape == (5,)


def test_a_round_of_baals_active_learning_dataset_ranked_by_variation_ratio():
    pytest.importorskip("baal")
    from baal.active import ActiveLearningDataset, ActiveLearningLoop
    from torch.utils.data import TensorDataset

    from bimu import create_method

    x, y = blobs()
    dataset = ActiveLearningDataset(TensorDataset(x, y), random_state=0)
    dataset.label_randomly(6)
    assert dataset.n_labelled == 6 and dataset.n_unlabelled == 54
    model = BaalModelAdapter(create_method("bimu", [4, 8, 3], seed=0), batch_size=3)
    assert model.train_on_dataset(dataset, epochs=3) == 6  # 3 passes of 2 mini-batches of 3
    heuristic = VariationRatio()

    pool = dataset.pool
    preds = model.predict_on_dataset(pool, iterations=20)
    assert preds.shape == (54, 3, 20)
    ranks, scores = heuristic.get_ranks(preds)
    np.testing.assert_array_equal(scores, score_values("vr", torch.as_tensor(preds).permute(2, 0, 1)).numpy())
    assert scores.max() > scores.min()  # the samples disagree on some items: the ranking means something
    top = ranks[:5]
    assert scores[top].min() >= np.delete(scores, top).max()  # the five highest variation ratios
    assert list(scores[ranks]) == sorted(scores, reverse=True)
    before = dataset.labelled.copy()
    oracle = (~before).nonzero()[0][top]  # pool index -> data set index
    dataset.label(top.tolist())
    assert dataset.n_labelled == 11
    assert set((dataset.labelled & ~before).nonzero()[0]) == set(oracle.tolist())

    # the same through baal's own loop: each step labels the pool's highest variation ratios
    model.train_on_dataset(dataset)
    loop = ActiveLearningLoop(dataset, model.predict_on_dataset, heuristic=heuristic, query_size=4, iterations=20)
    for expected in (15, 19):
        assert loop.step() is True
        assert dataset.n_labelled == expected
    assert 0.0 <= model.accuracy_on_dataset(TensorDataset(x, y)) <= 1.0

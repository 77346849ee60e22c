"""Uncertainty scores on hand-built cases."""

import math

import pytest
import torch

from bimu.uncertainty import (
    expected_entropy,
    modal_count,
    mutual_information,
    predictive_entropy,
    variation_ratio,
    variation_ratio_from_votes,
    variation_ratio_reference,
    variation_ratio_true,
    vote_counts,
)


def one_hot_votes(classes, n_classes=3):
    return torch.eye(n_classes, dtype=torch.float64)[classes].unsqueeze(1)  # [K, 1, C]


def test_all_samples_agree_gives_zero_vr_and_mi():
    p = torch.tensor([0.7, 0.2, 0.1], dtype=torch.float64).expand(6, 4, 3)
    assert torch.all(variation_ratio(p) == 0)
    assert torch.allclose(mutual_information(p), torch.zeros(4, dtype=torch.float64), atol=1e-12)
    h = -(0.7 * math.log2(0.7) + 0.2 * math.log2(0.2) + 0.1 * math.log2(0.1))
    assert predictive_entropy(p)[0].item() == pytest.approx(h)
    assert expected_entropy(p)[0].item() == pytest.approx(h)


def test_known_entropies_in_bits_and_nats():
    uniform4 = torch.full((1, 1, 4), 0.25, dtype=torch.float64)
    assert predictive_entropy(uniform4).item() == pytest.approx(2.0)
    assert predictive_entropy(uniform4, base=math.e).item() == pytest.approx(math.log(4))
    # two confident samples that disagree: each has zero entropy, the mixture has 1 bit
    p = one_hot_votes([0, 1], n_classes=2)
    assert expected_entropy(p).item() == pytest.approx(0.0)
    assert predictive_entropy(p).item() == pytest.approx(1.0)
    assert mutual_information(p).item() == pytest.approx(1.0)


def test_variation_ratio_from_votes():
    p = one_hot_votes([0, 0, 0, 1, 2])
    assert variation_ratio(p).item() == pytest.approx(1 - 3 / 5)
    vr, counts = variation_ratio(p, return_counts=True)
    assert counts.tolist() == [3]
    assert vote_counts(p).tolist() == [[3, 1, 1]]
    assert modal_count(p).tolist() == [3]
    assert variation_ratio_from_votes(torch.tensor([[3, 1, 1], [10, 0, 0]])).tolist() == pytest.approx([0.4, 0.0])


def test_sample_dim_keyword():
    p = one_hot_votes([0, 0, 0, 1, 2])  # [K, B, C]
    q = p.permute(1, 0, 2)  # [B, K, C]
    assert variation_ratio(q, sample_dim=1).item() == pytest.approx(0.4)
    assert predictive_entropy(q, sample_dim=1).item() == pytest.approx(predictive_entropy(p).item())
    with pytest.raises(ValueError, match="class"):
        variation_ratio(p, sample_dim=-1)


def test_variation_ratio_true():
    p = one_hot_votes([0, 0, 0, 1, 2])
    assert variation_ratio_true(p, torch.tensor([0])).item() == pytest.approx(0.4)
    assert variation_ratio_true(p, torch.tensor([1])).item() == pytest.approx(0.8)
    with pytest.raises(ValueError, match="labels shape"):
        variation_ratio_true(p, torch.tensor([0, 1]))


def test_reference_variant_differs_from_modal_definition():
    # votes: 2x class 0 (barely), 3x class 1 (barely) but the two class-0 samples are very confident:
    # softmax-averaged probabilities favour class 0 -> the reference counts agreement with class 0.
    p = torch.tensor([[0.99, 0.01], [0.99, 0.01], [0.49, 0.51], [0.49, 0.51], [0.49, 0.51]]).unsqueeze(1)
    assert variation_ratio(p).item() == pytest.approx(0.4)
    ref = variation_ratio_reference(p)
    assert ref.dtype == torch.float32
    assert ref.item() == pytest.approx(0.6)

"""Uncertainty scores over Monte-Carlo class probabilities shaped ``[samples, batch, classes]``.

All entropies are in bits by default (``base=2``). ``sample_dim`` says which axis holds the
Monte-Carlo samples (default 0); the class axis is always the last.

>>> import torch
>>> p = torch.tensor([[[0.5, 0.5]], [[0.5, 0.5]]])      # two samples that agree
>>> predictive_entropy(p).item(), mutual_information(p).item(), variation_ratio(p).item()
(1.0, 0.0, 0.0)
>>> votes = torch.eye(3)[[0, 0, 0, 1, 2]].unsqueeze(1)  # votes [0, 0, 0, 1, 2] of K = 5 samples
>>> round(variation_ratio(votes).item(), 6)
0.4
"""

from __future__ import annotations

import math

import torch


def _move(probs: torch.Tensor, sample_dim: int) -> torch.Tensor:
    if probs.dim() < 2:
        raise ValueError(f"probs must have a sample axis and a class axis, got shape {tuple(probs.shape)}")
    sd = sample_dim % probs.dim()
    if sd == probs.dim() - 1:
        raise ValueError("sample_dim must not be the class (last) axis")
    return probs.movedim(sd, 0)


def _entropy(p: torch.Tensor, base: float) -> torch.Tensor:
    h = -torch.special.xlogy(p, p).sum(-1)
    return h / math.log(base) if base is not None else h


def predictive_entropy(probs: torch.Tensor, sample_dim: int = 0, base: float = 2.0) -> torch.Tensor:
    """``H[mean_k p_k]``: total predictive uncertainty, shape ``[batch]``."""
    return _entropy(_move(probs, sample_dim).mean(0), base)


def expected_entropy(probs: torch.Tensor, sample_dim: int = 0, base: float = 2.0) -> torch.Tensor:
    """``mean_k H[p_k]``: the aleatoric part."""
    return _entropy(_move(probs, sample_dim), base).mean(0)


def mutual_information(probs: torch.Tensor, sample_dim: int = 0, base: float = 2.0) -> torch.Tensor:
    """``H[mean_k p_k] - mean_k H[p_k]``: the epistemic part (clamped at 0 against round-off)."""
    return (predictive_entropy(probs, sample_dim, base) - expected_entropy(probs, sample_dim, base)).clamp_min(0.0)


def vote_counts(probs: torch.Tensor, sample_dim: int = 0) -> torch.Tensor:
    """Integer votes ``[batch, classes]``: how many samples predict each class (argmax per sample)."""
    p = _move(probs, sample_dim)
    n_classes = p.shape[-1]
    winners = p.argmax(-1)  # [K, batch...]
    return torch.nn.functional.one_hot(winners, n_classes).sum(0)


def modal_count(probs: torch.Tensor, sample_dim: int = 0) -> torch.Tensor:
    """``f_mode``: the number of samples that predict the modal class (integer, ``[batch]``)."""
    return vote_counts(probs, sample_dim).max(-1).values


def widest_float(device: torch.device | str) -> torch.dtype:
    """float64 where ``device`` computes in it, float32 on Apple's MPS (which has no float64).

    >>> widest_float("cpu"), widest_float("mps")
    (torch.float64, torch.float32)
    """
    return torch.float32 if torch.device(device).type == "mps" else torch.float64


def variation_ratio_from_votes(votes: torch.Tensor) -> torch.Tensor:
    """``1 - f_mode / K`` from integer vote counts ``[batch, classes]`` (in :func:`widest_float`)."""
    k = votes.sum(-1)
    wide = widest_float(votes.device)
    return 1.0 - votes.max(-1).values.to(wide) / k.to(wide)


def variation_ratio(probs: torch.Tensor, sample_dim: int = 0, return_counts: bool = False):
    """Variation ratio ``1 - f_mode / K`` (Freeman 1965), computed from integer vote counts.

    With ``return_counts=True`` returns ``(vr, modal_counts)`` so that thresholds can be compared on
    the integers (``vr >= tau`` iff ``K - f_mode >= ceil(tau K)``).
    """
    votes = vote_counts(probs, sample_dim)
    vr = variation_ratio_from_votes(votes).to(probs.dtype)
    if return_counts:
        return vr, votes.max(-1).values
    return vr


def variation_ratio_true(probs: torch.Tensor, labels: torch.Tensor, sample_dim: int = 0) -> torch.Tensor:
    """Oracle ``VR-True = 1 - (1/K) sum_k 1[y_hat_k = y]``; needs the labels (diagnostic only)."""
    p = _move(probs, sample_dim)
    winners = p.argmax(-1)
    labels = torch.as_tensor(labels, device=p.device)
    if labels.shape != winners.shape[1:]:
        raise ValueError(f"labels shape {tuple(labels.shape)} does not match batch shape {tuple(winners.shape[1:])}")
    return 1.0 - (winners == labels).to(probs.dtype).mean(0)


def variation_ratio_reference(probs: torch.Tensor, sample_dim: int = 0) -> torch.Tensor:
    """The paper's code's variant, kept to replay its thresholds; not the textbook definition.

    It computes ``1 - (fraction of samples agreeing with argmax of mean_k softmax(p_k))`` - the
    probabilities are soft-maxed a second time before averaging - and returns float32, which its
    code compared against float32 thresholds (with K = 10 a threshold of 0.1 then acted like 0.2).
    """
    p = _move(probs, sample_dim)
    pred = torch.softmax(p, dim=-1).mean(0).argmax(-1)
    agree = (p.argmax(-1) == pred).to(torch.float32).mean(0)
    return (1.0 - agree).to(torch.float32)


UNCERTAINTY_SCORES = {
    "predictive_entropy": predictive_entropy,
    "aleatoric": expected_entropy,
    "epistemic": mutual_information,
    "variation_ratio": variation_ratio,
}
"""Named label-free scores over ``[samples, batch, classes]`` probabilities."""

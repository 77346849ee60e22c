"""Named acquisition scores over Monte-Carlo class probabilities ``[K, batch, classes]``.

=========== ===================================================== ========= ============
name        score                                                 discrete  needs labels
=========== ===================================================== ========= ============
vr          variation ratio ``1 - f_mode / K`` (integer votes)    yes       no
entropy     predictive entropy ``H[mean_k p_k]`` (bits)           no        no
aleatoric   expected entropy ``mean_k H[p_k]`` (bits)             no        no
epistemic   mutual information (predictive - aleatoric, bits)     no        no
random      none: query with a fixed probability                  -         no
vr-true     ORACLE ``1 - (1/K) sum_k 1[y_k = y]`` (diagnostic)    yes       YES
all         none: query every example (the 100%-update baseline)  -         no
=========== ===================================================== ========= ============

Discrete scores are also returned as integer *dissent counts* (``K - f_mode`` for VR,
``K - #{k: y_k = y}`` for VR-True) so that thresholds compare integers, never floats.

>>> import torch
>>> votes = torch.eye(3)[[0, 0, 0, 1, 2]].unsqueeze(1)   # K = 5 samples, votes 0,0,0,1,2
>>> dissent_count(votes).tolist(), round(score_values("vr", votes).item(), 6)
([2], 0.4)
>>> dissent_count(votes, labels=torch.tensor([1])).tolist()   # vr-true: 4 of 5 votes miss class 1
[4]
>>> canonical_score("variation-ratio"), canonical_score("predictive")
('vr', 'entropy')
"""

from __future__ import annotations

import dataclasses

import torch

from bimu.uncertainty import expected_entropy, modal_count, mutual_information, predictive_entropy


@dataclasses.dataclass(frozen=True)
class ScoreInfo:
    """What a named score is: discrete (integer votes) or not, and whether it needs the label."""

    name: str
    description: str
    discrete: bool
    needs_labels: bool
    uses_samples: bool = True


SCORES = {
    "vr": ScoreInfo("vr", "variation ratio 1 - f_mode/K from integer votes", True, False),
    "entropy": ScoreInfo("entropy", "predictive entropy H[mean_k p_k] in bits", False, False),
    "aleatoric": ScoreInfo("aleatoric", "expected entropy mean_k H[p_k] in bits", False, False),
    "epistemic": ScoreInfo("epistemic", "mutual information in bits", False, False),
    "random": ScoreInfo("random", "random querying with a fixed probability", False, False, uses_samples=False),
    "vr-true": ScoreInfo("vr-true", "ORACLE variation ratio against the true label (needs labels; "
                         "diagnostic only, not deployable)", True, True),
    "all": ScoreInfo("all", "query every example (100%-update baseline)", False, False, uses_samples=False),
}
"""Every acquisition strategy by canonical name."""

ALIASES = {
    "variation-ratio": "vr", "variation_ratio": "vr", "predictive": "entropy",
    "predictive-entropy": "entropy", "predictive_entropy": "entropy", "mutual-information": "epistemic",
    "mi": "epistemic", "expected-entropy": "aleatoric", "vr_true": "vr-true", "oracle": "vr-true",
    "full": "all", "none": "all",
}
"""Accepted alternative spellings."""


def canonical_score(name: str) -> str:
    """The canonical name of a strategy; ValueError listing the names for an unknown one."""
    key = str(name).strip().lower()
    key = ALIASES.get(key, key)
    if key not in SCORES:
        raise ValueError(f"unknown acquisition strategy {name!r}; available: {sorted(SCORES)} "
                         f"(aliases: {sorted(ALIASES)})")
    return key


def _check(probs: torch.Tensor) -> torch.Tensor:
    if not isinstance(probs, torch.Tensor):
        probs = torch.as_tensor(probs)
    if probs.dim() != 3:
        raise ValueError(f"probs must be [samples, batch, classes], got shape {tuple(probs.shape)}")
    return probs


def dissent_count(probs: torch.Tensor, labels: torch.Tensor | None = None) -> torch.Tensor:
    """Integer dissent ``[batch]``: ``K - f_mode`` (VR) or, with labels, ``K - #votes for y`` (VR-True)."""
    probs = _check(probs)
    k = probs.shape[0]
    if labels is None:
        return k - modal_count(probs)
    labels = torch.as_tensor(labels, dtype=torch.int64).reshape(-1)
    if labels.shape[0] != probs.shape[1]:
        raise ValueError(f"need one label per example ({probs.shape[1]}), got {labels.shape[0]}")
    return k - (probs.argmax(-1) == labels.view(1, -1)).sum(0)


def score_values(name: str, probs: torch.Tensor, labels: torch.Tensor | None = None) -> torch.Tensor:
    """The named score ``[batch]`` (float64 for discrete scores: exactly ``dissent / K``)."""
    name = canonical_score(name)
    probs = _check(probs)
    info = SCORES[name]
    if not info.uses_samples:
        raise ValueError(f"strategy {name!r} has no score")
    if info.needs_labels and labels is None:
        raise ValueError(f"score {name!r} is an oracle: it needs the true labels")
    if name == "vr":
        return dissent_count(probs).to(torch.float64) / probs.shape[0]
    if name == "vr-true":
        return dissent_count(probs, labels).to(torch.float64) / probs.shape[0]
    if name == "entropy":
        return predictive_entropy(probs)
    if name == "aleatoric":
        return expected_entropy(probs)
    return mutual_information(probs)

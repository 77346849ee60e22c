"""Fully online active continual learning: acquisition scores, threshold rule, budget controller,
the streaming :class:`ActiveLearner` and its accounting, and the threshold sweep.

>>> acq = make_acquisition("vr", threshold=0.1, mc_samples=10)
>>> acq.describe(), acq.needs_labels, make_acquisition("vr-true", threshold=0.1).needs_labels
('vr@0.1', False, True)
"""

from bimu.active.accounting import Accounting
from bimu.active.budget import BudgetController
from bimu.active.learner import Acquisition, ActiveLearner, make_acquisition
from bimu.active.scores import SCORES, canonical_score, dissent_count, score_values
from bimu.active.threshold import ThresholdRule, vote_threshold

__all__ = [
    "Accounting",
    "Acquisition",
    "ActiveLearner",
    "BudgetController",
    "SCORES",
    "ThresholdRule",
    "canonical_score",
    "dissent_count",
    "make_acquisition",
    "score_values",
    "vote_threshold",
]

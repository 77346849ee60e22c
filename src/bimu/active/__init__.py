"""Fully online active continual learning: acquisition scores, threshold rule, budget controller,
the streaming :class:`ActiveLearner` and its accounting, and the threshold sweep.

>>> acq = make_acquisition("vr", threshold=0.1, mc_samples=10)
>>> acq.describe(), acq.needs_labels, make_acquisition("vr-true", threshold=0.1).needs_labels
('vr@0.1', False, True)
"""

from bimu.lazy import lazy_exports

_SUBMODULES = ("bimu.active.accounting", "bimu.active.budget", "bimu.active.learner", "bimu.active.scores",
               "bimu.active.threshold")

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


__getattr__, __dir__ = lazy_exports(__name__, _SUBMODULES, __all__)

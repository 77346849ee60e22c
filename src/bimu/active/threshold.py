"""One-pass threshold querying: query iff ``score >= tau``.

For discrete scores (VR, VR-True) with ``K`` samples the comparison is done on integers:
``VR >= tau`` iff ``K - f_mode >= ceil(tau * K - 1e-9)``. With ``K = 10`` and ``tau = 0.1`` exactly the
examples with at least one dissenting vote are queried (the paper's code compared float32 values, so
its 0.1 acted like 0.2).

>>> vote_threshold(0.1, 10), vote_threshold(0.2, 10), vote_threshold(0.25, 10), vote_threshold(0.0, 10)
(1, 2, 3, 0)
>>> rule = ThresholdRule(0.1)
>>> rule.ask_discrete(dissent=1, k=10), rule.ask_discrete(dissent=0, k=10), rule.ask_continuous(0.05)
(True, False, False)
"""

from __future__ import annotations

import math


def vote_threshold(tau: float, k: int) -> int:
    """Smallest integer dissent count ``n`` with ``n / K >= tau``: ``ceil(tau K - 1e-9)``, at least 0."""
    if int(k) < 1:
        raise ValueError(f"K must be >= 1, got {k}")
    return max(0, math.ceil(float(tau) * int(k) - 1e-9))


class ThresholdRule:
    """Fixed threshold ``tau``: query iff the score is at least ``tau`` (integers for discrete scores)."""

    def __init__(self, tau: float):
        tau = float(tau)
        if not math.isfinite(tau) or tau < 0:
            raise ValueError(f"threshold must be a finite number >= 0, got {tau}")
        self.tau = tau

    def ask_discrete(self, dissent: int, k: int) -> bool:
        """Query iff ``dissent >= ceil(tau K - 1e-9)`` (integer comparison)."""
        return int(dissent) >= vote_threshold(self.tau, k)

    def ask_continuous(self, value: float) -> bool:
        """Query iff ``value >= tau``."""
        return float(value) >= self.tau

    def __repr__(self) -> str:
        return f"ThresholdRule(tau={self.tau})"

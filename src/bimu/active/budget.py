"""Budget-driven adaptive thresholding for variation ratio (paper appendix).

With target budget ``B``, exponent ``gamma`` and ``K`` samples, before each example:

- ``Q = queried / seen`` (0 before the first example), ``e = Q - B``;
- ``tau_cont = B + sign(e) |e|^gamma``;
- ``n = clip(round(K tau_cont), 0, K)`` (round half to even, like numpy/JAX), ``tau = n / K``;
- query iff ``VR >= tau``, i.e. iff the integer dissent ``K - f_mode >= n``.

The controller is memory-free: it reads only the two counters.

>>> c = BudgetController(budget=0.03, exponent=0.5, k=10)
>>> c.vote_threshold(queried=0, seen=0)      # e = -0.03: tau_cont = 0.03 - 0.173 < 0 -> 0 (query all)
0
>>> c.vote_threshold(queried=4, seen=100)    # e = 0.01: tau_cont = 0.03 + 0.1 = 0.13 -> round(1.3) = 1
1
>>> c.vote_threshold(queried=30, seen=100)   # e = 0.27: 0.03 + 0.5196 -> round(5.496) = 5
5
"""

from __future__ import annotations

import math

import numpy as np


class BudgetController:
    """The paper's budget controller quantised to the ``K + 1`` vote levels ``0, 1/K, ..., 1``."""

    def __init__(self, budget: float, exponent: float = 0.5, k: int = 10):
        budget, exponent = float(budget), float(exponent)
        if not 0.0 <= budget <= 1.0:
            raise ValueError(f"budget must be in [0, 1], got {budget}")
        if not (math.isfinite(exponent) and exponent > 0):
            raise ValueError(f"budget exponent must be > 0, got {exponent}")
        if int(k) < 1:
            raise ValueError(f"K must be >= 1, got {k}")
        self.budget, self.exponent, self.k = budget, exponent, int(k)

    def continuous_threshold(self, queried: int, seen: int) -> float:
        """``tau_cont = B + sign(e) |e|^gamma`` with ``e = queried/seen - B``."""
        rate = queried / seen if seen > 0 else 0.0
        e = rate - self.budget
        return self.budget + math.copysign(abs(e) ** self.exponent, e) if e != 0 else self.budget

    def vote_threshold(self, queried: int, seen: int) -> int:
        """``n_t = clip(round(K tau_cont), 0, K)``: the dissent count needed to query."""
        n = int(np.round(self.k * self.continuous_threshold(queried, seen)))
        return min(max(n, 0), self.k)

    def threshold(self, queried: int, seen: int) -> float:
        """The quantised threshold ``tau_t = n_t / K``."""
        return self.vote_threshold(queried, seen) / self.k

    def ask(self, dissent: int, queried: int, seen: int) -> bool:
        """Query iff ``dissent >= n_t`` (integer comparison)."""
        return int(dissent) >= self.vote_threshold(queried, seen)

    def __repr__(self) -> str:
        return f"BudgetController(budget={self.budget}, exponent={self.exponent}, k={self.k})"

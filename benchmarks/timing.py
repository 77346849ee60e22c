"""Interleaved best-of timing shared by the benchmarks that compare kernels in one run."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping


def best_cpu_seconds(calls: Mapping[str, Callable[[], object]], repeats: int) -> dict[str, float]:
    """The least CPU time (``time.process_time``) of each call over ``repeats`` rounds, the calls
    interleaved round by round so that a machine whose speed drifts treats them alike.

    >>> best = best_cpu_seconds({"a": lambda: sum(range(1000)), "b": lambda: None}, repeats=2)
    >>> sorted(best), all(v >= 0 for v in best.values())
    (['a', 'b'], True)
    """
    best = dict.fromkeys(calls, float("inf"))
    for _ in range(repeats):
        for name, call in calls.items():
            t0 = time.process_time()
            call()
            best[name] = min(best[name], time.process_time() - t0)
    return best

"""The paper's compute-cost appendix: its constants (K, query rate, the STM32 measurements) and the
expected cost per incoming example of an active learner (``C_AL``) and of full online training (``C_full``).

>>> expected_cost_al(1.0, 10.0, k=2, query_rate=0.5), expected_cost_full(1.0, 10.0, k=2)
(12.0, 22.0)
"""

from __future__ import annotations


PAPER_K = 2
"""MC predictors of the paper's compute-cost appendix (OpenLORIS-8192, variation ratio)."""
PAPER_QUERY_RATE = 0.033
"""Fraction of the stream queried (and trained on) in the paper's compute-cost appendix."""
PAPER_STM32 = {
    "device": "STM32 NUCLEO-64, 216 MHz (paper, projected to 8192 -> 19)",
    "sizes": [8192, 19],
    "inference_ms": 13.7,
    "train_ms": 266.0,
    "al_ms": 45.0,
    "full_ms": 559.4,
    "train_over_inference": 19.4,
    "full_over_al": 12.4,
    "reference_layer": {"sizes": [512, 16], "inference_us": 717.93, "train_us": 13991.27},
}
"""The paper's measured / projected numbers (appendix tables)."""


def expected_cost_al(c_inference: float, c_train: float, k: int = PAPER_K,
                     query_rate: float = PAPER_QUERY_RATE) -> float:
    """``C_AL = K (C_inference + B_rate C_train)``: expected cost per incoming example, active."""
    check_k_rate(k, query_rate)
    return k * (c_inference + query_rate * c_train)


def expected_cost_full(c_inference: float, c_train: float, k: int = PAPER_K) -> float:
    """``C_full = K (C_inference + C_train)``: full online training of a Bayesian binary network."""
    check_k_rate(k, 1.0)
    return k * (c_inference + c_train)


def check_k_rate(k, rate):
    """ValueError unless ``k`` is a positive integer and ``rate`` lies in [0, 1]."""
    if int(k) != k or k < 1:
        raise ValueError(f"K must be a positive integer, got {k}")
    if not 0.0 <= rate <= 1.0:
        raise ValueError(f"query rate must lie in [0, 1], got {rate}")
PAPER_CYCLES_512_16 = {"bimu": (155170, 3022211), "bayesbinn": (155195, 2833522), "ste": (67233, 786999),
                       "synaptic-metaplasticity": (67243, 1668432)}
"""The paper's measured cycles (inference, training) of the 512 -> 16 layer on the STM32 at 216 MHz."""
PAPER_MS_8192_19 = {"bimu": (13.7, 266.0), "bayesbinn": (13.6, 249.2), "ste": (5.9, 62.2),
                    "synaptic-metaplasticity": (5.9, 146.7)}
"""The paper's projected milliseconds (inference, training) of the 8192 -> 19 head."""

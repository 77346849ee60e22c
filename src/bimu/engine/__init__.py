"""The fused online engine: the whole online loop of the paper's networks in compiled code (numba).

Supported: BernoulliLinear layers with LayerNorm without affine, RBG or sign activations, any depth
and width (single-layer heads included), trained with BiMU (or BayesBiNN, whose update has the same
shape) with at most :data:`~bimu.engine.rowpass.MAX_SAMPLES` samples per step
(:mod:`bimu.engine.fused`); and every baseline on its own network, any depth and width: SGD, Online
EWC, SI and experience replay (:mod:`bimu.engine.fused_real`), MESU (:mod:`bimu.engine.fused_gaussian`), STE and
Synaptic Metaplasticity (:mod:`bimu.engine.fused_sign`). Per step it draws K relaxed samples, runs
forward and backward, applies the update and draws the next step's samples in one compiled call
without Python in between; hard-sample Monte-Carlo evaluation and active-learning scores cost only K
forward passes. Randomness is counter-based (:mod:`bimu.rng`): results do not depend on the thread
count or on how steps are grouped.

Layout: the method classes (:mod:`bimu.engine.base`, the base class of all of them, and the
``fused*`` modules) call numba-only kernel modules (``binary_*``, ``fastpath``, ``rowpass``,
``sampling``, ``hard_eval``, ``scores``, ``dots``, ``scalar``, ``dense``, ``real``, ``gaussian``,
``sign``), configured through the named slots of :mod:`bimu.engine.hparams`.

Entry points for the runner (see ``docs/contracts.md``):

>>> supports("bimu", [784, 100, 10], {"activation": "rbg"})
True
>>> supports("sgd", [784, 100, 10], {"momentum": 0.9})
False
>>> why_unsupported("bimu", [784, 100, 10], {"n_samples": 100})
'the fused engine runs bimu with at most 64 samples per step (n_samples=100)'

``create_fused(name, sizes, seed, hparams)`` returns an :class:`~bimu.methods.base.OnlineMethod`
(:class:`FusedBiMU`, :class:`FusedBayesBiNN`, ... one class per entry of :data:`FUSED_METHODS`) with
``learn_many(X, Y)`` and ``mc_scores(X)`` on top.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from bimu.engine.cache import refresh_stale_cache
from bimu.engine.fused import FusedBayesBiNN, FusedBiMU
from bimu.engine.fused_gaussian import FusedMESU
from bimu.engine.fused_real import FusedOnlineEWC, FusedReplay, FusedSGD, FusedSynapticIntelligence
from bimu.engine.fused_sign import FusedSTE, FusedSynapticMetaplasticity

refresh_stale_cache()  # code cached from other engine sources (an edit, a pull) is never loaded

FUSED_METHODS = {"bimu": FusedBiMU, "bayesbinn": FusedBayesBiNN, "sgd": FusedSGD, "ewc-online": FusedOnlineEWC,
                 "si": FusedSynapticIntelligence, "mesu": FusedMESU, "ste": FusedSTE,
                 "synaptic-metaplasticity": FusedSynapticMetaplasticity, "replay": FusedReplay}
"""Method name -> fused class."""


def why_unsupported(method_name: str, sizes: Sequence[int], hparams: Mapping[str, Any] | None = None) -> str | None:
    """Why the engine cannot run ``method_name`` on a network of ``sizes`` with ``hparams`` (one line),
    or None when it can (:func:`supports`)."""
    cls = FUSED_METHODS.get(method_name)
    if cls is None:
        return f"unknown method {method_name!r}; supported methods: {sorted(FUSED_METHODS)}"
    try:
        sizes = [int(s) for s in sizes]
        if len(sizes) < 2 or any(s <= 0 for s in sizes):
            return f"sizes must list at least two positive widths, got {sizes}"
        cls.resolve_hyperparameters(dict(hparams or {}))
    except (TypeError, ValueError) as e:
        return str(e)
    return None


def supports(method_name: str, sizes: Sequence[int], hparams: Mapping[str, Any] | None = None) -> bool:
    """Whether the engine can run ``method_name`` on a network of ``sizes`` with ``hparams``.

    True for every method of :data:`FUSED_METHODS` (any depth and width; every ``activation`` the
    torch method offers: rbg or sign for BiMU and BayesBiNN, relu or rbg for MESU, sign or rbg for
    Synaptic Metaplasticity; the torch methods' hyperparameters and defaults); False for anything it
    cannot run faithfully (unknown method or hyperparameter, invalid values or sizes, more than
    :data:`~bimu.engine.rowpass.MAX_SAMPLES` samples per step for BiMU or BayesBiNN): then
    :func:`why_unsupported` says why.

    >>> supports("mesu", [4, 3, 2], {"activation": "rbg"}), supports("mesu", [4, 3, 2], {"activation": "tanh"})
    (True, False)
    """
    return why_unsupported(method_name, sizes, hparams) is None


def create_fused(method_name: str, sizes: Sequence[int], seed: int = 0,
                 hparams: Mapping[str, Any] | None = None, threads: int | None = None,
                 dtype: str = "float32"):
    """Build the fused version of ``method_name``; ValueError (saying why) if :func:`supports` says no."""
    hparams = dict(hparams or {})
    reason = why_unsupported(method_name, sizes, hparams)
    if reason is not None:
        raise ValueError(f"the fused engine does not support method {method_name!r} with sizes {list(sizes)} "
                         f"and hyperparameters {sorted(hparams)}: {reason}")
    return FUSED_METHODS[method_name](sizes, seed=seed, threads=threads, dtype=dtype, **hparams)


__all__ = ["FUSED_METHODS", "FusedBayesBiNN", "FusedBiMU", "FusedMESU", "FusedOnlineEWC", "FusedReplay",
           "FusedSGD", "FusedSTE", "FusedSynapticIntelligence", "FusedSynapticMetaplasticity", "create_fused",
           "supports", "why_unsupported"]

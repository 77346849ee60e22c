"""The one place that chooses between the fused engine and the PyTorch method.

:func:`build_method` builds a registered method for a network of ``sizes``: on the fused engine
(:func:`bimu.engine.create_fused`) when ``engine`` is ``"auto"`` and :func:`bimu.engine.supports` says
it can run it, or when ``engine`` is ``"fused"`` (an error when it cannot); otherwise the PyTorch method
(:func:`bimu.methods.create_method`). The runner, the active-learning sweeps, tuning and the
compute-cost table all build their methods here. :func:`create_method` (``from bimu import
create_method``) is the same choice from a method name, a paper preset and hyperparameter overrides.

>>> method, used = build_method("bimu", [4, 3], 0, {"activation": "rbg"}, engine="torch")
>>> type(method).__name__, used
('BiMUMethod', 'torch')
>>> build_method("bimu", [4, 3], 0, {}, engine="gpu")
Traceback (most recent call last):
...
ValueError: engine must be one of ('auto', 'fused', 'torch'), got 'gpu'
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from bimu.methods import OnlineMethod, get_method
from bimu.methods import create_method as create_torch_method

ENGINES = ("auto", "fused", "torch")
"""``auto``: the fused engine when it supports the method, else PyTorch; ``fused`` / ``torch``: forced."""


def build_method(name: str, sizes: Sequence[int], seed: int, hparams: Mapping[str, Any], engine: str = "auto",
                 threads: int | None = 1):
    """``(method, "fused" | "torch")``: method ``name`` on a network of ``sizes``, seeded with ``seed``.

    ``hparams`` are the resolved hyperparameters. ``threads`` is the fused engine's thread count, capped
    at numba's pool size (``None``: the pool size); results do not depend on it. ``engine="fused"`` raises
    RuntimeError when the engine cannot be loaded and ValueError when it does not support the method,
    the sizes or the hyperparameters.
    """
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {ENGINES}, got {engine!r}")
    if engine != "torch":
        try:
            # looked up at call time: an engine that cannot load leaves the PyTorch path working
            fused = importlib.import_module("bimu.engine")
            supports, create_fused = fused.supports, fused.create_fused
        except (ImportError, AttributeError) as e:
            if engine == "fused":
                raise RuntimeError(f"engine 'fused': the fused engine is not available ({e}); "
                                   "use engine 'torch' or 'auto'") from None
        else:
            if supports(name, list(sizes), dict(hparams)):
                return create_fused(name, list(sizes), seed, dict(hparams), threads=_threads(threads)), "fused"
            if engine == "fused":
                why = fused.why_unsupported(name, list(sizes), dict(hparams))
                raise ValueError(f"engine 'fused' does not support method {name!r} with sizes {list(sizes)} "
                                 f"and these hyperparameters{f': {why}' if why else ''}; use engine 'torch' or 'auto'")
    return create_torch_method(name, list(sizes), seed, **hparams), "torch"


def create_method(name: str, sizes: Sequence[int], seed: int = 0, preset: str | None = None, device=None,
                  engine: str = "auto", **overrides) -> OnlineMethod:
    """Method ``name`` on a network of ``sizes``, seeded with ``seed``, with the paper ``preset`` (if any)
    and hyperparameter ``overrides``.

    ``engine="auto"`` (default) builds it on the fused engine when the engine supports the method, the
    sizes and the hyperparameters (the same interface, much faster on a batch-size-1 stream), else the
    PyTorch method; ``"torch"`` always the PyTorch method (on ``device``, default the CPU); ``"fused"``
    the fused engine or an error saying why not. A ``device`` other than the CPU means the PyTorch method.

    >>> type(create_method("bimu", [4, 3], seed=0, engine="torch")).__name__
    'BiMUMethod'
    >>> create_method("bimu", [4, 3], device="meta", engine="fused")
    Traceback (most recent call last):
    ...
    ValueError: engine 'fused' runs on the CPU only; use engine 'torch' for device 'meta'
    """
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {ENGINES}, got {engine!r}")
    on_cpu = device is None or torch.device(device).type == "cpu"
    if engine == "fused" and not on_cpu:
        raise ValueError(f"engine 'fused' runs on the CPU only; use engine 'torch' for device {device!r}")
    if engine == "torch" or not on_cpu:
        return create_torch_method(name, list(sizes), seed, preset=preset, device=device, **overrides)
    hparams = get_method(name).resolve_hyperparameters(overrides, preset=preset)
    return build_method(name, sizes, seed, hparams, engine=engine)[0]


def _threads(threads: int | None) -> int | None:
    """``threads`` capped at numba's thread pool (``None`` stays: the engine's default, the pool size)."""
    if threads is None:
        return None
    import numba

    return min(int(threads), int(numba.config.NUMBA_NUM_THREADS))

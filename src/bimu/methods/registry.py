"""The registry: method name -> :class:`~bimu.methods.base.OnlineMethod` subclass.

>>> 'bimu' in available_methods()
True
>>> get_method("bimu").info.paper_name
'BiMU'
>>> get_method("adam")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
ValueError: unknown method 'adam'; available: [...'bimu'...]
"""

from __future__ import annotations

import importlib

import torch

from bimu.methods.base import OnlineMethod

_REGISTRY: dict[str, type[OnlineMethod]] = {}


def register(cls: type[OnlineMethod]) -> type[OnlineMethod]:
    """Add a method class under ``cls.info.name`` (usable as a decorator)."""
    name = cls.info.name
    if name in _REGISTRY and _REGISTRY[name] is not cls:
        raise ValueError(f"method {name!r} is already registered")
    _REGISTRY[name] = cls
    return cls


def get_method(name: str) -> type[OnlineMethod]:
    """The method class registered under ``name``; ValueError listing the names otherwise."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown method {name!r}; available: {sorted(_REGISTRY)}") from None


def available_methods() -> tuple[str, ...]:
    """Registered method names, in registration order."""
    return tuple(_REGISTRY)


def create_method(name: str, sizes, seed: int = 0, preset: str | None = None, device=None, engine: str = "auto",
                  **overrides) -> OnlineMethod:
    """Instantiate method ``name`` with the paper ``preset`` (if any) and ``overrides``.

    ``engine="auto"`` (default) builds it on the fused engine when the engine supports the method, the
    sizes and the hyperparameters (the same interface, much faster on a batch-size-1 stream), else the
    PyTorch method; ``"torch"`` always the PyTorch method (on ``device``, default CPU); ``"fused"`` the
    fused engine or an error saying why not. The choice is :func:`bimu.engine.build.build_method`'s,
    looked up when called (the engine builds on the methods). A ``device`` other than the CPU means
    the PyTorch method.
    """
    cls = get_method(name)
    hparams = cls.resolve_hyperparameters(overrides, preset=preset)
    on_cpu = device is None or torch.device(device).type == "cpu"
    if engine != "torch" and on_cpu:
        build = importlib.import_module("bimu.engine.build")
        return build.build_method(name, list(sizes), seed, hparams, engine=engine)[0]
    if engine not in ("auto", "torch"):
        raise ValueError(f"engine {engine!r} runs on the CPU only; use engine 'torch' for device {device!r}")
    if device is None:
        return cls(sizes, seed=seed, **hparams)
    return cls(sizes, seed=seed, device=device, **hparams)

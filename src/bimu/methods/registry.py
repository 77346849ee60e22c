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


def create_method(name: str, sizes, seed: int = 0, preset: str | None = None, device=None, engine: str = "torch",
                  **overrides) -> OnlineMethod:
    """The PyTorch method ``name`` on a network of ``sizes`` (on ``device``, default the CPU), with the paper
    ``preset`` (if any) and ``overrides``.

    ``engine`` accepts ``"torch"`` only: :func:`bimu.create_method` is the factory that also picks the
    fused engine (``engine="auto"``, its default, or ``"fused"``).

    >>> type(create_method("sgd", [4, 2], seed=0)).__name__
    'SGDMethod'
    >>> create_method("sgd", [4, 2], engine="auto")
    Traceback (most recent call last):
    ...
    ValueError: bimu.methods.create_method builds the PyTorch method only (engine 'torch'), got engine 'auto'; use bimu.create_method for the fused engine
    """
    if engine != "torch":
        raise ValueError(f"bimu.methods.create_method builds the PyTorch method only (engine 'torch'), got engine "
                         f"{engine!r}; use bimu.create_method for the fused engine")
    cls = get_method(name)
    hparams = cls.resolve_hyperparameters(overrides, preset=preset)
    if device is None:
        return cls(sizes, seed=seed, **hparams)
    return cls(sizes, seed=seed, device=device, **hparams)

"""Package exports loaded on first use, so that ``bimu --help`` does not import torch.

A package lists the submodules that define its public names and binds the two module hooks of PEP 562:

    __getattr__, __dir__ = lazy_exports(__name__, _SUBMODULES, __all__)

``from bimu.active import ActiveLearner`` then imports ``bimu.active.learner`` at that moment.

>>> import types
>>> pkg = types.ModuleType("pkg")
>>> pkg.__getattr__, pkg.__dir__ = lazy_exports("pkg", ("json", "math"), ["dumps", "pi"])
>>> round(pkg.__getattr__("pi"), 2), "dumps" in pkg.__dir__()
(3.14, True)
>>> pkg.__getattr__("nope")
Traceback (most recent call last):
    ...
AttributeError: module 'pkg' has no attribute 'nope'
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Sequence


def lazy_exports(package: str, submodules: Sequence[str], names: Sequence[str]) -> tuple[Callable, Callable]:
    """The ``__getattr__`` and ``__dir__`` of ``package``: each of ``names`` is taken, on first use, from
    the first of ``submodules`` that defines it, and kept in the package's namespace."""
    exported = frozenset(names)

    def __getattr__(name: str):
        if name in exported:
            for m in submodules:
                module = importlib.import_module(m)
                if hasattr(module, name):
                    value = getattr(module, name)
                    if package in sys.modules:
                        setattr(sys.modules[package], name, value)
                    return value
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        namespace = vars(sys.modules[package]) if package in sys.modules else {}
        return sorted(set(namespace) | exported)

    return __getattr__, __dir__

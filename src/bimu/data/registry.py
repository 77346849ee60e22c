"""The benchmark registry itself: :class:`BenchmarkEntry` and :func:`register_benchmark`.

A benchmark module registers its benchmarks here when imported; :mod:`bimu.data.benchmarks` imports
the benchmark modules it lists and looks names up. This module imports neither, so the benchmark
modules and the lookup never import each other.

>>> entry = BenchmarkEntry("example", lambda data_dir=None, seed=0: None, default_hidden=(8,), preset="pmnist-100")
>>> entry.accepts("seed"), entry.accepts("train_limit"), entry.preset_for([8])
(True, False, ('pmnist-100', ''))
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Sequence
from typing import Any


@dataclasses.dataclass(frozen=True)
class BenchmarkEntry:
    """A registered benchmark: its factory, default hidden widths and paper-preset chooser."""

    name: str
    factory: Callable[..., Any]
    default_hidden: tuple[int, ...] = ()
    preset: Callable[[Sequence[int]], tuple[str | None, str]] | str | None = None
    description: str = ""

    def accepts(self, option: str) -> bool:
        """Whether the factory takes keyword ``option`` (or ``**kwargs``)."""
        try:
            params = inspect.signature(self.factory).parameters
        except (TypeError, ValueError):
            return False
        return option in params or any(p.kind is p.VAR_KEYWORD for p in params.values())

    def preset_for(self, hidden: Sequence[int]) -> tuple[str | None, str]:
        """``(preset key or None, note)`` of the paper's hyperparameters for these hidden widths."""
        if self.preset is None:
            return None, ""
        if isinstance(self.preset, str):
            return self.preset, ""
        return self.preset(tuple(hidden))


_REGISTRY: dict[str, BenchmarkEntry] = {}


def register_benchmark(name: str, factory: Callable[..., Any], *, default_hidden: Sequence[int] = (),
                       preset=None, description: str = "") -> None:
    """Register ``factory`` under ``name`` (re-registering the same factory is a no-op)."""
    old = _REGISTRY.get(name)
    if old is not None and old.factory is not factory:
        raise ValueError(f"benchmark {name!r} is already registered")
    _REGISTRY[name] = BenchmarkEntry(name, factory, tuple(int(h) for h in default_hidden), preset, description)


def registered(name: str) -> BenchmarkEntry | None:
    """The entry registered so far under ``name`` (None: none yet)."""
    return _REGISTRY.get(name)


def registered_names() -> tuple[str, ...]:
    """The names registered so far, sorted."""
    return tuple(sorted(_REGISTRY))

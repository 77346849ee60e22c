"""The benchmark registry: ``register_benchmark(name, factory)`` / ``get_benchmark(name, ...)``.

A benchmark object has ``name``, ``n_features``, ``n_classes``, ``n_tasks``, ``is_standin`` and
``train_task(task, seed) -> (X float32 [n, D], y int64 [n])`` (presentation order, shuffled per seed
and task), ``test_task(task) -> (X, y)``, ``ood_set() -> X | None`` (preprocessed like the ID data).

Benchmarks living in other modules register themselves when imported; list such a module in
:data:`BENCHMARK_MODULES` (one line) and it is imported the first time the registry is consulted.

Factories are called as ``factory(data_dir=..., **options)``. The runner passes the run's ``seed``,
``train_limit`` and ``test_limit`` only to factories whose signature accepts them.

>>> "pmnist" in available_benchmarks()
True
>>> get_benchmark("nope")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
ValueError: unknown benchmark 'nope'; available: [...'pmnist'...]
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
from collections.abc import Callable, Sequence
from typing import Any

BENCHMARK_MODULES: tuple[str, ...] = (
    "bimu.data.permuted",
    "bimu.data.feature_benchmarks",
    "bimu.data.own",
    "bimu.data.own_images",
)
"""``bimu.data`` plugin modules that register benchmarks when imported."""


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
_LOADED = False


def register_benchmark(name: str, factory: Callable[..., Any], *, default_hidden: Sequence[int] = (),
                       preset=None, description: str = "") -> None:
    """Register ``factory`` under ``name`` (re-registering the same factory is a no-op)."""
    old = _REGISTRY.get(name)
    if old is not None and old.factory is not factory:
        raise ValueError(f"benchmark {name!r} is already registered")
    _REGISTRY[name] = BenchmarkEntry(name, factory, tuple(int(h) for h in default_hidden), preset, description)


def _load_plugins() -> None:
    global _LOADED
    if _LOADED:
        return
    _LOADED = True
    for mod in BENCHMARK_MODULES:
        try:
            importlib.import_module(mod)
        except ModuleNotFoundError as e:
            if e.name != mod:  # the module exists but one of its own imports is missing
                raise


def available_benchmarks() -> tuple[str, ...]:
    """Registered benchmark names (plugin modules are imported first)."""
    _load_plugins()
    return tuple(sorted(_REGISTRY))


def benchmark_entry(name: str) -> BenchmarkEntry:
    """The registry entry of ``name``; ValueError listing the names otherwise."""
    _load_plugins()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown benchmark {name!r}; available: {sorted(_REGISTRY)}") from None


def get_benchmark(name: str, data_dir=None, **options) -> Any:
    """Build benchmark ``name`` with ``options`` (data files are checked before it returns)."""
    entry = benchmark_entry(name)
    return entry.factory(data_dir=data_dir, **options)

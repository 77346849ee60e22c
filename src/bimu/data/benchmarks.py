"""The benchmarks by name: ``get_benchmark(name, ...)``, ``benchmark_entry(name)``, ``available_benchmarks()``.

A benchmark object has ``name``, ``n_features``, ``n_classes``, ``n_tasks``, ``is_standin`` and
``train_task(task, seed) -> (X float32 [n, D], y int64 [n])`` (presentation order, shuffled per seed
and task), ``test_task(task) -> (X, y)``, ``ood_set() -> X | None`` (preprocessed like the ID data).

Benchmark modules register themselves with :func:`bimu.data.registry.register_benchmark` when
imported; list such a module in :data:`BENCHMARK_MODULES` (one line) and it is imported the first time
a name is looked up here.

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

import importlib
from typing import Any

from bimu.data.registry import BenchmarkEntry, registered, registered_names

BENCHMARK_MODULES: tuple[str, ...] = (
    "bimu.data.permuted",
    "bimu.data.imbalanced_permuted",
    "bimu.data.feature_benchmarks",
    "bimu.data.own",
    "bimu.data.own_images",
)
"""``bimu.data`` plugin modules that register benchmarks when imported."""

_LOADED = False


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
    return registered_names()


def benchmark_entry(name: str) -> BenchmarkEntry:
    """The registry entry of ``name``; ValueError listing the names otherwise."""
    _load_plugins()
    entry = registered(name)
    if entry is None:
        raise ValueError(f"unknown benchmark {name!r}; available: {list(registered_names())}")
    return entry


def get_benchmark(name: str, data_dir=None, **options) -> Any:
    """Build benchmark ``name`` with ``options`` (data files are checked before it returns)."""
    entry = benchmark_entry(name)
    return entry.factory(data_dir=data_dir, **options)

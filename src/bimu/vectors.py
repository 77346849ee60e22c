"""512-bit vectors for the compiled kernels on processors with AVX-512.

numba compiles bimu's kernels (:mod:`bimu.engine`, :mod:`bimu.rng`, :mod:`bimu.edge`) for the host
processor, but on processors with AVX-512 LLVM prefers 256-bit vectors unless told otherwise. The
kernels' results do not depend on the vector width: every dot product follows one stated order
(:mod:`bimu.engine.dots`) and no kernel lets the compiler reorder arithmetic (``fastmath`` is at most
``contract``), so the same seed gives the same bits either way (``tests/test_vectors.py`` checks it for
every fused method).
With 512-bit vectors the online loop is faster (``benchmarks/vector_width.py`` measures each method both
ways in one run), so importing bimu lifts that preference: it sets ``NUMBA_CPU_FEATURES`` to the host's
features plus ``-prefer-256-bit``. numba reads that before it compiles anything, and processes that
bimu starts (``--jobs``, Dask workers) inherit it.

It does nothing when the processor has no AVX-512, when ``NUMBA_CPU_FEATURES``, ``NUMBA_CPU_NAME`` or
``NUMBA_ENABLE_AVX`` is set, when numba has already compiled something in this process (its target is
then fixed), or when ``BIMU_VECTOR_WIDTH=256`` asks for numba's default. The setting is process-wide:
other numba code in the same process compiles with it too.

>>> env = {"BIMU_VECTOR_WIDTH": "256"}
>>> prefer_wide_vectors(env), env
(False, {'BIMU_VECTOR_WIDTH': '256'})
>>> prefer_wide_vectors({"BIMU_VECTOR_WIDTH": "1024"})
Traceback (most recent call last):
...
ValueError: BIMU_VECTOR_WIDTH must be 256, 512 or auto, got '1024'
"""

from __future__ import annotations

import os
import sys
from collections.abc import MutableMapping

ENV = "BIMU_VECTOR_WIDTH"
"""Environment variable: ``256`` keeps numba's default vector width; ``512`` or ``auto`` (the default)
lets bimu's kernels use 512-bit vectors where the processor has them."""

NUMBA_OVERRIDES = ("NUMBA_CPU_FEATURES", "NUMBA_CPU_NAME", "NUMBA_ENABLE_AVX")
"""numba's own settings of the compile target: when the user set one, bimu leaves the target alone."""


def processor() -> tuple[str | None, frozenset[str]]:
    """The first processor's model name and feature flags as Linux reports them (``/proc/cpuinfo``);
    ``(None, frozenset())`` where it cannot be read."""
    model, flags = None, frozenset()
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "model name":
                    model = value.strip()
                elif key.strip() == "flags":
                    flags = frozenset(value.split())
                    break
    except OSError:
        pass
    return model, flags


def _has_avx512() -> bool:
    """Whether the processor reports AVX-512 Foundation (False where :func:`processor` cannot tell)."""
    return "avx512f" in processor()[1]


def _numba_compiled() -> bool:
    """Whether numba has built its CPU target in this process (its features are then fixed)."""
    registry = sys.modules.get("numba.core.registry")
    return registry is not None and "_toplevel_target_context" in vars(registry.cpu_target)


def prefer_wide_vectors(environ: MutableMapping[str, str] = os.environ) -> bool:
    """Set ``NUMBA_CPU_FEATURES`` in ``environ`` to the host's features plus ``-prefer-256-bit`` where
    that applies (see the module); returns whether it did. ValueError for a bad ``BIMU_VECTOR_WIDTH``."""
    width = environ.get(ENV, "auto").strip().lower() or "auto"
    if width not in ("256", "512", "auto"):
        raise ValueError(f"{ENV} must be 256, 512 or auto, got {environ[ENV]!r}")
    if width == "256" or any(k in environ for k in NUMBA_OVERRIDES) or not _has_avx512() or _numba_compiled():
        return False
    from llvmlite import binding

    features = binding.get_host_cpu_features()
    if not features.get("avx512f"):
        return False
    environ["NUMBA_CPU_FEATURES"] = features.flatten() + ",-prefer-256-bit"
    config = sys.modules.get("numba.core.config")
    if config is not None and environ is os.environ:  # numba imported already: have it read the setting
        config.reload_config()
    return True

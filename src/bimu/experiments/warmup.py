"""``bimu warmup``: compile the engine's kernels once, ahead of the first run.

numba compiles the fused engine's kernels the first time a process meets a method, a precision and a
number of samples K, and keeps them in its disk cache (``bimu.engine.cache``), so the first run after an
installation or an upgrade waits 10 to 60 seconds before its first step. ``bimu warmup`` runs one
training step, one evaluation and one query decision of every fused method on a small network, for the
K of each of its presets (and the grouped evaluation, ``eval_sum=grouped``, of the methods that have it),
so that later runs start at once. The kernels do not depend on the widths, so
a small network compiles what the paper's networks use.

    bimu warmup                          every fused method, float32 (what runs use)
    bimu warmup --methods bimu --dtype float64
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence

SIZES = (12, 6, 3)
"""The small network the kernels are compiled on (any widths compile the same kernels)."""


def warmup_plan(methods: Sequence[str] | None = None) -> list[tuple[str, int | None]]:
    """``(method, K)`` pairs to compile: each fused method with the relaxed-sample count of each of its
    presets (``None`` for methods without one).

    >>> ("bimu", 5) in warmup_plan(["bimu"]) and ("bimu", 10) in warmup_plan(["bimu"])
    True
    """
    from bimu.engine import FUSED_METHODS
    from bimu.methods import get_method

    names = list(FUSED_METHODS) if not methods else list(methods)
    unknown = [m for m in names if m not in FUSED_METHODS]
    if unknown:
        raise ValueError(f"no fused kernels for {', '.join(map(repr, unknown))}; choose from {', '.join(FUSED_METHODS)}")
    plan = []
    for name in names:
        table = get_method(name)
        ks = set()
        for preset in [None, *table.presets]:
            hp = table.resolve_hyperparameters({}, preset=preset)
            ks.add(int(hp["n_samples"]) if "n_samples" in hp else None)
        plan += [(name, k) for k in sorted(ks, key=lambda k: -1 if k is None else k)]
    return plan


def warmup(methods: Sequence[str] | None = None, dtype: str = "float32", log=print) -> int:
    """Compile (or load from numba's cache) the kernels of :func:`warmup_plan`; returns the number of
    configurations run. ``log`` gets one line per configuration with its time."""
    import numpy as np
    import torch

    from bimu.engine import create_fused
    from bimu.methods import get_method

    rng = np.random.default_rng(0)
    x = torch.from_numpy(rng.standard_normal((4, SIZES[0])).astype(dtype))
    y = torch.from_numpy(rng.integers(0, SIZES[-1], 4))
    plan = warmup_plan(methods)
    grouped: set[str] = set()
    for name, k in plan:
        t0 = time.perf_counter()
        over = {} if k is None else {"n_samples": k}
        m = create_fused(name, SIZES, 0, get_method(name).resolve_hyperparameters(over), threads=1, dtype=dtype)
        m.learn(x[:1], y[:1])
        m.learn_many(x, y)
        m.predict(x, n_samples=2)
        if hasattr(m, "query_planes"):
            m.query_planes().logits(x[0].numpy(), 1, 2)
        if "eval_sum" in m.hparams and name not in grouped:  # the grouped evaluation, once per method
            grouped.add(name)
            over["eval_sum"] = "grouped"
            create_fused(name, SIZES, 0, get_method(name).resolve_hyperparameters(over), threads=1,
                         dtype=dtype).predict(x, n_samples=2)
        log(f"{name}{'' if k is None else f' K={k}'} {dtype}: {time.perf_counter() - t0:.1f} s")
    return len(plan)


def cmd_warmup(args: argparse.Namespace) -> int:
    """``bimu warmup``."""
    try:
        plan = warmup_plan(args.methods)
    except ValueError as e:
        print(f"bimu: error: {e}", file=sys.stderr)
        return 2
    print(f"compiling the kernels of {len(plan)} configurations ({args.dtype}); once per installation",
          flush=True)
    t0 = time.perf_counter()
    warmup(args.methods, args.dtype, log=lambda s: print("  " + s, flush=True))
    print(f"done in {time.perf_counter() - t0:.0f} s: later runs start without compiling")
    return 0


def add_parser(sub) -> None:
    """Register ``bimu warmup``."""
    p = sub.add_parser("warmup", help="compile the engine's kernels ahead of the first run",
                       description="Compile (or load from numba's disk cache) the fused engine's kernels of "
                                   "every method and preset K, so that the first run after an installation "
                                   "starts at once.")
    p.add_argument("--methods", nargs="+", default=None, metavar="NAME", help="fused methods (default: all)")
    p.add_argument("--dtype", choices=("float32", "float64"), default="float32",
                   help="precision of the kernels (runs use float32)")
    p.set_defaults(func=cmd_warmup)

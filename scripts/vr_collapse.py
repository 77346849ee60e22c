"""Why a fixed variation-ratio threshold can stop an active stream after a label or two: the numbers
the results page's query-dynamics section and the threshold rule in docs/active-learning.md quote.

    python scripts/vr_collapse.py [--thresholds 0.3 0.4] [--seeds 0 1 2] [--k 10] [--tasks T] [--examples N]

The variation ratio of K hard samples is ``VR = 1 - f_mode / K``: it takes only the levels
``0, 1/K, 2/K, ...``, and a threshold ``tau`` queries an example iff at least ``ceil(tau K)`` of the K
votes dissent from the mode (:func:`bimu.active.threshold.vote_threshold`). This script replays the
OpenLORIS active-learning entry's BiMU VR streams (``bimu reproduce openloris-al``: imbalanced
``objects-seq``, 8,192 features, linear head, preset ``openloris-8192-imbalanced``, K = 10) exactly as
the entry runs them (:func:`bimu.experiments.sweep.run_stream`, the fused engine's compiled query
blocks), records the dissent count of every example, and prints per threshold and seed:

- the labels queried and the final accuracy (the committed run's ``result.json`` gives the same);
- how many examples the stream saw, and after which example each label was asked;
- how the examples' dissent counts are distributed, before and after the last label: the share at
  each vote level, and the share at or above each threshold's level ``ceil(tau K)``.

``--tasks T`` runs the stream over the benchmark's first T tasks only (the same examples in the same
order; only their frames are rendered and their features extracted, which is most of the cost the
first time), ``--examples N`` stops each stream after its first N examples. Needs the objects-seq
stand-in's source images (``BIMU_DATA_DIR``; built offline, features cached).
"""

from __future__ import annotations

import argparse
import math

import numpy as np


def vote_levels(k: int) -> list[float]:
    """The values the variation ratio of ``k`` votes can take: ``0, 1/k, ..., (k - 1)/k`` (at least one
    vote is the mode's, so 1 itself is out of reach).

    >>> vote_levels(5)
    [0.0, 0.2, 0.4, 0.6, 0.8]
    """
    return [i / k for i in range(k)]


def dissent_needed(tau: float, k: int) -> int:
    """Dissenting votes that threshold ``tau`` needs out of ``k`` (the smallest ``n`` with ``n/k >= tau``).

    >>> dissent_needed(0.3, 5), dissent_needed(0.4, 5), dissent_needed(0.3, 10)
    (2, 2, 3)
    """
    return max(0, math.ceil(float(tau) * int(k) - 1e-9))


def summarise(dissent, asked, k: int, thresholds) -> dict:
    """Distribution of per-example dissent counts ``dissent`` (ints in ``[0, k)``), split at the last
    queried example (``asked``: bools, same length). Returns ``labels``, ``label_at`` (1-based example
    numbers of the queries), ``after`` (examples after the last label) and, for ``all`` examples and those
    ``after`` the last label, ``levels`` (share of examples at each dissent count) and ``at_or_above``
    (share whose dissent reaches each threshold's level)."""
    dissent = np.asarray(dissent, dtype=np.int64)
    asked = np.asarray(asked, dtype=bool)
    if dissent.shape != asked.shape:
        raise ValueError(f"dissent and asked differ in length: {dissent.shape} vs {asked.shape}")
    if dissent.size and (dissent.min() < 0 or dissent.max() >= k):
        raise ValueError(f"dissent counts must be in [0, {k}), got {dissent.min()}..{dissent.max()}")
    where = np.flatnonzero(asked)
    last = int(where[-1]) + 1 if where.size else 0

    def dist(d):
        n = max(len(d), 1)
        return {"n": int(len(d)),
                "levels": {i: float((d == i).sum()) / n for i in range(k)},
                "at_or_above": {float(t): float((d >= dissent_needed(t, k)).sum()) / n for t in thresholds}}

    return {"labels": int(where.size), "label_at": [int(i) + 1 for i in where], "after": len(dissent) - last,
            "all": dist(dissent), "after_last": dist(dissent[last:])}


def record_stream(seed: int, tau: float, k: int, tasks: int | None = None,
                  examples: int | None = None) -> tuple[dict, np.ndarray, np.ndarray]:
    """Run the entry's BiMU VR stream (``seed``, threshold ``tau``, K ``k``; its first ``tasks`` tasks, or
    all) and return its result and every decided example's dissent count and query decision, in
    stream order (the first ``examples`` of them, if given)."""
    import bimu.experiments.sweep as sweep
    from bimu.data.benchmarks import get_benchmark
    from bimu.reproduce.active_learning import rule_params
    from bimu.reproduce.al_setups import objects_setup
    from bimu.reproduce.spec import Options

    setup = objects_setup(Options(scale="full"))
    options = {key: v for key, v in setup.options.items() if key != "stream_repeats"}
    bench = get_benchmark(setup.benchmark, **options, **({} if tasks is None else {"tasks": tasks}))
    dissents: list[np.ndarray] = []
    asks: list[np.ndarray] = []
    build = sweep.build_method

    class Stop(Exception):
        pass

    def recording_build(*args, **kwargs):
        model, used = build(*args, **kwargs)
        planes = model.query_planes

        class Recorder:
            def __getattr__(self, name):
                return getattr(planes(), name)

            def block(self, X, Y, keys, need, mode, K):
                done, pred, dissent = planes().block(X, Y, keys, need, mode, K)
                dissents.append(dissent.copy())
                ask = np.zeros(done, dtype=bool)
                ask[-1] = dissent[-1] >= need[done - 1]
                asks.append(ask)
                if examples is not None and sum(len(d) for d in dissents) >= examples:
                    raise Stop
                return done, pred, dissent

        model.query_planes = Recorder
        return model, used

    sweep.build_method = recording_build
    try:
        result = sweep.run_stream(bench, seed=seed, engine="fused",
                                  **rule_params("vr", tau, k=k, preset=setup.preset, hidden=setup.hidden))
    except Stop:
        result = {}
    finally:
        sweep.build_method = build
    d, a = np.concatenate(dissents), np.concatenate(asks)
    if examples is not None:
        d, a = d[:examples], a[:examples]
    return result, d, a


def _pct(x: float) -> str:
    return f"{100 * x:.2f}%"


def main(argv=None) -> int:
    """Print each stream's summary (see the module)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--thresholds", type=float, nargs="+", default=[0.3, 0.4])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--tasks", type=int, default=None)
    ap.add_argument("--examples", type=int, default=None)
    args = ap.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    print(f"K = {args.k}: VR levels {', '.join(f'{v:g}' for v in vote_levels(args.k))}; "
          + "; ".join(f"tau {t:g} needs {dissent_needed(t, args.k)} dissenting votes" for t in args.thresholds))
    for tau in args.thresholds:
        for seed in args.seeds:
            result, d, a = record_stream(seed, tau, args.k, args.tasks, args.examples)
            s = summarise(d, a, args.k, args.thresholds)
            acc = f", final accuracy {_pct(result['accuracy'])}" if "accuracy" in result else ""
            print(f"tau {tau:g} seed {seed}: {len(d)} examples, {s['labels']} labels{acc}; "
                  f"labels at examples {s['label_at'][:10]}{' ...' if s['labels'] > 10 else ''}")
            for part in ("all", "after_last"):
                p = s[part]
                levels = ", ".join(f"{i}: {_pct(v)}" for i, v in p["levels"].items() if v > 0)
                above = ", ".join(f">= {dissent_needed(t, args.k)} ({t:g}): {_pct(v)}" for t, v in p["at_or_above"].items())
                print(f"  {part.replace('_', ' ')} ({p['n']} examples): dissent counts {levels}; at or above {above}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

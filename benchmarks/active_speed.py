"""Examples per second of an active VR stream: the compiled query path against the per-example one.

Workload: a BiMU head ``--features`` -> ``--classes`` (default 8,192 -> 19, the openloris-8192
preset) in the fused engine on one thread, variation-ratio querying with a fixed threshold
(``--threshold``, default 0.1) and K = ``--k`` (default 10) hard samples per decision, batch size 1.
The stream: ``--examples`` examples of a Gaussian class-cluster stream (fixed seed), the same for both
paths, each path starting from the same freshly made method.

- new: :func:`bimu.experiments.stream.learn_task` with an :class:`~bimu.active.ActiveLearner`, which
  decides the examples in compiled blocks (:mod:`bimu.active.blocks`, :mod:`bimu.engine.query`);
- per-example (the path active streams ran before the compiled query path): for each example
  ``method.predict_samples(x, K, query generator)`` (one compiled sampling and forward call of batch
  1), the prediction and the acquisition's decision from the torch probabilities, then
  ``observe_unlabelled`` or ``learn``.

Both are timed in CPU seconds (``time.process_time``) in the same run, after a warm-up that compiles,
``--repeats`` times each, alternating; the table gives the median examples/s of each path, the queried
fraction and the ratio of the medians. Compare the ratio on a loaded machine.

    PYTHONPATH=src python benchmarks/active_speed.py [--examples 1000] [--repeats 3] [--features 8192] [--classes 19]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch


def make_stream(n: int, features: int, classes: int, seed: int = 0):
    """``n`` examples of ``classes`` Gaussian clusters in ``features`` dimensions (float32, int64)."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(classes, features)).astype(np.float32)
    y = rng.integers(0, classes, n)
    x = centres[y] + 2.0 * rng.normal(size=(n, features)).astype(np.float32)
    return torch.from_numpy(x), torch.from_numpy(y.astype(np.int64))


def _method(features, classes, threads=1):
    from bimu.engine import create_fused
    from bimu.methods.bimu import BiMUMethod

    hp = BiMUMethod.resolve_hyperparameters({}, preset="openloris-8192")
    return create_fused("bimu", [features, classes], 0, hp, threads=threads)


def run_new(x, y, features, classes, threshold, k):
    """(CPU seconds, labels asked) of the stream through learn_task's compiled query path."""
    from bimu.active import ActiveLearner, make_acquisition
    from bimu.experiments.stream import learn_task

    method = _method(features, classes)
    learner = ActiveLearner(method, make_acquisition("vr", threshold=threshold, mc_samples=k))
    t0 = time.process_time()
    _, asked = learn_task(method, x, y, learner=learner, task=0)
    return time.process_time() - t0, asked


def run_per_example(x, y, features, classes, threshold, k):
    """(CPU seconds, labels asked) of the per-example path (see the module)."""
    from bimu.active import make_acquisition
    from bimu.active.accounting import Accounting

    method = _method(features, classes)
    acq = make_acquisition("vr", threshold=threshold, mc_samples=k)
    ledger = Accounting()
    gen = torch.Generator().manual_seed(7919 + 0xAC71)
    asked = 0
    t0 = time.process_time()
    for i in range(len(y)):
        xb = x[i:i + 1]
        probs = method.predict_samples(xb, n_samples=k, generator=gen)
        int(torch.log(probs.clamp_min(1e-30)).mean(0).argmax(-1)[0])
        ask = acq.decide(probs, ledger.labels_queried, ledger.examples_seen)[0]
        ledger.record_prediction(ask, forward_passes=k, task=0)
        if ask:
            method.learn(xb, y[i:i + 1])
            ledger.record_update()
            asked += 1
        else:
            method.observe_unlabelled(1)
    return time.process_time() - t0, asked


def main(argv=None) -> int:
    """Run both paths and print the table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--examples", type=int, default=1000, help="stream length (default 1000)")
    ap.add_argument("--features", type=int, default=8192, help="input features (default 8192)")
    ap.add_argument("--classes", type=int, default=19, help="classes (default 19)")
    ap.add_argument("--k", type=int, default=10, help="hard samples per decision (default 10)")
    ap.add_argument("--threshold", type=float, default=0.1, help="VR threshold (default 0.1)")
    ap.add_argument("--repeats", type=int, default=3, help="timed runs of each path (default 3; the median is shown)")
    args = ap.parse_args(argv)
    if args.examples < 1 or args.features < 1 or args.classes < 2 or args.k < 1 or args.repeats < 1:
        raise SystemExit("--examples, --features, --k, --repeats must be >= 1 and --classes >= 2")
    torch.set_num_threads(1)
    x, y = make_stream(args.examples, args.features, args.classes)
    wx, wy = make_stream(16, args.features, args.classes, seed=1)
    run_new(wx, wy, args.features, args.classes, args.threshold, args.k)  # compile (or load the cache)
    run_per_example(wx, wy, args.features, args.classes, args.threshold, args.k)
    new, old = [], []
    for _ in range(args.repeats):
        new.append(run_new(x, y, args.features, args.classes, args.threshold, args.k))
        old.append(run_per_example(x, y, args.features, args.classes, args.threshold, args.k))
    (new_s, new_q), (old_s, old_q) = sorted(new)[len(new) // 2], sorted(old)[len(old) // 2]
    n = args.examples
    print(f"workload: BiMU {args.features} -> {args.classes} (openloris-8192), VR@{args.threshold:g}, "
          f"K={args.k}, {n} examples, 1 thread, CPU seconds, median of {args.repeats}")
    print(f"{'path':<14} {'examples/s':>11} {'queried':>8}")
    print(f"{'new':<14} {n / new_s:>11.0f} {new_q / n:>8.3f}")
    print(f"{'per-example':<14} {n / old_s:>11.0f} {old_q / n:>8.3f}")
    print(f"ratio new / per-example: {old_s / new_s:.1f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Steps per second of the PyTorch BiMU path and of the fused engine on the same MNIST workload.

Network 784-100-10 (LayerNorm without affine, RBG), K = 5 relaxed samples, BiMU with the pmnist-100
preset, batch size 1, real MNIST (``$BIMU_DATA_DIR/mnist``, default ``/work/shared/data``), pixels /255
then standardised. Prints one table: path, threads, steps/s and the ratio to the torch path measured
in the same run, plus the time to evaluate the 10,000 test examples with K = 5 hard samples, the
processor and the machine's load before and after: on a shared machine, compare ratios, not absolute
rates.

Then one row per baseline (``--methods``, default every other method the engine runs): its torch
method and its fused version, each on one thread, with the method's pmnist-100 preset (experience
replay, which has none: its defaults, a buffer of 1000 and one replayed example per step) on its own
784-100-10 network, same data; steps/s and the ratio. A baseline's torch path runs for
``--torch-steps`` steps or ``--torch-seconds``, whichever ends first; its engine row is the best of
``--repeats`` runs of about ``--engine-seconds`` each (at most ``--engine-steps`` steps).

    PYTHONPATH=src python benchmarks/stream_speed.py [--torch-steps 300] [--engine-steps 30000]
        [--methods sgd mesu ...]
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from pathlib import Path

import bimu  # noqa: F401 - before torch: its OpenMP wait policy (bimu.threads) applies, as in `bimu run`
import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import cpu_line, load_line  # noqa: E402


def load_mnist(data_dir: Path):
    """(X_train, y_train, X_test, y_test): float32 images [n, 784] /255 standardised with the
    training statistics, int64 labels (read and checksum-verified by :mod:`bimu.data`)."""
    from bimu.data.mnist import load_dataset

    xtr, ytr = load_dataset("mnist", "train", data_dir)
    xte, yte = load_dataset("mnist", "test", data_dir)
    xtr = xtr.reshape(-1, 784).astype(np.float32) / 255.0
    xte = xte.reshape(-1, 784).astype(np.float32) / 255.0
    mean, std = xtr.mean(), xtr.std()
    return (xtr - mean) / std, ytr.astype(np.int64), (xte - mean) / std, yte.astype(np.int64)


def _threading_layer() -> str:
    try:
        import numba

        return numba.threading_layer()
    except ValueError:
        return "not initialised"


def main(argv=None) -> int:
    """Run the benchmark and print the table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--torch-steps", type=int, default=300, help="steps of each torch measurement (default 300)")
    ap.add_argument("--engine-steps", type=int, default=30000, help="steps of the 1-thread engine row (default 30000)")
    ap.add_argument("--engine-steps-2t", type=int, default=5000, help="steps of the 2-thread row")
    ap.add_argument("--repeats", type=int, default=3, help="best of this many timings per engine row")
    ap.add_argument("--data-dir", default=os.environ.get("BIMU_DATA_DIR", "/work/shared/data"),
                    help="folder holding mnist/ (default $BIMU_DATA_DIR or /work/shared/data)")
    ap.add_argument("--methods", nargs="*", default=None, metavar="METHOD",
                    help="baselines to add a row for (default: all the engine runs besides bimu; "
                         "none given: no baseline rows)")
    ap.add_argument("--torch-seconds", type=float, default=5.0,
                    help="time limit of a baseline's torch measurement (default 5)")
    ap.add_argument("--engine-seconds", type=float, default=2.0,
                    help="about this long per timed engine run of a baseline (default 2)")
    args = ap.parse_args(argv)
    baselines = _baseline_names(args.methods)

    from bimu.engine import create_fused
    from bimu.methods import create_method
    from bimu.methods.bimu import BiMUMethod

    load_before = load_line()
    xtr, ytr, xte, yte = load_mnist(Path(args.data_dir))
    hp = BiMUMethod.resolve_hyperparameters({}, preset="pmnist-100")
    sizes = [784, 100, 10]
    rows = []

    # ---- torch path, one thread
    torch.set_num_threads(1)
    tm = create_method("bimu", sizes, seed=0, preset="pmnist-100")
    xt, yt = torch.from_numpy(xtr), torch.from_numpy(ytr)
    for i in range(20):
        tm.learn(xt[i:i + 1], yt[i:i + 1])
    t0 = time.perf_counter()
    for i in range(args.torch_steps):
        tm.learn(xt[i:i + 1], yt[i:i + 1])
    torch_rate = args.torch_steps / (time.perf_counter() - t0)
    rows.append(("torch (autograd)", 1, torch_rate))

    # ---- fused engine, 1 and 2 threads (compile is cached; warm up first). The 2-thread row splits
    # each step's first-layer rows over two threads (a barrier per step: on a loaded machine the
    # second thread's wake-ups dominate, so it gets fewer steps)
    n = min(args.engine_steps, len(xtr))
    for threads in (1, 2):
        m = create_fused("bimu", sizes, 0, hp, threads=threads)
        m.learn_many(xtr[:200], ytr[:200])
        nt = n if threads == 1 else min(n, args.engine_steps_2t)
        best = 0.0
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            m.learn_many(xtr[:nt], ytr[:nt])
            best = max(best, nt / (time.perf_counter() - t0))
        rows.append(("fused engine", threads, best))
        if threads == 1:
            m1 = m

    # ---- two independent runs (seeds 0 and 1), one per core: the kernels release the GIL
    pair = [create_fused("bimu", sizes, seed, hp, threads=1) for seed in (0, 1)]
    for mm in pair:
        mm.learn_many(xtr[:200], ytr[:200])
    best = 0.0
    for _ in range(args.repeats):
        workers = [threading.Thread(target=mm.learn_many, args=(xtr[:n], ytr[:n])) for mm in pair]
        t0 = time.perf_counter()
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        best = max(best, 2 * n / (time.perf_counter() - t0))
    rows.append(("2 seeds, 1 each", 2, best))

    # ---- evaluation of the 10,000 test examples with K = 5 hard samples
    eval_rows = []
    for threads in (1, 2):
        m1.threads = threads
        m1.predict(xte[:64], n_samples=5)
        best = float("inf")
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            pred = m1.predict(xte, n_samples=5)
            best = min(best, time.perf_counter() - t0)
        acc = float((pred.numpy() == yte).mean())
        eval_rows.append((threads, best, acc))

    print(f"workload: MNIST 784-100-10 RBG, K=5, BiMU pmnist-100, batch 1, {n} engine steps (best of "
          f"{args.repeats}), {args.torch_steps} torch steps")
    print(f"machine: {cpu_line()}")
    print(f"before: {load_before}")
    print(f"after:  {load_line()}")
    print(f"{'path':<18} {'threads':>7} {'steps/s':>10} {'vs torch':>9}   (numba threading layer: "
          f"{_threading_layer()})")
    for name, threads, rate in rows:
        print(f"{name:<18} {threads:>7} {rate:>10.0f} {rate / torch_rate:>8.1f}x")
    print(f"{'evaluation':<18} {'threads':>7} {'seconds':>10} {'accuracy':>9}  (10,000 test examples, K=5 hard)")
    for threads, secs, acc in eval_rows:
        print(f"{'fused engine':<18} {threads:>7} {secs:>10.3f} {acc:>9.4f}")
    if baselines:
        print(f"{'method':<24} {'torch steps/s':>13} {'engine steps/s':>14} {'vs torch':>9}   (1 thread each, "
              "pmnist-100 presets; replay: its defaults)")
        for name in baselines:
            t_rate, e_rate = _baseline_rates(name, xtr, ytr, args)
            print(f"{name:<24} {t_rate:>13.1f} {e_rate:>14.0f} {e_rate / t_rate:>8.1f}x")
        print(f"after baselines: {load_line()}")
    return 0


def _baseline_names(asked):
    """The baselines to measure: ``asked`` (checked against the engine's methods) or all but bimu."""
    from bimu.engine import FUSED_METHODS

    known = [m for m in FUSED_METHODS if m != "bimu"]
    if asked is None:
        return known
    unknown = sorted(set(asked) - set(known))
    if unknown:
        raise SystemExit(f"--methods: unknown {unknown}; choose from {known}")
    return list(asked)


def _baseline_rates(name, xtr, ytr, args):
    """(torch steps/s, engine steps/s) of baseline ``name`` on one thread, batch size 1."""
    from bimu.engine import create_fused
    from bimu.methods import create_method

    torch.set_num_threads(1)
    sizes = [784, 100, 10]
    from bimu.methods import get_method

    # every baseline's pmnist-100 preset; replay has none: its defaults (the SGD baseline's pmnist-100 lr)
    preset = "pmnist-100" if "pmnist-100" in get_method(name).presets else None
    tm = create_method(name, sizes, seed=0, preset=preset)
    xt, yt = torch.from_numpy(xtr), torch.from_numpy(ytr)
    for i in range(3):
        tm.learn(xt[i:i + 1], yt[i:i + 1])
    done, t0 = 0, time.perf_counter()
    while done < args.torch_steps and (done < 10 or time.perf_counter() - t0 < args.torch_seconds):
        tm.learn(xt[done:done + 1], yt[done:done + 1])
        done += 1
    torch_rate = done / (time.perf_counter() - t0)

    m = create_fused(name, sizes, 0, dict(tm.hparams), threads=1)
    m.learn_many(xtr[:50], ytr[:50])  # compiles (or loads the cache)
    t0 = time.perf_counter()
    m.learn_many(xtr[:200], ytr[:200])
    n = int(min(args.engine_steps, len(xtr), max(200, 200 / (time.perf_counter() - t0) * args.engine_seconds)))
    best = 0.0
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        m.learn_many(xtr[:n], ytr[:n])
        best = max(best, n / (time.perf_counter() - t0))
    return torch_rate, best


if __name__ == "__main__":
    raise SystemExit(main())

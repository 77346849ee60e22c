"""Steps per second of the PyTorch BiMU path and of the fused engine on the same MNIST workload.

Network 784-100-10 (LayerNorm without affine, RBG), K = 5 relaxed samples, BiMU with the pmnist-100
preset, batch size 1, real MNIST (``$BIMU_DATA_DIR/mnist``, default ``/work/shared/data``), pixels /255
then standardised. Prints one table: path, threads, steps/s and the ratio to the torch path measured
in the same run, plus the time to evaluate the 10,000 test examples with K = 5 hard samples.

    PYTHONPATH=src python benchmarks/stream_speed.py [--torch-steps 500] [--engine-steps 20000]
"""

from __future__ import annotations

import argparse
import gzip
import os
import time
from pathlib import Path

import numpy as np
import torch


def _read_idx(path: Path, offset: int) -> np.ndarray:
    with gzip.open(path, "rb") as f:
        return np.frombuffer(f.read(), dtype=np.uint8, offset=offset)


def load_mnist(data_dir: Path):
    """(X_train, y_train, X_test, y_test): float32 standardised images [n, 784], int64 labels."""
    d = data_dir / "mnist"
    xtr = _read_idx(d / "train-images-idx3-ubyte.gz", 16).reshape(-1, 784).astype(np.float32) / 255.0
    ytr = _read_idx(d / "train-labels-idx1-ubyte.gz", 8).astype(np.int64)
    xte = _read_idx(d / "t10k-images-idx3-ubyte.gz", 16).reshape(-1, 784).astype(np.float32) / 255.0
    yte = _read_idx(d / "t10k-labels-idx1-ubyte.gz", 8).astype(np.int64)
    xtr = (xtr - xtr.mean()) / xtr.std()
    xte = (xte - xte.mean()) / xte.std()
    return xtr, ytr, xte, yte


def main(argv=None) -> int:
    """Run the benchmark and print the table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--torch-steps", type=int, default=500)
    ap.add_argument("--engine-steps", type=int, default=20000)
    ap.add_argument("--repeats", type=int, default=3, help="best of this many timings per engine row")
    ap.add_argument("--data-dir", default=os.environ.get("BIMU_DATA_DIR", "/work/shared/data"))
    args = ap.parse_args(argv)

    from bimu.engine import create_fused
    from bimu.methods import create_method
    from bimu.methods.bimu import BiMUMethod

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

    # ---- fused engine, 1 and 2 threads (compile is cached; warm up first)
    n = min(args.engine_steps, len(xtr))
    for threads in (1, 2):
        m = create_fused("bimu", sizes, 0, hp, threads=threads)
        m.learn_many(xtr[:200], ytr[:200])
        best = 0.0
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            m.learn_many(xtr[:n], ytr[:n])
            best = max(best, n / (time.perf_counter() - t0))
        rows.append(("fused engine", threads, best))
        if threads == 1:
            m1 = m

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

    print(f"workload: MNIST 784-100-10 RBG, K=5, BiMU pmnist-100, batch 1; load average {os.getloadavg()}")
    print(f"{'path':<18} {'threads':>7} {'steps/s':>10} {'vs torch':>9}")
    for name, threads, rate in rows:
        print(f"{name:<18} {threads:>7} {rate:>10.0f} {rate / torch_rate:>8.1f}x")
    print(f"{'evaluation':<18} {'threads':>7} {'seconds':>10} {'accuracy':>9}  (10,000 test examples, K=5 hard)")
    for threads, secs, acc in eval_rows:
        print(f"{'fused engine':<18} {threads:>7} {secs:>10.3f} {acc:>9.4f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

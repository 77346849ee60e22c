"""Hard-sample evaluation speed, one thread: the paper's dense float32 evaluation vs bimu's before and after
the lane kernel, and the grouped first layer (``eval_sum="grouped"``), in one run.

Workload: the 10,000 MNIST test images (pixels / 255, standardised with the test set's own mean and
standard deviation, as the paper's code does), the Permuted-MNIST network 784-100-10 (LayerNorm without
affine, RBG), K = 5 hard weight samples, logits ``[K, 10000, 10]`` including drawing the K weight sets.

- (a) paper: a reimplementation of what the authors' code does at test time (PyTorch, float32,
  ``torch.set_num_threads(1)``): per sample, hard weights ``w = +1 if u < sigmoid(2 lambda) else -1``, then
  per layer a dense matrix product ``h @ w.T``, LayerNorm, and the gate ``1[|h| > 1]``. ``(a')`` is the
  same with the K first-layer matrices stacked into one product (a faster dense variant, for reference).
- (b) before: :func:`bimu.engine.hard_eval.hard_forward_reference` (one example at a time, the previous
  kernel) after :func:`bimu.engine.sampling.sample_weights`.
- (c) after: :func:`bimu.engine.hard_eval.hard_forward` (examples in the vector lanes), same draw;
  the run checks that (b) and (c) give the same bits.
- (d) grouped: :func:`bimu.engine.grouped_eval.grouped_forward` (the first layer summed by groups of four
  inputs from tables of their 16 signed sums, the evaluation of ``eval_sum="grouped"``), same draw; it
  rounds differently from (c), so the run prints the largest absolute difference of its logits from (c)'s
  and the fraction of predictions (argmax of the mean log-softmax over the samples) that agree.

Each row is the median of ``--repeats`` interleaved rounds after one warm-up call of each (numba one
thread, torch one thread). CPU seconds of the process (``time.process_time``) give the ratios, as they are
less disturbed by other work on a shared machine than wall time, which is shown beside them. The script
sets ``OMP_WAIT_POLICY=passive`` (unless set): with the default policy an OpenMP pool that has just run a
parallel region (numba's or torch's) keeps spinning for a while, on the same cores and in the same
process, which adds CPU time to whatever is measured next (about 10-25 ms per call here).

Usage: PYTHONPATH=src BIMU_DATA_DIR=/work/shared/data python benchmarks/eval_speed.py [--repeats 9]
"""

from __future__ import annotations

import argparse
import gzip
import os
import platform
import statistics
import time
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "passive")  # before numba and torch load their OpenMP runtimes

import numba  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from bimu.engine import create_fused  # noqa: E402
from bimu.engine.grouped_eval import grouped_forward  # noqa: E402
from bimu.engine.hard_eval import hard_forward, hard_forward_reference  # noqa: E402
from bimu.engine.scores import scores_from_logits  # noqa: E402
from bimu.engine.hparams import BinaryHP  # noqa: E402
from bimu.engine.sampling import sample_weights  # noqa: E402
from bimu.methods.bimu import BiMUMethod  # noqa: E402


def mnist_test(data: Path, n: int) -> np.ndarray:
    """The first ``n`` MNIST test images, pixels / 255 standardised with their own mean and std (float32)."""
    with gzip.open(data / "mnist" / "t10k-images-idx3-ubyte.gz") as f:
        x = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 784)[:n].astype(np.float64) / 255
    return ((x - x.mean()) / x.std()).astype(np.float32)


def paper_eval(lams: list[torch.Tensor], x: torch.Tensor, K: int, gate: float = 1.0, stacked: bool = False):
    """The paper's test-time forward, dense float32: K hard weight sets, then per sample matrix products,
    LayerNorm (no affine) and the RBG between the layers. ``stacked``: the first layer of all K samples as
    one product. Logits ``[K, B, C]``."""
    probs = [torch.sigmoid(2 * lam) for lam in lams]
    ws = [[torch.where(torch.rand(p.shape) < p, 1.0, -1.0) for p in probs] for _ in range(K)]
    first = (x @ torch.cat([w[0] for w in ws]).T).split(lams[0].shape[0], dim=1) if stacked else None
    outs = []
    for k in range(K):
        h = x
        for i, w in enumerate(ws[k]):
            h = F.layer_norm(first[k] if (stacked and i == 0) else h @ w.T, (w.shape[0],), eps=1e-5)
            if i < len(ws[k]) - 1:
                h = (h.abs() > gate).float()
        outs.append(h)
    return torch.stack(outs)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--samples", type=int, default=5)
    ap.add_argument("--n", type=int, default=10000, help="test images")
    ap.add_argument("--data", type=Path, default=Path(os.environ.get("BIMU_DATA_DIR", "/work/shared/data")))
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    numba.set_num_threads(1)
    K = args.samples
    X = mnist_test(args.data, args.n)
    B = X.shape[0]
    m = create_fused("bimu", [784, 100, 10], 0, BiMUMethod.resolve_hyperparameters({}, preset="pmnist-100"))
    Xp = np.zeros(((B + 3) // 4 * 4, 784), np.float32)  # the engine's callers pad to a multiple of 4
    Xp[:B] = X
    W = np.empty(K * m.n_params, np.float32)
    outs = {name: np.empty((K, B, 10), np.float32) for name in ("before", "after", "grouped")}

    def engine(fn, name):
        def run():
            sample_weights(m.lam, W, m._sizes, m._poff, K, m.eval_key, np.uint64(0), True,
                           m._hp[BinaryHP.INV_TEMPERATURE])
            fn(Xp, B, W, m._sizes, m._poff, m._cfg, m._hp, K, 1, numba.config.NUMBA_NUM_THREADS, outs[name])
        return run

    lams = [torch.from_numpy(a.copy()) for a in m.layer_lambdas()]
    xt = torch.from_numpy(X)
    calls = {
        "(a) paper: torch float32 matmuls": lambda: paper_eval(lams, xt, K),
        "(a') paper, K first layers in one matmul": lambda: paper_eval(lams, xt, K, stacked=True),
        "(b) bimu before (hard_forward_reference)": engine(hard_forward_reference, "before"),
        "(c) bimu after (hard_forward, lanes)": engine(hard_forward, "after"),
        "(d) bimu grouped (grouped_forward, eval_sum=grouped)": engine(grouped_forward, "grouped"),
    }
    cpu = {name: [] for name in calls}
    wall = {name: [] for name in calls}
    with torch.no_grad():
        for call in calls.values():  # warm-up (and numba compilation)
            call()
        for _ in range(args.repeats):
            for name, call in calls.items():
                c0, w0 = time.process_time(), time.perf_counter()
                call()
                cpu[name].append(time.process_time() - c0)
                wall[name].append(time.perf_counter() - w0)
    same = np.array_equal(outs["before"].view(np.uint32), outs["after"].view(np.uint32))
    med = {name: statistics.median(v) for name, v in cpu.items()}
    a, b, c, d = (med[n] for n in calls if n[:3] in ("(a)", "(b)", "(c)", "(d)"))
    diff = float(np.abs(outs["grouped"].astype(np.float64) - outs["after"]).max())
    agree = float(np.mean(scores_from_logits(outs["grouped"])[2] == scores_from_logits(outs["after"])[2]))
    cpu_name = platform.processor() or platform.machine()
    try:
        cpu_name = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    print(f"# {cpu_name}, torch {torch.__version__} (1 thread), numba {numba.__version__} (1 thread), "
          f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY')}; {B} MNIST test images x {K} hard samples, "
          f"784-100-10; median of {args.repeats} interleaved rounds")
    print("| evaluation | median CPU ms | median wall ms |")
    print("|---|---|---|")
    for name in calls:
        print(f"| {name} | {1e3 * med[name]:.1f} | {1e3 * statistics.median(wall[name]):.1f} |")
    print(f"after vs paper (a): {a / c:.2f}x faster; after vs paper (a'): {med[list(calls)[1]] / c:.2f}x; "
          f"after vs before: {b / c:.2f}x faster; before and after bit-identical: {same}")
    print(f"grouped (d) vs paper (a): {a / d:.2f}x faster; vs (a'): {med[list(calls)[1]] / d:.2f}x; vs after (c): "
          f"{c / d:.2f}x faster; max |logit (d) - logit (c)| = {diff:.3g}; predictions agreeing: {100 * agree:.2f}%")


if __name__ == "__main__":
    main()

"""Bit-packed vs float Monte-Carlo inference throughput (examples/s), one core, ratios in one run.

Networks: the OpenLORIS-8192 head (8192 -> 19) and the Permuted-MNIST MLP (784-100-10), K = 10 hard
samples. Two regimes:

- streaming (the active-learning regime, the paper's C_inference): every example draws its own
  K fresh weight samples (batch of one);
- batched evaluation: K samples shared by a batch of 256 examples (sampling amortised).

Float paths (torch, float32, one thread): ``model`` is bimu.nn.BinaryBayesianMLP's hard-sample
forward; ``tuned`` caches sigmoid(2 lambda) and does rand < p, matmul, LayerNorm, RBG by hand.
Packed: bimu.edge.PackedNetwork (uint32 thresholds, bit-sliced sampling, popcount; numba, one thread).
Timings are medians of interleaved repeats; only ratios measured in this run are meaningful.

Usage: PYTHONPATH=src python benchmarks/inference_speed.py [--repeats 5] [--stream-examples 20]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time

import numpy as np
import torch
import torch.nn.functional as F

from bimu.edge.packed import pack
from bimu.nn import BinaryBayesianMLP

K = 10


def tuned_float(model: BinaryBayesianMLP):
    probs = [torch.sigmoid(2 * layer.lam.detach()) for layer in model.layers]

    def forward(x, n_samples, gen):
        outs = []
        for _ in range(n_samples):
            h = x
            for i, p in enumerate(probs):
                w = torch.where(torch.rand(p.shape, generator=gen) < p, 1.0, -1.0)
                h = h @ w.T
                if i < len(probs) - 1:
                    h = (F.layer_norm(h, (h.shape[-1],), eps=1e-5).abs() > model.gate_width).float()
            outs.append(h)
        return torch.stack(outs)

    return forward


def bench(sizes, repeats, stream_examples, batch):
    torch.manual_seed(0)
    model = BinaryBayesianMLP(sizes)
    packed = pack(model, input_max=4.0)
    x = packed.dequantize(np.clip(np.random.default_rng(0).standard_normal((batch, sizes[0])), -3.9, 3.9))
    xs = x[:stream_examples]
    gen = torch.Generator().manual_seed(0)
    tuned = tuned_float(model)
    packed.logits_int(xs[:1], 1, per_example=True)

    def t(fn):
        s = time.perf_counter()
        fn()
        return time.perf_counter() - s

    def stream_model():
        with torch.no_grad():
            for i in range(stream_examples):
                model(xs[i:i + 1], n_samples=K, mode="hard", generator=gen)

    def stream_tuned():
        with torch.no_grad():
            for i in range(stream_examples):
                tuned(xs[i:i + 1], K, gen)

    fns = {
        ("stream", "packed"): (lambda: packed.logits_int(xs, K, per_example=True), stream_examples),
        ("stream", "float model"): (stream_model, stream_examples),
        ("stream", "float tuned"): (stream_tuned, stream_examples),
        ("batch", "packed"): (lambda: packed.logits_int(x, K), batch),
        ("batch", "float model"): (lambda: model(x, n_samples=K, mode="hard", generator=gen), batch),
        ("batch", "float tuned"): (lambda: tuned(x, K, gen), batch),
    }
    times = {key: [] for key in fns}
    with torch.no_grad():
        for fn, _ in fns.values():
            fn()
        for _ in range(repeats):
            for key, (fn, _) in fns.items():
                times[key].append(t(fn))
    return {key: n / statistics.median(times[key]) for key, (_, n) in fns.items()}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--stream-examples", type=int, default=20)
    ap.add_argument("--batch", type=int, default=256)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    print(f"# {platform.processor() or platform.machine()}, torch {torch.__version__}, 1 thread, K = {K}")
    print("| network | regime | packed ex/s | float model ex/s | float tuned ex/s | packed / model | packed / tuned |")
    print("|---|---|---|---|---|---|---|")
    for sizes in ([8192, 19], [784, 100, 10]):
        r = bench(sizes, args.repeats, args.stream_examples, args.batch)
        for regime in ("stream", "batch"):
            p, m, tu = r[(regime, "packed")], r[(regime, "float model")], r[(regime, "float tuned")]
            name = "streaming (fresh K per example)" if regime == "stream" else f"batch {args.batch}, shared K"
            print(f"| {'-'.join(map(str, sizes))} | {name} | {p:,.0f} | {m:,.0f} | {tu:,.0f} | "
                  f"{p / m:.1f}x | {p / tu:.1f}x |")


if __name__ == "__main__":
    main()

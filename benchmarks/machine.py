"""How fast this machine is at dense float32 work, measured in the benchmark's own run.

The issue's absolute targets (steps/s) were set on a machine whose single-core float32 matmul peak
was 110-125 GFLOP/s (../shared/notes/performance.md). Printing this machine's peak beside the engine's
rate lets a reader compare rates across machines: steps/s per GFLOP/s of matmul peak.

    python benchmarks/machine.py
"""

from __future__ import annotations

import time

import torch

NOTES_PEAK_GFLOPS = (110.0, 125.0)
"""Single-core float32 matmul peak of the machine the performance notes were measured on."""


def matmul_peak_gflops(threads: int = 1, n: int = 1536, repeats: int = 5) -> float:
    """Best float32 GFLOP/s of an ``n x n`` matmul (torch, ``threads`` threads) over ``repeats`` runs."""
    old = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        a = torch.randn(n, n)
        b = torch.randn(n, n)
        a @ b
        best = 0.0
        for _ in range(repeats):
            t0 = time.perf_counter()
            a @ b
            best = max(best, 2 * n**3 / (time.perf_counter() - t0) / 1e9)
        return best
    finally:
        torch.set_num_threads(old)


def main() -> int:
    """Print the peak for 1 and 2 threads."""
    for threads in (1, 2):
        print(f"float32 matmul peak, {threads} thread(s): {matmul_peak_gflops(threads):.0f} GFLOP/s")
    print(f"(performance notes' machine, 1 thread: {NOTES_PEAK_GFLOPS[0]:.0f}-{NOTES_PEAK_GFLOPS[1]:.0f} GFLOP/s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

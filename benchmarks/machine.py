"""How fast this machine is at dense float32 work, measured in the benchmark's own run.

The issue's absolute targets (steps/s) were set on a machine whose single-core float32 matmul peak
was 110-125 GFLOP/s (../shared/notes/performance.md). Printing this machine's peak beside the engine's
rate lets a reader compare rates across machines: steps/s per GFLOP/s of matmul peak.

    python benchmarks/machine.py
"""

from __future__ import annotations

import os
import platform
import time
from pathlib import Path

NOTES_PEAK_GFLOPS = (110.0, 125.0)
"""Single-core float32 matmul peak of the machine the performance notes were measured on."""


def matmul_peak_gflops(threads: int = 1, n: int = 1536, repeats: int = 5) -> float:
    """Best float32 GFLOP/s of an ``n x n`` matmul (torch, ``threads`` threads) over ``repeats`` runs."""
    import torch  # here: importing this module leaves the OpenMP runtime unloaded (bimu.threads)

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


def cpu_line() -> str:
    """This machine in one line: the processor's model name and the number of cores this process may use.

    >>> "cores" in cpu_line()
    True
    """
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{model}, {len(os.sched_getaffinity(0))} cores"


def load_line() -> str:
    """The machine's load in one line: the 1, 5 and 15 minute load averages and the tasks runnable now
    (``/proc/loadavg``, the reading process included), against the number of cores; on a shared machine,
    quote ratios measured in one run, with this line.

    >>> load_line().startswith("load ")
    True
    """
    try:
        one, five, fifteen, runnable = Path("/proc/loadavg").read_text().split()[:4]
        return f"load {one} {five} {fifteen}, runnable now {runnable.split('/')[0]}, {os.cpu_count()} cores"
    except (OSError, ValueError):
        return f"load {' '.join(f'{v:.2f}' for v in os.getloadavg())}, {os.cpu_count()} cores"


def main() -> int:
    """Print the peak for 1 and 2 threads."""
    for threads in (1, 2):
        print(f"float32 matmul peak, {threads} thread(s): {matmul_peak_gflops(threads):.0f} GFLOP/s")
    print(f"machine: {cpu_line()}; {load_line()}")
    print(f"(performance notes' machine, 1 thread: {NOTES_PEAK_GFLOPS[0]:.0f}-{NOTES_PEAK_GFLOPS[1]:.0f} GFLOP/s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

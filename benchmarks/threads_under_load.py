"""The fused engine on one thread and on two, with the cores free and with a competing load.

Workload: BiMU with the pmnist-100 preset, 784-100-10, K = 5, batch size 1, real MNIST (as
``stream_speed.py``). Each round is one fresh process per setting (``--settings``: a numba threading
layer and OpenMP wait policy, fixed per process; see :data:`SETTINGS`), and in it, interleaved: one
thread, two threads, then the same with a competing load started (one busy process per core, ``while
True: pass``) and stopped again; every other round measures two threads first. Rates are wall-clock steps/s of ``--steps`` steps (under a
load the engine gets what the scheduler gives it, which is what a user waits for). Prints, per layer
and condition, the median steps/s over the rounds and the median (and range) of the ratio of two
threads to one measured side by side in each round, and the machine's load before and after: on a
shared machine, "free" means no load started by the benchmark, not an idle machine.

    BIMU_DATA_DIR=../shared/data python benchmarks/threads_under_load.py [--steps 3000] [--rounds 3]
        [--settings passive "passive no fallback" active "active no fallback"]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import cpu_line, load_line  # noqa: E402

TAG = "threads_under_load:"
"""Prefix of the line on which a measuring process reports its rates."""

SETTINGS = {"passive": ({}, True),
            "passive no fallback": ({}, False),
            "active": ({"OMP_WAIT_POLICY": "active"}, True),
            "active no fallback": ({"OMP_WAIT_POLICY": "active"}, False),
            "workqueue": ({"NUMBA_THREADING_LAYER": "workqueue"}, True),
            "tbb": ({"NUMBA_THREADING_LAYER": "tbb"}, True)}
"""What a round can run under: ``(environment, fallback)``. ``passive``: what bimu does (numba's OpenMP
layer, its waiting threads asleep, and a call on one thread while the machine is busy: :mod:`bimu.threads`);
``active``: OpenMP's waiting threads spinning, as when torch is imported before bimu; ``... no
fallback``: the same with the fall back to one thread disabled (a counterfactual, for comparison);
``workqueue`` / ``tbb``: numba's other threading layers (tbb where installed)."""


def start_load(n: int) -> list[subprocess.Popen]:
    """``n`` busy processes, one per core, spinning until :func:`stop_load`."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    time.sleep(0.5)  # let them start spinning
    return procs


def stop_load(procs: list[subprocess.Popen]) -> None:
    """End the processes of :func:`start_load` (only those)."""
    for p in procs:
        p.terminate()
    for p in procs:
        p.wait()


def measure(steps: int, data_dir: str, busy: int, two_first: bool = False, fallback: bool = True) -> dict[str, float]:
    """One round in this process: steps/s (wall) of one and two threads (``two_first``: in the other
    order), free then under ``busy`` busy processes; keys ``"free 1"``, ``"free 2"``, ``"load 1"``,
    ``"load 2"``. ``fallback=False`` disables the engine's fall back to one thread on a busy machine."""
    import bimu.engine.base
    from bimu.engine import create_fused

    if not fallback:
        bimu.engine.base.busy = lambda threads, cores=None: False
    from bimu.methods.bimu import BiMUMethod
    from stream_speed import load_mnist

    xtr, ytr, _, _ = load_mnist(Path(data_dir))
    hp = BiMUMethod.resolve_hyperparameters({}, preset="pmnist-100")
    x, y = xtr[:steps], ytr[:steps]
    methods = {t: create_fused("bimu", [784, 100, 10], 0, hp, threads=t) for t in ((2, 1) if two_first else (1, 2))}
    for m in methods.values():
        m.learn_many(x[:200], y[:200])  # compiles or loads the kernels; starts the thread pool
    rates = {}
    for cond in ("free", "load"):
        load = start_load(busy) if cond == "load" else []
        try:
            for t, m in methods.items():
                t0 = time.perf_counter()
                m.learn_many(x, y)
                rates[f"{cond} {t}"] = steps / (time.perf_counter() - t0)
        finally:
            stop_load(load)
    return rates


def main(argv=None) -> int:
    """Run the rounds and print the table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=3000, help="steps per measurement (default 3000)")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    ap.add_argument("--settings", nargs="+", default=["passive", "passive no fallback", "active", "active no fallback"],
                    choices=list(SETTINGS), help="settings to measure, each in its own processes")
    ap.add_argument("--data-dir", default=os.environ.get("BIMU_DATA_DIR", "/work/shared/data"),
                    help="folder holding mnist/ (default $BIMU_DATA_DIR or /work/shared/data)")
    ap.add_argument("--measure", choices=("1-2", "2-1"), help=argparse.SUPPRESS)
    ap.add_argument("--no-fallback", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    busy = os.cpu_count() or 1
    if args.measure:
        rates = measure(args.steps, args.data_dir, busy, args.measure == "2-1", not args.no_fallback)
        print(TAG, json.dumps(rates), flush=True)
        return 0

    load_before = load_line()
    rounds: dict[str, list[dict[str, float]]] = {name: [] for name in args.settings}
    for i in range(args.rounds):
        for name in args.settings:
            env, fallback = SETTINGS[name]
            env = {**{k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "NUMBA_THREADING_LAYER")},
                   **env}
            r = subprocess.run([sys.executable, __file__, "--measure", "2-1" if i % 2 else "1-2", "--steps",
                                str(args.steps), "--data-dir", args.data_dir, *([] if fallback else ["--no-fallback"])],
                               env=env, capture_output=True, text=True, check=False)
            line = next((s for s in r.stdout.splitlines() if s.startswith(TAG)), None)
            if r.returncode != 0 or line is None:
                raise SystemExit(f"setting {name}: the measuring process failed ({r.returncode}):\n{r.stderr}")
            rounds[name].append(json.loads(line[len(TAG):]))

    print(f"BiMU pmnist-100, 784-100-10, K=5, batch 1, MNIST; {args.steps} steps per measurement, "
          f"{args.rounds} interleaved rounds (wall clock, medians); load: {busy} busy processes")
    print(f"machine: {cpu_line()}")
    print(f"before: {load_before}")
    print(f"after:  {load_line()}")
    print(f"{'setting':<18} {'free 1t':>8} {'free 2t':>8} {'2t/1t (range)':>19} {'load 1t':>8} "
          f"{'load 2t':>8} {'2t/1t (range)':>19}")
    for name, rs in rounds.items():
        cells = []
        for cond in ("free", "load"):
            ratios = [r[f"{cond} 2"] / r[f"{cond} 1"] for r in rs]
            cells.append(f"{statistics.median(r[f'{cond} 1'] for r in rs):>8.0f} "
                         f"{statistics.median(r[f'{cond} 2'] for r in rs):>8.0f} "
                         f"{statistics.median(ratios):>5.2f}x ({min(ratios):.2f}-{max(ratios):.2f})")
        print(f"{name:<18} {cells[0]:>37} {cells[1]:>37}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

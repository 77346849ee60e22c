"""How long `bimu run` takes to its first training step: with a fresh kernel cache, warm, and after `bimu warmup`.

In one run, each case a fresh process running bimu's command line (``bimu.cli.main``, what the ``bimu``
script runs) with ``NUMBA_CACHE_DIR`` and ``BIMU_KERNEL_DIR`` in a temporary folder, so nothing
compiled before counts:

- cold: the first ``bimu run pmnist`` of an installation (empty caches);
- warm: the same command again (the caches the cold run filled);
- warmup: ``bimu warmup`` on another empty cache, then the same run.

Each run is one task of ``--examples`` training and test examples (``--method``, default BiMU with
the pmnist-100 preset: 784-100-10, K = 5; the fused engine, one thread). Times are seconds from the process's start:
``ready`` when the first training call begins (Python, imports, data, the method built), ``first
step`` when the first training step is done (a probe splits the first compiled call into its first
step and the rest: ``learn_many`` is defined as equal to one ``learn`` per row, so the results do not
change), ``whole run`` when the process exits (training, evaluation, the run directory written).
Each is given as wall time and as the process's CPU time (its threads and child processes
included): on a busy machine the wall time stretches with the load while the CPU time stays near
what an idle machine's wall time would be. Prints the times, the cold / warm ratios, whether the
cold run announced its compiling, and whether the warm first step meets the 5 s target.

    BIMU_DATA_DIR=../shared/data python benchmarks/cold_start.py [--examples 200] [--method bimu]
        [--warmup-methods bimu]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import cpu_line, load_line  # noqa: E402

WARM_TARGET_S = 5.0
"""The first training step of a warm installation should come within this many seconds."""

FIRST_RUN_TARGET_S = 10.0
"""The first run after an installation should reach its first step within this many seconds, or say why not."""

CHILD_TAG = "cold_start times:"
"""Prefix of the line on standard error where a probed run reports its moments."""


def run_command(method: str, examples: int) -> list[str]:
    """The ``bimu run`` arguments of every case (but ``--out``)."""
    return ["run", "pmnist", "--method", method, "--tasks", "1", "--train-limit", str(examples), "--test-limit",
            str(examples), "--no-ood", "--no-progress", "--threads", "1"]


def probed_run(argv: list[str]) -> int:
    """Run ``bimu`` with ``argv`` in this process, then report on standard error (one line after
    :data:`CHILD_TAG`, JSON of ``[time.monotonic(), time.process_time()]`` readings) when the first
    training call began and when its first step was done."""
    from bimu.engine.base import FusedMethod

    moments: dict[str, float] = {}
    learn_many = FusedMethod.learn_many

    def probe(self, X, Y):
        if "first_step" in moments or len(Y) == 0:
            return learn_many(self, X, Y)
        moments["ready"] = [time.monotonic(), time.process_time()]
        learn_many(self, X[:1], Y[:1])
        moments["first_step"] = [time.monotonic(), time.process_time()]
        return learn_many(self, X[1:], Y[1:])

    FusedMethod.learn_many = probe
    from bimu.cli import main

    code = main(argv)
    print(CHILD_TAG, json.dumps(moments), file=sys.stderr, flush=True)
    return code


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(args: list[str], env: dict[str, str]) -> tuple[dict[str, tuple[float, float]], str]:
    """Run ``python ARGS`` with ``env``; ``({moment: (wall seconds from the start, CPU seconds)}, standard
    error)`` for each reported moment and for the exit (``"end"``). Raises on a failed command."""
    t0, cpu0 = time.monotonic(), _children_cpu()
    r = subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True, check=False)
    times = {"end": (time.monotonic() - t0, _children_cpu() - cpu0)}
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
    for line in r.stderr.splitlines():
        if line.startswith(CHILD_TAG):
            times.update({k: (wall - t0, cpu) for k, (wall, cpu) in json.loads(line[len(CHILD_TAG):]).items()})
            if "first_step" not in times:
                raise SystemExit(f"{' '.join(args)}: no training step on the fused engine")
    return times, r.stderr


def cache_env(folder: Path) -> dict[str, str]:
    """The environment of a process whose compiled kernels live under ``folder`` only."""
    env = dict(os.environ)
    env["NUMBA_CACHE_DIR"] = str(folder / "numba")
    env["BIMU_KERNEL_DIR"] = str(folder / "kernels")
    return env


def main(argv=None) -> int:
    """Time the three cases and print the table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--examples", type=int, default=200, help="training (and test) examples of the run's one task")
    ap.add_argument("--method", default="bimu", help="the method run (default bimu)")
    ap.add_argument("--warmup-methods", nargs="+", default=None, metavar="NAME",
                    help="`bimu warmup --methods` (default: every method, as `bimu warmup` does)")
    ap.add_argument("--probed-run", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.probed_run is not None:
        return probed_run(args.probed_run)

    me = str(Path(__file__).resolve())
    command = run_command(args.method, args.examples)
    warmup = ["-m", "bimu", "warmup"] + (["--methods", *args.warmup_methods] if args.warmup_methods else [])
    load_before = load_line()
    with tempfile.TemporaryDirectory(prefix="bimu-cold-start-") as tmp:
        tmp = Path(tmp)
        first = cache_env(tmp / "cache-a")
        run = [me, "--probed-run", *command]
        cold, cold_err = timed([*run, "--out", str(tmp / "out-cold")], first)
        warm, _ = timed([*run, "--out", str(tmp / "out-warm")], first)
        after = cache_env(tmp / "cache-b")
        compiled, _ = timed(warmup, after)
        ready, _ = timed([*run, "--out", str(tmp / "out-after")], after)

    print(f"bimu {' '.join(command)} (784-100-10, the preset of pmnist-100, fused engine); a fresh process per "
          "case, the kernel caches empty at first")
    print(f"machine: {cpu_line()}")
    print(f"before: {load_before}")
    print(f"after:  {load_line()}")
    print(f"{'seconds (wall / CPU)':<26} {'ready':>13} {'first step':>13} {'whole run':>13}")
    for name, t in (("cold cache (first run)", cold), ("warm cache", warm), ("after bimu warmup", ready)):
        print(f"{name:<26} " + " ".join(f"{t[k][0]:>6.2f} {t[k][1]:>6.2f}" for k in ("ready", "first_step", "end")))
    what = " ".join(args.warmup_methods) if args.warmup_methods else "every method"
    print(f"{f'bimu warmup ({what})':<26} {'':>13} {'':>13} {compiled['end'][0]:>6.2f} {compiled['end'][1]:>6.2f}")
    print(f"cold / warm (wall): first step {cold['first_step'][0] / warm['first_step'][0]:.1f}x, "
          f"whole run {cold['end'][0] / warm['end'][0]:.1f}x")
    announced = any(line.startswith("bimu: compiling") for line in cold_err.splitlines())
    print(f"first run: first step {_verdict(cold['first_step'], FIRST_RUN_TARGET_S)}; compiling announced: "
          f"{'yes' if announced else 'no'}")
    print(f"warm: first step {_verdict(warm['first_step'], WARM_TARGET_S)}")
    return 0


def _verdict(t: tuple[float, float], target: float) -> str:
    """``t`` (wall, CPU seconds) against ``target`` seconds, in words."""
    wall, cpu = t
    return (f"{wall:.2f} s wall, {cpu:.2f} s CPU: {'within' if wall <= target else 'over'} the {target:.0f} s "
            f"target (CPU time {'within' if cpu <= target else 'over'})")


if __name__ == "__main__":
    raise SystemExit(main())

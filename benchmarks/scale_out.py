"""Speedup of a reproduction on a Dask cluster of two workers over one worker, measured in one run.

Starts a ``distributed.LocalCluster`` of worker processes (one thread each, one run per worker at a
time) with one worker, runs ``bimu reproduce ENTRY --scheduler ADDRESS`` into a fresh output folder,
then the same with two workers into another, and prints the wall time of each and their ratio, with
the machine's load (``os.getloadavg``) before and after: on a shared machine compare the ratio, not the
times. The two tables are checked to be identical (the cluster does not change the numbers).

    PYTHONPATH=src BIMU_DATA_DIR=/work/shared/data python benchmarks/scale_out.py [--entry memory-window]
        [--scale quick] [--seeds 2] [--rows bimu-N100 bimu-N700] [--smoke]

``--smoke``: one seed of two rows (four short runs in all), to check that the script works.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path


def reproduce_on(n_workers: int, entry: str, opts: dict, out: Path) -> tuple[float, bytes]:
    """``(wall seconds, the table's CSV)`` of ``entry`` on a fresh LocalCluster of ``n_workers`` workers."""
    import dask
    from distributed import LocalCluster

    from bimu.reproduce.entries import reproduce
    from bimu.reproduce.spec import Options

    with dask.config.set({"distributed.scheduler.worker-saturation": 1.0}), \
            LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        t0 = time.perf_counter()
        reproduce(entry, Options(**opts, out=str(out), scheduler=cluster.scheduler_address),
                  log=lambda s: print(f"  {s}", flush=True))
        seconds = time.perf_counter() - t0
    return seconds, (out / f"{entry}.csv").read_bytes()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--entry", default="memory-window", help="run table to reproduce (default memory-window)")
    p.add_argument("--scale", choices=("quick", "full"), default="quick", help="reproduction scale (default quick)")
    p.add_argument("--seeds", type=int, default=2, help="seeds per row (default 2)")
    p.add_argument("--rows", nargs="+", default=None, metavar="SLUG", help="only these rows (default all)")
    p.add_argument("--smoke", action="store_true", help="one seed of two rows: check that the script works")
    args = p.parse_args(argv)
    seeds, rows = args.seeds, args.rows
    if args.smoke:
        seeds, rows = 1, rows or ["bimu-N100", "bimu-N700"]
    opts = {"seeds": tuple(range(seeds)), "scale": args.scale, "rows": None if rows is None else tuple(rows)}
    load0 = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="bimu-scale-out-") as tmp:
        t1, table1 = reproduce_on(1, args.entry, opts, Path(tmp) / "one")
        t2, table2 = reproduce_on(2, args.entry, opts, Path(tmp) / "two")
    load1 = os.getloadavg()[0]
    print(f"{args.entry} --scale {args.scale}, {seeds} seed{'s' if seeds != 1 else ''}"
          f"{'' if rows is None else ', rows ' + ' '.join(rows)}; load {load0:.1f} -> {load1:.1f} "
          f"on {os.cpu_count()} cores")
    print(f"1 worker : {t1:8.2f} s")
    print(f"2 workers: {t2:8.2f} s")
    print(f"speedup  : {t1 / t2:8.2f}x")
    if table1 != table2:
        print("the two tables differ", file=sys.stderr)
        return 1
    print("tables identical")
    return 0


if __name__ == "__main__":
    sys.exit(main())

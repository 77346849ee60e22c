"""``bimu demo``: BiMU on a few permuted-MNIST tasks (subsets), in minutes on a laptop CPU.

It resolves the data directory, fetches MNIST and Fashion-MNIST there if they are missing (offline
routes included), trains BiMU online on ``tasks`` permutations of ``train_limit`` examples each,
prints the accuracy on each task right after training and after the whole stream (plasticity: every
new task is still learned), and writes a figure. Its run directory and figure go to ``out``, by default
:func:`default_out` (in the user cache, not the working directory); the first line printed names the folder.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path


def ensure_data(data_dir=None, log=print) -> bool:
    """Make MNIST present (fetching it if needed); returns whether Fashion-MNIST (OOD) is available too."""
    from bimu.data.fetch import FetchError, fetch_dataset
    from bimu.data.mnist import missing_files

    if missing_files("mnist", data_dir):
        log("MNIST not found in the data directory; fetching it ...")
        fetch_dataset("mnist", data_dir, log=log)
    if missing_files("fashion-mnist", data_dir):
        log("Fashion-MNIST (OOD set) not found; fetching it ...")
        try:
            fetch_dataset("fashion-mnist", data_dir, log=log)
        except FetchError as e:
            log(f"Fashion-MNIST unavailable, the demo runs without OOD detection:\n{e}")
            return False
    return True


def default_out() -> Path:
    """Where the demo writes by default: ``bimu/demo`` in the per-user cache (beside the data cache of
    :func:`bimu.data.paths.user_cache_dir`)."""
    from bimu.data.paths import user_cache_dir

    return user_cache_dir().parent / "demo"


def run_demo(out: str | None = None, tasks: int = 4, train_limit: int = 10000, test_limit: int = 2000,
             data_dir=None, engine: str = "auto", progress=None, seed: int = 0) -> int:
    """Run the demo into ``out`` (default :func:`default_out`); returns the exit code."""
    from bimu.experiments.config import RunConfig
    from bimu.experiments.runner import run_experiment
    from bimu.report import plot_accuracy_per_task
    from bimu.report.tables import group_runs, load_run

    def log(s):
        print(s, file=sys.stderr, flush=True)

    out = Path(out).expanduser().resolve() if out is not None else default_out()
    print(f"bimu demo: writing the run and its figure into {out} (--out to change it)", flush=True)
    has_ood = ensure_data(data_dir, log)
    config = RunConfig.from_dict(dict(benchmark="pmnist", method="bimu", tasks=tasks, seeds=[seed], hidden=[100],
                                      train_limit=train_limit, test_limit=test_limit, eval_final="all",
                                      ood=has_ood, out=str(out), data_dir=data_dir, engine=engine)).validate()
    print(f"BiMU demo: {tasks} permuted-MNIST tasks x {train_limit} examples, batch size 1, one pass per task, "
          f"784-100-10 binary Bayesian MLP, paper preset pmnist-100")
    t0 = time.perf_counter()
    results, code = run_experiment(config, progress=progress, log=log)
    if code != 0 or seed not in results:
        return code or 1
    res = results[seed]
    R, summary = res["R"], res["summary"]
    print()
    print("| task | acc right after training (%) | acc after all tasks (%) |")
    print("|---:|---:|---:|")
    for t in range(tasks):
        print(f"| {t + 1} | {100 * R[t, t]:.2f} | {100 * R[-1, t]:.2f} |")
    diag = [100 * R[t, t] for t in range(tasks)]
    print(f"\nplasticity: first task learned to {diag[0]:.2f}%, last task to {diag[-1]:.2f}% "
          f"(mean over tasks {sum(diag) / tasks:.2f}%); BWT {100 * summary['bwt']:.2f} points; "
          f"{summary['steps_per_s']:.0f} steps/s ({summary['engine']} engine)")
    if summary.get("ood_auc"):
        print("OOD ROC-AUC vs Fashion-MNIST after the last task: "
              + ", ".join(f"{k} {v:.3f}" for k, v in summary["ood_auc"].items()))
    fig = Path(out) / "demo.png"
    plot_accuracy_per_task(group_runs([load_run(res["run_dir"])]), fig, title="BiMU on permuted MNIST (demo)")
    print(f"figure: {fig}\nrun directory: {res['run_dir']}  ({time.perf_counter() - t0:.0f} s)")
    return 0

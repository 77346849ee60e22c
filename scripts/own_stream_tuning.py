"""Tuning BiMU on a stream of your own, measured: ``python scripts/own_stream_tuning.py`` prints the
before/after table of docs/own-data.md ("Choosing BiMU's settings for a new stream").

Two streams, each written as a ``.npz`` for ``bimu run`` / ``bimu tune``:

- ``digits5.npz``: scikit-learn's 8 x 8 digits (1,797 images), split once into 1,437 training and 360
  test images (seed 0); five tasks, each every training image rotated by 0, 45, 90, 135 and 180
  degrees (in its own seeded order) and tested on the test images rotated alike; the 64 pixels
  standardised with the training rows' mean and standard deviation. Network 64-32-10.
- ``phishing.npz``: river's Phishing data set (1,250 web pages, 9 features in [0, 1], 2 classes), one
  task, 1,000 training and 250 test rows drawn at random (seed 0), features as river gives them.
  Network 9-32-2 (``--linear``: the linear head 9-2).

For each stream, the commands (printed as they run, through :func:`bimu.cli.main`):

1. before: ``bimu run FILE --hidden H --seeds S...`` (the paper preset of ``bimu run FILE.npz``);
2. ``bimu tune FILE --method bimu --hidden H --seeds S... --trials N --start-from-preset --sampler-seed 0``
   (on the validation split: 20% of each task's training rows held out; Phishing also
   ``--set output_norm=false``, see docs/own-data.md);
3. after: ``bimu run FILE --config OUT/tune-FILE/best_config.json --seeds S...``.

The table gives the mean test accuracy over the tasks after the last one (``final_mean_acc``),
mean ± standard deviation over the seeds. One thread; a few minutes on one core with the defaults.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
import time
from pathlib import Path

import numpy as np

ANGLES = (0, 45, 90, 135, 180)
"""Rotation of each digits task, in degrees."""


def digits_stream(path, seed: int = 0) -> str:
    """Write the five-task rotated-digits stream to ``path`` (see the module docs); returns the path."""
    from scipy.ndimage import rotate
    from sklearn.datasets import load_digits

    digits = load_digits()
    images, labels = digits.images.astype(np.float32), digits.target.astype(np.int64)
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(labels))
    train, test = order[: int(0.8 * len(labels))], order[int(0.8 * len(labels)):]

    def rotated(index, angle):
        return np.stack([rotate(im, angle, reshape=False, order=1, mode="constant")
                         for im in images[index]]).reshape(len(index), 64)

    xs, ys, xt, yt = [], [], [], []
    for angle in ANGLES:
        shuffled = rng.permutation(train)
        xs.append(rotated(shuffled, angle))
        ys.append(labels[shuffled])
        xt.append(rotated(test, angle))
        yt.append(labels[test])
    x_train, x_test = np.concatenate(xs), np.concatenate(xt)
    mean, std = x_train.mean(0), x_train.std(0)
    std[std == 0] = 1.0
    np.savez(path, x_train=((x_train - mean) / std).astype(np.float32), y_train=np.concatenate(ys),
             task_train=np.repeat(np.arange(len(ANGLES)), len(train)),
             x_test=((x_test - mean) / std).astype(np.float32), y_test=np.concatenate(yt),
             task_test=np.repeat(np.arange(len(ANGLES)), len(test)))
    return str(path)


def phishing_stream(path, seed: int = 0, n_train: int = 1000) -> str:
    """Write river's Phishing data set as one task to ``path`` (see the module docs); returns the path."""
    from river import datasets

    rows = list(datasets.Phishing())
    keys = list(rows[0][0])
    x = np.array([[float(features[k]) for k in keys] for features, _ in rows], np.float32)
    y = np.array([int(bool(label)) for _, label in rows], np.int64)
    order = np.random.default_rng(seed).permutation(len(y))
    train, test = order[:n_train], order[n_train:]
    np.savez(path, x_train=x[train], y_train=y[train], x_test=x[test], y_test=y[test])
    return str(path)


def bimu(argv: list[str], log) -> None:
    """Run ``bimu ARGV`` in this process (its output to ``log``); SystemExit when it fails."""
    from bimu.cli import main

    print("$ bimu " + " ".join(argv), flush=True)
    with contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
        code = main(argv)
    if code != 0:
        sys.exit(f"bimu {' '.join(argv)} failed ({code}); see {log.name}")


def test_accuracy(run_root: Path, seeds) -> tuple[float, float]:
    """Mean and sample standard deviation over ``seeds`` of the final mean test accuracy of the runs under
    ``run_root``."""
    values = [json.loads((run_root / "npz-bimu" / f"seed-{s}" / "summary.json").read_text())["final_mean_acc"]
              for s in seeds]
    return float(np.mean(values)), float(np.std(values, ddof=1)) if len(values) > 1 else 0.0


def measure(name: str, path: str, hidden: list[int], fixed: list[str], out: Path, seeds, trials: int, log) -> dict:
    """Before, tuning and after for one stream; returns the numbers and the tuned values."""
    widths = ["--hidden", *map(str, hidden)]
    sets = [a for kv in fixed for a in ("--set", kv)]
    seed_args = ["--seeds", *map(str, seeds)]
    stem = Path(path).stem
    bimu(["run", path, *widths, *seed_args, "--out", str(out / f"before-{stem}"), "--no-progress"], log)
    before_fixed = None
    if fixed:
        bimu(["run", path, *widths, *sets, *seed_args, "--out", str(out / f"fixed-{stem}"), "--no-progress"], log)
        before_fixed = test_accuracy(out / f"fixed-{stem}", seeds)
    tune_dir = out / f"tune-{stem}"
    start = time.perf_counter()
    bimu(["tune", path, "--method", "bimu", *widths, *sets, *seed_args, "--trials", str(trials),
          "--start-from-preset", "--sampler-seed", "0", "--out", str(tune_dir), "--quiet"], log)
    seconds = time.perf_counter() - start
    bimu(["run", path, "--config", str(tune_dir / "best_config.json"), *seed_args, "--out", str(out / f"after-{stem}"),
          "--no-progress"], log)
    best = json.loads((tune_dir / "best_trial.json").read_text())
    with np.load(path) as z:
        sizes = [z["x_train"].shape[1], *hidden, int(max(z["y_train"].max(), z["y_test"].max())) + 1]
    return {"stream": name, "network": "-".join(map(str, sizes)),
            "before": test_accuracy(out / f"before-{stem}", seeds), "before_fixed": before_fixed,
            "after": test_accuracy(out / f"after-{stem}", seeds), "trial": best["trial"],
            "validation_H": best["value"], "overrides": best["config"]["overrides"], "tune_seconds": seconds}


def main(argv=None) -> int:
    """Build the streams, tune them and print the table."""
    import torch

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default="runs/own-stream-tuning", help="output folder (streams, runs, studies)")
    p.add_argument("--trials", type=int, default=16, help="trials per study (default 16)")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="seeds of every run and trial")
    p.add_argument("--linear", action="store_true", help="Phishing with the linear head 9-2 instead of 9-32-2")
    p.add_argument("--only", choices=("digits", "phishing"), default=None, help="one stream only")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    streams = []
    if args.only in (None, "digits"):
        streams.append(("rotated digits (5 tasks)", digits_stream(out / "digits5.npz"), [32], []))
    if args.only in (None, "phishing"):
        streams.append(("river Phishing (1 task)", phishing_stream(out / "phishing.npz"),
                        [] if args.linear else [32], ["output_norm=false"]))
    rows = []
    with open(out / "bimu.log", "w") as log:
        for name, path, hidden, fixed in streams:
            rows.append(measure(name, path, hidden, fixed, out, args.seeds, args.trials, log))
    pct = (lambda v: "-" if v is None else f"{100 * v[0]:.1f} ± {100 * v[1]:.1f}")
    print(f"\nfinal mean test accuracy (%), seeds {args.seeds}, {args.trials} trials per study\n")
    print("| stream | network | preset | preset + --set | tuned | best trial (validation H) | tuning s |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['stream']} | {r['network']} | {pct(r['before'])} | {pct(r['before_fixed'])} | {pct(r['after'])} | "
              f"{r['trial']} ({r['validation_H']:.3f}) | {r['tune_seconds']:.0f} |")
    for r in rows:
        tuned = {k: round(v, 4) if isinstance(v, float) else v for k, v in r["overrides"].items()}
        print(f"{r['stream']}: tuned {json.dumps(tuned)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""How a run's plasticity and memory evolve along its stream: the numbers the gap notes quote.

    python scripts/plasticity_profile.py SEED_DIR [SEED_DIR ...] [--bounds 1,10,50,100,...] [--paper-mmrr X]
                                         [--final-bounds 900,1000]

For each seed directory (a finished run: ``metrics.jsonl`` and its accuracy matrix) it prints
- the accuracy on each task right after training on it, averaged over the task ranges that
  ``--bounds`` closes (default 1, 10, 50, 100, 200, 400, 600, 800, 1000: tasks 1, 2-10, 11-50, ...);
- the last five tasks' accuracy after the whole stream and their mean (the last-5 column);
- the best accuracy of the matrix and the last task's final accuracy, the two ends of MMRR
  (1 / (best - last)), in points;
- backward transfer as the difference of its two means over tasks 1 to T-1 (those evaluated after
  the stream, as bimu.metrics.bwt pairs them): after the stream, and right after training.

``--final-bounds`` adds the accuracy after the whole stream (the final row of the matrix) averaged over
the task ranges it closes (``900,1000``: tasks 1-900 and 901-1000; every task of a range must have
been evaluated after the stream) and how many of the most recent tasks end the stream above 50%.
``--paper-mmrr X`` adds how far below the best accuracy the paper's MMRR X puts the last task
(100 / X points). Tasks are numbered from 1, as in the paper.
"""

import sys

import numpy as np

DEFAULT_BOUNDS = (1, 10, 50, 100, 200, 400, 600, 800, 1000)


def _ranges(values, bounds) -> list[tuple[int, int, float]]:
    """``(first, last, mean)`` of ``values`` over the 1-based task ranges that ``bounds`` closes."""
    out, start = [], 0
    for end in [b for b in bounds if b <= len(values)]:
        if end > start:
            out.append((start + 1, end, float(np.mean(values[start:end]))))
            start = end
    return out


def profile(seed_dir: str, bounds=DEFAULT_BOUNDS, final_bounds=()) -> dict:
    """The numbers of one finished run (fractions, not percent)."""
    from bimu.metrics import bwt_terms
    from bimu.rundir import RunDir

    run = RunDir(seed_dir)
    if not run.exists("metrics.jsonl"):
        raise SystemExit(f"{seed_dir}: no metrics.jsonl (not a run directory)")
    R = run.read_matrix()
    T = R.shape[0]
    if np.isnan(R[-1, -5:]).any():
        raise SystemExit(f"{seed_dir}: the last row of its accuracy matrix is incomplete (an unfinished run?)")
    just = np.diagonal(R)
    ranges = _ranges(just, bounds)
    final_ranges = _ranges(R[-1], final_bounds)
    if any(np.isnan(m) for _, _, m in final_ranges):
        raise SystemExit(f"{seed_dir}: --final-bounds: a range has tasks not evaluated after the stream")
    recent = 0
    while recent < T and R[-1, T - 1 - recent] > 0.5:
        recent += 1
    # BWT's pairs: tasks 1 to T-1 evaluated both right after training and after the stream (a run
    # with --eval-final last evaluates only the last few after the stream)
    final_mean, just_mean, pairs = bwt_terms(R)
    return {"tasks": T, "ranges": ranges, "last5": [float(v) for v in R[-1, -5:]],
            "best": float(np.nanmax(R)), "last": float(R[-1, -1]), "pairs": pairs,
            "final_mean": final_mean, "just_mean": just_mean, "final_ranges": final_ranges,
            "recent_above_half": recent}


def describe(seed_dir: str, p: dict, paper_mmrr: float | None = None) -> list[str]:
    """The printed lines for one run's :func:`profile`."""
    pct = lambda v: f"{100 * v:.2f}"  # noqa: E731
    def spans(rs):
        return ", ".join(f"{a}: {pct(m)}" if a == b else f"{a}-{b}: {pct(m)}" for a, b, m in rs)

    ranges = spans(p["ranges"])
    gap = 100 * (p["best"] - p["last"])
    which = f"tasks 1-{p['tasks'] - 1}"
    if p["pairs"] < p["tasks"] - 1:
        which = f"the {p['pairs']} of {which} evaluated"
    lines = [f"{seed_dir} ({p['tasks']} tasks)",
             f"  right after training, tasks {ranges}",
             f"  after the stream, the last five tasks: {' / '.join(pct(v) for v in p['last5'])} "
             f"(mean {pct(float(np.mean(p['last5'])))})",
             *([f"  after the stream, tasks {spans(p['final_ranges'])}; the {p['recent_above_half']} most recent "
                f"tasks above 50%"] if p.get("final_ranges") else []),
             f"  best accuracy of the matrix {pct(p['best'])}, the last task's {pct(p['last'])}: "
             f"{gap:.1f} points below",
             f"  BWT {p['final_mean'] - p['just_mean']:.4f} = {pct(p['final_mean'])} ({which} after the stream) - "
             f"{pct(p['just_mean'])} (right after training)"]
    if paper_mmrr:
        lines.append(f"  the paper's MMRR {paper_mmrr:g} puts its last task {100 / paper_mmrr:.1f} points below its best")
    return lines


def main(argv: list[str]) -> int:
    args, bounds, paper_mmrr, final_bounds = list(argv), DEFAULT_BOUNDS, None, ()
    for flag in ("--bounds", "--final-bounds", "--paper-mmrr"):
        if flag in args:
            i = args.index(flag)
            if i + 1 >= len(args):
                sys.exit(f"{flag}: needs a value")
            value = args[i + 1]
            del args[i:i + 2]
            try:
                if flag in ("--bounds", "--final-bounds"):
                    given = tuple(int(b) for b in value.split(","))
                    if list(given) != sorted(set(given)) or given[0] < 1:
                        raise ValueError
                    bounds, final_bounds = (given, final_bounds) if flag == "--bounds" else (bounds, given)
                else:
                    paper_mmrr = float(value)
                    if not paper_mmrr > 0:
                        raise ValueError
            except ValueError:
                sys.exit(f"{flag}: {value!r} is not " + ("increasing task numbers from 1, comma-separated"
                                                         if flag != "--paper-mmrr" else "a positive number"))
    if not args or any(a.startswith("-") for a in args):
        sys.exit(__doc__)
    for seed_dir in args:
        print("\n".join(describe(seed_dir, profile(seed_dir, bounds, final_bounds), paper_mmrr)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

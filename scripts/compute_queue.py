"""Run the full-scale reproductions as resumable queues on one core each, cheapest runs first.

    python scripts/compute_queue.py OUT [--queue pmnist|active|mesu|pmnist-b|after-pmnist|pmnist-al] [--dry-run]

``pmnist`` (the default): Table 1 and the memory-window rows on the 1000-task stream. ``active``: the
active-learning entries on the stand-ins (animals-ti, objects-seq). ``mesu``: Table 1's MESU seed 0
(the longest single run, on a core of its own). ``after-pmnist``: what the mesu queue's core takes up
when that queue is done (MESU's seed 1), then ``pmnist-b`` (probes of Table 1's BayesBiNN and Syn. Meta.
gaps, trained by the pmnist queue's code). ``pmnist-al``: the active-learning entries of the real-data venue,
imbalanced Permuted MNIST (the method comparison, then the controller and K tables that decide claims 4
and 6, then the other scores of each method's figure). A run (row and seed) belongs to one queue
only: two queues with different OUT folders would each train it. Run each from its own frozen worktree
and OUT, one core each.

Each item is ``bimu reproduce NAME --scale full --seeds N [--first-seed F] [--rows ROW ...] --jobs 1
--out OUT``, or a probe (a run that tests a cause of a gap: ``bimu run ARGS --out
OUT/runs/probes/NAME``). A finished run is reused as it is and an unfinished one resumes after its
last completed task, so stopping this script (or losing the machine) and starting it again continues
where it stopped. One queue at a time works in an OUT: the script holds ``OUT/.queue.lock`` and hands
it to each item's process, so a second start is refused while the first, or an item it started,
still runs (a stopped script's item would otherwise go on beside the new script's next one).
``bash scripts/queues.sh start`` starts the queues, each from a frozen worktree (so that every run of
a table trains with the same code) and an OUT seeded with the runs kept in
``results/reproduce-full/runs``; ``bash scripts/queues.sh keep`` copies what they finished, and the
checkpoints of what they have not, back into the repository.
"""

import fcntl
import os
import subprocess
import sys
import time

PMNIST_1000 = ["pmnist", "--tasks", "1000", "--seeds", "0", "--hidden", "100", "--eval-last-every", "1",
               "--eval-final", "all"]
"""A probe's ``bimu run`` arguments for Table 1's protocol (its rows' configuration), seed 0."""
PMNIST = [
    # (reproduction, row, seeds); one seed of the 1000-task stream is 6e7 steps
    ("pmnist-1000", "sgd", 3),  # ~0.4 h a seed
    ("pmnist-1000", "ewc-online", 3),  # ~0.7 h
    ("pmnist-1000", "si", 3),  # ~0.8 h
    ("pmnist-1000", "ste", 2),  # ~2.7 h
    ("pmnist-1000", "bimu", 2),  # ~3 h
    ("pmnist-1000", "bayesbinn", 2),  # ~2.9 h
    ("pmnist-1000", "synaptic-metaplasticity", 2),  # ~3.9 h a seed
    # the memory-window rows whose runs are not in the repository (~18 min a seed)
    *[("memory-window", f"bimu-N{n}", 2) for n in (100, 400, 1000, 1300, 1600, 1900, 100000)],
    ("memory-window", "bayesbinn-exact-ratio", 2),
    ("memory-window", "bayesbinn-away", 2),
    # Table 1's BiMU row in the paper code's file order (every task unshuffled), seed 0: the untried test of
    # the row's BWT gap (~6.7 h)
    ("probe", "bimu-unshuffled-1000", [*PMNIST_1000, "--method", "bimu", "--option", "unshuffled_order=true"]),
    # MESU's seeds (~21 h each on this machine, one sequential stream) run in the mesu and after-pmnist
    # queues
]


def _rows(data: str, keep):
    """The slugs of the method comparison's rows on ``data`` that ``keep(row)`` selects, read when the
    item starts."""
    def slugs() -> list[str]:
        from bimu.reproduce import al_methods
        from bimu.reproduce.spec import Options

        return [r.slug for r in al_methods.rows_for(Options(scale="full"), data) if keep(r)]
    return slugs


def _compared(row) -> bool:
    """Each method's baseline, comparison rule and random querying (not the other scores of its figure)."""
    from bimu.reproduce import al_methods

    return al_methods.in_comparison(row)


def _bimu(row) -> bool:
    """BiMU's rows (every score: the paper's main BiMU figures)."""
    return row.params["method"] == "bimu"


ACTIVE = [
    # (reproduction, rows (None: all; a callable: its slugs), seeds): the method comparison on Animals,
    # then objects-seq's BiMU tables, cheapest first, with the comparison on objects-seq (claim 3)
    # before the tables that decide no claim, then BiMU's other scores there, then the other scores of
    # each method's own figure (Animals, then objects-seq)
    ("animals-al", _rows("animals", _compared), 3),
    ("animals-budget-controller", None, 3),
    ("animals-vr-samples", None, 3),
    ("openloris-al", ["bimu-all", *[f"bimu-vr-{t:g}" for t in (0.1, 0.2, 0.3, 0.4, 0.5, 0.6)],
                      *[f"bimu-random-{p:g}" for p in (0.01, 0.02, 0.05, 0.1, 0.2, 0.4)]], 3),
    ("query-dynamics", None, 3),  # 3 runs
    ("budget-controller", None, 3),
    ("vr-samples", None, 3),
    ("openloris-al", _rows("openloris", _compared), 3),
    ("standardisation", None, 3),
    ("openloris", None, 3),  # bwt's rows are its all-features runs and pmnist-1000's (no runs of their own)
    ("openloris-al", _rows("openloris", _bimu), 3),
    ("animals-al", None, 3),
    ("openloris-al", None, 3),
]
PMNIST_B = [
    # what the mesu queue's core takes up after MESU's seed 1 (after-pmnist), trained by the pmnist queue's
    # frozen code: Table 1's BayesBiNN row with the paper code's prior sign (bimu's compatibility switch), seed
    # 0: does it explain the row's 1000-task gap? (~5.5 h)
    ("probe", "bayesbinn-away-1000", [*PMNIST_1000, "--method", "bayesbinn", "--set", "prior_direction=away"]),
    # Table 1's Syn. Meta. row with the paper's runs' batch norm (bimu's compatibility switch), seed 0:
    # does it bring the row's last-5 to the paper's chance level over 1000 tasks? (~2.5 h)
    ("probe", "synmeta-equinox-1000", [*PMNIST_1000, "--method", "synaptic-metaplasticity",
                                       "--set", "bn_statistics=equinox"]),
]
MESU = [
    # Table 1's MESU row (issue: at least one seed, a second if compute allows): one 6e7-step stream
    # (~21 h) a seed, the longest single run, so seed 0 has a core of its own from the start
    ("pmnist-1000", "mesu", 1),
]
AFTER_PMNIST = [
    # what the mesu queue's core takes up when that queue is done (trained by the active queue's code):
    # MESU's second seed, before the pmnist-b probes (Table 1 needs it)
    ("pmnist-1000", "mesu", 1, 1),
]
def _k_rows(keep):
    """The slugs of the Permuted-MNIST K table's rows whose K ``keep(K)`` selects (the baseline: K = 10)."""
    def slugs() -> list[str]:
        from bimu.reproduce import active_learning as al
        from bimu.reproduce.spec import Options

        return [r.slug for r in al.rows_vr_samples(Options(scale="full"), "pmnist") if keep(r.params["mc_samples"])]
    return slugs


def _claim3() -> list[str]:
    """The slugs of the rows that claim 3 reads on the real-data venue (``al_claims.reads``) besides BiMU's
    VR: the other methods' comparison rules (MESU's and BayesBiNN's VR, STE's aleatoric rule)."""
    from bimu.reproduce import al_claims, al_methods
    from bimu.reproduce.spec import Options

    rows = al_methods.rows_for(Options(scale="full"), "pmnist")
    return [r.slug for r in al_claims.reads(rows, 3) if r.params["method"] != "bimu"]


PMNIST_AL = [
    # the real-data venue (docs/active-learning.md), 3 seeds a row, 400,730 stream examples a run
    # (python scripts/al_methods_cost.py --venue pmnist --estimate prices them), the rows that decide a
    # claim first, cheapest first: the K table's K = 2 and 3 (claim 6, with K = 10 and the baseline shared
    # from pmnist-al), the budget controller (claim 4), the other methods' rules (claim 3), then the rest of
    # the comparison (each method's baseline and random querying), K = 5, the other scores of each method's
    # figure and K = 25, which decide no claim
    ("pmnist-vr-samples", _k_rows(lambda k: k in (2, 3, 10)), 3),
    ("pmnist-budget-controller", None, 3),
    ("pmnist-al", _claim3, 3),
    ("pmnist-al", _rows("pmnist", _compared), 3),
    ("pmnist-vr-samples", _k_rows(lambda k: k < 25), 3),
    ("pmnist-al", None, 3),
    ("pmnist-vr-samples", None, 3),
]
QUEUES = {"pmnist": PMNIST, "active": ACTIVE, "mesu": MESU, "pmnist-b": PMNIST_B, "after-pmnist": AFTER_PMNIST,
          "pmnist-al": PMNIST_AL}
QUEUE = PMNIST


def row_names(rows) -> list[str]:
    """An item's rows as a list of names (``[]``: every row of the reproduction); a callable is called."""
    rows = rows() if callable(rows) else rows
    return [] if rows is None else [rows] if isinstance(rows, str) else list(rows)


def command(out: str, name: str, rows, seeds=1, first: int = 0) -> list[str]:
    """The command of an item: ``bimu reproduce`` for ``(name, rows, seeds[, first seed])``; ``bimu run``
    for a probe ``("probe", NAME, [ARGS ...])``, into ``OUT/runs/probes/NAME`` (kept like every run)."""
    if name == "probe":
        return [sys.executable, "-m", "bimu", "run", *seeds, "--threads", "1", "--no-progress",
                "--out", os.path.join(out, "runs", "probes", rows)]
    rows = row_names(rows)
    return [sys.executable, "-m", "bimu", "reproduce", name, "--scale", "full", "--seeds", str(seeds),
            *(["--first-seed", str(first)] if first else []), *(["--rows", *rows] if rows else []),
            "--jobs", "1", "--threads", "1", "--out", out]


def hold_queue_lock(out: str) -> int:
    """An exclusive ``flock`` on ``OUT/.queue.lock``, held until this process and every process that
    inherits the returned descriptor have ended; exits with one line if another queue holds it."""
    os.makedirs(out, exist_ok=True)
    fd = os.open(os.path.join(out, ".queue.lock"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        sys.exit(f"{out}: another queue, or a run it started, is still working here (it holds "
                 f"{os.path.join(out, '.queue.lock')}); stop it first")
    return fd


def main(argv: list[str]) -> int:
    args = [a for a in argv if a != "--dry-run"]
    queue = "pmnist"
    if "--queue" in args:
        i = args.index("--queue")
        queue = args[i + 1] if i + 1 < len(args) else ""
        del args[i:i + 2]
        if queue not in QUEUES:
            sys.exit(f"--queue: unknown queue {queue!r}; choose from {', '.join(QUEUES)}")
    if len(args) != 1:
        sys.exit(__doc__)
    out = args[0]
    dry = "--dry-run" in argv
    lock = None if dry else hold_queue_lock(out)
    for name, row, *seeds in QUEUES[queue]:
        cmd = command(out, name, row, *seeds)
        print(time.strftime("%Y-%m-%d %H:%M:%S"), " ".join(cmd[1:]), flush=True)
        if dry:
            continue
        code = subprocess.call(cmd, pass_fds=(lock,))
        if code:
            print(f"exit {code}: {name} {row} (its error.txt says why); going on", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

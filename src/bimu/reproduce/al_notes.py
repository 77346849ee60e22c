"""The notes of the active-learning tables: which rows wait for runs, which runs diverged or stopped
querying at the start, what the runs cost, and the seeds shown (rows: ``active_learning.ALRow``)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

TIMING = "timing.json"
"""A run directory's wall time of its stream (``seconds``, with ``threads``), written beside ``result.json``."""


def seeds_cell(res: Sequence[dict]) -> str:
    """The seeds of a row's runs, a diverged one marked (its numbers are left out of the means).

    >>> seeds_cell([{"seed": 0}, {"seed": 1, "diverged": "..."}]), seeds_cell([])
    ('0,1 (diverged)', '-')
    """
    return ",".join(f"{r['seed']}" + (" (diverged)" if r.get("diverged") else "") for r in res) or "-"


def waiting_note(rows: Sequence, results: dict, label=None) -> list[str]:
    """The note on the rows left out of a table because none of their runs is complete (yet: an entry built
    from the runs on disk while its queue works, or run with ``--rows``): their slugs, or with ``label`` (a
    function of the row) their count per label; none: no note.

    >>> from bimu.reproduce.active_learning import ALRow, rule_params
    >>> rows = [ALRow([], f"vr-{t}", rule_params("vr", t)) for t in (0.1, 0.2)] + [ALRow([], "all", {})]
    >>> waiting_note(rows, {"all": [{"seed": 0}]})
    ['rows without a complete run yet, left out: 2 of 3 (vr-0.1, vr-0.2)']
    >>> waiting_note(rows, {}, lambda r: r.slug[:2])
    ['rows without a complete run yet, left out: 3 of 3 (vr 2; al 1)']
    """
    waiting = [r for r in rows if not results.get(r.slug)]
    if not waiting:
        return []
    counts: dict[str, int] = {}
    for r in waiting:
        key = label(r) if label else r.slug
        counts[key] = counts.get(key, 0) + 1
    what = ", ".join(counts) if label is None else "; ".join(f"{k} {n}" for k, n in counts.items())
    return [f"rows without a complete run yet, left out: {len(waiting)} of {len(rows)} ({what})"]


def diverged_note(results: dict) -> list[str]:
    """A note naming the runs that diverged (the first message in full), if any."""
    bad = [(slug, r) for slug, res in results.items() for r in res if r.get("diverged")]
    if not bad:
        return []
    runs = ", ".join(f"{slug} seed {r['seed']}" for slug, r in bad)
    return [f"diverged (non-finite weights; left out of the means, seeds marked): {runs}; {bad[0][1]['diverged']}"]


STALLED_LABELS = 10  # a run that asked for at most this many labels over the whole stream stopped querying


def stalled_note(rows: Sequence, results: dict) -> list[str]:
    """A note naming the runs that stopped querying at the start (their weight samples soon agree, no score
    reaches the threshold again, the head stays near chance), one item per row; the means include them.

    >>> from bimu.reproduce.active_learning import ALRow, rule_params
    >>> row = ALRow(["10", "0.60"], "vr-K10-n6", {"strategy": "vr"})
    >>> res = [{"seed": 0, "labels_queried": 2, "accuracy": 0.0556}, {"seed": 1, "labels_queried": 40},
    ...        {"seed": 2, "labels_queried": 1, "accuracy": 0.0481}]
    >>> stalled_note([row], {row.slug: res})[0].split(": ", 1)[1]
    '10, 0.60 seeds 0, 2 (2, 1 labels); accuracy of these runs 4.81-5.56%'
    """
    items, accs = [], []
    for row in (r for r in rows if r.params.get("strategy") != "all"):
        runs = [r for r in results.get(row.slug) or []
                if not r.get("diverged") and r.get("labels_queried", STALLED_LABELS + 1) <= STALLED_LABELS]
        counts = [r["labels_queried"] for r in runs]
        items += [f"{', '.join(row.labels)} seed{'s' * (len(runs) > 1)} {', '.join(str(r['seed']) for r in runs)} "
                  f"({', '.join(map(str, counts))} label{'s' * (counts != [1])})"] if runs else []
        accs += [100 * r["accuracy"] for r in runs if r.get("accuracy") is not None]
    span = f"; accuracy of these runs {min(accs):.2f}-{max(accs):.2f}%" if accs else ""
    note = f"stopped querying at the start ({STALLED_LABELS} labels or fewer in the stream): "
    return [note + "; ".join(items) + span] if items else []


def compute_note(rows: Sequence, results: dict, group=lambda row: "") -> list[str]:
    """The note giving the runs' compute: wall seconds a run (mean over the timed runs of each ``group``
    of rows, e.g. a method) and the core-hours of them all; ``[]`` when no run is timed.

    >>> from bimu.reproduce.active_learning import ALRow, rule_params
    >>> row = ALRow(["VR", "0.1"], "vr-0.1", {"strategy": "vr"})
    >>> compute_note([row], {row.slug: [{"_seconds": 30.0}, {"_seconds": 90.0}, {}]})[0].split("differ): ")[1]
    '60 s a run; 0.033 core-hours in all, 2 of 3 runs timed'
    """
    from bimu.report.tables import fmt_hours

    timed: dict[str, list[float]] = {}
    n = 0
    for row in rows:
        res = results.get(row.slug) or []
        n += len(res)
        timed.setdefault(group(row), []).extend(r["_seconds"] for r in res if isinstance(r.get("_seconds"), float))
    every = [t for ts in timed.values() for t in ts]
    if not every:
        return []
    each = "; ".join(f"{name + ' ' if name else ''}{np.mean(ts):.0f} s a run" for name, ts in timed.items() if ts)
    return [f"compute (wall time of each run's stream in its {TIMING}, one core; machines and their load differ): "
            f"{each}; {fmt_hours(sum(every) / 3600)} core-hours in all, {len(every)} of {n} runs timed"]


def seeds_shown(results: dict) -> list[int]:
    """Every seed with a complete run in ``results`` (for the manifest)."""
    return sorted({int(r["seed"]) for res in results.values() for r in res})

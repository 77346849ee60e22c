"""``bimu reproduce query-dynamics``: where in each task the VR queries fall (first quarter, middle, last
quarter of the task's examples) and the task's accuracy at checkpoints inside it, on imbalanced
OpenLORIS-Object (the stand-in ``objects-seq`` unless ``--benchmark`` names the real data), beside the
paper's two query-dynamics tables. The runs, their directories and ``--from-runs`` are those of every
active-learning entry (:mod:`bimu.reproduce.active_learning`).

>>> query_dynamics_row(al.objects_setup(Options(scale="quick"))).params["checkpoints"]
[0, 25, 50, 75, 99]
"""

from __future__ import annotations

import math

import numpy as np

from bimu import paper
from bimu.reproduce import active_learning as al
from bimu.reproduce.spec import Options, Report
from bimu.reproduce.table import Table


CHECKPOINTS = (0, 25, 50, 75, 99)
"""The query-dynamics table's accuracy checkpoints: percents of a task's examples streamed (the paper's
Acc@0 ... Acc@99)."""


QUERY_COLLAPSE_NOTE = (
    "a higher fixed threshold can stop a stream (openloris-al, BiMU VR, K = 10): VR = 1 - f_mode / K takes "
    "only the values 0, 0.1, ..., 0.9, and a threshold tau asks for ceil(tau K) dissenting votes (3 for 0.3, 4 "
    "for 0.4). Every seed's first label is example 1, where the untrained head's votes split; after it all "
    "10 votes agree on 99.92% of the rest of task 1 (seed 0, tau 0.3; one dissenting vote on the other "
    "0.08%), so nothing is queried until a later task splits the votes again: seeds 1 and 2 resume in task 2 "
    "or 3 (274 and 185 labels over the first three tasks), seed 0 gets one label at example 9,976 (task 3), "
    "after which the 10 votes agree on every one of the task's 4,913 remaining examples, and its run asks for "
    "no other label in the stream (2 labels, accuracy 5.56%: one class; at tau 0.4 labels at examples 1 and "
    "10,002). python scripts/vr_collapse.py --tasks 3 replays these streams from the start and prints every "
    "example's dissent count (its output in results/probes/vr-collapse/output.txt; labels per task as in the "
    "runs' result.json). The rule for users (docs/active-learning.md): with K samples a threshold of 1/K "
    "queries whenever any vote dissents (VR 0.1: every seed 1,405-1,440 labels, none stopped), or the budget "
    "controller (budget-controller) keeps the queried fraction at or above its budget")
"""Why a fixed vote threshold above 1/K can stop querying after a label or two, with the numbers of
``scripts/vr_collapse.py`` and of the openloris-al runs."""


def query_dynamics_row(setup: al.ALSetup) -> al.ALRow:
    """The one row of the query-dynamics table: VR, K = 10, threshold 0.1, accuracy at :data:`CHECKPOINTS`."""
    return al.ALRow(["VR", "0.1"], "vr-0.1", {**al.rule_params("vr", 0.1, preset=setup.preset),
                                              "checkpoints": list(CHECKPOINTS)})


def build_query_dynamics(opts: Options, log=None) -> Report:
    """Per task and on average, beside the paper's tables (a) and (b): the accuracy on the task's test set
    at :data:`CHECKPOINTS` inside it, and the share of its VR queries in its first quarter (0-24% of
    the task's examples), middle (25-74%) and last quarter (75-99%)."""
    setup = al.objects_setup(opts)
    row = query_dynamics_row(setup)
    results, code = al.run_al_rows("query-dynamics", setup, [row], opts, log)
    res = results.get(row.slug) or []
    parts = ("first_quarter", "middle", "last_quarter")
    tasks = sorted({int(t) for r in res for t in r.get("task_quarters", {})})
    header = ["Task", *[h for c in CHECKPOINTS for h in (f"Acc@{c} (%)", "Paper")], "Updates 0-24 (%)", "Paper",
              "Updates 25-74 (%)", "Paper", "Updates 75-99 (%)", "Paper", "Queried in task (%)"]
    out = []
    per_task = {p: [] for p in (*CHECKPOINTS, *parts)}
    for t in tasks:
        cells = [f"Task {t + 1}"]
        ref_cells = paper.cells(paper.QUERY_DYNAMICS_ACCURACY.get(str(t + 1), {str(c): None for c in CHECKPOINTS}))
        for c in CHECKPOINTS:
            vals = [r["checkpoint_accuracy"][str(t)][str(c)] for r in res if str(t) in r.get("checkpoint_accuracy", {})]
            per_task[c].append(float(np.mean(vals)) if vals else math.nan)
            cells += [al.pm(vals), ref_cells[str(c)]]
        ref_cells = paper.cells(paper.QUERY_DYNAMICS.get(str(t + 1), dict.fromkeys(parts)))
        for p in parts:
            ref = ref_cells[p]
            vals = [r["task_quarters"][str(t)][p] for r in res if str(t) in r.get("task_quarters", {})]
            per_task[p].append(float(np.mean(vals)) if vals else math.nan)
            cells += [al.pm(vals), ref]
        cells.append(al.pm([r["task_quarters"][str(t)]["query_fraction"] for r in res
                          if str(t) in r.get("task_quarters", {})]))
        out.append(cells)
    if tasks:
        avg = ["Average"]
        ref_cells = paper.cells(paper.QUERY_DYNAMICS_ACCURACY["Average"])
        for c in CHECKPOINTS:
            avg += [al.pm(per_task[c]), ref_cells[str(c)]]
        ref_cells = paper.cells(paper.QUERY_DYNAMICS["Average"])
        for p in parts:
            avg += [al.pm(per_task[p]), ref_cells[p]]
        out.append(avg + [al.pm([r.get("query_fraction") for r in res])])
    notes = al.table_notes(setup, opts, "query-dynamics")
    notes += ["per task: mean ± std over seeds; Average: mean ± std over tasks of the seed means (as the paper)",
              "regions are percentiles of each task's stream: 0-24, 25-74, 75-99 (the paper's table heads its "
              "columns 0-24, 25-73 and 74-99, its text 0-24, 25-74 and 74-99)",
              "VR, K = 10, threshold 0.1 (the paper's best fixed threshold)",
              "Acc@c: accuracy on the task's own test set when c% of the task's examples have streamed past "
              "(Acc@0: before its first), the method's evaluation samples with a generator of its own, so the "
              "stream is the same as without the checkpoints; the paper does not say which test set its "
              "checkpoints use", QUERY_COLLAPSE_NOTE] + al.compute_note([row], results)
    return Report(Table(al.table_title("Temporal distribution of VR updates per task (imbalanced OpenLORIS-Object)",
                                    setup, opts), header, out, notes), [], code, [setup.benchmark], al.seeds_shown(results))



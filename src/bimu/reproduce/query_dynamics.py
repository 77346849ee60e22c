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
              "checkpoints use"] + al.compute_note([row], results)
    return Report(Table(al.table_title("Temporal distribution of VR updates per task (imbalanced OpenLORIS-Object)",
                                    setup, opts), header, out, notes), [], code, [setup.benchmark], al.seeds_shown(results))



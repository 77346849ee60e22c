"""``bimu reproduce on-device-stream``: the imbalanced OpenLORIS-Object active stream (the stand-in
``objects-seq`` unless ``--benchmark`` names the real data) learned by the C learner's host build, beside
the Python learner on the same configuration, and lambda stored compactly (float16, int16).

Configuration: the 8 192-feature linear head, BiMU with the ``openloris-8192-imbalanced`` preset, queries
by the variation ratio with K = 2 hard samples and threshold 0.5 (ask when the two samples disagree: the
K = 2 row of the paper's VR-samples table, the only threshold K = 2 has), every task in order, one pass
(:mod:`bimu.reproduce.device_stream`). Rows: the Python learner (fused engine) and the C learner (host build,
``cc`` with the pinned flags of :mod:`bimu.edge.clearner`) in float32 and in float64, and the Python learner
with lambda rounded to float16 or to int16 fixed point after every update (a device that stores lambda in
2 bytes). Each (row, seed) is a run directory ``OUT/runs/<scale>/on-device-stream/<row>/seed-<s>/`` holding
``config.json`` and ``result.json`` (the accuracy matrix after every task, the final accuracy, the queried
fraction, a digest of which examples were queried and a hash of the final lambda); ``--from-runs``
rebuilds the table from them.

>>> [r.slug for r in rows_on_device()]
['python-float32', 'c-float32', 'python-float64', 'c-float64', 'python-float16-lambda', 'python-int16-lambda']
"""

from __future__ import annotations

import time

import numpy as np

from bimu.reproduce import active_learning as al
from bimu.reproduce.spec import Options, Report
from bimu.reproduce.table import Table

NAME = "on-device-stream"
K, THRESHOLD = 2, 0.5
"""Query rule: K = 2 hard samples, ask iff the variation ratio is at least 0.5 (the samples disagree)."""
_ROWS = (("python", "float32", None), ("c", "float32", None), ("python", "float64", None), ("c", "float64", None),
         ("python", "float32", "float16"), ("python", "float32", "int16"))
_LEARNER = {"python": "Python (fused engine)", "c": "C learner (host build)"}


def rows_on_device(opts: Options | None = None) -> list[al.ALRow]:
    """The rows: learner x precision, then the compact-lambda simulations."""
    rows = []
    for learner, precision, compact in _ROWS:
        slug = f"{learner}-{compact}-lambda" if compact else f"{learner}-{precision}"
        params = {"method": "bimu", "strategy": "vr", "threshold": THRESHOLD, "mc_samples": K,
                  "preset": "openloris-8192-imbalanced", "learner": learner, "precision": precision, "compact": compact}
        rows.append(al.ALRow([_LEARNER[learner], precision, compact or precision], slug, params))
    return rows


def run_one(setup: al.ALSetup, opts: Options, entry: str, row: al.ALRow, seed: int) -> int:
    """Run (or reuse) one (row, seed) into its run directory (as :func:`bimu.reproduce.active_learning.run_one`)."""
    from bimu.reproduce.device_stream import c_stream, python_stream

    rd = al.start_run_dir(setup, opts, entry, row, seed, {"learner": row.params["learner"]})
    if rd is None:
        return 0
    data = al.load_benchmark(setup, opts)
    p = row.params
    start = time.perf_counter()
    kw = dict(seed=int(seed), preset=p["preset"], mc_samples=p["mc_samples"], threshold=p["threshold"])
    if p["learner"] == "c":
        result = c_stream(data, double=p["precision"] == "float64", **kw)
    else:
        result = python_stream(data, dtype=p["precision"], quantise=p["compact"], **kw)
    result["seed"] = int(seed)
    rd.write_json(al.TIMING, {"seconds": round(time.perf_counter() - start, 3), "threads": 1})
    rd.write_json("result.json", result)
    return 0


def _versus(row: al.ALRow, res: list[dict], results: dict) -> str:
    """How the row's runs compare with the Python learner of the same precision (float32 for compact
    lambda), seed by seed: the same queried examples, and the same final lambda to the bit."""
    ref_slug = f"python-{row.params['precision']}"
    if row.slug == ref_slug:
        return "reference"
    ref = {r["seed"]: r for r in results.get(ref_slug, [])}
    cells = []
    for r in res:
        other = ref.get(r["seed"])
        if other is None:
            cells.append("-")
        elif r["queried_digest"] == other["queried_digest"]:
            same_lam = r["lambda_hash"] == other["lambda_hash"]
            cells.append("same queries" + (", same lambda bits" if same_lam else ", lambda differs"))
        else:
            a = np.asarray(r["accuracy_matrix"])
            cells.append(f"other queries ({r['labels_queried']} vs {other['labels_queried']} labels)"
                         if a.size else "other queries")
    return "; ".join(dict.fromkeys(cells)) or "-"


def build(opts: Options, log=None) -> Report:
    """Run (or read, with ``--from-runs``) every (row, seed) and tabulate them."""
    setup = al.objects_setup(opts)
    rows = rows_on_device(opts)
    setup = al.ALSetup(setup.benchmark, setup.options, "openloris-8192-imbalanced")
    results, code = al.run_al_rows(NAME, setup, rows, opts, log, runner=run_one)
    header = ["Learner", "Precision", "Lambda stored as", "Accuracy (%)", "Queried (%)", "Labels",
              "Versus Python", "Stream (s)", "Seeds"]
    table_rows = []
    for row in rows:
        res = [r for r in results[row.slug] if not r.get("diverged")]
        table_rows.append(row.labels + [
            al.pm([r["accuracy"] for r in res]), al.pm([r["query_fraction"] for r in res]),
            al.pm([r["labels_queried"] for r in res], 1.0, 0), _versus(row, res, results),
            al.pm([r["seconds"] for r in res], 1.0, 0), al.seeds_cell(results[row.slug])])
    notes = al.table_notes(setup, opts, NAME, rows=rows) + [
        f"query rule: variation ratio with K = {K} hard samples, ask iff it is >= {THRESHOLD} (the two samples "
        "disagree), the same per-example keys for every learner; one pass over every task in order",
        "accuracy: mean over all tasks' test sets after the whole stream, with the evaluation draws of "
        "run_stream (the C learner's lambda is evaluated on the host); each run's result.json holds its "
        "accuracy matrix (a row after every task) and the digest of the queried examples",
        "versus Python: the same queried examples (digest of their indices) and the same final lambda to the "
        "bit (FNV-1a of its bytes) as the Python learner of the same precision; compact rows against float32",
        "C learner rows: built with BIMU_QUERY_DOT8 1, the query's sums in the engine's order; a float32 device "
        "build sums 2 (sum over the +1 weights) - (sum of the inputs) by default, which is cheaper and equals the "
        "engine's logits only to float32 rounding (docs/on-device.md)",
        "lambda stored as float16 / int16: the Python learner with lambda rounded after every update (int16: "
        "fixed point, 10 fraction bits, saturating at +-32), as a device keeping 2 bytes a weight would",
        "stream (s): wall seconds of the stream on one core, evaluations excluded",
    ] + al.diverged_note(results)
    title = al.table_title("On-device active stream: the C learner beside the Python learner (linear head, VR "
                           "K = 2)", setup, opts)
    return Report(Table(title, header, table_rows, notes), code=code, benchmarks=[setup.benchmark],
                  seeds=al.seeds_shown(results))

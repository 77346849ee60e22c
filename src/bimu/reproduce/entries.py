"""Every ``bimu reproduce`` entry (:data:`ENTRIES`), and :func:`reproduce`, which runs one and writes
its report.

A run table's entry lists its rows (:mod:`bimu.reproduce.pmnist`, :mod:`bimu.reproduce.features`);
each row is run into ``OUT/runs/<scale>/<entry>/<row>/`` (one run directory per seed below it), so a
second invocation reuses every completed run and resumes interrupted ones
(:mod:`bimu.reproduce.runtable`). Other entries build their own report
(:mod:`bimu.reproduce.al_methods`, :mod:`bimu.reproduce.active_learning`, :mod:`bimu.reproduce.al_claims`,
:mod:`bimu.reproduce.query_dynamics`, :mod:`bimu.reproduce.figures`). The report is written as
``OUT/<entry>.md``, ``.csv`` and ``.tex`` (mean ± std over seeds of each quantity, the paper's own number
in the adjacent column), figures as ``OUT/<entry>-*.png`` and a manifest ``OUT/<entry>.json`` (command,
seeds, scale, real or stand-in data) from which ``bimu report --results-page`` builds
``docs/results.md`` (:mod:`bimu.reproduce.results_page`). ``compute-cost`` is not an entry: ``bimu
reproduce compute-cost`` forwards to its own command.

>>> list(ENTRIES)[:4]
['memory-footprint', 'memory-window', 'activation', 'pmnist-1000']
"""

from __future__ import annotations

import dataclasses

from pathlib import Path

from bimu.reproduce import active_learning as al
from bimu.reproduce import al_claims, al_methods, on_device, query_dynamics
from bimu.reproduce.features import rows_bwt, rows_openloris, rows_standardisation
from bimu.reproduce.figures import accuracy_per_task_figure, learning_rate_map, probability_histograms_figure
from bimu.reproduce.pmnist import (memory_footprint_report, rows_activation, rows_memory_window, rows_pmnist_1000,
                                   rows_pmnist_2000)
from bimu.reproduce.spec import SCALES, Entry, Options
from bimu.reproduce.table import Table

ENTRIES: dict[str, Entry] = {e.name: e for e in (
    Entry("memory-footprint", "Training-state memory overhead (784-100-10, 1000 tasks)"),
    Entry("memory-window", "Memory window ablation (100-task Permuted MNIST, 100 hidden units)",
          ("Memory window N",), ("acc", "auc", "mmrr"), rows_memory_window, figures=probability_histograms_figure),
    Entry("activation", "Activation function ablation (100-task Permuted MNIST, 100 hidden units)",
          ("Method", "Activation"), ("acc", "auc", "mmrr", "one_task"), rows_activation),
    Entry("pmnist-1000", "Table 1: 1000-task Permuted MNIST (100 hidden units)",
          ("Method",), ("acc", "auc", "mmrr", "one_task"), rows_pmnist_1000),
    Entry("pmnist-2000-neurons", "1000-task Permuted MNIST, 2000 hidden units", ("Method",), ("acc", "auc", "mmrr"),
          rows_pmnist_2000, figures=accuracy_per_task_figure),
    Entry("bwt", "Backward transfer: 1000-task Permuted MNIST and OpenLORIS-Object (all features)",
          ("Benchmark", "Method"), ("headline", "mmrr", "bwt"), rows_bwt, figures=accuracy_per_task_figure),
    Entry("openloris", "Table 2: OpenLORIS-Object, linear head, 1 024 / 8 192 / all features",
          ("Method", "Features"), ("mean_acc", "auc_alea", "auc_epi"), rows_openloris,
          figures=accuracy_per_task_figure),
    Entry("standardisation", "OpenLORIS-Object with standardised 8 192 features",
          ("Method",), ("mean_acc", "auc_alea", "auc_epi"), rows_standardisation),
    Entry("animals-al", "Imbalanced Animals active learning, methods compared: accuracy vs queried fraction",
          ("Method", "Query rule", "Threshold"),
          build=al_methods.build_for("animals", "animals-al", "Imbalanced Animals active learning (BiMU, MESU, "
                                     "BayesBiNN, STE): accuracy vs queried fraction"),
          repeatable_stream=True, reads_runs=True),
    Entry("openloris-al", "Imbalanced OpenLORIS-Object active continual learning, methods compared: accuracy vs "
          "queried fraction", ("Method", "Query rule", "Threshold"),
          build=al_methods.build_for("openloris", "openloris-al", "Imbalanced OpenLORIS-Object active continual "
                                     "learning (BiMU, MESU, BayesBiNN, STE): accuracy vs queried fraction"),
          repeatable_stream=True, reads_runs=True),
    Entry("pmnist-al", "Imbalanced Permuted MNIST active continual learning, methods compared: accuracy vs "
          "queried fraction", ("Method", "Query rule", "Threshold"),
          build=al_methods.build_for("pmnist", "pmnist-al", "Imbalanced Permuted MNIST active continual "
                                     "learning (BiMU, MESU, BayesBiNN, STE; 10 tasks, 784-100-10): accuracy vs "
                                     "queried fraction"),
          repeatable_stream=True, reads_runs=True),
    Entry("vr-samples", "Number of VR predictors K", ("Samples", "Threshold"), build=al.build_vr_samples, repeatable_stream=True,
          reads_runs=True),
    Entry("budget-controller", "Budget-driven adaptive VR thresholding", ("Method", "Controller setting"),
          build=al.build_budget,
          repeatable_stream=True, reads_runs=True),
    Entry("animals-vr-samples", "Number of VR predictors K on Animals", ("Samples", "Threshold"),
          build=al.vr_samples_entry("animals", "animals-vr-samples"), repeatable_stream=True, reads_runs=True),
    Entry("animals-budget-controller", "Budget-driven adaptive VR thresholding on Animals",
          ("Method", "Controller setting"), build=al.budget_entry("animals", "animals-budget-controller"),
          repeatable_stream=True, reads_runs=True),
    Entry("pmnist-vr-samples", "Number of VR predictors K on imbalanced Permuted MNIST", ("Samples", "Threshold"),
          build=al.vr_samples_entry("pmnist", "pmnist-vr-samples"), repeatable_stream=True, reads_runs=True),
    Entry("pmnist-budget-controller", "Budget-driven adaptive VR thresholding on imbalanced Permuted MNIST",
          ("Method", "Controller setting"), build=al.budget_entry("pmnist", "pmnist-budget-controller"),
          repeatable_stream=True, reads_runs=True),
    Entry("query-dynamics", "Temporal distribution of VR updates", ("Task",), build=query_dynamics.build_query_dynamics,
          repeatable_stream=True, reads_runs=True),
    Entry("learning-rate-map", "BiMU learning-rate colour map", build=learning_rate_map, computed=True),
    Entry("on-device-stream", "On-device active stream: the C learner beside the Python learner",
          ("Learner", "Precision", "Lambda stored as"), build=on_device.build, repeatable_stream=True,
          reads_runs=True),
    Entry("al-claims", "The paper's active-learning claims, decided from the runs", ("Claim",),
          build=al_claims.build, computed=True, reads_runs=True, repeatable_stream=True),
)}
"""``bimu reproduce NAME`` -> its entry, in the order ``bimu reproduce --help`` lists them."""


def entry_of(name: str) -> Entry:
    """The entry ``name``; ValueError listing the known ones."""
    if name not in ENTRIES:
        raise ValueError(f"unknown reproduction {name!r}; known: {sorted(ENTRIES)}")
    return ENTRIES[name]


def reproduce(name: str, opts: Options, log=None, announce=None) -> tuple[Table, dict[str, Path], int]:
    """Run (or reuse) the runs of entry ``name`` and write its report (tables, figures and the manifest
    ``OUT/NAME.json`` read by the results page); returns ``(table, paths, exit code)``. A run table calls
    ``announce(name, opts)`` once its options are checked, before any run starts (the command line
    prints what it will train there, :func:`bimu.reproduce.cli.print_summary`)."""
    from bimu.experiments.parallel import check_jobs
    from bimu.reproduce.results_page import write_manifest
    from bimu.reproduce.runtable import run_rows, run_table, table_from_runs

    entry = entry_of(name)
    if opts.scale not in SCALES:
        raise ValueError(f"--scale must be one of {SCALES}, got {opts.scale!r}")
    check_jobs(opts.jobs)
    if opts.scheduler is not None:
        from bimu.experiments.distributed import check_scheduler

        check_scheduler(opts.scheduler)
        opts = dataclasses.replace(opts, out=str(Path(opts.out).resolve()),  # the same paths on every worker
                                   data_dir=None if opts.data_dir is None else str(Path(opts.data_dir).resolve()))
    if opts.stream_repeats != 1 and not entry.repeatable_stream:
        raise ValueError(f"--stream-repeats applies to the active-learning entries "
                         f"({', '.join(sorted(e for e in ENTRIES if ENTRIES[e].repeatable_stream))}), not {name!r}")
    if opts.from_runs and entry.build is not None and not (entry.computed or entry.reads_runs):
        raise ValueError(f"--from-runs builds these tables ({', '.join(from_runs_entries())}) from their "
                         f"runs; {name!r} builds its own runs")
    benchmarks: list[str] = []
    figures: list[Path] = []
    seeds = [0] if opts.from_runs else list(opts.seeds)  # a computed table has no seeds to find
    if entry.build is not None:
        rep = entry.build(opts, log)
        table, code, figures, benchmarks = rep.table, rep.code, list(rep.figures), list(rep.benchmarks)
        if rep.seeds is not None:
            seeds = list(rep.seeds)
    elif entry.rows is None:
        table, code = memory_footprint_report(opts, entry.title), 0
    elif opts.from_runs:  # figures need checkpoints, which committed runs do not keep
        table, rows, summaries = table_from_runs(entry, opts)
        code = 0
        benchmarks = sorted({r.config.benchmark for r in rows if r.config is not None})
        seeds = sorted({int(s["seed"]) for summ in summaries.values() for s in summ})
    else:
        if announce is not None:
            announce(name, opts)
        rows, summaries, code = run_rows(entry, opts, log=log)
        table = run_table(entry, opts, rows, summaries)
        benchmarks = sorted({r.config.benchmark for r in rows if r.config is not None})
        if entry.figures is not None:
            figures = list(entry.figures(entry, opts, rows, summaries))
    paths = table.write(opts.out, name)
    for f in figures:
        paths[Path(f).stem] = Path(f)
    paths["manifest"] = write_manifest(opts, entry, table, paths, benchmarks, code, seeds=seeds)
    return table, paths, code


def from_runs_entries() -> list[str]:
    """The entries ``--from-runs`` applies to: the run tables, the computed ones and the active-learning
    entries (which read their runs' ``result.json``)."""
    return [n for n, e in ENTRIES.items() if e.build is None or e.computed or e.reads_runs]

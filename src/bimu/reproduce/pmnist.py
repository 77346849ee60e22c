"""The Permuted-MNIST tables of ``bimu reproduce``: ``memory-window``, ``activation``, ``pmnist-1000``
(Table 1), ``pmnist-2000-neurons`` and ``memory-footprint``.

Every row is a 784-100-10 network (2000 hidden units for ``pmnist-2000-neurons``) with the paper's
preset (:func:`base_config`); quick scale: 2 tasks of a few hundred examples.

>>> [r.labels for r in rows_pmnist_2000(Options(scale="quick"))]
[['BiMU'], ['SGD']]
"""

from __future__ import annotations

from typing import Any

from bimu import paper
from bimu.experiments.config import RunConfig
from bimu.reproduce.spec import Options, Row, share_runs
from bimu.reproduce.table import Table

QUICK_METHODS = ("bimu", "sgd")
"""Methods of the quick (smoke-test) scale of the method tables."""


def base_config(opts: Options, *, tasks_full: int, method: str, train_limit: int = 300, test_limit: int = 300,
                **changes) -> RunConfig:
    """The Permuted-MNIST (100 hidden units, paper preset) config of a row at the requested scale (the
    paper's evaluation schedule, never the default full accuracy matrix: ``eval_all_max=0``)."""
    quick = opts.scale == "quick"
    d: dict[str, Any] = dict(benchmark="pmnist", method=method, hidden=(100,), seeds=opts.seeds,
                             tasks=2 if quick else tasks_full, engine=opts.engine, threads=opts.threads,
                             data_dir=opts.data_dir, ood=True, ood_every=0, eval_all_max=0,
                             train_limit=train_limit if quick else None, test_limit=test_limit if quick else None)
    d.update(changes)
    return RunConfig.from_dict(d)


def _fmt_n(n) -> str:
    return f"{n:,}".replace(",", " ") if isinstance(n, int) else str(n)


BAYESBINN_VARIANTS = (
    ("BayesBiNN", "bayesbinn", {}, ""),
    ("BayesBiNN, paper's prior sign", "bayesbinn-away", {"prior_direction": "away"},
     "prior_direction=away: the sign of the prior term in the paper's runs (compatibility switch)"),
    ("BayesBiNN, exact ratio", "bayesbinn-exact-ratio", {"ratio_eps": 0.0},
     "ratio_eps=0: the exact mu-gradient ratio, without Meng et al.'s eps"),
)
"""The memory-window table's BayesBiNN rows: ``(label, slug, overrides, note)``; all against the paper's
BayesBiNN numbers."""


def replay_row(opts: Options, labels_after: tuple[str, ...] = (), **limits) -> Row:
    """Experience replay (not a method of the paper) with its defaults, which the row's label and note
    state: a reservoir buffer of ``buffer_size`` examples, ``replay_batch_size`` stored examples replayed
    with each incoming one, the SGD baseline's network and Permuted-MNIST learning rate. No paper column."""
    from bimu.methods.replay import ExperienceReplayMethod, buffer_bytes

    hp = ExperienceReplayMethod.resolve_hyperparameters({})
    size, k = hp["buffer_size"], hp["replay_batch_size"]
    note = (f"Replay: experience replay with a reservoir buffer (Chaudhry et al. 2019; not a method of the paper, "
            f"no paper column) on the SGD baseline's 784-100-10 ReLU network with its lr {hp['lr']:g}: "
            f"M = {size:,} stored examples ({buffer_bytes(size, 784) / 1e6:.2f} MB), {k} replayed with each "
            f"incoming example; OOD AUC from the predictive entropy (a deterministic network)")
    return Row([f"Replay, M = {_fmt_n(size)}", *labels_after], "replay",
               base_config(opts, tasks_full=100, method="replay", **limits), {}, note=note)


def rows_memory_window(opts: Options) -> list[Row]:
    """BiMU with each memory window N of the paper (quick: two of them), then BayesBiNN, then experience
    replay (:func:`replay_row`)."""
    ns = [n for n in paper.MEMORY_WINDOW if isinstance(n, int)]
    if opts.scale == "quick":
        ns = [100, 700]
    rows = [Row([_fmt_n(n)], f"bimu-N{n}", base_config(opts, tasks_full=100, method="bimu",
                                                         overrides={"memory_window": n}),
                paper.cells(paper.MEMORY_WINDOW[n])) for n in ns]
    cells = paper.cells(paper.MEMORY_WINDOW["bayesbinn"])
    for label, slug, overrides, note in BAYESBINN_VARIANTS:
        rows.append(Row([label], slug, base_config(opts, tasks_full=100, method="bayesbinn", overrides=overrides),
                        cells, note=note))
    rows.append(replay_row(opts))
    return rows


def rows_activation(opts: Options) -> list[Row]:
    """Sign (ReLU for MESU) vs RBG for BayesBiNN, BiMU, MESU, Syn. Meta. through each method's
    ``activation`` hyperparameter; then Syn. Meta. again with the norm of the paper's runs
    (``bn_statistics=equinox``, the compatibility switch that explains its rows' gaps); then experience
    replay on its ReLU network (:func:`replay_row`, at full scale the memory-window table's runs)."""
    variants = [(method, act, False) for method, first in (("bayesbinn", "sign"), ("bimu", "sign"), ("mesu", "relu"),
                                                           ("synaptic-metaplasticity", "sign"))
                for act in (first, "rbg")]
    variants += [("synaptic-metaplasticity", act, True) for act in ("sign", "rbg")]
    rows = []
    for method, act, paper_norm in variants:
        label = [paper.METHOD_NAMES[method], "ReLU" if act == "relu" else act.upper() if act == "rbg" else "Sign"]
        overrides = {"activation": act}
        if paper_norm:
            label[1] += ", paper's norm"
            overrides["bn_statistics"] = "equinox"
        cfg = base_config(opts, tasks_full=100, method=method, train_limit=100, test_limit=100, overrides=overrides)
        rows.append(Row(label, f"{method}-{act}" + ("-equinox" if paper_norm else ""), cfg,
                        paper.cells(paper.ACTIVATION[(method, act)]),
                        note="\"paper's norm\": bn_statistics=equinox, the batch norm of the paper's runs "
                        "(compatibility switch)"
                        if paper_norm else ""))
    rows.append(replay_row(opts, ("ReLU",), train_limit=100, test_limit=100))
    return share_runs(rows, "memory-window", rows_memory_window(opts))


def rows_pmnist_1000(opts: Options) -> list[Row]:
    """Table 1: the eight methods on 1000-task Permuted MNIST, the current task evaluated after each task
    and every task after the final one (the whole last row of the accuracy matrix, which the BWT table
    needs; about 100 s per run); quick: BiMU and SGD on 2 tasks."""
    methods = QUICK_METHODS if opts.scale == "quick" else paper.METHOD_ORDER
    return [Row([paper.METHOD_NAMES[m]], m,
                base_config(opts, tasks_full=1000, method=m, train_limit=200, test_limit=200, eval_final="all"),
                paper.cells(paper.TABLE1[m])) for m in methods]


def rows_pmnist_2000(opts: Options) -> list[Row]:
    """The eight methods on 1000-task Permuted MNIST with 2000 hidden units (paper preset
    ``pmnist-2000``; current task after each task, the last five after the final one)."""
    methods = QUICK_METHODS if opts.scale == "quick" else paper.METHOD_ORDER
    return [Row([paper.METHOD_NAMES[m]], m,
                base_config(opts, tasks_full=1000, method=m, train_limit=100, test_limit=100, hidden=(2000,),
                            eval_final="last", eval_final_last=5),
                paper.cells(paper.PMNIST_2000[m])) for m in methods]


def memory_footprint_report(opts: Options, title: str) -> Table:
    """The memory table from :func:`~bimu.methods.footprint.memory_footprint_table` beside the paper's
    (quick scale: 10 task boundaries instead of 1000, so per-task state is smaller)."""
    from bimu.methods.footprint import memory_footprint_table

    n_tasks = 10 if opts.scale == "quick" else 1000
    table = memory_footprint_table((784, 100, 10), n_tasks=n_tasks, methods=[*paper.MEMORY_MB, "replay"])
    replay = replay_row(opts)
    rows = [[replay.labels[0] if m == "replay" else paper.METHOD_NAMES.get(m, m), f"{mb:.2f}",
             paper.cell(paper.MEMORY_MB[m]) if m in paper.MEMORY_MB else "-"] for m, mb in table.items()]
    notes = [f"regenerated after {n_tasks} task boundaries (MB = 10^6 bytes, float32)",
             "Replay (not a method of the paper): its network, its reservoir buffer of stored examples "
             "(inputs and labels) and its counters"]
    if opts.scale == "quick":
        notes.append("quick scale: not the paper's 1000 tasks; state that grows per task is smaller")
    return Table(title, ["Method", "Memory (MB)", "Paper (MB)"], rows, notes)

"""The OpenLORIS-Object tables of ``bimu reproduce``: ``openloris`` (Table 2), ``standardisation`` and
``bwt`` (backward transfer on 1000-task Permuted MNIST and on OpenLORIS-Object).

The OpenLORIS rows run on the offline stand-in ``objects-seq`` (OpenLORIS-Object's structure: 69 object
instances recorded as frame sequences under 12 nuisance conditions, docs/objects-seq.md) unless
``--benchmark`` names another: ``openloris`` (the real data, which must be present) or ``objects-ti``
(the older stand-in of unrelated Tiny-ImageNet photos, which has no redundancy in its stream); their
reports say "stand-in" in the title. The stand-ins' backbone gives 11,520 features where the paper's
VGG19 gives 25,088: the "full" rows use all of them.

>>> feature_benchmark(Options()), feature_benchmark(Options(benchmark="openloris"))
('objects-seq', 'openloris')
"""

from __future__ import annotations

from bimu import paper
from bimu.experiments.config import RunConfig
from bimu.reproduce.pmnist import QUICK_METHODS, rows_pmnist_1000
from bimu.reproduce.spec import Options, Row, is_standin, share_runs

ALL_FEATURES_NOTE = ("'full' / 'all' features: all of the benchmark's backbone features (25 088 VGG19 features in "
                     "the paper; 11 520 EfficientNet-Lite0 features on the stand-ins objects-seq and objects-ti)")
"""Note of the all-features rows."""

BAYESBINN_ALL_FEATURES_NOTE = (
    "BayesBiNN, all features on a stand-in: the paper's preset for its 25 088 VGG19 features (table hpo-openloris: "
    "lr 0.011, 78 times its 8 192-feature lr 0.86) is kept unchanged; on the stand-in's features one pass at that "
    "rate hardly learns (right after training its tasks reach 42.92 / 40.19 / 40.79 %, seeds 0-2). With the "
    "8 192 preset's rate seed 0 reaches 96.20 % mean accuracy (bimu run objects-seq --method bayesbinn --preset "
    "openloris-25088 --set lr=0.86 --seeds 0 --no-ood --out results/probes/bayesbinn-all-features-lr, its run "
    "committed there). The row keeps the paper's preset: the stand-in's hyperparameters are not tuned")
"""Note of BayesBiNN's all-features rows on a stand-in."""

SYNMETA_STANDIN_NOTE = (
    "Syn. Meta. on a stand-in: one pass learns the harder nuisance levels poorly (8 192 features, seed 0: right "
    "after training its tasks reach 65.19 % on average, its last task 30.56 %). Without metaplasticity (m = 0 "
    "instead of the preset's 6) they reach 85.19 %, for 74.03 % mean accuracy instead of 61.30 % and a BWT of "
    "-12.17 instead of -4.24 points (bimu run objects-seq --method synaptic-metaplasticity --preset openloris-8192 "
    "--option n_features=8192 --set metaplasticity=0 --seeds 0 --no-ood --out "
    "results/probes/synaptic-metaplasticity-m0, its run committed there). The preset's m, tuned on VGG19 features, "
    "consolidates the stand-in's weights early; the row keeps the paper's preset")
"""Note of Syn. Meta.'s rows on a stand-in."""

STANDARDISED_NOTE = ("hyperparameters: each method's openloris-8192-std preset (the paper's table hpo-openloris-std, "
                     "tuned on standardised features)")
"""Note of the standardisation table."""

OPENLORIS_STANDIN = "objects-seq"
"""The default benchmark of every OpenLORIS entry: the stand-in with OpenLORIS-Object's structure
(instances filmed as videos, near-duplicate consecutive frames, test frames from the same recordings),
on which the paper's active-learning claims can be tested (docs/objects-seq.md)."""

FEATURES = (1024, 8192, None)
"""Feature counts of Table 2 (``None``: all the backbone's features: 25,088 for VGG19)."""


def feature_benchmark(opts: Options) -> str:
    """The benchmark of the OpenLORIS entries: ``--benchmark`` or the stand-in :data:`OPENLORIS_STANDIN`."""
    return opts.benchmark or OPENLORIS_STANDIN


def _fmt_features(n) -> str:
    return "full" if n is None else f"{n:,}".replace(",", " ")


def _preset(method: str, key: str) -> str:
    from bimu.methods import get_method

    return key if key in get_method(method).presets else "none"


def _row_note(method: str, n_features: int | None, bench: str, first: bool) -> str:
    """The note of an OpenLORIS row: what 'full' means (on the first all-features row), BayesBiNN's
    all-features preset and Syn. Meta.'s metaplasticity on a stand-in."""
    if method == "synaptic-metaplasticity" and n_features == 8192 and is_standin(bench):
        return SYNMETA_STANDIN_NOTE
    if n_features is not None:
        return ""
    if method == "bayesbinn" and is_standin(bench):
        return BAYESBINN_ALL_FEATURES_NOTE
    return ALL_FEATURES_NOTE if first else ""


def feature_config(opts: Options, method: str, n_features: int | None, preset_key: str, **options) -> RunConfig:
    """A linear-head run on the OpenLORIS benchmark (all 12 tasks; quick: 2 tasks of 60 examples)."""
    quick = opts.scale == "quick"
    bench = feature_benchmark(opts)
    return RunConfig.from_dict(dict(
        benchmark=bench, method=method, hidden=(), seeds=opts.seeds, tasks=2 if quick else None,
        preset=_preset(method, preset_key), engine=opts.engine, threads=opts.threads, data_dir=opts.data_dir,
        ood=True, ood_every=0, ood_scores=("epistemic", "aleatoric"), train_limit=60 if quick else None,
        eval_all_max=0,  # the paper's schedule, not the default full matrix
        benchmark_options={"n_features": n_features, **options}))


def rows_bwt(opts: Options) -> list[Row]:
    """BWT needs the whole final row of the accuracy matrix: 1000-task Permuted MNIST (binary methods,
    the runs of ``pmnist-1000``, which evaluate every task at the end), then OpenLORIS with all features
    (eight methods: the all-features runs of ``openloris``, as the paper, whose two tables give the same
    mean accuracies; the OOD evaluation those runs add leaves every accuracy as it is)."""
    quick = opts.scale == "quick"
    table1 = rows_pmnist_1000(opts)
    rows = []
    for m in (QUICK_METHODS[:1] if quick else paper.BWT_PMNIST):
        cells = paper.cells(paper.BWT_PMNIST[m])
        cfg = next(r.config for r in table1 if r.slug == m)
        rows.append(Row(["Permuted MNIST (1000 tasks)", paper.METHOD_NAMES[m]], f"pmnist-{m}", cfg,
                        {"headline": cells["acc"], "mmrr": cells["mmrr"], "bwt": cells["bwt"]}))
    share_runs(rows, "pmnist-1000", table1)
    bench = feature_benchmark(opts)
    n = 1024 if quick else None
    label = (f"OpenLORIS ({'all' if n is None else _fmt_features(n)} features)"
             + (f" [stand-in: {bench}]" if is_standin(bench) else ""))
    for m in (QUICK_METHODS if quick else paper.METHOD_ORDER):
        cells = paper.cells(paper.BWT_OPENLORIS[m])
        cfg = feature_config(opts, m, n, "openloris-25088")
        rows.append(Row([label, paper.METHOD_NAMES[m]], f"{bench}-{m}", cfg,
                        {"headline": cells["mean_acc"], "bwt": cells["bwt"]},
                        note=_row_note(m, n, bench, m == "bimu")))
    return share_runs(rows, "openloris", rows_openloris(opts))


def rows_openloris(opts: Options) -> list[Row]:
    """Table 2: each method with 1,024 / 8,192 / all features (quick: BiMU and SGD, 1,024 features)."""
    quick = opts.scale == "quick"
    rows = []
    for m in (QUICK_METHODS if quick else paper.METHOD_ORDER):
        for n in ((1024,) if quick else FEATURES):
            rows.append(Row([paper.METHOD_NAMES[m], _fmt_features(n)], f"{m}-{n or 'full'}",
                            feature_config(opts, m, n, f"openloris-{25088 if n is None else n}"),
                            paper.cells(paper.OPENLORIS[(m, 25088 if n is None else n)]),
                            note=_row_note(m, n, feature_benchmark(opts), not rows[3:])))
    return rows


def rows_standardisation(opts: Options) -> list[Row]:
    """The standardisation appendix: 8,192 features standardised with the training data's statistics
    (the paper's offline control), each method with its ``openloris-8192-std`` preset (quick: BiMU, SGD)."""
    quick = opts.scale == "quick"
    methods = QUICK_METHODS if quick else tuple(paper.STANDARDISED)
    return [Row([paper.METHOD_NAMES[m]], m, feature_config(opts, m, 1024 if quick else 8192, "openloris-8192-std",
                                                           standardize=True),
                paper.cells(paper.STANDARDISED[m]), note=STANDARDISED_NOTE if m == "bimu" else "")
            for m in methods]

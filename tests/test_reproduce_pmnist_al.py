"""The real-data active-learning venue: ``pmnist-imbalanced`` (Permuted MNIST under the paper's imbalance
rule, task by task) and its entries ``pmnist-al``, ``pmnist-vr-samples``, ``pmnist-budget-controller``, and
its column of ``al-claims``. The construction is checked against the numbers docs/active-learning.md
states; the entries run at quick scale on real MNIST (a few rows, the torch engine)."""

import csv
import json
import os
from pathlib import Path

import numpy as np
import pytest

from bimu.cli import main
from bimu.data import imbalanced_permuted as ip
from bimu.data.benchmarks import benchmark_entry, get_benchmark
from bimu.data.permuted import PermutedMNIST
from bimu.methods import get_method
from bimu.reproduce import active_learning as al
from bimu.reproduce import al_claims, al_methods
from bimu.reproduce.spec import Options

DATA = os.environ.get("BIMU_DATA_DIR")
needs_mnist = pytest.mark.skipif(not DATA or not (Path(DATA) / "mnist").is_dir()
                                 or not (Path(DATA) / "fashion-mnist").is_dir(),
                                 reason="needs MNIST and Fashion-MNIST under $BIMU_DATA_DIR")
DOC = Path(__file__).resolve().parents[1] / "docs" / "active-learning.md"


@pytest.fixture
def synthetic(monkeypatch):
    """A small MNIST: class c has 10 + 2c training images (0..9: 10..28), test counts 3..12."""
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(10), 10 + 2 * np.arange(10)).astype(np.uint8)
    ty = np.repeat(np.arange(10), 3 + np.arange(10)).astype(np.uint8)
    data = {("mnist", "train"): (rng.integers(0, 256, (len(y), 28, 28), dtype=np.uint8), y),
            ("mnist", "test"): (rng.integers(0, 256, (len(ty), 28, 28), dtype=np.uint8), ty),
            ("fashion-mnist", "test"): (rng.integers(0, 256, (7, 28, 28), dtype=np.uint8), np.zeros(7, np.uint8))}
    monkeypatch.setattr(ip, "load_dataset", lambda name, split, data_dir=None: data[(name, split)])
    return data


def test_the_imbalance_rule_on_a_small_mnist(synthetic):
    b = ip.ImbalancedPermutedMNIST(n_tasks=3)
    # the median count is 19: classes 0-4 (10-18 images) are low-frequency
    assert b.rare_threshold == 19.0 and b.rare_classes == {0, 1, 2, 3, 4} and b.frequent_classes == {5, 6, 7, 8, 9}
    assert set(b.remove_fraction) == {0, 1, 2, 3, 4} and all(0.5 <= f <= 0.8 for f in b.remove_fraction.values())
    y = synthetic[("mnist", "train")][1]
    for t in range(3):
        x, yt = b.train_task(t, seed=0)
        counts = np.bincount(yt.numpy(), minlength=10)
        assert counts.tolist() == [n - round(b.remove_fraction.get(c, 0.0) * n)
                                   for c, n in enumerate(np.bincount(y))]
        assert x.shape == (len(yt), 784)
    # each task draws its own rare images; the run seed reorders a task without changing it
    assert not np.array_equal(b.kept(0), b.kept(1))
    a0, a1 = b.train_task(1, seed=0), b.train_task(1, seed=1)
    assert sorted(a0[1].tolist()) == sorted(a1[1].tolist()) and not np.array_equal(a0[1], a1[1])
    _, ty = b.test_task(2)
    assert np.bincount(ty.numpy()).tolist() == [3] * 10  # balanced: the smallest test class
    assert b.ood_set().shape == (7, 784)
    assert ip.ImbalancedPermutedMNIST(rare_threshold=13).rare_classes == {0, 1}
    assert len(ip.ImbalancedPermutedMNIST(train_limit=5).train_task(0, 0)[1]) == 5
    with pytest.raises(ValueError, match="task must lie in"):
        b.train_task(3, 0)


@needs_mnist
def test_the_venue_is_what_the_docs_say():
    b = get_benchmark("pmnist-imbalanced")
    assert (b.n_tasks, b.n_features, b.n_classes, b.is_standin) == (10, 784, 10, False)
    assert b.rare_threshold == 5936.0 and b.rare_classes == {0, 4, 5, 6, 8}
    assert {c: round(100 * f, 1) for c, f in b.remove_fraction.items()} == {0: 73.2, 4: 66.0, 5: 56.0, 6: 77.2,
                                                                           8: 70.6}
    x, y = b.train_task(0, seed=0)
    assert x.shape == (40073, 784)
    assert np.bincount(y.numpy()).tolist() == [1589, 6742, 5958, 6131, 1986, 2383, 1352, 6265, 1718, 5949]
    xt, yt = b.test_task(9)
    assert xt.shape == (8920, 784) and np.bincount(yt.numpy()).tolist() == [892] * 10
    assert b.ood_set().shape == (10000, 784)
    # the tasks are pmnist's permutations of data seed 0, preprocessed as pmnist
    p = PermutedMNIST(n_tasks=10, seed=0, ood=False)
    assert np.array_equal(p.permutation(9).numpy(), b.permutation(9))
    assert (b.mean, b.std) == (p.mean, p.std)
    assert benchmark_entry("pmnist-imbalanced").preset_for((100,)) == ("pmnist-100", "")
    doc = DOC.read_text()
    for fact in ("40,073", "5,936", "73.2, 66.0, 56.0, 77.2 and 70.6%", "892 images per class", "8,920",
                 "1,589 / 1,986 / 2,383 / 1,352 / 1,718", "400,730"):
        assert fact in doc, fact


def test_the_comparison_rows_and_presets():
    opts = Options(seeds=(0, 1, 2))
    rows = al_methods.rows_for(opts, "pmnist")
    # BiMU, MESU, BayesBiNN: baseline, VR 9, entropy 6, aleatoric 6, epistemic 5, VR-True 5, random 6; STE 1 + 6 + 6;
    # no MESU on standardised inputs (the pixels are standardised already)
    assert len(rows) == 3 * 38 + 13 and len({r.slug for r in rows}) == len(rows)
    assert not any(r.params.get("standardize") for r in rows)
    assert {r.params["preset"] for r in rows} == {"pmnist-100"} and all(r.params["hidden"] == [100] for r in rows)
    for method in al_methods.COMPARED:
        assert "pmnist-100" in get_method(method).presets
    assert [r.params["threshold"] for r in rows if r.slug.startswith("bimu-vr-") and "true" not in r.slug] == [
        0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]
    assert len([r for r in rows if al_methods.in_comparison(r)]) == 3 * 16 + 13
    assert al_claims.PMNIST_DYNAMICS in {r.slug for r in rows}
    # claims 4 and 6: the OpenLORIS tables' rows, on this network
    k_rows, b_rows = al.rows_vr_samples(opts, "pmnist"), al.rows_budget(opts, "pmnist")
    assert len(k_rows) == 1 + 1 + 2 + 4 + 9 + 24 and len(b_rows) == 1 + 18
    assert all(r.params["hidden"] == [100] and r.params["preset"] == "pmnist-100" for r in k_rows + b_rows)
    assert all(not r.paper for r in k_rows[:1] + b_rows)
    # the stand-ins' rows keep their configuration (no hidden key: their runs stay valid)
    assert not any("hidden" in r.params for r in al_methods.rows_for(opts, "openloris") + al.rows_budget(opts))
    assert al.pmnist_setup(Options(scale="quick")).options == {"n_tasks": 10, "train_limit": 60, "test_limit": 100}
    with pytest.raises(ValueError, match="must be pmnist-imbalanced, got 'pmnist'"):
        al.pmnist_setup(Options(benchmark="pmnist"))


def test_the_cost_script_prices_every_row_of_the_venue():
    import doctest

    from repo_scripts import load

    cost = load("scripts/al_methods_cost.py")
    assert doctest.testmod(cost).failed == 0
    per = {"update": 1e-3, "query": 2e-3}  # seconds an example
    est = cost.estimate("pmnist", dict.fromkeys(al_methods.COMPARED, per), stream=1000)
    assert {k: (v["rows"], v["runs"]) for k, v in est.items()} == {
        "pmnist-al": (127, 381), "pmnist-vr-samples": (41, 123), "pmnist-budget-controller": (19, 57)}
    # the controller's rows are priced at their target; its baseline, one update an example
    targets = sum(al.BUDGETS) * len(al.GAMMAS)
    low, high = est["pmnist-budget-controller"]["core_hours"]
    assert low == high == pytest.approx(3 * (1000 * 1e-3 + 18 * 2.0 + 1000 * targets * 1e-3) / 3600)
    low, high = est["pmnist-al"]["core_hours"]
    assert 0 < low < high


def _quick(name, out, *extra):
    return main(["reproduce", name, "--scale", "quick", "--engine", "torch", "--seeds", "1", "--out", str(out),
                 "--jobs", "1", *extra])


def _csv(out, name):
    rows = list(csv.reader((Path(out) / f"{name}.csv").open()))
    return rows[0], rows[1:]


@needs_mnist
def test_the_entries_run_at_quick_scale(tmp_path):
    chosen = ["bimu-all", "bimu-vr-0.1", "bimu-random-0.01", "mesu-vr-0.1", "bayesbinn-vr-0.1", "ste-aleatoric-0.01"]
    assert _quick("pmnist-al", tmp_path, "--rows", *chosen) == 0
    header, rows = _csv(tmp_path, "pmnist-al")
    done = {(r[0], r[1]) for r in rows if r[-1] == "0"}
    assert done == {("BiMU", "100% updates"), ("BiMU", "VR"), ("BiMU", "Random"), ("MESU", "VR"), ("BayesBiNN", "VR"),
                    ("STE", "Aleatoric")}
    assert {r[0] for r in rows} == {"BiMU", "MESU", "BayesBiNN", "STE"}
    assert {r[header.index("Paper (accuracy %)")] for r in rows} == {"-"}
    run = tmp_path / "runs/quick/pmnist-al"
    cfg = json.loads((run / "mesu-vr-0.1/seed-0/config.json").read_text())
    assert (cfg["benchmark"], cfg["preset"], cfg["hidden"], cfg["mc_samples"]) == ("pmnist-imbalanced", "pmnist-100",
                                                                                  [100], 10)
    res = json.loads((run / "bimu-all/seed-0/result.json").read_text())
    assert res["examples_seen"] == 120 and res["query_fraction"] == 1.0 and "task_quarters" in res
    md = (tmp_path / "pmnist-al.md").read_text()
    assert "pmnist-imbalanced (real)" in md and "stand-in" not in md and "hidden layers [100]" in md
    assert (tmp_path / "pmnist-al-methods.png").stat().st_size > 1000
    # --from-runs rebuilds the same table without training
    (tmp_path / "pmnist-al.csv").rename(tmp_path / "first.csv")
    assert _quick("pmnist-al", tmp_path, "--from-runs") == 0
    assert (tmp_path / "pmnist-al.csv").read_text() == (tmp_path / "first.csv").read_text()
    # claims 4 and 6 have their tables on this venue
    assert _quick("pmnist-budget-controller", tmp_path, "--rows", "vr-B0.03-g0.5") == 0
    assert _quick("pmnist-vr-samples", tmp_path, "--rows", "vr-K2-n1") == 0
    for name, slug in (("pmnist-budget-controller", "vr-B0.03-g0.5"), ("pmnist-vr-samples", "vr-K2-n1")):
        cfg = json.loads((tmp_path / "runs/quick" / name / slug / "seed-0/config.json").read_text())
        assert cfg["benchmark"] == "pmnist-imbalanced" and cfg["hidden"] == [100]


def _write(opts, name, setup, row, seed, **result):
    d = al.run_dir_of(opts, name, row, seed)
    d.mkdir(parents=True)
    (d / "config.json").write_text(json.dumps(al._job_config(setup, opts, row, seed)))
    (d / "result.json").write_text(json.dumps({"seed": seed, **result}))


def test_al_claims_decides_the_pmnist_column(tmp_path):
    opts = Options(scale="full", out=str(tmp_path))
    setup = al.pmnist_setup(opts)
    rows = {r.slug: r for r in al_methods.rows_for(opts, "pmnist")}
    quarters = {"0": {"first_quarter": 0.5, "middle": 0.4, "last_quarter": 0.1}}
    runs = {"bimu-all": (1.0, 0.80, 0.60), "bimu-vr-0.1": (0.04, 0.90, 0.70), "bimu-vr-0.2": (0.02, 0.70, 0.50),
            "bimu-random-0.01": (0.01, 0.50, 0.20), "bimu-random-0.05": (0.05, 0.60, 0.30)}
    for slug, (q, acc, rare) in runs.items():
        for seed in (0, 1):
            _write(opts, "pmnist-al", setup, rows[slug], seed, query_fraction=q, accuracy=acc, rare_accuracy=rare,
                   frequent_accuracy=acc, labels_queried=1000, task_quarters=quarters)
    gated = {r[0].split(".")[0]: r[-1] for r in al_claims.build(opts).table.rows}
    # by default a claim waits for the rows it reads: claim 1 reads BiMU's baseline and its nine VR rows
    assert gated["1"] == ("not decided: 3 of its 10 rows have runs of seeds 0, 1; unfinished: bimu-vr-0.3, "
                          "bimu-vr-0.4, bimu-vr-0.5, bimu-vr-0.6 and 3 more")
    assert gated["2"].startswith("not decided: 4 of its 15 rows") and gated["3"].startswith("not decided: 2 of its")
    table = al_claims.build(opts, partial=True).table  # the rules on the rows that are there
    assert table.header[-1] == "pmnist-imbalanced"
    cells = {r[0].split(".")[0]: r[-1] for r in table.rows}
    # VR crosses the 80% baseline at 3% queried: within twice the paper's OpenLORIS 3.1%
    assert cells["1"].startswith("holds: VR matches the 100% baseline's 80.00 ± 0.00% at 3.00% queried (33.3x; "
                                 "paper 32.3x at 3.1%)")
    assert cells["2"].startswith("holds: BiMU VR minus BiMU random")
    assert cells["3"].startswith("not decided: no other method")
    assert cells["4"].startswith("not decided") and cells["6"].startswith("not decided")
    assert cells["5"] == ("holds: 50.0% / 40.0% / 10.0% of a task's updates in its first quarter / middle half / "
                          "last quarter (uniform: 25 / 50 / 25), mean over 1 tasks")
    assert "pmnist-al: 5 of 127 rows with complete runs, 10 runs, seeds 0,1" in table.notes
    assert any("10 classes on the pmnist side" in n for n in table.notes)


def test_an_identical_run_under_another_entry_is_copied_not_trained(tmp_path, monkeypatch):
    import bimu.experiments.sweep as sweep

    opts = Options(scale="full", out=str(tmp_path))
    setup = al.SETUPS["pmnist"](opts)
    vr = next(r for r in al_methods.rows_for(opts, "pmnist") if r.slug == "bimu-vr-0.3")
    k10 = next(r for r in al.rows_vr_samples(opts, "pmnist") if r.slug == "vr-K10-n3")
    assert vr.params == k10.params  # the K table's K = 10 row is the comparison's VR row
    src = al.run_dir_of(opts, "pmnist-al", vr, 1)
    src.mkdir(parents=True)
    (src / "config.json").write_text(json.dumps(al._stored_config(setup, opts, vr, 1)))
    (src / "result.json").write_text(json.dumps({"seed": 1, "acc": 0.875, "queried": 0.031}))
    (src / al.TIMING).write_text(json.dumps({"seconds": 612.5, "threads": 1}))

    def no_training(*args, **kwargs):
        raise AssertionError("an identical finished run exists: nothing should train")

    monkeypatch.setattr(sweep, "run_stream", no_training)
    monkeypatch.setattr(al, "load_benchmark", lambda setup, opts: None)
    assert al.run_one(setup, opts, "pmnist-vr-samples", k10, 1) == 0
    mine = al.run_dir_of(opts, "pmnist-vr-samples", k10, 1)
    assert json.loads((mine / "result.json").read_text()) == {"seed": 1, "acc": 0.875, "queried": 0.031}
    assert json.loads((mine / al.SHARED).read_text()) == {"from": "pmnist-al/bimu-vr-0.3/seed-1"}
    assert json.loads((mine / al.TIMING).read_text())["seconds"] == 612.5
    assert al.is_complete(setup, opts, "pmnist-vr-samples", k10, 1)
    # another seed, or an unfinished source, is not shared: that run trains
    (src / "result.json").unlink()
    with pytest.raises(AssertionError, match="nothing should train"):
        al.run_one(setup, opts, "pmnist-vr-samples", k10, 2)

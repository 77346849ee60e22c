"""``bimu reproduce openloris-al`` / ``animals-al``: the method comparison (BiMU, MESU, BayesBiNN with VR,
STE with the aleatoric rule, each with random querying and its 100% baseline) at quick scale on a
generated objects-seq fixture (Tiny-ImageNet layout written by the test, fake 48-feature backbone: no
download, no real backbone); rows, determinism from the seed, ``--from-runs`` rebuilding the same table."""

import csv
import json
import math
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from bimu import paper
from bimu.cli import main
from bimu.data import feature_benchmarks as fb
from bimu.data.views import LimitedBenchmark
from bimu.methods import get_method
from bimu.reproduce import active_learning as al
from bimu.reproduce import al_methods
from bimu.reproduce.spec import Options
from test_data_images import FakeBackbone  # 4x4 resize, flattened RGB (48 features)

CATS = {"bottle": ("b", 2), "cup": ("c", 3), "knife": ("k", 1), "toy": ("teddy", 2)}
"""Fixture categories: two frequent, one with a single instance (rare), the OOD category."""

RULES = {(m, r) for m in ("BiMU", "MESU", "BayesBiNN", "MESU (standardised)")
         for r in ("100% updates", "VR", "Predictive entropy", "Aleatoric", "Epistemic", "VR-True (oracle)", "Random")}
RULES |= {("STE", r) for r in ("100% updates", "Aleatoric", "Random")}
"""(method, rule) rows of the comparison at quick scale."""


@pytest.fixture(scope="module")
def fixture_bench(tmp_path_factory):
    """objects-seq on a generated Tiny-ImageNet layout (20 frames per recording, 12 tasks)."""
    root = tmp_path_factory.mktemp("data")
    for c, (folder, _) in enumerate(CATS.values()):
        for split in ("train", "val"):
            for i in range(6 if split == "train" else 1):
                base = np.random.default_rng(100 * c + i).integers(0, 256, size=(4, 4, 3)).astype(np.uint8)
                path = root / "tiny-imagenet/objects" / split / folder / f"{folder}_{i}.JPEG"
                path.parent.mkdir(parents=True, exist_ok=True)
                Image.fromarray(np.asarray(Image.fromarray(base).resize((16, 16), Image.BILINEAR))).save(path)
    return fb.objects_seq(root, n_features=None, backbone=FakeBackbone(), cache_dir=tmp_path_factory.mktemp("cache"),
                          frames_per_recording=20, categories=CATS)


@pytest.fixture
def on_fixture(monkeypatch, fixture_bench):
    """Every active-learning entry streams the fixture (cut to quick scale) instead of its data set."""
    monkeypatch.setattr(al, "load_benchmark", lambda setup, opts: LimitedBenchmark(fixture_bench, **al.QUICK_LIMITS))


def _run(name, out, *extra):
    return main(["reproduce", name, "--scale", "quick", "--engine", "torch", "--seeds", "1", "--out", str(out),
                 "--jobs", "1", *extra])


def _csv(out, name):
    rows = list(csv.reader((Path(out) / f"{name}.csv").open()))
    return rows[0], rows[1:]


def test_openloris_al_compares_every_method_and_rule(tmp_path, on_fixture):
    assert _run("openloris-al", tmp_path) == 0
    header, rows = _csv(tmp_path, "openloris-al")
    assert header[:3] == ["Method", "Query rule", "Threshold"] and "Random, same queried: accuracy (%)" in header
    assert {(r[0], r[1]) for r in rows} == RULES and len(rows) == len(RULES)
    q, acc = header.index("Queried (%)"), header.index("Accuracy (%)")
    for r in rows:
        assert math.isfinite(float(r[acc])) and 0 <= float(r[q]) <= 100 and r[-1] == "0"
        if r[1] == "100% updates":
            assert float(r[q]) == 100.0
    cell = {(r[0], r[1]): r[header.index("Paper (accuracy %)")] for r in rows}
    assert cell[("BiMU", "VR")] == "88.70 at 3.1% queried; 90.91 at 4.0% queried"
    assert cell[("BiMU", "100% updates")] == "87.76 ± 0.19 (100% queried)" and cell[("MESU", "VR")] == "-"
    for suffix in ("methods", "accuracy-vs-queried"):
        assert (tmp_path / f"openloris-al-{suffix}.png").stat().st_size > 1000
    run = tmp_path / "runs/quick/openloris-al"
    ste = json.loads((run / "ste-aleatoric-0.01/seed-0/config.json").read_text())
    assert (ste["method"], ste["strategy"], ste["mc_samples"], ste["preset"]) == ("ste", "aleatoric", 1,
                                                                                   "openloris-8192-imbalanced")
    assert json.loads((run / "bayesbinn-vr-0.1/seed-0/config.json").read_text())["mc_samples"] == 10
    env = json.loads((run / "bayesbinn-vr-0.1/seed-0/environment.json").read_text())  # the processor that ran it
    assert env["seed"] == 0 and env["cpu"]["isa"] == sorted(env["cpu"]["isa"]) and env["versions"]["numpy"]
    assert json.loads((run / "mesu-random-0.01/seed-0/result.json").read_text())["forward_passes"] == 0
    oracle = json.loads((run / "bayesbinn-vr-true-0.1/seed-0/result.json").read_text())
    assert oracle["oracle"] is True and oracle["score"] == "vr-true"
    for variant in ("mesu", "bayesbinn", "ste"):  # each method's own figure (the paper's per-method figures)
        assert (tmp_path / f"openloris-al-{variant}.png").stat().st_size > 1000
    md = (tmp_path / "openloris-al.md").read_text()
    assert "[stand-in: objects-seq]" in md and "OpenLORIS-Object's structure" in md

    # --from-runs trains nothing and rebuilds the same table
    results = sorted(run.rglob("result.json"))
    stamps = [p.stat().st_mtime_ns for p in results]
    (tmp_path / "openloris-al.csv").rename(tmp_path / "first.csv")
    assert _run("openloris-al", tmp_path, "--from-runs") == 0
    assert (tmp_path / "openloris-al.csv").read_text() == (tmp_path / "first.csv").read_text()
    assert [p.stat().st_mtime_ns for p in sorted(run.rglob("result.json"))] == stamps
    manifest = json.loads((tmp_path / "openloris-al.json").read_text())
    assert manifest["seeds"] == [0] and manifest["command"].endswith("--from-runs")

    # the results page built from it passes bimu report --check (its numbers recomputed from the runs)
    page = tmp_path / "docs" / "results.md"
    (tmp_path / "first.csv").unlink()
    assert main(["report", "--results-page", str(page), str(tmp_path)]) == 0
    assert "| BiMU | VR | 0.1 |" in page.read_text()
    assert main(["report", "--check", str(page)]) == 0


def test_same_seed_same_run_and_rows_select(tmp_path, on_fixture):
    for out in ("a", "b"):
        assert _run("openloris-al", tmp_path / out, "--rows", "mesu-vr-0.1", "ste-aleatoric-0.01") == 0
    for slug in ("mesu-vr-0.1", "ste-aleatoric-0.01"):
        a, b = (json.loads((tmp_path / o / "runs/quick/openloris-al" / slug / "seed-0/result.json").read_text())
                for o in ("a", "b"))
        assert a == b
    ran = sorted(p.parent.parent.name for p in (tmp_path / "a/runs").rglob("result.json"))
    assert ran == ["mesu-vr-0.1", "ste-aleatoric-0.01"]
    _, rows = _csv(tmp_path / "a", "openloris-al")
    assert [r[-1] for r in rows if (r[0], r[1]) in {("MESU", "VR"), ("STE", "Aleatoric")}] == ["0", "0"]
    assert [(r[0], r[1]) for r in rows] == [("MESU", "VR"), ("STE", "Aleatoric")]  # rows without runs left out
    md = (tmp_path / "a" / "openloris-al.md").read_text()
    assert f"rows without a complete run yet, left out: {len(RULES) - 2} of {len(RULES)} (BiMU 100% updates 1;" in md


def test_animals_al_compares_methods(tmp_path, on_fixture):
    rows = ["bimu-all", "bimu-vr-0.1", "bimu-random-0.01", "bayesbinn-vr-0.1", "ste-aleatoric-0.01", "mesu-std-vr-0.1"]
    assert _run("animals-al", tmp_path, "--rows", *rows) == 0
    header, table = _csv(tmp_path, "animals-al")
    assert {(r[0], r[1]) for r in table} == {("BiMU", "100% updates"), ("BiMU", "VR"), ("BiMU", "Random"),
                                             ("BayesBiNN", "VR"), ("STE", "Aleatoric"), ("MESU (standardised)", "VR")}
    paper_col = {(r[0], r[1]): r[header.index("Paper (accuracy %)")] for r in table}
    assert paper_col[("BiMU", "VR")] == ("84.46 at 11% queried; 87.12 at 18% queried; rare classes +41 points over "
                                         "random at 11% queried")
    cfg = json.loads((tmp_path / "runs/quick/animals-al/bayesbinn-vr-0.1/seed-0/config.json").read_text())
    assert cfg["benchmark"] == "animals-ti" and cfg["preset"] == "animals" and cfg["method"] == "bayesbinn"
    assert (tmp_path / "animals-al-methods.png").is_file()
    cfg = json.loads((tmp_path / "runs/quick/animals-al/mesu-std-vr-0.1/seed-0/config.json").read_text())
    assert cfg["standardize"] is True and cfg["preset"] == "animals-std" and cfg["method"] == "mesu"
    # the per-method figures of the variants with runs, none for those without
    assert [(tmp_path / f"animals-al-{v}.png").is_file() for v in ("bayesbinn", "ste", "mesu-std", "mesu")] == [
        True, True, True, False]


def test_full_scale_rows_and_presets():
    opts = Options(seeds=(0, 1, 2))
    rows = al_methods.rows_for(opts, "openloris")
    # BiMU, MESU, BayesBiNN, MESU standardised: baseline, VR 9, entropy 6, aleatoric 6, epistemic 5, VR-True 5,
    # random 6; STE: 1 + 6 + 6
    assert len(rows) == 4 * 38 + 13
    assert len({r.slug for r in rows}) == len(rows)
    # the comparison: each method's baseline, comparison rule and random querying
    assert len([r for r in rows if al_methods.in_comparison(r)]) == 4 * 16 + 13
    assert [r.params["threshold"] for r in rows if r.slug.startswith("bayesbinn-vr-") and "true" not in r.slug] == [
        0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]
    assert {r.params["strategy"] for r in rows if not al_methods.in_comparison(r)} == {
        "entropy", "aleatoric", "epistemic", "vr-true"}
    std = [r for r in rows if r.slug.startswith("mesu-std-")]
    assert len(std) == 38 and all(r.params["standardize"] and r.params["preset"] == "openloris-8192-imbalanced-std"
                                  for r in std)
    assert not any("standardize" in r.params for r in rows if r not in std)  # the other rows' runs stay valid
    for data in ("openloris", "animals"):
        preset = al_methods.SETUPS[data](opts).preset
        for method in al_methods.COMPARED:
            assert preset in get_method(method).presets  # each method's own preset of the paper's appendix
        for method in al_methods.STANDARDISED:
            assert preset + "-std" in get_method(method).presets
    assert {r.params["mc_samples"] for r in rows if r.params["method"] == "ste"} == {1}
    assert al.objects_setup(opts).benchmark == "objects-seq"
    assert al.objects_setup(Options(benchmark="objects-ti")).benchmark == "objects-ti"
    with pytest.raises(ValueError, match="must be one of objects-seq, objects-ti, openloris, got 'animals-ti'"):
        al.objects_setup(Options(benchmark="animals-ti"))


def test_the_paper_cell_is_written_once_per_rule():
    opts = Options(scale="full", seeds=(0, 1, 2))
    setup, rows = al.animals_setup(opts), al_methods.rows_for(opts, "animals")
    done = {r.slug: [{"seed": 0, "accuracy": 0.5, "query_fraction": 0.1}] for r in rows}
    table = al_methods.methods_table("animals-al", "t", setup, rows, done, opts)
    assert len(table.rows) == len(rows)
    col = table.header.index("Paper (accuracy %)")
    vr = [r[col] for r in table.rows if r[:2] == ["BiMU", "VR"]]
    assert vr[0].startswith("84.46 at 11% queried") and vr[1:] == ["as above"] * 8
    assert [r[col] for r in table.rows if r[:2] == ["BiMU", "100% updates"]] == ["86.28 (100% queried)"]
    assert {r[col] for r in table.rows if r[0] != "BiMU"} == {"-"}


def test_random_at_interpolates_the_same_methods_random_curve():
    rows = [al.ALRow(["x"], f"{m}-random-{p}", al.rule_params("random", p, method=m)) for m in ("bimu", "mesu")
            for p in (0.02, 0.1)]
    res = {"bimu-random-0.02": [{"query_fraction": 0.02, "accuracy": 0.50, "rare_accuracy": 0.10, "seed": 0},
                                {"query_fraction": 0.04, "accuracy": 0.60, "rare_accuracy": 0.30, "seed": 1}],
           "bimu-random-0.1": [{"query_fraction": 0.10, "accuracy": 0.80, "rare_accuracy": 0.50, "seed": 0}],
           "mesu-random-0.02": [{"query_fraction": 0.02, "accuracy": 0.1, "rare_accuracy": 0.1, "seed": 0}],
           "mesu-random-0.1": []}
    # BiMU's points: (0.03, 0.55, rare 0.20) and (0.10, 0.80, rare 0.50); at 0.065 halfway: 0.675, rare 0.35
    got = al_methods.random_at(rows, res, "bimu", 0.065)
    assert got["accuracy"] == pytest.approx(0.675) and got["rare_accuracy"] == pytest.approx(0.35)
    assert al_methods.random_at(rows, res, "bimu", 0.2) == {"accuracy": None, "rare_accuracy": None}
    assert al_methods.random_at(rows, res, "mesu", 0.02)["accuracy"] == pytest.approx(0.1)


def test_paper_rare_gain_is_quoted():
    assert paper.cells(paper.ANIMALS_VR_RARE_GAIN) == {"rare_gain": "41", "queried": "11"}


def test_from_runs_command_keeps_the_data_that_select_the_runs():
    from bimu.reproduce.results_page import reproduce_command

    opts = Options(scale="full", out="r", benchmark="objects-ti", stream_repeats=2, from_runs=True)
    assert reproduce_command("openloris-al", opts) == ("bimu reproduce openloris-al --scale full --out r "
                                                       "--benchmark objects-ti --stream-repeats 2 --from-runs")


def test_a_diverged_run_is_a_result_shown_as_such(tmp_path, monkeypatch):
    """A method whose weights become non-finite (MESU's Animals preset on animals-ti's raw features) is a
    result of that configuration and seed: recorded, reused, marked in the table, left out of the means."""
    import bimu.experiments.sweep as sweep
    from bimu.methods.divergence import DivergenceError

    def fake(benchmark, seed, **kw):
        if kw["method"] == "mesu":
            raise DivergenceError("mesu", "model.layers.0.mu_weight", 0)
        return {"seed": seed, "accuracy": 0.5, "rare_accuracy": 0.25, "frequent_accuracy": 0.75,
                "query_fraction": 1.0 if kw["strategy"] == "all" else 0.1}

    monkeypatch.setattr(sweep, "run_stream", fake)
    monkeypatch.setattr(al, "load_benchmark", lambda setup, opts: None)
    assert _run("animals-al", tmp_path, "--rows", "mesu-all", "bimu-all") == 0
    header, rows = _csv(tmp_path, "animals-al")
    mesu = next(r for r in rows if r[:2] == ["MESU", "100% updates"])
    assert mesu[header.index("Accuracy (%)")] == "-" and mesu[-1] == "0 (diverged)"
    assert next(r for r in rows if r[:2] == ["BiMU", "100% updates"])[header.index("Accuracy (%)")] == "50.00"
    md = (tmp_path / "animals-al.md").read_text()
    assert ("diverged (non-finite weights; left out of the means, seeds marked): mesu-all seed 0; method 'mesu' "
            "diverged during task 1: model.layers.0.mu_weight became non-finite") in md
    res = json.loads((tmp_path / "runs/quick/animals-al/mesu-all/seed-0/result.json").read_text())
    assert res["seed"] == 0 and res["diverged"].startswith("method 'mesu' diverged")


def test_runs_that_stopped_querying_are_named_under_the_comparison(tmp_path, monkeypatch):
    """A VR run that asked for a label or two in the whole stream (its samples agreed from the start) is
    named in the table's notes, its row and seed with the labels it asked for; its accuracy stays in the mean."""
    import bimu.experiments.sweep as sweep

    def fake(benchmark, seed, **kw):
        labels = 2 if kw["strategy"] == "vr" else 500
        return {"seed": seed, "accuracy": 0.0556 if labels == 2 else 0.5, "rare_accuracy": 0.0,
                "frequent_accuracy": 0.1, "query_fraction": labels / 1000, "labels_queried": labels}

    monkeypatch.setattr(sweep, "run_stream", fake)
    monkeypatch.setattr(al, "load_benchmark", lambda setup, opts: None)
    assert _run("animals-al", tmp_path, "--rows", "bimu-vr-0.1", "bimu-random-0.01") == 0
    md = (tmp_path / "animals-al.md").read_text()
    assert ("stopped querying at the start (10 labels or fewer in the stream): BiMU, VR, 0.1 seed 0 (2 labels); "
            "accuracy of these runs 5.56-5.56%") in md
    assert "Random, 0.01 seed" not in md
    # each run's wall time beside its result (which stays the same on a rerun), summed in a note
    run = tmp_path / "runs/quick/animals-al/bimu-vr-0.1/seed-0"
    assert set(json.loads((run / "timing.json").read_text())) == {"seconds", "threads"}
    assert "seconds" not in json.loads((run / "result.json").read_text())
    assert ("compute (wall time of each run's stream in its timing.json, one core; machines and their load "
            "differ): BiMU 0 s a run; <0.001 core-hours in all, 2 of 2 runs timed") in md

"""`bimu reproduce NAME`: quick-scale smoke tests of each entry (tables written, paper column, runs reused)."""

import csv
import os
from pathlib import Path

import pytest

from bimu.cli import REPRODUCTIONS, main
from bimu import paper
from bimu.reproduce import entries, plan, pmnist, runtable, spec
from bimu.reproduce.table import Table

needs_data = pytest.mark.skipif(not os.environ.get("BIMU_DATA_DIR"),
                                reason="BIMU_DATA_DIR is not set (Permuted MNIST entries need MNIST and Fashion-MNIST)")


def _tables(out: Path, name: str):
    md, cs, tex = (out / f"{name}.{ext}" for ext in ("md", "csv", "tex"))
    assert md.is_file() and cs.is_file() and tex.is_file()
    header = next(csv.reader(cs.open()))
    return md.read_text(), header, list(csv.reader(cs.open()))[1:], tex.read_text()


def _run_files(out: Path) -> dict[str, float]:
    files = [p for p in (out / "runs").rglob("*") if p.name in ("checkpoint.pt", "summary.json")]
    return {str(p): p.stat().st_mtime_ns for p in files}


def _quick(name, out, *more):
    return main(["reproduce", name, "--scale", "quick", "--engine", "torch", "--seeds", "1", "--out", str(out), *more])


def test_every_entry_is_a_reproduction():
    for name in entries.ENTRIES:
        assert REPRODUCTIONS[name] == "reproduce"
    assert REPRODUCTIONS["compute-cost"] == "compute-cost"


def test_seeds_and_scale_validated():
    assert spec.seeds_of(2) == (0, 1) and spec.seeds_of(1, first=1) == (1,)
    with pytest.raises(ValueError):
        spec.seeds_of(0)
    with pytest.raises(ValueError, match="--first-seed must be >= 0"):
        spec.seeds_of(2, first=-1)
    with pytest.raises(ValueError, match="scale"):
        entries.reproduce("memory-window", spec.Options(scale="huge"))
    with pytest.raises(ValueError, match="unknown reproduction"):
        entries.reproduce("nope", spec.Options())


def test_table_formats_agree(tmp_path):
    t = Table("T", ["a", "acc (%)"], [["x_1", "1.00 ± 0.10"]], ["note"])
    paths = t.write(tmp_path, "t")
    assert "| x_1 | 1.00 ± 0.10 |" in paths["md"].read_text()
    assert list(csv.reader(paths["csv"].open())) == [["a", "acc (%)"], ["x_1", "1.00 ± 0.10"]]
    assert "x\\_1 & 1.00 $\\pm$ 0.10 \\\\" in paths["tex"].read_text()


def test_memory_footprint(tmp_path):
    assert _quick("memory-footprint", tmp_path) == 0
    md, header, rows, tex = _tables(tmp_path, "memory-footprint")
    assert header == ["Method", "Memory (MB)", "Paper (MB)"]
    by = {r[0]: r for r in rows}
    assert by["BiMU"][1:] == ["0.32", "0.32"] and by["BayesBiNN"][2] == "0.64" and by["Syn. Meta."][2] == "1.84"
    # replay: the SGD network plus 1000 stored examples of 784 float32 inputs and an int64 label
    assert by["Replay, M = 1 000"][1:] == [f"{float(by['SGD'][1]) + 1000 * (4 * 784 + 8) / 1e6:.2f}", "-"]
    assert len(rows) == 9 and "Paper (MB)" in md and "Paper (MB)" in tex
    assert not (tmp_path / "runs").exists()


@needs_data
def test_memory_window_quick_and_reuse(tmp_path):
    assert _quick("memory-window", tmp_path) == 0
    md, header, rows, tex = _tables(tmp_path, "memory-window")
    assert header[:3] == ["Memory window N", "Mean acc. last 5 tasks (%)", "Paper"]
    assert [r[0] for r in rows] == ["100", "700", "BayesBiNN", "BayesBiNN, paper's prior sign",
                                    "BayesBiNN, exact ratio", "Replay, M = 1 000"]
    assert rows[1][2] == "90.29 ± 0.24" and all(r[2] == "67.91 ± 0.96" for r in rows[2:5])
    assert all(r[1] not in ("-", "n/a") for r in rows)
    assert rows[5][2] == "-" and rows[5][4] == "-"  # replay: not in the paper, no paper column
    assert "prior_direction=away" in md and "ratio_eps=0" in md
    assert "M = 1,000 stored examples (3.14 MB), 1 replayed with each incoming example" in md
    before = _run_files(tmp_path)
    assert sum(p.endswith("summary.json") for p in before) == 6
    assert _quick("memory-window", tmp_path) == 0
    assert _run_files(tmp_path) == before  # completed runs reused, not retrained


@needs_data
def test_activation_quick_and_reuse(tmp_path):
    assert _quick("activation", tmp_path) == 0
    md, header, rows, tex = _tables(tmp_path, "activation")
    assert header[:4] == ["Method", "Activation", "Mean acc. last 5 tasks (%)", "Paper"]
    assert len(rows) == 11
    by = {(r[0], r[1]): r for r in rows}
    replay = by[("Replay, M = 1 000", "ReLU")]  # experience replay on its ReLU network, no paper column
    assert replay[2] not in ("-", "n/a") and replay[3] == "-" and "no paper column" in md
    assert by[("BiMU", "RBG")][3] == "90.29 ± 0.24" and by[("MESU", "ReLU")][3] == "93.51 ± 0.18"
    # the paper's runs' norm (compatibility rows) beside bimu's, against the same paper numbers
    for act in ("Sign", "RBG"):
        compat = by[("Syn. Meta.", f"{act}, paper's norm")]
        assert compat[3] == by[("Syn. Meta.", act)][3] and compat[2] not in ("-", "n/a")
    assert md.count("bn_statistics=equinox") == 1  # the two compatibility rows' note, stated once
    for name in ("MESU", "Syn. Meta."):  # every row is a run
        assert by[(name, "RBG")][2] not in ("-", "n/a")
    assert "not applicable" not in md
    assert by[("BiMU", "Sign")][2] not in ("-", "n/a")
    before = _run_files(tmp_path)
    assert _quick("activation", tmp_path) == 0
    assert _run_files(tmp_path) == before


@needs_data
def test_pmnist_1000_quick_and_reuse(tmp_path):
    assert _quick("pmnist-1000", tmp_path) == 0
    md, header, rows, tex = _tables(tmp_path, "pmnist-1000")
    assert [r[0] for r in rows] == ["BiMU", "SGD"]
    assert rows[0][2] == "90.30 ± 0.38" and rows[1][2] == "66.64 ± 2.70"
    assert "Paper" in header and "Paper" in tex
    before = _run_files(tmp_path)
    assert _quick("pmnist-1000", tmp_path) == 0
    assert _run_files(tmp_path) == before


def test_full_scale_configs_follow_the_paper():
    opts = spec.Options(seeds=(0, 1, 2, 3, 4))
    mw = pmnist.rows_memory_window(opts)
    assert [r.config.overrides.get("memory_window") for r in mw[:-4]] == [100, 400, 700, 1000, 1300, 1600, 1900, 100000]
    assert [(r.slug, r.config.overrides) for r in mw[-4:-1]] == [
        ("bayesbinn", {}), ("bayesbinn-away", {"prior_direction": "away"}), ("bayesbinn-exact-ratio", {"ratio_eps": 0.0})]
    replay = mw[-1]  # experience replay with its defaults, which its label and note state
    assert (replay.slug, replay.config.method, replay.config.overrides, replay.paper) == ("replay", "replay", {}, {})
    hp = replay.config.resolve_hparams()[1]
    assert (hp["buffer_size"], hp["replay_batch_size"], hp["lr"]) == (1000, 1, 9e-4) and "M = 1 000" in replay.labels[0]
    assert all(r.config.tasks == 100 and r.config.train_limit is None and r.config.seeds == opts.seeds for r in mw)
    t1 = pmnist.rows_pmnist_1000(opts)
    assert [r.config.method for r in t1] == list(paper.METHOD_ORDER)
    assert all(r.config.tasks == 1000 and r.config.eval_all_every == 0 and r.config.eval_final == "all" for r in t1)


def test_same_configuration_compares_what_trains():
    opts = spec.Options(seeds=(0, 1))
    base = pmnist.base_config(opts, tasks_full=100, method="bimu")
    assert spec.same_configuration(base, base.replace(overrides={"memory_window": 700}))  # = the preset's value
    assert spec.same_configuration(base, base.replace(seeds=(3,), out="elsewhere", threads=2))
    assert not spec.same_configuration(base, base.replace(overrides={"memory_window": 701}))
    assert not spec.same_configuration(base, base.replace(tasks=99))
    assert not spec.same_configuration(base, pmnist.base_config(opts, tasks_full=100, method="bayesbinn"))


def test_full_scale_activation_shares_the_identical_memory_window_runs():
    opts = spec.Options(seeds=(0, 1), out="repro")
    act = {r.slug: r for r in pmnist.rows_activation(opts)}
    mw = {r.slug: r for r in pmnist.rows_memory_window(opts)}
    assert act["bimu-rbg"].same_runs_as == ("memory-window", "bimu-N700")
    assert act["bayesbinn-rbg"].same_runs_as == ("memory-window", "bayesbinn")
    assert act["replay"].same_runs_as == ("memory-window", "replay")  # one run per seed for both tables
    assert spec.row_dir(opts, "activation", act["replay"]) == Path("repro/runs/full/memory-window/replay")
    assert spec.row_dir(opts, "activation", act["bimu-rbg"]) == spec.row_dir(opts, "memory-window", mw["bimu-N700"])
    assert "same runs as memory-window row bimu-N700" in act["bimu-rbg"].note
    assert act["mesu-rbg"].config.overrides == {"activation": "rbg"}
    assert act["synaptic-metaplasticity-rbg-equinox"].config.overrides == {"activation": "rbg", "bn_statistics": "equinox"}
    for slug in ("bimu-sign", "bayesbinn-sign", "mesu-relu", "mesu-rbg", "synaptic-metaplasticity-sign",
                 "synaptic-metaplasticity-rbg", "synaptic-metaplasticity-sign-equinox",
                 "synaptic-metaplasticity-rbg-equinox"):
        assert act[slug].same_runs_as is None
        assert spec.row_dir(opts, "activation", act[slug]) == Path("repro/runs/full/activation") / slug
    quick = spec.Options(seeds=(0,), scale="quick")  # quick rows differ (example limits): nothing shared
    assert all(r.same_runs_as is None for r in pmnist.rows_activation(quick))


@needs_data
def test_a_shared_row_reuses_the_other_tables_runs(tmp_path, monkeypatch):
    # make the quick activation rows' limits those of memory-window, so BiMU RBG = memory-window N = 700
    real = pmnist.base_config
    monkeypatch.setattr(pmnist, "base_config", lambda opts, **kw: real(opts, **{k: v for k, v in kw.items()
                                                                               if k not in ("train_limit", "test_limit")}))
    assert _quick("memory-window", tmp_path, "--rows", "bimu-N700") == 0
    _, _, mw_rows, _ = _tables(tmp_path, "memory-window")
    before = _run_files(tmp_path)
    assert sum(p.endswith("summary.json") for p in before) == 1  # the one row asked for
    assert _quick("activation", tmp_path, "--rows", "bimu-rbg") == 0
    assert _run_files(tmp_path) == before  # nothing trained: memory-window's run was reused
    md, _, rows, _ = _tables(tmp_path, "activation")
    by = {(r[0], r[1]): r for r in rows}
    assert by[("BiMU", "RBG")][2] == mw_rows[1][1] and mw_rows[1][0] == "700"
    assert "same runs as memory-window row bimu-N700" in md
    assert not (tmp_path / "runs" / "quick" / "activation" / "bimu-rbg").exists()


def test_ood_auc_and_mmrr_cells():
    import numpy as np

    assert spec.ood_auc_of({"ood_auc": {"epistemic": 0.9, "aleatoric": 0.6}}) == 0.9
    assert spec.ood_auc_of({"ood_auc": {"aleatoric": 0.6}}) == 0.6
    assert spec.ood_auc_of({}) is None
    R1 = np.array([[0.9, np.nan], [0.5, 0.8]])
    R2 = np.array([[0.7, np.nan], [0.5, 0.6]])
    # seed-averaged: max 0.8, final 0.7 -> 1 / (0.1 + eps)
    cell = runtable.seed_averaged_mmrr([{"_R": R1}, {"_R": R2}])
    assert abs(float(cell) - 10.0) < 0.01
    assert runtable.seed_averaged_mmrr([]) == "-"


def _fake_summaries(rows, acc, auc):
    return {r.slug: [{"seed": s, "last_k_acc": a, "ood_auc": {"epistemic": u}, "complete": True}
                     for s, (a, u) in enumerate(zip(acc, auc))] for r in rows if r.config is not None}


def test_full_scale_gaps_beyond_two_sd_are_marked_and_explained(monkeypatch):
    from bimu.reproduce import gaps

    # the fake numbers below, not the causes recorded for the real runs of this entry
    monkeypatch.setattr(gaps, "EXPLANATIONS", {k: v for k, v in gaps.EXPLANATIONS.items() if k[0] != "memory-window"})
    opts = spec.Options(seeds=(0, 1), scale="full")
    entry = entries.ENTRIES["memory-window"]
    rows = entry.rows(opts)
    # 95.0 ± 0.1414 (2 seeds) against N = 700's 90.29 ± 0.24 (5 runs): 4.71 / sqrt(0.24^2 / 5 + 0.1414^2 / 2)
    # = 4.71 / 0.1467 = 32.1 sd; AUC 0.99 against 0.99 ± 0.01: no gap
    table = runtable.run_table(entry, opts, rows, _fake_summaries(rows, [0.949, 0.951], [0.99, 0.99]))
    by = {r[0]: r for r in table.rows}
    assert by["700"][1] == "95.00 ± 0.14 †1" and by["700"][3] == "0.99 ± 0.00"
    assert by["1 000"][1] == "95.00 ± 0.14 †1"  # every unexplained cell shares the cause "open"
    [open_gap] = [g for g in table.gaps if g["cause"] == "open"]  # one cause for all unexplained cells
    assert open_gap["mark"] == "†1" and open_gap["text"] == "not explained yet"
    assert ("700, Mean acc. last 5 tasks (%): 95.00 ± 0.14 against the paper's 90.29 ± 0.24 (32.1 sd)"
            in open_gap["cells"])
    monkeypatch.setitem(gaps.EXPLANATIONS, ("memory-window", "bimu-N700", "acc"), ("x", "cause: X, checked by Y"))
    monkeypatch.setitem(gaps.EXPLANATIONS, ("memory-window", "bimu-N1000", "acc"), ("x", "cause: X, checked by Y"))
    table = runtable.run_table(entry, opts, rows, _fake_summaries(rows, [0.949, 0.951], [0.99, 0.99]))
    by = {r[0]: r for r in table.rows}
    assert by["400"][1].endswith("†1") and by["700"][1].endswith("†2") and by["1 000"][1].endswith("†2")
    x = [g for g in table.gaps if g["cause"] == "x"]
    assert len(x) == 1 and len(x[0]["cells"]) == 2  # one cause, written once, naming both cells
    md = table.markdown()
    assert md.count("cause: X, checked by Y") == 1 and '<a id="gap-x"></a>' in md
    # within two sd: nothing marked (N = 700: 90.5 ± 0.14 against 90.29 ± 0.24 is 0.21 / 0.1467 = 1.4 sd)
    table = runtable.run_table(entry, opts, rows, _fake_summaries(rows, [0.904, 0.906], [0.99, 0.99]))
    by = {r[0]: r for r in table.rows}
    assert by["700"][1] == "90.50 ± 0.14" and not any("700," in c for g in table.gaps for c in g["cells"])


def test_the_gap_rule_is_the_sd_of_the_difference_of_the_two_means():
    from bimu.reproduce.gaps import gap_sd

    # ours 93.63, 93.71 (mean 93.67, sample sd 0.0566, n = 2); paper 94.67 ± 0.11 over 5 runs:
    # 1.00 / sqrt(0.11^2 / 5 + 0.0566^2 / 2) = 1.00 / sqrt(0.00242 + 0.0016) = 15.77 sd
    assert round(gap_sd([93.63, 93.71], (94.67, 0.11)), 2) == 15.77
    # ours 89.48 ± 0.46 (n = 2) against 90.27 ± 0.32: 0.79 / sqrt(0.32^2 / 5 + 0.46^2 / 2) = 2.2 (flagged),
    # where sqrt(0.32^2 + 0.46^2) = 0.56 would give 1.4
    ours = [89.48 - 0.46 / 2 ** 0.5, 89.48 + 0.46 / 2 ** 0.5]
    assert round(gap_sd(ours, (90.27, 0.32)), 1) == 2.2
    # one seed: only the paper's term, 1.0 / (0.5 / sqrt(5)) = 4.47; paper_runs=1 gives 2.0
    assert round(gap_sd([91.0], (90.0, 0.5)), 2) == 4.47 and gap_sd([91.0], (90.0, 0.5), paper_runs=1) == 2.0


def test_quick_scale_and_stand_in_rows_are_not_judged():
    quick = spec.Options(seeds=(0, 1), scale="quick")
    entry = entries.ENTRIES["memory-window"]
    rows = entry.rows(quick)
    table = runtable.run_table(entry, quick, rows, _fake_summaries(rows, [0.5, 0.52], [0.6, 0.61]))
    assert not any("†" in c for r in table.rows for c in r) and not any(n.startswith("†") for n in table.notes)
    full = spec.Options(seeds=(0, 1), scale="full")
    sentry = entries.ENTRIES["standardisation"]
    srows = sentry.rows(full)
    assert all(r.config.benchmark == "objects-seq" for r in srows if r.config is not None)
    summ = {r.slug: [{"seed": s, "final_mean_acc": 0.01 * s, "ood_auc": {"epistemic": 0.5, "aleatoric": 0.5},
                      "complete": True} for s in (0, 1)] for r in srows if r.config is not None}
    table = runtable.run_table(sentry, full, srows, summ)
    assert not any("†" in c for r in table.rows for c in r)


def test_dry_run_lists_runs_states_and_estimates_without_training(tmp_path, capsys, monkeypatch):
    from bimu.rundir import RunDir, seed_dir

    # no committed runs to estimate from (tests/test_reproduce_estimates.py: estimates from them)
    monkeypatch.setenv("BIMU_COMMITTED_RUNS", str(tmp_path / "no-committed-runs"))

    opts = spec.Options(seeds=(0, 1), scale="full", out=str(tmp_path))
    mw = {r.slug: r for r in pmnist.rows_memory_window(opts)}
    # seed 0 of N = 100 stopped after 40 of 100 tasks at 20 s per task (+ 1 s evaluation)
    d = seed_dir(spec.row_dir(opts, "memory-window", mw["bimu-N100"]), "pmnist", "bimu", 0)
    rd = RunDir(d)
    rd.write_json("config.json", {"benchmark": "pmnist", "method": "bimu", "tasks": 100, "hidden": [100]})
    rd.write_metrics([{"task": t, "acc": 0.9, "train_seconds": 20.0, "eval_seconds": 1.0, "steps_per_s": 3000.0}
                      for t in range(40)])
    runs = {(r["row"], r["seed"]): r for r in plan.plan("memory-window", opts)}
    assert len(runs) == 24  # 8 BiMU rows, 3 BayesBiNN rows and replay, 2 seeds each
    assert runs[("bimu-N100", 0)]["state"] == "stopped" and runs[("bimu-N100", 0)]["seconds_left"] == 60 * 21.0
    # not started: estimated from the started BiMU run (same benchmark and widths), 100 tasks x 21 s
    assert runs[("bimu-N700", 1)]["state"] == "to run" and runs[("bimu-N700", 1)]["seconds_left"] == 2100.0
    assert runs[("bayesbinn", 0)]["seconds_left"] is None  # no started BayesBiNN run: no estimate
    act = {(r["row"], r["seed"]): r for r in plan.plan("activation", opts)}
    assert act[("bimu-rbg", 0)]["shared_with"] == "memory-window/bimu-N700"
    assert main(["reproduce", "memory-window", "--dry-run", "--seeds", "2", "--out", str(tmp_path),
                 "--rows", "bimu-N100", "bayesbinn"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "memory-window: 4 runs (1 stopped, 3 to run)"  # left: (60 + 100) tasks x 21 s = 56 min
    assert out[-1] == ("work left: 56 min of one core "
                       "(+ 2 not estimated: no run of their kind started under OUT/runs or committed)")
    # --first-seed: seed 1 alone (another queue or machine runs seed 0), its run to do
    assert main(["reproduce", "memory-window", "--dry-run", "--seeds", "1", "--first-seed", "1", "--out",
                 str(tmp_path), "--rows", "bimu-N100"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[:3] == ["memory-window: 1 run (1 to run)", "row        seed  state   tasks    left",
                      "bimu-N100  1     to run  0/100  35 min"]  # 100 tasks x 21 s, as seed 0's started run
    assert not (tmp_path / "memory-window.md").exists()  # nothing written
    assert sorted(p.name for p in (tmp_path / "runs").rglob("*") if p.is_file()) == ["config.json", "metrics.jsonl"]
    assert main(["reproduce", "openloris-al", "--dry-run", "--out", str(tmp_path)]) == 2
    assert "builds its own" in capsys.readouterr().err


def test_dry_run_of_an_entry_without_runs_says_so(tmp_path, capsys):
    assert main(["reproduce", "memory-footprint", "--dry-run", "--out", str(tmp_path)]) == 2
    assert "trains nothing" in capsys.readouterr().err


def test_dry_run_estimates_from_the_median_of_the_started_runs(tmp_path):
    from bimu.rundir import RunDir, seed_dir

    opts = spec.Options(seeds=(0, 1), scale="full", out=str(tmp_path))
    mw = {r.slug: r for r in pmnist.rows_memory_window(opts)}
    for slug, per_task in (("bimu-N100", 21.0), ("bimu-N400", 30.0)):  # two started runs: 21 s and 30 s per task
        rd = RunDir(seed_dir(spec.row_dir(opts, "memory-window", mw[slug]), "pmnist", "bimu", 0))
        rd.write_json("config.json", {"benchmark": "pmnist", "method": "bimu", "tasks": 100, "hidden": [100]})
        rd.write_metrics([{"task": t, "acc": 0.9, "train_seconds": per_task - 1.0, "eval_seconds": 1.0,
                           "steps_per_s": 3000.0} for t in range(10)])
    runs = {(r["row"], r["seed"]): r for r in plan.plan("memory-window", opts)}
    assert runs[("bimu-N400", 0)]["seconds_left"] == 90 * 30.0  # its own rate
    assert runs[("bimu-N700", 0)]["seconds_left"] == 100 * 25.5  # median of 21 and 30, not the upper one


def test_a_printed_zero_std_is_half_a_unit_of_its_last_digit():
    from bimu.reproduce.gaps import gap_sd, parse_reported

    # our 0.992 and 0.994 against the paper's "0.99 ± 0.00": 0.003 / sqrt(0.005^2 / 5 + 0.00141^2 / 2) = 1.22 sd
    assert parse_reported("0.99 ± 0.00") == (0.99, 0.005)
    assert round(gap_sd([0.992, 0.994], parse_reported("0.99 ± 0.00")), 2) == 1.22
    assert parse_reported("139.47") == (139.47, None)  # no std printed: nothing assumed


def test_every_recorded_gap_explanation_names_a_real_cell():
    """A typo in an EXPLANATIONS key would leave its gap 'not explained yet' without anyone noticing."""
    from bimu.reproduce import gaps

    full = spec.Options(seeds=(0, 1), scale="full")
    assert gaps.EXPLANATIONS
    for (name, slug, quantity), (cause, text) in gaps.EXPLANATIONS.items():
        entry = entries.ENTRIES[name]
        assert entry.rows is not None, name
        assert slug in {r.slug for r in entry.rows(full)}, (name, slug)
        assert quantity in entry.quantities, (name, slug, quantity)
        assert text.startswith(("cause", "open", "partly")), (name, slug, quantity)
        assert (gaps.resources.files(gaps) / f"{cause}.md").is_file()

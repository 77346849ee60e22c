"""``bimu report`` groups runs by configuration: one row per distinct resolved configuration and data
fingerprint, the keys that tell rows of one benchmark and method apart shown as columns, seeds
averaged only within a row; keys that never change results (output folder, threads, ...) never split
a row, and a seed in two runs of one configuration is an error naming both directories."""

from __future__ import annotations

import json

import numpy as np
import pytest

import test_runner_fakes  # noqa: F401 - registers the fake-test benchmark
from bimu import cli
from bimu.report.tables import report
from bimu.rundir import RunDir, seed_dir

NAN = np.nan


def fake_run(root, seed, acc, *, threshold=0.2, budget=None, out="runs", threads=1, sha=None, **config):
    """A complete two-task run directory ``root/pmnist-bimu/seed-<seed>`` (``root/npz-bimu/...`` with a data
    fingerprint ``sha``) whose summary's last-k and first-task accuracies are ``acc``, with a ``config.json``
    laid out as the runner writes it (``config`` overrides its keys)."""
    rd = RunDir(seed_dir(root, "pmnist", "bimu", seed))
    resolved = {"sizes": [784, 100, 10], "preset": "pmnist-100", "note": "", "engine": "fused",
                "hparams": {"lr": 0.1, "memory_window": 700.0}}
    cfg = {"benchmark": "pmnist", "method": "bimu", "tasks": 2, "seeds": [seed], "hidden": [100], "preset": "auto",
           "overrides": {}, "engine": "auto", "threads": threads, "out": out, "data_dir": None, "log_to": [],
           "active": "vr", "threshold": threshold, "mc_samples": 10, "budget": budget, "budget_exponent": 0.5}
    if sha is not None:
        cfg.update(benchmark="npz", benchmark_options={"path": f"/data/{sha}.npz"})
        resolved["data_file"] = {"path": f"/data/{sha}.npz", "sha256": sha * 8}
        rd = RunDir(seed_dir(root, "npz", "bimu", seed))
    cfg.update(config)
    rd.write_json("config.json", {**cfg, "resolved": resolved})
    R = np.array([[acc, NAN], [acc - 0.1, acc]])
    rd.write_matrix(R)
    rd.write_metrics([{"task": t} for t in range(2)])
    rd.write_json("summary.json", {"complete": True, "seed": seed, "last_k": 5, "last_k_acc": acc,
                                   "ood_auc": None, "mmrr": 10.0, "bwt": -0.1, "first_task_acc": acc,
                                   "steps_per_s": 100.0, "active": {"query_fraction": 0.5}})
    return rd.path


def rows(table: str) -> list[dict[str, str]]:
    """The table's rows as header -> cell."""
    lines = [ln for ln in table.splitlines() if ln.startswith("|")]
    head = [c.strip() for c in lines[0].strip("|").split("|")]
    return [dict(zip(head, (c.strip() for c in ln.strip("|").split("|")))) for ln in lines[2:]]


def test_mixed_thresholds_give_one_row_each_with_their_own_seeds_and_means(tmp_path):
    for threshold, accs in ((0.2, (0.80, 0.84)), (0.4, (0.60, 0.70))):
        for seed, acc in enumerate(accs):
            fake_run(tmp_path / f"t{threshold}", seed, acc, threshold=threshold, out=str(tmp_path / f"t{threshold}"))
    table, groups = report([tmp_path], paper=False)
    got = rows(table)
    assert len(got) == 2 and len(groups) == 2
    assert [r["threshold"] for r in got] == ["threshold=0.2", "threshold=0.4"]
    assert [r["seeds"] for r in got] == ["0,1", "0,1"]
    # last-k accuracy: mean 82, sample std of (80, 84) = 2.83; mean 65, std of (60, 70) = 7.07
    assert [r["last-k acc (%)"] for r in got] == ["82.00 ± 2.83", "65.00 ± 7.07"]
    assert [r["1st task (%)"] for r in got] == ["82.00 ± 2.83", "65.00 ± 7.07"]
    assert "budget" not in got[0]  # a key all the runs agree on is no column


def test_thresholds_and_budgets_each_get_a_column_and_rows_sort_by_value(tmp_path):
    for i, (threshold, budget) in enumerate(((0.05, 0.1), (0.2, 0.1), (0.2, 0.3), (0.4, 0.3))):
        fake_run(tmp_path / str(i), 0, 0.5 + 0.1 * i, threshold=threshold, budget=budget, out=str(tmp_path / str(i)))
    got = rows(report([tmp_path], paper=False)[0])
    assert [(r["threshold"], r["budget"], r["seeds"], r["last-k acc (%)"]) for r in got] == [
        ("threshold=0.05", "budget=0.1", "0", "50.00"), ("threshold=0.2", "budget=0.1", "0", "60.00"),
        ("threshold=0.2", "budget=0.3", "0", "70.00"), ("threshold=0.4", "budget=0.3", "0", "80.00")]


def test_output_folder_threads_and_other_bookkeeping_never_split_a_row(tmp_path):
    fake_run(tmp_path / "a", 0, 0.80, out=str(tmp_path / "a"), threads=1, log_to=[])
    fake_run(tmp_path / "b", 1, 0.84, out=str(tmp_path / "b"), threads=4, log_to=["csv"], data_dir="/d",
             seeds=[1, 2, 3], engine="fused", overrides={"lr": "0.1"}, preset="pmnist-100")
    fake_run(tmp_path / "c", 0, 0.60, threshold=0.4, out=str(tmp_path / "c"), threads=2)  # another configuration
    table, groups = report([tmp_path], paper=False)
    got = rows(table)
    assert len(got) == 2 and len(groups) == 2
    assert [(r["threshold"], r["seeds"], r["last-k acc (%)"]) for r in got] == [
        ("threshold=0.2", "0,1", "82.00 ± 2.83"), ("threshold=0.4", "0", "60.00")]
    assert not {"out", "threads", "log_to", "data_dir", "engine", "lr", "preset"} & set(got[0])  # no such columns


def test_the_ignored_keys_hold_every_key_a_run_may_resume_with_changed():
    from bimu.experiments.config import NON_SEMANTIC_KEYS
    from bimu.report.tables import REPORT_IGNORED_KEYS

    assert set(NON_SEMANTIC_KEYS) <= set(REPORT_IGNORED_KEYS)


def test_a_hyperparameter_or_the_engine_that_ran_splits_a_row(tmp_path):
    fake_run(tmp_path / "a", 0, 0.80, out=str(tmp_path / "a"))
    for name, change in (("b", ("hparams", "memory_window", 900.0)), ("c", ("engine", None, "torch"))):
        rd = RunDir(fake_run(tmp_path / name, 0, 0.60, out=str(tmp_path / name)))
        cfg = rd.read_json("config.json")
        if change[0] == "hparams":
            cfg["resolved"]["hparams"][change[1]] = change[2]
        else:
            cfg["resolved"]["engine"] = change[2]
        rd.write_json("config.json", cfg)
    got = rows(report([tmp_path], paper=False)[0])
    assert sorted((r["memory_window"], r["engine"], r["seeds"]) for r in got) == [
        ("memory_window=700", "engine=fused", "0"), ("memory_window=700", "engine=torch", "0"),
        ("memory_window=900", "engine=fused", "0")]


def test_a_run_made_before_a_hyperparameter_existed_is_the_same_configuration(tmp_path):
    """sgd's ``bias`` (default and value before it existed: true): a run whose config.json predates it
    is a seed of the row of runs that record ``bias: true``, not of those with ``bias: false``."""
    for seed, (acc, hparams) in enumerate(((0.80, {"lr": 0.1}), (0.84, {"lr": 0.1, "bias": True}),
                                           (0.60, {"lr": 0.1, "bias": False}))):
        rd = RunDir(fake_run(tmp_path / str(seed), seed if seed < 2 else 0, acc, method="sgd", active=None,
                             threshold=None, out=str(tmp_path / str(seed))))
        cfg = rd.read_json("config.json")
        cfg["resolved"]["hparams"] = hparams
        rd.write_json("config.json", cfg)
    got = rows(report([tmp_path], paper=False)[0])
    assert [(r["bias"], r["seeds"], r["last-k acc (%)"]) for r in got] == [
        ("bias=false", "0", "60.00"), ("bias=true", "0,1", "82.00 ± 2.83")]


def test_a_seed_in_two_runs_of_one_configuration_is_one_line_exit_2(tmp_path, capsys):
    a = fake_run(tmp_path / "a", 0, 0.80, out=str(tmp_path / "a"))
    b = fake_run(tmp_path / "b", 0, 0.84, out=str(tmp_path / "b"), threads=8)
    with pytest.raises(ValueError) as e:  # a DuplicateSeedError
        report([tmp_path], paper=False)
    assert str(a) in str(e.value) and str(b) in str(e.value)
    assert cli.main(["report", str(tmp_path), "--plot", str(tmp_path / "p.png")]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in captured.err, captured.err
    assert err[0].startswith("bimu: error: seed 0 of pmnist-bimu") and str(a) in err[0] and str(b) in err[0]
    assert captured.out == "" and not (tmp_path / "p.png").exists()


def test_two_data_fingerprints_give_two_rows(tmp_path):
    fake_run(tmp_path / "a", 0, 0.80, sha="a1", out=str(tmp_path / "a"))
    fake_run(tmp_path / "a", 1, 0.84, sha="a1", out=str(tmp_path / "a"))
    fake_run(tmp_path / "b", 0, 0.60, sha="b2", out=str(tmp_path / "b"))
    got = rows(report([tmp_path], paper=False)[0])
    assert [(r["benchmark"], r["data"], r["seeds"], r["last-k acc (%)"]) for r in got] == [
        ("npz", "data=" + ("a1" * 8)[:12], "0,1", "82.00 ± 2.83"), ("npz", "data=" + ("b2" * 8)[:12], "0", "60.00")]
    assert "path" not in got[0]  # the fingerprint tells the files apart, not where they were


def test_the_same_data_file_at_another_path_is_the_same_row(tmp_path):
    fake_run(tmp_path / "a", 0, 0.80, sha="a1", out=str(tmp_path / "a"))
    rd = RunDir(fake_run(tmp_path / "b", 1, 0.84, sha="a1", out=str(tmp_path / "b")))
    cfg = rd.read_json("config.json")
    cfg["benchmark_options"]["path"] = cfg["resolved"]["data_file"]["path"] = "/elsewhere/copy.npz"
    rd.write_json("config.json", cfg)
    fake_run(tmp_path / "c", 0, 0.60, sha="c3", out=str(tmp_path / "c"))  # another file
    got = rows(report([tmp_path], paper=False)[0])
    assert [(r["data"], r["seeds"], r["last-k acc (%)"]) for r in got] == [
        ("data=a1a1a1a1a1a1", "0,1", "82.00 ± 2.83"), ("data=c3c3c3c3c3c3", "0", "60.00")]


def test_real_runs_of_two_configurations_through_the_cli(tmp_path, capsys):
    """Runs the runner wrote (fake-test benchmark): two memory windows, two seeds each, in two output folders."""
    for window in ("500", "900"):
        out = tmp_path / f"w{window}"
        assert cli.main(["run", "fake-test", "--tasks", "2", "--seeds", "0", "1", "--out", str(out), "--no-progress",
                         "--no-ood", "--set", f"memory_window={window}", "--engine", "torch"]) == 0
    capsys.readouterr()
    assert cli.main(["report", str(tmp_path), "--plot", str(tmp_path / "p.png")]) == 0
    got = rows(capsys.readouterr().out)
    assert [(r["memory_window"], r["seeds"]) for r in got] == [("memory_window=500", "0,1"),
                                                               ("memory_window=900", "0,1")]
    summaries = {w: [json.loads((tmp_path / f"w{w}" / "fake-test-bimu" / f"seed-{s}" / "summary.json").read_text())
                     ["last_k_acc"] for s in (0, 1)] for w in ("500", "900")}
    for r, w in zip(got, ("500", "900")):
        a = 100 * np.array(summaries[w])
        assert r["last-k acc (%)"].split(" (last")[0] == f"{a.mean():.2f} ± {a.std(ddof=1):.2f}"

"""Tuning on your own stream: the validation split of a ``.npz`` (held-out training rows, or the file's
``x_val``/``y_val``), ``bimu tune FILE.npz`` and ``bimu sweep-threshold FILE.npz`` on it, and ``--set`` /
``--hidden`` spelled the same in run, tune and sweep-threshold."""

import argparse
import json
from pathlib import Path

import numpy as np
import pytest

from bimu import cli
from bimu.data.own import load_npz

N_TRAIN, N_TEST, D, C = (50, 40), 20, 16, 3
"""Training rows of tasks 0 and 1, test rows per task, features, classes."""


def stream(seed=0, val=False):
    """Two tasks of Gaussian blobs; every row is unique (row i's feature 0 is i + 1000 * split)."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(0, 2, (2, C, D))

    def draw(task, n, split):
        y = rng.integers(0, C, n)
        x = (centres[task][y] + rng.normal(0, 1, (n, D))).astype(np.float32)
        x[:, 0] = np.arange(n) + 1000 * split + 100 * task
        return x, y

    parts = {split: [draw(t, n, k) for t, n in enumerate(ns)]
             for k, (split, ns) in enumerate((("train", N_TRAIN), ("test", (N_TEST, N_TEST)), ("val", (9, 7))))}
    out = {}
    for split in ("train", "test", "val") if val else ("train", "test"):
        out[f"x_{split}"] = np.concatenate([x for x, _ in parts[split]])
        out[f"y_{split}"] = np.concatenate([y for _, y in parts[split]])
        out[f"task_{split}"] = np.concatenate([np.full(len(y), t) for t, (_, y) in enumerate(parts[split])])
    return out


@pytest.fixture
def npz(tmp_path):
    path = tmp_path / "mine.npz"
    np.savez(path, **stream())
    return str(path)


def held_out_counts(fraction=0.2):
    return [int(round(fraction * n)) for n in N_TRAIN]


# ----------------------------------------------------------------------------- the validation split
def test_the_validation_split_holds_a_fraction_of_each_task_out(npz):
    full = load_npz(npz)
    v = load_npz(npz, validation=True)
    again = load_npz(npz, validation=True)
    other = load_npz(npz, validation=True, validation_seed=1)
    assert v.name == "mine.npz[validation]" and v.n_tasks == 2 and v.held_out == again.held_out != other.held_out
    for t, n in enumerate(N_TRAIN):
        held = held_out_counts()[t]
        xs, _ = v.train_task(t, seed=0)
        xv, yv = v.validation_task(t)
        assert len(v.held_out[t]) == held == len(xv) and len(xs) == n - held
        assert set(xs[:, 0].tolist()).isdisjoint(xv[:, 0].tolist())  # no held-out row is trained on
        full_x, full_y = full.train_task(t, seed=0)
        assert sorted(xs[:, 0].tolist() + xv[:, 0].tolist()) == sorted(full_x[:, 0].tolist())
        assert xv[:, 0].tolist() == full_x[v.held_out[t], 0].tolist() and yv.tolist() == full_y[v.held_out[t]].tolist()
        assert xs[:, 0].tolist() == sorted(xs[:, 0].tolist())  # the rest keep the file order
        assert v.test_task(t)[0][:, 0].tolist() == xv[:, 0].tolist()  # evaluated on validation rows, never the test
    half = load_npz(npz, validation=True, validation_fraction=0.5)
    assert [len(h) for h in half.held_out] == [25, 20]
    with pytest.raises(ValueError, match="validation_fraction must lie in"):
        load_npz(npz, validation=True, validation_fraction=1.0)
    with pytest.raises(ValueError, match="no validation split"):
        full.validation_task(0)


def test_the_files_own_validation_arrays_are_the_split(tmp_path):
    arrays = stream(val=True)
    path = tmp_path / "withval.npz"
    np.savez(path, **arrays)
    v = load_npz(path, validation=True)
    assert v.held_out is None
    assert [len(v.train_task(t, 0)[1]) for t in (0, 1)] == list(N_TRAIN)  # every training row is trained on
    assert [len(v.validation_task(t)[1]) for t in (0, 1)] == [9, 7]
    assert v.test_task(1)[0][:, 0].tolist() == arrays["x_val"][arrays["task_val"] == 1][:, 0].tolist()
    with pytest.raises(ValueError, match="give no validation_fraction"):
        load_npz(path, validation=True, validation_fraction=0.3)
    no_task = {k: v for k, v in arrays.items() if k != "task_val"}
    np.savez(tmp_path / "notask.npz", **no_task)
    with pytest.raises(ValueError, match="task_val: is needed with task_train"):
        load_npz(tmp_path / "notask.npz")


# ----------------------------------------------------------------------------- bimu tune FILE.npz
def test_tune_on_an_npz_trains_without_its_validation_rows_and_exports_the_file(npz, tmp_path, capsys, monkeypatch):
    pytest.importorskip("optuna")
    import bimu.experiments.stream as stream_module
    import bimu.tune.evaluators as ev
    from bimu.data.own import OwnBenchmark

    methods, trained, evaluated = [], [], []
    real_build, real_train, real_eval = ev.build_method, OwnBenchmark.train_task, stream_module.evaluate

    def build(*a, **k):
        m, used = real_build(*a, **k)
        methods.append((a[1], m))
        return m, used

    def train_task(self, task, seed):
        x, y = real_train(self, task, seed)
        trained.extend(x[:, 0].tolist())
        return x, y

    def evaluate(method, x, y, **kw):
        evaluated.extend(x[:, 0].tolist())
        return real_eval(method, x, y, **kw)

    monkeypatch.setattr(ev, "build_method", build)
    monkeypatch.setattr(OwnBenchmark, "train_task", train_task)
    monkeypatch.setattr(stream_module, "evaluate", evaluate)
    out = tmp_path / "tune"
    code = cli.main(["tune", npz, "--method", "bimu", "--trials", "2", "--hidden", "8", "--set", "n_samples=2",
                     "--set", "memory_window=900", "--sampler-seed", "0", "--out", str(out), "--quiet"])
    err = capsys.readouterr().err
    assert code == 0, err
    assert "no validation split" not in err
    best = json.loads((out / "best_config.json").read_text())
    assert best["benchmark"] == str(Path(npz).resolve()) and best["hidden"] == [8]
    assert best["overrides"]["n_samples"] == 2 and best["overrides"]["memory_window"] == 900
    info = json.loads((out / "best_trial.json").read_text())
    assert info["validation_options"]["validation"] is True and info["study"] == "mine-bimu"
    assert len(methods) == 2 and all(sizes == [D, 8, C] for sizes, _ in methods)
    per_trial = sum(N_TRAIN) - sum(held_out_counts())
    assert [m.examples_seen for _, m in methods] == [per_trial, per_trial]  # the held-out rows were not learned
    held = load_npz(npz, validation=True)
    held_rows = {float(v) for t in (0, 1) for v in held.validation_task(t)[0][:, 0].tolist()}
    assert held_rows.isdisjoint(trained) and len(trained) == 2 * per_trial
    assert set(evaluated) == held_rows  # evaluated on the held-out rows only (test rows are >= 1000)
    assert (out / "optuna.journal").exists() and list(out.glob("worker-*.json"))


def test_tune_npz_with_option_path_and_python_form(npz, tmp_path, capsys):
    pytest.importorskip("optuna")
    from bimu import tune

    code = cli.main(["tune", "npz", "--option", f"path={npz}", "--option", "validation_fraction=0.5", "--method",
                     "bimu", "--trials", "1", "--hidden", "--set", "n_samples=2", "--out", str(tmp_path / "a"),
                     "--sampler-seed", "0", "--quiet"])
    err = capsys.readouterr().err
    assert code == 0 and "has no validation split" not in err, err
    assert json.loads((tmp_path / "a" / "best_config.json").read_text())["hidden"] == []  # --hidden alone: linear
    c = tune.TuneConfig(npz, "bimu", trials=1, out_dir=str(tmp_path / "b"), overrides={"n_samples": "2"},
                        start_from_preset=True, benchmark_options={"hidden": [4]})
    r = tune.run_tune(c)
    assert r.n_finished == 1 and r.best["config"]["benchmark"] == str(Path(npz).resolve())
    resolved = c.resolved()
    assert resolved.benchmark == "npz" and resolved.benchmark_options["path"] == str(Path(npz).resolve())
    import optuna

    [trial] = optuna.load_study(study_name="mine-bimu", storage=tune.make_storage(resolved)).get_trials()
    assert trial.user_attrs["bimu_start"] == "preset" and trial.params["memory_window"] == 700  # the preset first
    assert "n_samples" not in trial.params and trial.user_attrs["hparams"]["n_samples"] == 2  # fixed, not tuned


# ----------------------------------------------------------------------------- bimu sweep-threshold FILE.npz
def test_sweep_threshold_on_an_npz_and_its_validation_split(npz, tmp_path, capsys, monkeypatch):
    import bimu.experiments.sweep as sw

    sizes = []
    real = sw.build_method
    monkeypatch.setattr(sw, "build_method", lambda m, s, *a, **k: sizes.append(list(s)) or real(m, s, *a, **k))
    for split, seen in (("validation", sum(N_TRAIN) - sum(held_out_counts())), ("test", sum(N_TRAIN))):
        out = tmp_path / split
        code = cli.main(["sweep-threshold", npz, "--split", split, "--hidden", "8", "--set", "n_samples=2",
                         "--scores", "random", "--grid", "random=0.5", "--out", str(out)])
        err = capsys.readouterr().err
        assert code == 0 and "unknown benchmark" not in err, err
        for name in ("sweep.csv", "sweep.md", "sweep.json", "sweep.png"):
            assert (out / name).stat().st_size > 0
        rows = json.loads((out / "sweep.json").read_text())
        assert {r["score"] for r in rows} == {"all", "random"} and all(r["examples_seen"] == seen for r in rows)
    assert sizes and all(s == [D, 8, C] for s in sizes)


# ----------------------------------------------------------------------------- --set and --hidden everywhere
def _sub(argv):
    return cli.build_parser().parse_args(argv)


def test_set_and_hidden_are_spelled_the_same_in_every_command(npz):
    from bimu.active import cli as active_cli
    from bimu.tune import cli as tune_cli

    common = ["--set", "n_samples=2", "--set", "memory_window=900", "--hidden", "8", "4"]
    run = _sub(["run", npz, *common])
    assert run.overrides == ["n_samples=2", "memory_window=900"] and run.hidden == [8, 4]
    assert cli.config_from_args(run).overrides == {"n_samples": "2", "memory_window": "900"}
    tune = tune_cli.config_from_args(_sub(["tune", npz, "--method", "bimu", *common]))
    assert tune.overrides == {"n_samples": "2", "memory_window": "900"} and tune.benchmark_options["hidden"] == [8, 4]
    sweep = _sub(["sweep-threshold", npz, "--out", "x", *common])
    assert active_cli._hidden(sweep) == [8, 4]
    assert active_cli._load(sweep)[2] == {"n_samples": "2", "memory_window": "900"}
    for argv in (["run", npz], ["tune", npz, "--method", "bimu"], ["sweep-threshold", npz, "--out", "x"]):
        assert _sub([*argv, "--hidden"]).hidden == []  # no value: a linear head, in every command
    assert active_cli._hidden(_sub(["sweep-threshold", npz, "--out", "x"])) == [100]  # the npz default, as bimu run


def test_hp_is_a_deprecated_alias_of_set(npz, capsys):
    from bimu.active import cli as active_cli

    args = _sub(["sweep-threshold", npz, "--out", "x", "--hp", "n_samples=2", "lr=3", "--set", "lr=4"])
    assert active_cli._load(args)[2] == {"n_samples": "2", "lr": "4"}
    assert "--hp is deprecated; use --set" in capsys.readouterr().err
    with pytest.raises(ValueError, match="memory_windw"):
        active_cli._load(_sub(["sweep-threshold", npz, "--out", "x", "--set", "memory_windw=3"]))


def test_tune_refuses_a_file_and_another_path(npz, tmp_path, capsys):
    pytest.importorskip("optuna")
    code = cli.main(["tune", npz, "--method", "bimu", "--option", "path=other.npz", "--out", str(tmp_path)])
    assert code == 2 and "give the file once" in capsys.readouterr().err
    assert isinstance(_sub(["tune", npz, "--method", "bimu"]), argparse.Namespace)


def test_the_issues_commands_no_longer_fail(npz, tmp_path, capsys):
    """The commands of the report, as typed there: no 'has no validation split', no 'unknown benchmark'."""
    pytest.importorskip("optuna")
    code = cli.main(["tune", "npz", "--option", f"path={npz}", "--method", "bimu", "--trials", "1",
                     "--sampler-seed", "0", "--out", str(tmp_path / "t"), "--quiet"])
    err = capsys.readouterr().err
    assert code == 0 and "has no validation split" not in err, err
    assert (tmp_path / "t" / "best_config.json").is_file()
    code = cli.main(["sweep-threshold", npz, "--scores", "random", "--grid", "random=0.5", "--no-baseline",
                     "--out", str(tmp_path / "s")])
    err = capsys.readouterr().err
    assert code == 0 and "unknown benchmark" not in err, err
    assert (tmp_path / "s" / "sweep.csv").is_file()

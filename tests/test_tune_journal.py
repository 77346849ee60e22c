"""A tiny search on a journal file, the best-config export, the CLI, and the default evaluator."""

import json
import math
import sys
import types

import numpy as np
import pytest

optuna = pytest.importorskip("optuna")

from bimu import tune  # noqa: E402
from bimu.tune import cli as tune_cli  # noqa: E402
from bimu.tune import spaces as ss  # noqa: E402
from bimu.methods import get_method  # noqa: E402

TINY = {"n_tasks": 2, "n_train": 16, "n_eval": 32, "hidden": 0}


def fake_evaluate(method_name, hparams, seed, benchmark_options):
    """Instant accuracy matrix peaking at lr = 5 (a stand-in for a run)."""
    acc = 0.5 + 0.4 * math.exp(-(math.log(hparams["lr"]) - math.log(5.0)) ** 2 / 8)
    T = int(benchmark_options.get("n_tasks", 3))
    R = np.full((T, T), np.nan)
    for i in range(T):
        R[i, : i + 1] = acc
    return R


def load(config):
    c = config.resolved()
    return optuna.load_study(study_name=c.study_name, storage=tune.make_storage(c))


def test_tiny_search_on_a_journal_file(tmp_path):
    seen = []

    def evaluate(method_name, hparams, seed, benchmark_options, on_task_end=None):
        seen.append(dict(benchmark_options))
        return tune.synthetic_evaluate(method_name, hparams, seed, benchmark_options, on_task_end=on_task_end)

    config = tune.TuneConfig("blobs", "bimu", trials=3, out_dir=str(tmp_path / "out"), sampler_seed=0,
                             benchmark_options=dict(TINY), export=str(tmp_path / "best.json"))
    result = tune.run_tune(config, evaluate=evaluate)

    assert (tmp_path / "out" / "optuna.journal").exists()
    assert sorted(result.completed_here) == [0, 1, 2] and result.n_finished == 3
    assert all(o["validation"] is True and o["benchmark"] == "blobs" for o in seen)  # never a test split
    study = load(config)
    trials = study.get_trials()
    assert [t.state for t in trials] == [optuna.trial.TrialState.COMPLETE] * 3

    rec = ss.SpaceRecorder()
    ss.get_search_space("bimu")(rec)
    cls = get_method("bimu")
    for t in trials:
        assert sorted(t.intermediate_values) == [0, 1]  # H_t reported after each task
        assert t.intermediate_values[1] == pytest.approx(t.value)
        hp = t.user_attrs["hparams"]
        for key, value in hp.items():
            d = rec.distributions[key]
            assert d["low"] <= value <= d["high"]
        cls.resolve_hyperparameters(hp)  # valid for the method

    best = json.loads((tmp_path / "out" / "best_config.json").read_text())
    assert json.loads((tmp_path / "best.json").read_text()) == best
    # Only keys of the run config (``bimu run --config``): no tuning options, no provenance.
    assert best == {"benchmark": "blobs", "method": "bimu", "preset": "none",
                    "overrides": study.best_trial.user_attrs["hparams"], "hidden": []}  # TINY: hidden=0
    info = json.loads((tmp_path / "out" / "best_trial.json").read_text())
    assert info["trial"] == study.best_trial.number and info["config"] == best
    assert info["value"] == pytest.approx(study.best_value)
    assert info["weights"] == [0.5, 0.25, 0.25] and info["validation_options"]["validation"] is True

    # The budget is for the study: a second worker finds it complete; a larger budget adds the rest.
    again = tune.run_tune(config, evaluate=fake_evaluate)
    assert again.completed_here == [] and again.n_finished == 3
    more = tune.run_tune(tune.TuneConfig(**{**vars(config), "trials": 5}), evaluate=fake_evaluate)
    assert more.completed_here == [3, 4] and more.n_finished == 5

    # Workers of one study must agree on its objective.
    with pytest.raises(ValueError, match="other settings.*weights"):
        tune.run_tune(tune.TuneConfig(**{**vars(config), "trials": 6, "weights": (1, 0, 0)}),
                      evaluate=fake_evaluate)


def test_cli_runs_a_search_and_exports(tmp_path, capsys):
    out = tmp_path / "cli"
    argv = ["blobs", "--method", "bimu", "--evaluator", "synthetic", "--trials", "2", "--out", str(out),
            "--export", str(tmp_path / "exported.json"), "--sampler-seed", "1", "--quiet", "--objective", "mean",
            *[a for k, v in TINY.items() for a in ("--option", f"{k}={v}")]]
    assert tune_cli.main(argv) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["n_finished"] == 2 and sorted(summary["completed_here"]) == [0, 1]
    best = json.loads((tmp_path / "exported.json").read_text())
    assert best == json.loads((out / "best_config.json").read_text()) and best["hidden"] == []
    info = json.loads((out / "best_trial.json").read_text())
    assert info["reduce"] == "mean" and info["validation_options"]["n_tasks"] == 2
    assert summary["best_value"] == pytest.approx(info["value"])
    assert list(out.glob("worker-*.json"))


@pytest.mark.parametrize("extra, message", [
    (["--method", "adam"], "unknown method 'adam'"),
    (["--method", "bimu", "--weights", "1", "1", "1"], "sum to 1"),
    (["--method", "bimu", "--weights", "-1", "1", "1"], "non-negative"),
    (["--method", "bimu", "--storage", "redis://localhost"], "unknown storage scheme 'redis'"),
    (["--method", "bimu", "--evaluator", "nope"], "unknown evaluator"),
    (["--method", "bimu", "--preset", "pmnist-3"], "no preset 'pmnist-3'"),
])
def test_cli_bad_input(tmp_path, capsys, extra, message):
    assert tune_cli.main(["blobs", "--out", str(tmp_path), "--trials", "1", *extra]) == 2
    assert message in capsys.readouterr().err


def test_cli_registers_on_a_parent_parser():
    import argparse

    parser = argparse.ArgumentParser(prog="bimu")
    tune_cli.add_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["tune", "pmnist", "--method", "bimu", "--trials", "200", "--hidden", "2000",
                              "--storage", "postgresql://u@h/db", "--option", "n_tasks=10"])
    assert args.func is tune_cli.run_command
    c = tune_cli.config_from_args(args).resolved()
    assert (c.trials, c.storage) == (200, "postgresql://u@h/db")
    assert c.benchmark_options == {"n_tasks": 10, "validation": True, "hidden": [2000]}


def test_pruning_on_intermediate_h(tmp_path):
    def streaming(method_name, hparams, seed, benchmark_options, on_task_end=None):
        R = fake_evaluate(method_name, hparams, seed, {"n_tasks": 4})
        for t in range(4):
            on_task_end(t, R[t, : t + 1])
        return R

    config = tune.TuneConfig("blobs", "bimu", trials=12, out_dir=str(tmp_path), pruner="median", sampler_seed=3)
    result = tune.run_tune(config, evaluate=streaming)
    states = [t.state for t in load(config).get_trials()]
    assert result.n_finished == 12 and len(states) == 12
    assert states.count(optuna.trial.TrialState.PRUNED) >= 1
    assert set(states) <= {optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED}


def test_show_space(capsys):
    assert tune_cli.main(["pmnist", "--method", "bimu", "--show-space"]) == 0
    assert set(json.loads(capsys.readouterr().out)) == set(ss.check_search_space("bimu"))


class _Bench:
    """A two-task benchmark whose test and validation data differ (the test data must never be used)."""

    name, n_features, n_classes, n_tasks = "fake", 3, 2, 2

    def __init__(self, **options):
        self.options = options

    def train_task(self, task, seed):
        """Four examples."""
        import torch

        return torch.zeros(4, 3), torch.zeros(4, dtype=torch.int64)

    def test_task(self, task):
        """Never called while tuning."""
        raise AssertionError("the test set was used")

    def validation_task(self, task):
        """Two validation examples."""
        import torch

        return torch.ones(2, 3), torch.ones(2, dtype=torch.int64)

    def ood_set(self):
        """Never called while tuning."""
        raise AssertionError("the OOD set was used")


def _fake_modules(monkeypatch, *, validation=True):
    built, runs = [], []

    def factory(data_dir=None, n_tasks=2, seed=0, validation=False):
        bench = _Bench(n_tasks=n_tasks, seed=seed, validation=validation)
        built.append(bench)
        return bench

    def factory_without_validation(data_dir=None, n_tasks=2, seed=0):
        return _Bench()

    entry = types.SimpleNamespace(factory=factory if validation else factory_without_validation,
                                  default_hidden=(5,))
    entry.accepts = lambda key: key in __import__("inspect").signature(entry.factory).parameters
    benchmarks = types.ModuleType("bimu.data.benchmarks")
    benchmarks.benchmark_entry = lambda name: entry
    runner = types.ModuleType("bimu.experiments.stream")

    def run_stream(benchmark, method, schedule=None, *, seed=0, n_tasks=None, ood=True, on_task_end=None):
        runs.append(dict(benchmark=benchmark, method=method, seed=seed, n_tasks=n_tasks, ood=ood))
        for t in range(n_tasks):
            x, y = benchmark.train_task(t, seed)
            benchmark.test_task(t)                      # the runner evaluates "test_task": the view
            on_task_end(t)
        return {"R": None}

    def evaluate(method, x, y, generator=None, **kwargs):
        assert float(x.mean()) == 1.0                   # validation data only
        return 0.75, {}

    runner.run_stream, runner.evaluate = run_stream, evaluate
    runner.eval_generator = lambda seed, t, j: None
    monkeypatch.setitem(sys.modules, "bimu.data.benchmarks", benchmarks)
    monkeypatch.setitem(sys.modules, "bimu.experiments.stream", runner)
    return built, runs


def test_default_evaluator_runs_the_runner_on_the_validation_split(monkeypatch):
    built, runs = _fake_modules(monkeypatch)
    rows = []
    R = tune.runner_evaluate("bimu", get_method("bimu").resolve_hyperparameters({}), 3,
                             {"benchmark": "fake", "n_tasks": 2, "validation": True},
                             on_task_end=lambda t, row: rows.append((t, list(row))))
    assert R[0, 0] == R[1, 0] == R[1, 1] == 0.75 and np.isnan(R[0, 1])
    assert rows == [(0, [0.75]), (1, [0.75, 0.75])]
    (bench,) = built
    assert bench.options == {"n_tasks": 2, "seed": 3, "validation": True}
    (run,) = runs
    assert run["ood"] is False and run["n_tasks"] == 2 and run["seed"] == 3
    assert run["method"].sizes == [3, 5, 2]               # the benchmark's default hidden widths
    with pytest.raises(AssertionError, match="OOD"):
        run["benchmark"]._benchmark.ood_set()
    assert run["benchmark"].ood_set() is None


def test_default_evaluator_refuses_a_benchmark_without_validation_split(monkeypatch, tmp_path):
    _fake_modules(monkeypatch, validation=False)
    with pytest.raises(tune.TuneSetupError, match="no validation split"):
        tune.runner_evaluate("bimu", {}, 0, {"benchmark": "fake", "validation": True})
    # ... before any trial starts
    config = tune.TuneConfig("fake", "bimu", trials=2, out_dir=str(tmp_path))
    with pytest.raises(tune.TuneSetupError, match="no validation split"):
        tune.run_tune(config)
    assert not (tmp_path / "optuna.journal").exists()

    class _Strict:
        def __init__(self, n_tasks=2, seed=0):
            pass

    sys.modules["bimu.data.benchmarks"].benchmark_entry("fake").factory = lambda data_dir=None, **o: _Strict(**o)
    sys.modules["bimu.data.benchmarks"].benchmark_entry("fake").accepts = lambda key: True
    with pytest.raises(tune.TuneSetupError, match="no validation split.*unexpected keyword"):
        tune.runner_evaluate("bimu", {}, 0, {"benchmark": "fake", "validation": True})
    with pytest.raises(ValueError, match="never evaluates on the test set"):
        tune.ValidationView(object())


def test_default_evaluator_without_a_runner_is_a_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "bimu.experiments.stream", types.ModuleType("bimu.experiments.stream"))
    with pytest.raises(tune.TuneSetupError, match="run_stream"):
        tune.runner_evaluate("bimu", {}, 0, {"benchmark": "pmnist", "validation": True})


@pytest.mark.parametrize("name", ["../../../escaped", "/tmp/escaped", "a/b", ".hidden"])
def test_a_study_name_cannot_name_a_folder_outside_the_output_root(name, tmp_path, capsys, monkeypatch):
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")  # default output folder: runs/tune/<study-name>
    argv = ["blobs", "--method", "bimu", "--evaluator", "synthetic", "--trials", "1", "--study-name", name,
            *[a for k, v in TINY.items() for a in ("--option", f"{k}={v}")]]
    assert tune_cli.main(argv) == 2
    assert capsys.readouterr().err == (
        f"bimu tune: error: study name {name!r} must be 1 to 128 letters, digits, '.', '_' or '-', starting with "
        "a letter or digit (it names the output folder runs/tune/<study-name>)\n")
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["work"]

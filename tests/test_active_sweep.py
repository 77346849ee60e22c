"""The stream loop, the threshold sweep outputs and the CLI, on a tiny synthetic benchmark."""

import argparse
import csv
import json

import numpy as np
import pytest

from bimu.active import cli
from bimu.experiments.sweep import method_hparams, run_stream, sweep, sweep_configs, write_sweep
from bimu.data.feature_benchmarks import ArrayBenchmark


def toy_benchmark(n_tasks=2, n=60, d=16, c=3):
    rng = np.random.default_rng(0)
    centers = rng.normal(0, 1.5, size=(c, d))
    train, test = [], []
    for t in range(n_tasks):
        y = rng.integers(0, c, n)
        X = centers[y] + rng.normal(0, 1, size=(n, d)) + 0.3 * t
        yt = np.repeat(np.arange(c), 10)
        Xt = centers[yt] + rng.normal(0, 1, size=(len(yt), d)) + 0.3 * t
        train.append((X.astype(np.float32), y))
        test.append((Xt.astype(np.float32), yt))
    return ArrayBenchmark("toy", train, test, rare_classes={2})


HP = dict(lr=10.0, lr_max=0.05, likelihood_multiplier=10.0, kl_multiplier=0.5, memory_window=1000,
          n_samples=4, n_eval_samples=4)


def test_run_stream_accounting_and_determinism():
    b = toy_benchmark()
    r = run_stream(b, "bimu", "vr", threshold=0.2, mc_samples=6, seed=0, hparams=HP)
    assert r["examples_seen"] == 120 and r["forward_passes"] == 6 * 120
    assert r["labels_queried"] == r["backward_passes"] == r["weight_writes"]
    assert r["query_fraction"] == r["labels_queried"] / 120
    assert 0 <= r["accuracy"] <= 1 and not np.isnan(r["rare_accuracy"])
    assert set(r["task_quarters"]) == {"0", "1"}
    again = run_stream(b, "bimu", "vr", threshold=0.2, mc_samples=6, seed=0, hparams=HP)
    assert again["accuracy"] == r["accuracy"] and again["labels_queried"] == r["labels_queried"]
    full = run_stream(b, "bimu", "all", mc_samples=6, seed=0, hparams=HP)
    assert full["query_fraction"] == 1.0 and full["backward_passes"] == 120 and full["forward_passes"] == 0
    assert full["accuracy"] > 0.6  # the toy problem is learnable
    budget = run_stream(b, "bimu", "vr", budget=0.1, mc_samples=6, seed=0, hparams=HP)
    assert budget["budget_mode"] and budget["labels_queried"] > 0
    std = run_stream(b, "bimu", "random", threshold=0.5, mc_samples=6, seed=0, hparams=HP, standardize=True)
    assert 0.3 < std["query_fraction"] < 0.7


def test_sweep_writes_table_and_plot(tmp_path):
    b = toy_benchmark(n_tasks=1, n=40)
    rows = sweep(b, "bimu", scores=["vr", "random"], grids={"vr": [0.1, 0.5], "random": [0.3]}, seeds=[0, 1],
                 mc_samples=4, hparams=HP)
    assert len(rows) == 2 * (1 + 2 + 1)
    res = write_sweep(rows, tmp_path, title="toy")
    for name in ("sweep.csv", "sweep.md", "sweep.json", "sweep.png"):
        assert (tmp_path / name).stat().st_size > 0
    with open(tmp_path / "sweep.csv") as fh:
        table = list(csv.DictReader(fh))
    assert len(table) == 8 and {r["score"] for r in table} == {"all", "vr", "random"}
    md = (tmp_path / "sweep.md").read_text()
    assert "100% baseline" in md and "Updates saved" in md
    assert {a["score"] for a in res["aggregate"]} == {"all", "vr", "random"}
    assert json.loads((tmp_path / "sweep.json").read_text())[0]["score"] == "all"


def test_sweep_configs_and_presets():
    cfg = sweep_configs(["vr", "random"], thresholds=[0.1, 0.2])
    assert cfg == [("all", None), ("vr", 0.1), ("vr", 0.2), ("random", 0.1), ("random", 0.2)]
    with pytest.raises(ValueError, match="unknown acquisition"):
        sweep_configs(["bald"])
    hp = method_hparams("bimu", "animals")
    assert hp["lr"] == 5.8 and hp["memory_window"] == 4600 and hp["n_samples"] == 10
    assert method_hparams("bimu", "openloris-8192-imbalanced", {"lr": 3})["lr"] == 3.0
    with pytest.raises(ValueError, match="no preset"):
        method_hparams("bimu", "cifar")


def test_cli_parsers_and_errors():
    p = argparse.ArgumentParser()
    cli.add_parser(p.add_subparsers())
    a = p.parse_args(["sweep-threshold", "animals-ti", "--scores", "vr", "random", "--thresholds", "0.1",
                      "--out", "x"])
    assert a.func is cli._sweep and a.scores == ["vr", "random"] and a.mc_samples == 10
    assert a.stream_repeats == 1
    import bimu.cli as top  # run-active is registered by the top-level CLI, beside run

    a = top.build_parser().parse_args(["run-active", "objects-ti", "--active", "vr", "--threshold", "0.2",
                                       "--mc-samples", "5"])
    acq = cli.acquisition_from_args(a)
    assert acq.describe() == "vr@0.2" and acq.mc_samples == 5
    assert top.main(["run-active", "animals-ti", "--active", "bald", "--threshold", "0.1"]) == 2


def test_engines_agree_and_random_fast_path_matches_per_example():
    """The fused engine and the torch method run the same stream; random querying's batched path
    learns exactly the examples the per-example path would (standardize=True forces that path with an
    identity-free transform, so compare the decisions and counters, and the fused/torch accuracies)."""
    b = toy_benchmark()
    fused = run_stream(b, "bimu", "vr", threshold=0.2, mc_samples=6, seed=0, hparams=HP, engine="fused")
    torch_ = run_stream(b, "bimu", "vr", threshold=0.2, mc_samples=6, seed=0, hparams=HP, engine="torch")
    assert fused["engine"] == "fused" and torch_["engine"] == "torch"
    assert abs(fused["accuracy"] - torch_["accuracy"]) <= 0.1
    full_f = run_stream(b, "bimu", "all", seed=0, hparams=HP, engine="fused")
    full_t = run_stream(b, "bimu", "all", seed=0, hparams=HP, engine="torch")
    assert full_f["backward_passes"] == full_t["backward_passes"] == full_f["examples_seen"] == 120
    assert full_f["task_quarters"] == full_t["task_quarters"]
    rnd = run_stream(b, "bimu", "random", threshold=0.3, seed=3, hparams=HP)
    assert rnd["forward_passes"] == 0 and rnd["examples_seen"] == 120
    assert rnd["labels_queried"] == rnd["backward_passes"] == round(rnd["query_fraction"] * 120)
    slow = run_stream(b, "bimu", "random", threshold=0.3, seed=3, hparams=HP, standardize=True)
    assert slow["labels_queried"] == rnd["labels_queried"]  # same decisions (own generator)
    with pytest.raises(ValueError, match="engine"):
        run_stream(b, "bimu", "all", seed=0, hparams=HP, engine="gpu")


def test_run_active_is_an_alias_of_run_active_option(monkeypatch):
    import bimu.cli as top

    seen = {}
    monkeypatch.setattr(top, "cmd_run", lambda args: seen.setdefault("args", args) and 0)
    parser = top.build_parser()
    a = parser.parse_args(["run-active", "objects-ti", "--active", "vr", "--threshold", "0.3", "--seeds", "1", "2"])
    b = parser.parse_args(["run", "objects-ti", "--active", "vr", "--threshold", "0.3", "--seeds", "1", "2"])
    assert {k: v for k, v in vars(a).items() if k not in ("func", "command")} == \
        {k: v for k, v in vars(b).items() if k not in ("func", "command")}
    assert top.main(["run-active", "objects-ti", "--active", "vr", "--threshold", "0.3"]) == 0
    assert seen["args"].active == "vr"
    assert top.main(["run-active", "objects-ti"]) == 2  # --active is required
    assert top.main(["run-active", "objects-ti", "--active", "bald", "--threshold", "0.1"]) == 2


def test_sweep_cli_streams_the_benchmark_repeatedly(monkeypatch):
    import bimu.data.feature_benchmarks as fb

    monkeypatch.setattr(fb, "get_feature_benchmark", lambda name, **kw: toy_benchmark())
    p = argparse.ArgumentParser()
    cli.add_parser(p.add_subparsers())
    a = p.parse_args(["sweep-threshold", "toy", "--stream-repeats", "3", "--out", "x"])
    bench, _, _ = cli._load(a)
    n = len(toy_benchmark().train_task(0, 0)[1])
    assert bench.name == "toyx3" and len(bench.train_task(0, 0)[1]) == 3 * n
    a = p.parse_args(["sweep-threshold", "toy", "--out", "x"])
    assert cli._load(a)[0].name == "toy"


@pytest.mark.parametrize("strategy, kw", [("random", {"threshold": 0.3}), ("all", {}), ("vr", {"threshold": 0.2})])
def test_every_path_ends_every_task(monkeypatch, strategy, kw):
    """A method that needs task boundaries gets task_end() after each task, whichever path learns it
    (random querying's batched path included)."""
    from bimu.methods.ewc_online import OnlineEWCMethod

    ended = []
    real = OnlineEWCMethod.task_end
    monkeypatch.setattr(OnlineEWCMethod, "task_end", lambda self: ended.append(self.examples_seen) or real(self))
    run_stream(toy_benchmark(), "ewc-online", strategy, seed=0, engine="torch", **kw)
    assert ended == [60, 120]


def test_aggregate_is_mean_and_sample_std_over_seeds():
    from bimu.experiments.sweep import aggregate

    rows = [{"score": "vr", "threshold": 0.4, "seed": s, "accuracy": a, "query_fraction": 0.1}
            for s, a in ((0, 0.5), (1, 0.7), (2, 0.6))]
    [d] = aggregate(rows)
    # mean 0.6; sample std sqrt((0.01 + 0.01 + 0) / 2) = 0.1 (the population std would be 0.0816)
    assert d["n_seeds"] == 3 and d["accuracy"] == pytest.approx(0.6) and d["accuracy_std"] == pytest.approx(0.1)
    assert aggregate(rows[:1])[0]["accuracy_std"] == 0.0


@pytest.mark.parametrize("strategy,kw", [("vr", {"threshold": 0.2}), ("entropy", {"threshold": 0.5}),
                                         ("random", {"threshold": 0.3}), ("all", {}),
                                         ("vr", {"budget": 0.2})])
@pytest.mark.parametrize("engine", ["fused", "torch"])
def test_accuracy_checkpoints_leave_the_stream_unchanged(strategy, kw, engine):
    b = toy_benchmark()
    plain = run_stream(b, "bimu", strategy, mc_samples=6, seed=3, hparams=HP, engine=engine, **kw)
    marked = run_stream(b, "bimu", strategy, mc_samples=6, seed=3, hparams=HP, engine=engine,
                        checkpoints=(0, 25, 50, 75, 99), **kw)
    acc = marked.pop("checkpoint_accuracy")
    assert "checkpoint_accuracy" not in plain
    assert json.dumps(marked, sort_keys=True) == json.dumps(plain, sort_keys=True)  # threshold may be NaN
    assert sorted(acc) == ["0", "1"] and all(sorted(v, key=int) == ["0", "25", "50", "75", "99"] for v in acc.values())
    assert all(a * 30 == round(a * 30) for v in acc.values() for a in v.values())  # 30 test examples a task


def test_a_checkpoint_is_the_accuracy_of_the_model_that_learned_that_prefix():
    import torch

    from bimu.active.learner import ActiveLearner, make_acquisition
    from bimu.engine.build import build_method
    from bimu.experiments.stream import eval_generator, stream_tasks
    from bimu.experiments.sweep import _CHECKPOINT_TAG

    b = toy_benchmark(n_tasks=1)
    r = run_stream(b, "bimu", "vr", threshold=0.2, mc_samples=6, seed=1, hparams=HP, checkpoints=(0, 50))
    for percent in (0, 50):
        model, _ = build_method("bimu", [b.n_features, b.n_classes], 1, method_hparams("bimu", None, HP), "auto")
        learner = ActiveLearner(model, make_acquisition("vr", threshold=0.2, mc_samples=6, seed=1))
        for _ in stream_tasks(b, model, seed=1, tasks=[0], learner=learner, train_limit=60 * percent // 100):
            pass
        X, y = b.test_task(0)
        pred = model.predict(X, n_samples=None, generator=eval_generator(1, 0, 0, tag=_CHECKPOINT_TAG + percent))
        assert r["checkpoint_accuracy"]["0"][str(percent)] == float((pred == y).double().mean())
    assert r["checkpoint_accuracy"]["0"]["50"] > r["checkpoint_accuracy"]["0"]["0"]  # it learned something


def test_checkpoints_are_checked_before_any_work():
    b = toy_benchmark()
    with pytest.raises(ValueError, match="0 to 99; got 100"):
        run_stream(b, "bimu", "vr", threshold=0.2, mc_samples=6, seed=0, hparams=HP, checkpoints=(0, 100))
    with pytest.raises(ValueError, match="0 to 99; got 12.5"):
        run_stream(b, "bimu", "vr", threshold=0.2, mc_samples=6, seed=0, hparams=HP, checkpoints=(12.5,))

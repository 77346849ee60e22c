"""bimu evaluate: the checkpointed model scored again gives the run's own numbers to the bit, and other
evaluation settings change only what they should."""

import json
import os

import pytest

from bimu.cli import main
from bimu.experiments.config import RunConfig
from bimu.experiments.evaluate import evaluate_run, parse_tasks
from bimu.rundir import RunDir, seed_dir
from bimu.experiments.runner import run_experiment

needs_data = pytest.mark.skipif(not os.environ.get("BIMU_DATA_DIR"),
                                reason="BIMU_DATA_DIR is not set (Permuted MNIST needs MNIST and Fashion-MNIST)")


@pytest.fixture(scope="module", params=["fused", "torch"])
def finished_run(request, tmp_path_factory):
    """A finished 3-task Permuted-MNIST BiMU run (small), on the fused engine and on the torch path."""
    out = tmp_path_factory.mktemp(f"runs-{request.param}")
    cfg = RunConfig.from_dict(dict(benchmark="pmnist", method="bimu", tasks=3, seeds=[0], out=str(out),
                                   train_limit=200, test_limit=300, eval_final="all", ood_every=1,
                                   engine=request.param))
    res, code = run_experiment(cfg, progress=False, log=lambda s: None)
    assert code == 0
    return RunDir(seed_dir(out, "pmnist", "bimu", 0)), res[0]


@needs_data
def test_unchanged_settings_give_the_runs_own_numbers_to_the_bit(finished_run):
    rd, res = finished_run
    out = evaluate_run(rd.path, tasks=["all"])
    last = res["records"][-1]
    assert out["after_task"] == 2 and [r["task"] for r in out["tasks"]] == [0, 1, 2]
    assert out["after_task_number"] == 3 and [r["task_number"] for r in out["tasks"]] == [1, 2, 3]  # as printed
    assert [r["acc"] for r in out["tasks"]] == [float(a) for a in res["R"][2]]  # the final row of the matrix
    assert out["tasks"][2]["ood_auc"] == last["ood_auc"]  # current task vs Fashion-MNIST, every score
    assert out["scores"] == ["epistemic", "aleatoric", "variation_ratio"]
    assert out["mean"]["acc"]["mean"] == pytest.approx(sum(res["R"][2]) / 3) and "sd" in out["mean"]["acc"]


@needs_data
def test_the_paper_codes_ood_preprocessing_changes_the_auc_and_nothing_else(finished_run):
    rd, _ = finished_run
    ours = evaluate_run(rd.path, scores=["epistemic"])
    paper = evaluate_run(rd.path, scores=["epistemic"], options={"ood_unstandardised": True})
    assert paper["tasks"][0]["acc"] == ours["tasks"][0]["acc"]
    assert paper["tasks"][0]["ood_auc"]["epistemic"] != ours["tasks"][0]["ood_auc"]["epistemic"]
    assert paper["options"] == {"ood_unstandardised": True} and paper["scores"] == ["epistemic"]
    fewer = evaluate_run(rd.path, ood=False, eval_samples=1)
    assert fewer["tasks"][0]["ood_auc"] is None and 0 <= fewer["tasks"][0]["acc"] <= 1


@needs_data
def test_chance_level_is_the_label_independent_accuracy_of_the_runs_own_predictions(finished_run, capsys):
    """``chance``: sum over classes of the share of predictions times the share of labels, computed here
    by hand from the predictions drawn with the run's own generator; the accuracy stays the run's."""
    import numpy as np

    from bimu.experiments.runner import make_benchmark, make_method
    from bimu.experiments.stream import eval_generator

    rd, res = finished_run
    out = evaluate_run(rd.path, tasks=["1-2"], ood=False, chance=True)
    assert [r["acc"] for r in out["tasks"]] == [float(a) for a in res["R"][2][:2]]
    stored = json.loads((rd.path / "config.json").read_text())
    cfg = RunConfig.from_dict({k: v for k, v in stored.items() if k != "resolved"}).replace(
        engine=stored["resolved"]["engine"])
    bench = make_benchmark(cfg, 0)
    method, _ = make_method(cfg, stored["resolved"]["sizes"], 0, cfg.resolve_hparams()[1])
    method.load_state_dict(rd.load_checkpoint()["method_state"])
    for row in out["tasks"]:
        x, y = bench.test_task(row["task"])
        x, y = x[:cfg.test_limit], y[:cfg.test_limit].numpy()
        p = method.predict_samples(x, generator=eval_generator(0, 2, row["task"]))
        pred = np.log(np.clip(p.numpy(), 1e-30, None)).mean(0).argmax(-1)
        assert (pred == y).mean() == row["acc"]  # the same draws as the run's evaluation
        by_hand = sum((pred == c).mean() * (y == c).mean() for c in range(10))
        assert row["chance"] == pytest.approx(by_hand, abs=1e-12)
        counts = np.bincount(pred, minlength=10)
        assert (row["top_class"], row["top_share"]) == (int(counts.argmax()), counts.max() / len(pred))
    assert out["mean"]["chance"]["mean"] == pytest.approx(np.mean([r["chance"] for r in out["tasks"]]))
    assert main(["evaluate", str(rd.path), "--tasks", "1-2", "--no-ood", "--chance"]) == 0
    text = capsys.readouterr().out
    assert "chance %" in text and f"{100 * out['tasks'][0]['chance']:.2f}" in text


@needs_data
def test_cli_prints_a_table_and_writes_json(finished_run, tmp_path, capsys):
    rd, res = finished_run
    target = tmp_path / "eval.json"
    assert main(["evaluate", str(rd.path), "--tasks", "last-2", "--ood-scores", "aleatoric",
                 "--json", str(target)]) == 0
    text = capsys.readouterr().out
    assert "model after task 3" in text and "aleatoric AUC" in text and "mean" in text
    saved = json.loads(target.read_text())
    assert [r["task"] for r in saved[0]["tasks"]] == [1, 2]
    assert saved[0]["tasks"][1]["ood_auc"]["aleatoric"] == res["records"][-1]["ood_auc"]["aleatoric"]


@needs_data
def test_bad_input_is_named_before_any_work(finished_run, tmp_path, capsys):
    rd, _ = finished_run
    with pytest.raises(ValueError, match="takes no option 'no_such_option'"):
        evaluate_run(rd.path, options={"no_such_option": 1})
    with pytest.raises(ValueError, match="outside the stream's 1..3"):
        evaluate_run(rd.path, tasks=["4"])
    with pytest.raises(ValueError, match="eval-samples must be >= 1"):
        evaluate_run(rd.path, eval_samples=0)
    with pytest.raises(ValueError, match="is not a seed directory"):
        evaluate_run(tmp_path)
    copy = tmp_path / "seed-0"
    copy.mkdir()
    (copy / "config.json").write_text((rd.path / "config.json").read_text())
    with pytest.raises(ValueError, match="holds no checkpoint.pt"):
        evaluate_run(copy)
    assert main(["evaluate", str(copy)]) == 2
    assert "holds no checkpoint.pt" in capsys.readouterr().err


def test_task_words():
    assert parse_tasks(["all"], current=2, n_tasks=5) == [0, 1, 2]
    assert parse_tasks(["2-4", "1"], current=2, n_tasks=5) == [1, 2, 3, 0]
    for bad in ("4-2", "0-2", "2-6"):
        with pytest.raises(ValueError, match=f"range {bad} is not within the stream's 1..5"):
            parse_tasks([bad], current=2, n_tasks=5)
    assert parse_tasks(["last-10", "current"], current=2, n_tasks=5) == [0, 1, 2]
    assert parse_tasks(["5", "1", "5"], current=2, n_tasks=5) == [4, 0]
    for bad in ("last-0", "first", "0"):
        with pytest.raises(ValueError, match="--tasks"):
            parse_tasks([bad], current=2, n_tasks=5)


def test_a_benchmark_without_ood_set_gives_accuracy_and_refuses_asked_scores(tmp_path, monkeypatch):
    """A benchmark without an OOD set: the run's own scores are skipped, explicitly asked ones refused."""
    from test_runner_fakes import FakeBenchmark  # registers fake-test

    monkeypatch.setattr(FakeBenchmark, "ood_set", lambda self: None)

    cfg = RunConfig.from_dict(dict(benchmark="fake-test", tasks=2, seeds=[0], out=str(tmp_path), engine="torch"))
    res, code = run_experiment(cfg, progress=False, log=lambda s: None)
    assert code == 0
    rd = RunDir(seed_dir(tmp_path, "fake-test", "bimu", 0))
    out = evaluate_run(rd.path, tasks=["all"])
    assert [r["acc"] for r in out["tasks"]] == [float(a) for a in res[0]["R"][1]]
    assert all(r["ood_auc"] is None for r in out["tasks"])
    with pytest.raises(ValueError, match="has no OOD set to score"):
        evaluate_run(rd.path, scores=["epistemic"])


@needs_data
def test_the_grouped_sums_score_the_run_again_on_the_fused_engine(finished_run, capsys, monkeypatch):
    from bimu.engine import fused

    rd, res = finished_run
    calls = []
    real = fused.grouped_forward
    monkeypatch.setattr(fused, "grouped_forward", lambda *a: calls.append(1) or real(*a))
    engine = json.loads((rd.path / "config.json").read_text())["engine"]
    if engine == "torch":  # the PyTorch path evaluates with dense products: grouped is refused, by name
        with pytest.raises(ValueError, match="eval_sum"):
            evaluate_run(rd.path, tasks=["all"], ood=False, eval_sum="grouped")
        return
    out = evaluate_run(rd.path, tasks=["all"], ood=False, eval_sum="grouped")
    assert calls  # the grouped kernel scored the tasks
    # the grouped order rounds the first layer differently: accuracies agree to within a few examples
    assert [r["acc"] for r in out["tasks"]] == pytest.approx([float(a) for a in res["R"][2]], abs=0.02)
    with pytest.raises(SystemExit):
        main(["evaluate", str(rd.path), "--no-ood", "--eval-sum", "fast"])
    assert "invalid choice: 'fast'" in capsys.readouterr().err


def test_eval_sum_is_refused_for_a_method_without_it(tmp_path):
    run = tmp_path / "pmnist-sgd" / "seed-0"
    run.mkdir(parents=True)
    (run / "config.json").write_text(json.dumps(dict(benchmark="pmnist", method="sgd", tasks=1, seeds=[0])))
    (run / "checkpoint.pt").write_bytes(b"")
    with pytest.raises(ValueError, match="--eval-sum: sgd has no eval_sum"):
        evaluate_run(run, eval_sum="grouped")

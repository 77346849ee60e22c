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

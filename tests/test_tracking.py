"""Results reach the ``bimu`` logger and the sinks of ``--log-to`` (csv always; tensorboard and mlflow when
installed), per task, with the numbers the run directory records."""

import csv
import importlib.util
import logging

import numpy as np
import pytest

from bimu import create_method
from bimu.experiments.config import RunConfig
from bimu.experiments.runner import run_experiment
from bimu.experiments.stream import run_stream
from bimu.experiments.tracking import Sink, check_sinks
from bimu.rundir import RunDir, seed_dir
from test_runner_fakes import N_CLASSES, N_FEATURES, FakeBenchmark


def method():
    return create_method("bimu", [N_FEATURES, N_CLASSES], 0, preset="pmnist-100")


class Recorder(Sink):
    def __init__(self):
        self.calls = []

    def task_end(self, record, R):
        self.calls.append(("task", record["task"], record["acc"], R.copy()))

    def run_end(self, summary, R):
        self.calls.append(("run", summary["final_mean_acc"]))

    def close(self):
        self.calls.append(("close",))


def test_sink_and_logger_get_every_task_record(caplog, tmp_path):
    rec = Recorder()
    with caplog.at_level(logging.INFO, logger="bimu"):
        res = run_stream(FakeBenchmark(n_tasks=3), method(), seed=0, progress=False, sinks=[rec],
                         run_dir=tmp_path / "r")
    assert [c[0] for c in rec.calls] == ["task", "task", "task", "run", "close"]
    assert [c[2] for c in rec.calls[:3]] == [res["R"][t, t] for t in range(3)]
    np.testing.assert_array_equal(rec.calls[2][3], res["R"])
    assert rec.calls[3][1] == res["summary"]["final_mean_acc"]
    logged = [r for r in caplog.records if r.name == "bimu" and hasattr(r, "bimu_record")]
    assert [r.bimu_record["task"] for r in logged] == [0, 1, 2]
    assert [r.bimu_record["acc"] for r in logged] == [res["R"][t, t] for t in range(3)]
    assert logged[0].getMessage() == f"seed 0 task 1: acc {res['R'][0, 0]:.4f}"


def test_csv_sink_writes_one_row_per_task_and_keeps_rows_across_resume(tmp_path):
    cfg = RunConfig.from_dict(dict(benchmark="fake-test", tasks=3, seeds=[0], out=str(tmp_path), engine="torch",
                                   log_to=["csv"], eval_all_max=0))  # the paper's schedule: cells left empty

    def stop(t):
        if t == 1:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_experiment(cfg, progress=False, log=lambda s: None, on_task_end=stop)
    res, code = run_experiment(cfg, progress=False, log=lambda s: None)
    assert code == 0
    rd = RunDir(seed_dir(tmp_path, "fake-test", "bimu", 0))
    with open(rd.file("metrics.csv"), newline="") as f:
        rows = list(csv.DictReader(f))
    assert [int(float(r["task"])) for r in rows] == [0, 1, 2]
    assert [int(float(r["task_number"])) for r in rows] == [1, 2, 3]  # the console's and the plots' numbering
    assert list(rows[0])[:2] == ["task", "task_number"]
    assert rows[2]["acc_task_1"] != "" and rows[1]["acc_task_1"] == ""  # the final evaluation covers all tasks
    metrics = rd.read_metrics()
    for row, m in zip(rows, metrics):
        assert float(row["acc"]) == m["acc"] and float(row["n_train"]) == m["n_train"]
        assert {k: float(v) for k, v in row.items() if k.startswith("acc_task_") and v} == {
            f"acc_task_{int(j) + 1}": a for j, a in m["evaluated"].items()}
    assert float(rows[2]["ood_auc.epistemic"]) == metrics[2]["ood_auc"]["epistemic"]


def test_unknown_or_missing_sinks_are_one_line_errors():
    with pytest.raises(ValueError, match=r"^config 'log_to' must be names from \('csv', 'tensorboard', 'mlflow'\)"):
        RunConfig.from_dict(dict(benchmark="fake-test", log_to=["wandb"]))
    with pytest.raises(ValueError, match="unknown sink"):
        check_sinks(["wandb"])
    for name in ("tensorboard", "mlflow"):
        if importlib.util.find_spec(name) is None:
            with pytest.raises(ValueError, match=rf"^--log-to {name} needs the '{name}' package, which is not installed"):
                check_sinks([name])


def test_tensorboard_sink_writes_the_task_scalars(tmp_path):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    res = run_stream(FakeBenchmark(n_tasks=2), method(), seed=0, progress=False, sinks=["tensorboard"],
                     run_dir=tmp_path / "r")
    acc = EventAccumulator(str(tmp_path / "r" / "tensorboard"))
    acc.Reload()
    events = acc.Scalars("acc")
    assert [e.step for e in events] == [1, 2]
    assert [e.value for e in events] == pytest.approx([res["R"][0, 0], res["R"][1, 1]], rel=1e-6)


def test_mlflow_sink_logs_the_task_metrics(tmp_path, monkeypatch):
    mlflow = pytest.importorskip("mlflow")
    # a database store (MLflow's file store is refused by MLflow 3 unless MLFLOW_ALLOW_FILE_STORE is set)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    res = run_stream(FakeBenchmark(n_tasks=2), method(), seed=0, progress=False, sinks=["mlflow"],
                     run_dir=tmp_path / "r")
    client = mlflow.tracking.MlflowClient()
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    assert len(runs) == 1 and runs[0].info.status == "FINISHED"  # the sink ended its run
    history = client.get_metric_history(runs[0].info.run_id, "acc")
    assert [(m.step, m.value) for m in history] == [(1, pytest.approx(res["R"][0, 0])),
                                                    (2, pytest.approx(res["R"][1, 1]))]
    final = client.get_metric_history(runs[0].info.run_id, "summary.final_mean_acc")
    assert [(m.step, m.value) for m in final] == [(2, pytest.approx(res["summary"]["final_mean_acc"]))]


def test_mlflow_sink_logs_the_runs_parameters_and_says_where_its_store_is(tmp_path, monkeypatch, capfd):
    mlflow = pytest.importorskip("mlflow")
    store = tmp_path / "store" / "mlflow.db"
    store.parent.mkdir()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{store}")
    cfg = RunConfig.from_dict(dict(benchmark="fake-test", tasks=2, seeds=[0], out=str(tmp_path / "runs"),
                                   engine="torch", log_to=["mlflow"], overrides={"memory_window": 500}))
    res, code = run_experiment(cfg, progress=False, log=lambda s: None)
    assert code == 0
    err = capfd.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("mlflow: ")]
    assert len(lines) == 1 and str(store) in lines[0], err
    client = mlflow.tracking.MlflowClient()
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    params = runs[0].data.params
    assert params["method"] == "bimu" and params["benchmark"] == "fake-test" and params["tasks"] == "2"
    assert float(params["resolved.hparams.memory_window"]) == 500 and params["resolved.engine"] == "torch"
    assert params["resolved.preset"] == str(res[0]["summary"]["preset"])

    import bimu  # fit_stream sends to the same sinks

    rng = np.random.default_rng(0)
    x = rng.normal(size=(40, 4)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.int64)
    bimu.fit_stream((x[:30], y[:30]), (x[30:], y[30:]), method="sgd", hidden=[4], engine="torch", log_to="mlflow")
    assert str(store) in capfd.readouterr().err
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    fitted = [r for r in runs if r.data.params.get("method") == "sgd"]
    assert len(fitted) == 1 and fitted[0].data.params["resolved.sizes"] == "[4, 4, 2]"
    assert [m.step for m in client.get_metric_history(fitted[0].info.run_id, "acc")] == [1]

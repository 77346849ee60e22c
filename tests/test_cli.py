import json
import os
import re

import pytest

import test_runner_fakes  # noqa: F401 - registers the fake-test benchmark
from bimu import cli


def test_help_documents_every_command(capsys):
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    out = capsys.readouterr().out
    for cmd in ("run", "report", "demo", "data"):
        assert cmd in out
    with pytest.raises(SystemExit):
        cli.main(["run", "--help"])
    out = capsys.readouterr().out
    for opt in ("--method", "--tasks", "--seeds", "--hidden", "--set", "--engine", "--active", "--threshold",
                "--mc-samples", "--budget", "--budget-exponent", "--eval-all-every", "--train-limit", "--out"):
        assert opt in out


def test_bad_options_exit_2_naming_the_problem(capsys, tmp_path):
    assert cli.main(["run", "fake-test", "--set", "foo=1", "--out", str(tmp_path)]) == 2
    assert "unknown hyperparameter 'foo'" in capsys.readouterr().err
    assert cli.main(["run", "fake-test", "--tasks", "0", "--out", str(tmp_path)]) == 2
    assert "'tasks' must be >= 1" in capsys.readouterr().err
    assert cli.main(["run", "nobench", "--out", str(tmp_path)]) == 2
    assert "unknown benchmark 'nobench'" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())  # nothing was written


def test_missing_data_is_an_error_before_training(capsys, tmp_path):
    code = cli.main(["run", "pmnist", "--tasks", "1", "--data-dir", str(tmp_path / "empty"), "--out",
                     str(tmp_path / "runs")])
    assert code == 2
    assert "bimu data fetch mnist" in capsys.readouterr().err
    assert not (tmp_path / "runs").exists()


def test_run_then_report(capsys, tmp_path):
    out = tmp_path / "runs"
    args = ["run", "fake-test", "--tasks", "2", "--seeds", "0", "1", "--out", str(out), "--no-progress",
            "--set", "memory_window=500", "--engine", "torch"]
    assert cli.main(args) == 0
    printed = capsys.readouterr().out
    assert "| fake-test | bimu |" in printed
    cfg = json.loads((out / "fake-test-bimu" / "seed-1" / "config.json").read_text())
    assert cfg["overrides"] == {"memory_window": "500"} and cfg["resolved"]["hparams"]["memory_window"] == 500.0
    assert cfg["resolved"]["engine"] == "torch" and cfg["resolved"]["sizes"] == [6, 3]
    plot = tmp_path / "acc.png"
    assert cli.main(["report", str(out), "--plot", str(plot)]) == 0
    table = capsys.readouterr().out
    assert "| fake-test | bimu | - | 0,1 |" in table and "±" in table
    assert plot.stat().st_size > 1000
    heatmap = tmp_path / "accuracy_matrix.png"  # beside --plot
    assert f"accuracy matrix: {heatmap}" in table and heatmap.read_bytes()[:4] == b"\x89PNG"


def test_report_on_missing_dir(capsys, tmp_path):
    assert cli.main(["report", str(tmp_path / "nope")]) == 2
    assert "no such run directory" in capsys.readouterr().err


@pytest.mark.skipif(not os.environ.get("BIMU_DATA_DIR"), reason="BIMU_DATA_DIR is not set")
def test_data_verify(capsys):
    assert cli.main(["data", "verify"]) == 0
    out = capsys.readouterr().out
    assert "mnist: OK" in out and "fashion-mnist: OK" in out


def test_command_modules_are_optional():
    assert isinstance(cli.COMMAND_MODULES, tuple)
    cli.build_parser()  # every listed module registers its subcommands


@pytest.mark.parametrize("name", cli.COMMAND_MODULES)
def test_every_command_module_imports_and_registers(name):
    import importlib

    assert callable(importlib.import_module(name).add_parser)


def test_benchmark_options_from_the_command_line(capsys, tmp_path):
    cfg_file = tmp_path / "c.json"
    cfg_file.write_text(json.dumps({"benchmark_options": {"stream_repeats": 3, "standardize": True}}))
    args = cli.build_parser().parse_args(["run", "fake-test", "--config", str(cfg_file), "--option", "stream_repeats=2",
                                          "--option", "tag=abc"])
    assert cli.config_from_args(args).benchmark_options == {"stream_repeats": 2, "standardize": True, "tag": "abc"}
    out = tmp_path / "runs"
    assert cli.main(["run", "fake-test", "--tasks", "1", "--option", "stream_repeats=2", "--out", str(out),
                     "--no-progress", "--engine", "torch"]) == 0
    metrics = [json.loads(s) for s in (out / "fake-test-bimu" / "seed-0" / "metrics.jsonl").read_text().splitlines()]
    assert metrics[0]["n_train"] == metrics[0]["examples_seen"] == 48  # the fake benchmark's 24 training examples, streamed twice
    capsys.readouterr()
    assert cli.main(["run", "fake-test", "--option", "stream_repeats=0", "--out", str(tmp_path / "r2")]) == 2
    assert "stream_repeats must be an integer >= 1" in capsys.readouterr().err
    assert cli.main(["run", "fake-test", "--option", "nope", "--out", str(tmp_path / "r3")]) == 2
    assert "--option expects KEY=VALUE, got 'nope'" in capsys.readouterr().err


@pytest.mark.parametrize("text, message", [
    (None, r"config file .*missing.json: cannot be read \(No such file or directory\)"),
    ("{bad", r"config file .*c.json is not valid JSON: Expecting property name .* at line 1, column 2"),
    ("[1, 2]", r"config file .*c.json must hold a JSON object of config keys, got list"),
])
def test_bad_config_file_is_named_before_any_work(tmp_path, capsys, text, message):
    path = tmp_path / ("missing.json" if text is None else "c.json")
    if text is not None:
        path.write_text(text)
    assert cli.main(["run", "fake-test", "--config", str(path), "--out", str(tmp_path / "out")]) == 2
    assert re.search(message, capsys.readouterr().err)
    assert not (tmp_path / "out").exists()

"""Checkpoints load with ``torch.load(weights_only=True)``: a file that would run code when unpickled is
refused with one line naming it, by every bimu command that opens a run directory, and nothing in it runs."""

import builtins
import io
import os
from collections import OrderedDict

import numpy as np
import pytest
import torch

from bimu.cli import main
from bimu.experiments.config import RunConfig
from bimu.experiments.runner import run_experiment
from bimu.rundir import CheckpointError, RunDir, checkpoint_bytes, checkpoint_value, load_checkpoint_file, seed_dir
import test_runner_fakes  # noqa: F401 - registers the fake-test benchmark


class WritesMarker:
    """Unpickling this calls ``exec``, which creates the marker file."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return builtins.exec, (f"open({self.marker!r}, 'w').write('ran')",)


def write_malicious(path, marker):
    torch.save({"format": 1, "task": 0, "n_tasks": 2, "method_state": WritesMarker(marker), "R": [], "records": []},
               path)


@pytest.fixture
def run_with_malicious_checkpoint(tmp_path):
    """A fake-test run stopped after task 1 of 2 whose checkpoint was replaced by a code-running pickle."""
    cfg = RunConfig.from_dict(dict(benchmark="fake-test", tasks=2, seeds=[0], out=str(tmp_path / "runs"),
                                   engine="torch"))

    def stop(t):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_experiment(cfg, progress=False, log=lambda s: None, on_task_end=stop)
    rd = RunDir(seed_dir(tmp_path / "runs", "fake-test", "bimu", 0))
    assert rd.exists("checkpoint.pt")
    marker = tmp_path / "marker"
    write_malicious(rd.file("checkpoint.pt"), marker)
    torch.load(rd.file("checkpoint.pt"), weights_only=False)  # the payload is live: a plain load runs it
    assert marker.read_text() == "ran"
    marker.unlink()
    rd.release_lock()
    return cfg, rd, marker


def test_malicious_checkpoint_is_refused_in_one_line_and_never_runs(run_with_malicious_checkpoint):
    _, rd, marker = run_with_malicious_checkpoint
    with pytest.raises(CheckpointError) as e:
        rd.load_checkpoint()
    msg = str(e.value)
    assert "\n" not in msg and str(rd.file("checkpoint.pt")) in msg and "builtins.exec" in msg
    assert not marker.exists()


@pytest.mark.parametrize("command", ["evaluate", "export", "resume"])
def test_bimu_commands_exit_2_on_a_malicious_checkpoint(run_with_malicious_checkpoint, command, capsys, tmp_path,
                                                        monkeypatch):
    import importlib.util

    from bimu import cli

    # the parser is built from the subcommand modules this tree has
    monkeypatch.setattr(cli, "COMMAND_MODULES", tuple(m for m in cli.COMMAND_MODULES if importlib.util.find_spec(m)))
    cfg, rd, marker = run_with_malicious_checkpoint
    argv = {"evaluate": ["evaluate", str(rd.path)],
            "export": ["export", str(rd.path), "--out", str(tmp_path / "edge")],
            "resume": ["run", "fake-test", "--tasks", "2", "--out", cfg.out, "--engine", "torch", "--no-progress"]}
    assert main(argv[command]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(rd.file("checkpoint.pt")) in err and "refused" in err, err
    assert not marker.exists()
    assert not (tmp_path / "edge").exists()


@pytest.mark.parametrize("content", [b"not a torch file", b"task 10"])  # the second: a legacy pickle's stack error
def test_unreadable_checkpoint_is_one_line_naming_the_file(tmp_path, content):
    bad = tmp_path / "checkpoint.pt"
    bad.write_bytes(content)
    with pytest.raises(CheckpointError, match=r"checkpoint\.pt: cannot read the checkpoint") as e:
        load_checkpoint_file(bad)
    assert "\n" not in str(e.value)


def test_checkpoint_values_round_trip_exactly_and_load_without_allowlists(tmp_path):
    state = {"R": np.array([[0.5, np.nan], [0.25, 1.0]]), "acc": np.float64(0.125), "n": np.int64(3),
             "flag": np.bool_(True), "half": np.float32(1.5), "empty": np.zeros((0, 3), np.int32),
             "zero_d": np.array(7, dtype=np.uint16), "text": np.array(["ab", "c"]), "big": 2 ** 127 + 5,
             "records": [{"task": 0, "acc": np.float64(0.75), "evaluated": {"0": np.float64(0.75)}}],
             "nested": (1, [np.arange(3)], None), "ordered": OrderedDict(w=torch.ones(2)), "t": torch.arange(4),
             "size": torch.Size([2, 3]), "dtype": torch.float16}
    path = tmp_path / "c.pt"
    path.write_bytes(checkpoint_bytes(state))
    torch.load(path, weights_only=True)  # no allowlist needed: only tensors and plain values in the file
    back = load_checkpoint_file(path)
    assert back.keys() == state.keys()
    np.testing.assert_array_equal(back["R"], state["R"])
    assert back["R"].dtype == np.float64 and back["R"].flags.writeable
    for k in ("acc", "n", "flag", "half"):
        assert type(back[k]) is type(state[k]) and back[k] == state[k]
    assert back["empty"].shape == (0, 3) and back["empty"].dtype == np.int32
    assert back["zero_d"].shape == () and back["zero_d"].dtype == np.uint16 and int(back["zero_d"]) == 7
    assert back["text"].tolist() == ["ab", "c"] and back["big"] == 2 ** 127 + 5
    assert type(back["records"][0]["acc"]) is np.float64 and back["records"][0]["evaluated"]["0"] == 0.75
    assert back["nested"][0] == 1 and back["nested"][1][0].tolist() == [0, 1, 2] and back["nested"][2] is None
    assert isinstance(back["ordered"], OrderedDict) and torch.equal(back["ordered"]["w"], torch.ones(2))
    assert torch.equal(back["t"], torch.arange(4)) and back["size"] == torch.Size([2, 3])
    assert back["dtype"] is torch.float16


def test_a_value_that_cannot_be_saved_safely_is_named():
    with pytest.raises(TypeError, match=r"checkpoint entry state\['learner'\]\['rule'\]: a .*WritesMarker"):
        checkpoint_value({"learner": {"rule": WritesMarker("x")}})
    with pytest.raises(TypeError, match=r"state\['a'\]: a numpy array of Python objects"):
        checkpoint_value({"a": np.array([object()])})


def test_checkpoint_with_raw_numpy_values_still_loads(tmp_path):
    """Run directories whose checkpoints hold numpy arrays and scalars as such resume unchanged."""
    path = tmp_path / "checkpoint.pt"
    buf = io.BytesIO()
    torch.save({"R": np.eye(2), "records": [{"acc": np.float64(0.5)}], "method_state": {"t": torch.ones(1)}}, buf)
    path.write_bytes(buf.getvalue())
    back = load_checkpoint_file(path)
    np.testing.assert_array_equal(back["R"], np.eye(2))
    assert back["records"][0]["acc"] == 0.5


def test_no_module_loads_a_file_with_weights_only_false():
    import bimu

    src = os.path.dirname(bimu.__file__)
    offenders = [os.path.join(d, f) for d, _, fs in os.walk(src) for f in fs if f.endswith(".py")
                 and "weights_only=False" in open(os.path.join(d, f), encoding="utf-8").read()]
    assert offenders == []

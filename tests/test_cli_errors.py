"""Bad input and unusable files reach the user as one line naming the file or value (exit 2), never as
a traceback; outputs that exist are not overwritten without --force; a corrupt run is skipped by
``bimu report``."""

import json
import os
import shutil

import pytest

import test_runner_fakes  # noqa: F401 - registers the fake-test benchmark
from bimu import cli

needs_data = pytest.mark.skipif(not os.environ.get("BIMU_DATA_DIR"), reason="BIMU_DATA_DIR is not set")


def _one_line_error(capsys, pattern_parts):
    err = capsys.readouterr().err
    lines = [s for s in err.splitlines() if s.startswith("bimu")]
    assert "Traceback" not in err and len(lines) == 1, err
    for part in pattern_parts:
        assert part in lines[0], lines[0]
    return lines[0]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Two completed one-task fake-test runs (torch engine)."""
    out = tmp_path_factory.mktemp("runs")
    assert cli.main(["run", "fake-test", "--tasks", "1", "--seeds", "0", "1", "--out", str(out), "--engine", "torch",
                     "--no-progress"]) == 0
    return out / "fake-test-bimu"


@pytest.fixture
def unreadable_mnist(tmp_path):
    """A data directory whose MNIST training labels cannot be read (every read fails with EIO)."""
    src = os.path.join(os.environ["BIMU_DATA_DIR"], "mnist")
    dst = tmp_path / "data" / "mnist"
    dst.mkdir(parents=True)
    for name in os.listdir(src):
        (dst / name).symlink_to(os.path.join(src, name))
    bad = dst / "train-labels-idx1-ubyte.gz"
    bad.unlink()
    bad.symlink_to("/proc/self/mem")
    return tmp_path / "data", bad


@needs_data
def test_run_with_an_unreadable_data_file(unreadable_mnist, tmp_path, capsys):
    data, bad = unreadable_mnist
    code = cli.main(["run", "pmnist", "--tasks", "1", "--data-dir", str(data), "--out", str(tmp_path / "o")])
    assert code == 2
    _one_line_error(capsys, [f"bimu: error: {bad}: Input/output error"])


@needs_data
def test_data_verify_with_an_unreadable_data_file(unreadable_mnist, capsys):
    data, bad = unreadable_mnist
    assert cli.main(["data", "verify", "mnist", "--data-dir", str(data)]) == 2
    assert f"mnist: FAILED: {bad}: Input/output error" in capsys.readouterr().out


@pytest.mark.parametrize("argv, message", [
    (["--set", "n_samples=1e999"], "hyperparameter 'n_samples' must be of type int, got '1e999'"),
    (["--seeds", "99999999999999999999"], "'seeds' must be a non-empty list of distinct seeds in [0, 4294967296)"),
])
def test_numbers_that_overflow_on_the_command_line(argv, message, tmp_path, capsys):
    assert cli.main(["run", "fake-test", "--tasks", "1", "--out", str(tmp_path / "o"), *argv]) == 2
    _one_line_error(capsys, [message])
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("text", ['{"tasks": 1e999}', '{"overrides": {"lr": -1e999}}'])
def test_numbers_that_overflow_in_a_config_file(text, tmp_path, capsys):
    cfg = tmp_path / "c.json"
    cfg.write_text(text)
    assert cli.main(["run", "fake-test", "--config", str(cfg), "--out", str(tmp_path / "o")]) == 2
    _one_line_error(capsys, [f"config file {cfg}: number ", "1e999 is out of range"])


def test_a_training_step_larger_than_memory_is_refused_before_allocating(tmp_path, capsys):
    # 100000 samples of 6*100000 + 100000 + 100000*3 + 3 = 1,000,003 float32 parameters: 372.5 GiB per step
    code = cli.main(["run", "fake-test", "--tasks", "1", "--hidden", "100000", "--set", "n_samples=100000",
                     "--engine", "torch", "--out", str(tmp_path / "o")])
    assert code == 2
    _one_line_error(capsys, ["method 'bimu' with n_samples=100000 on sizes [6, 100000, 3] needs at least 372.5 GiB "
                             "per training step, more than the "])
    assert not (tmp_path / "o").exists()


def test_evaluate_json_refuses_an_existing_file_unless_forced(runs, tmp_path, capsys):
    seed0 = str(runs / "seed-0")
    target = tmp_path / "eval.json"
    target.write_text("keep")
    assert cli.main(["evaluate", seed0, "--no-ood", "--json", str(target)]) == 2
    assert f"{target} exists; pass --force to overwrite it" in capsys.readouterr().err
    assert target.read_text() == "keep"
    assert cli.main(["evaluate", seed0, "--no-ood", "--json", str(target), "--force"]) == 0
    assert json.loads(target.read_text())[0]["run_dir"].endswith("seed-0")


def test_evaluate_json_under_a_file_is_refused_before_evaluating(runs, tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert cli.main(["evaluate", str(runs / "seed-0"), "--no-ood", "--json", str(blocker / "eval.json")]) == 2
    captured = capsys.readouterr()
    assert f"cannot write {blocker / 'eval.json'}: {blocker} is a file, not a folder" in captured.err
    assert captured.out == ""  # nothing was evaluated


def test_export_refuses_existing_files_unless_forced(runs, tmp_path, capsys):
    out = tmp_path / "edge"
    assert cli.main(["export", str(runs / "seed-0"), "--out", str(out)]) == 0
    first = (out / "bimu_model.npz").read_bytes()
    assert cli.main(["export", str(runs / "seed-0"), "--out", str(out)]) == 2
    assert f"{out / 'bimu_model.npz'} exists; pass --force to overwrite it" in capsys.readouterr().err
    assert cli.main(["export", str(runs / "seed-1"), "--out", str(out), "--force"]) == 0
    assert (out / "bimu_model.npz").read_bytes() != first


def test_evaluate_a_truncated_checkpoint(runs, tmp_path, capsys):
    run = tmp_path / "seed-0"
    shutil.copytree(runs / "seed-0", run)
    ckpt = run / "checkpoint.pt"
    ckpt.write_bytes(ckpt.read_bytes()[: ckpt.stat().st_size // 2])
    assert cli.main(["evaluate", str(run), "--no-ood"]) == 2
    assert f"{ckpt} cannot be read: truncated or corrupt" in capsys.readouterr().err


def test_report_skips_a_corrupt_run_and_reports_the_others(runs, tmp_path, capsys):
    root = tmp_path / "runs"
    shutil.copytree(runs, root / "fake-test-bimu")
    (root / "fake-test-bimu" / "seed-1" / "summary.json").write_text("{bad")
    assert cli.main(["report", str(root), "--plot", str(tmp_path / "p.png")]) == 0
    captured = capsys.readouterr()
    assert (f"bimu: warning: skipping {root / 'fake-test-bimu' / 'seed-1'}: a file of this run cannot be read "
            f"(UntrustedFileError: {root / 'fake-test-bimu' / 'seed-1' / 'summary.json'}: not valid JSON") in captured.err
    assert "| fake-test | bimu | - | 0 |" in captured.out


@needs_data
def test_tune_storage_that_is_a_directory(tmp_path, capsys):
    folder = tmp_path / "storage"
    folder.mkdir()
    code = cli.main(["tune", "pmnist", "--method", "bimu", "--storage", str(folder), "--trials", "1",
                     "--out", str(tmp_path / "t")])
    assert code == 2
    _one_line_error(capsys, [f"bimu: error: {folder}: Is a directory"])


@pytest.mark.parametrize("command", ["export", "evaluate"])
def test_a_full_disk_is_one_line_and_leaves_no_partial_file(runs, tmp_path, capsys, command):
    """A write that the file system refuses part-way (a file-size limit of 64 bytes: the kernel fails the
    write as it does on a full disk): exit 2, one line naming the error, no output file and no
    temporary file left behind."""
    import resource
    import signal

    out = tmp_path / "out"
    out.mkdir()
    args = (["export", str(runs / "seed-0"), "--out", str(out)] if command == "export" else
            ["evaluate", str(runs / "seed-0"), "--no-ood", "--json", str(out / "eval.json")])
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    previous = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the write fails (EFBIG) instead of killing us
    resource.setrlimit(resource.RLIMIT_FSIZE, (64, hard))
    try:
        code = cli.main(args)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, previous)
    assert code == 2
    _one_line_error(capsys, ["File too large"])
    assert list(out.iterdir()) == []

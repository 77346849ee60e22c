"""Hostile and careless files: each is refused in one line naming the file and the limit, before anything
large is allocated (memory-hostile cases run in a subprocess under an address-space limit), and a run
whose numbers are not finite or whose counters are impossible is never used or reported silently."""

import json
import os
import struct
import subprocess
import sys
import zlib

import numpy as np
import pytest
import torch

import test_runner_fakes  # noqa: F401 - registers the fake-test benchmark
from bimu import cli
from bimu.rundir import CheckpointError, RunDir, check_checkpoint_state, checkpoint_bytes, load_checkpoint_file

LIMIT = 6 * 2**30
"""Address-space limit of the memory-hostile subprocesses (torch alone maps a few GiB)."""


def _limited(code: str, tmp_path, env=None, timeout=60) -> subprocess.CompletedProcess:
    """``code`` in a fresh Python under RLIMIT_AS = LIMIT."""
    pre = (f"import resource; resource.setrlimit(resource.RLIMIT_AS, ({LIMIT}, {LIMIT}))\n"
           "import sys; sys.path.insert(0, %r)\n" % os.path.dirname(__file__))
    return subprocess.run([sys.executable, "-c", pre + code], capture_output=True, text=True, timeout=timeout,
                          cwd=tmp_path, env=dict(os.environ, **(env or {})))


def _one_line(err: str, *parts: str) -> str:
    lines = [s for s in err.splitlines() if s.startswith("bimu")]
    assert "Traceback" not in err and len(lines) == 1, err
    for p in parts:
        assert p in lines[0], lines[0]
    return lines[0]


def _arrays(**over):
    x = np.zeros((4, 2), np.float32)
    d = dict(x_train=x, y_train=np.array([0, 1, 0, 1]), x_test=x, y_test=np.array([0, 1, 0, 1]))
    d.update(over)
    return d


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Two completed two-task fake-test runs (torch engine)."""
    out = tmp_path_factory.mktemp("runs")
    assert cli.main(["run", "fake-test", "--tasks", "2", "--seeds", "0", "1", "--out", str(out), "--engine", "torch",
                     "--no-progress"]) == 0
    return out


def _copy(runs, tmp_path):
    import shutil

    shutil.copytree(runs, tmp_path / "r")
    return tmp_path / "r", tmp_path / "r" / "fake-test-bimu" / "seed-1"


# ------------------------------------------------------------------------------- npz / npy / images
@pytest.mark.parametrize("over, message", [
    ({"y_train": np.array([0, 1, 0, 10**12])}, "y_train: label 1000000000000 at row 3 is beyond the limit of 100,000 classes"),
    ({"task_train": np.array([0, 0, 0, 10**12]), "task_test": np.zeros(4, np.int64)},
     "task_train: task index 1000000000000 at row 3 leaves tasks without rows"),
])
def test_a_label_or_task_of_10_to_the_12_is_refused_before_anything_is_sized_by_it(over, message, tmp_path):
    np.savez(tmp_path / "d.npz", **_arrays(**over))
    r = _limited("from bimu import cli; raise SystemExit(cli.main(['run', 'd.npz', '--out', 'o']))", tmp_path)
    assert r.returncode == 2
    _one_line(r.stderr, "d.npz: ", message)


def _npy_header(shape, dtype="<f8") -> bytes:
    import io

    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": dtype, "fortran_order": False, "shape": shape})
    return buf.getvalue()


def test_a_tiny_npz_declaring_a_huge_array_and_a_zip_bomb_are_refused_before_reading(tmp_path):
    import zipfile

    arrays = _arrays()
    with zipfile.ZipFile(tmp_path / "huge.npz", "w") as z:
        for k, v in arrays.items():
            z.writestr(k + ".npy", _npy_header((10**9, 8)) + b"\0" * 64 if k == "x_train" else _npy_header(
                v.shape, v.dtype.str) + v.tobytes())
    np.savez_compressed(tmp_path / "bomb.npz", **_arrays(x_train=np.zeros((2**24, 2), np.float32)))
    assert os.path.getsize(tmp_path / "bomb.npz") < 2**20
    r = _limited("from bimu import cli; raise SystemExit(cli.main(['run', 'huge.npz', '--out', 'o']))", tmp_path)
    assert r.returncode == 2
    _one_line(r.stderr, "huge.npz: x_train: declares an array of shape (1000000000, 8) (59.6 GiB), more than the "
                        "archive member holds")
    r = _limited("from bimu import cli; raise SystemExit(cli.main(['run', 'bomb.npz', '--out', 'o']))", tmp_path,
                 env={"BIMU_READ_BUDGET": str(64 * 2**20)})
    assert r.returncode == 2
    _one_line(r.stderr, "bomb.npz: its arrays expand to 128.0 MiB", "more than the memory budget (64.0 MiB)")


def test_an_accuracy_matrix_declaring_10_to_the_6_squared_is_refused_by_report_and_status(runs, tmp_path):
    root, seed1 = _copy(runs, tmp_path)
    (seed1 / "accuracy_matrix.npy").write_bytes(_npy_header((10**6, 10**6)) + b"\0" * 128)
    r = _limited(f"from bimu import cli; raise SystemExit(cli.main(['report', {str(root)!r}, '--plot', 'p.png']))",
                 tmp_path)
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr
    assert "accuracy_matrix.npy: declares an array of shape (1000000, 1000000)" in r.stderr
    assert "| fake-test | bimu | - | 0 |" in r.stdout


def _png(width: int, height: int) -> bytes:
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\0" * 64)) + chunk(b"IEND", b"")


def test_a_900_megapixel_png_is_refused_from_its_header(tmp_path):
    from bimu.data.features import load_image

    (tmp_path / "big.png").write_bytes(_png(30000, 30000))
    with pytest.raises(ValueError, match=r"big.png: .*limit of 100,000,000 .*; refused"):
        load_image(tmp_path / "big.png")


# ------------------------------------------------------------------------------- locks
@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_a_lock_that_is_a_fifo_or_a_device_never_hangs_status_or_run(kind, runs, tmp_path):
    root, seed1 = _copy(runs, tmp_path)
    (seed1 / "summary.json").unlink()
    lock = seed1 / ".lock"
    os.mkfifo(lock) if kind == "fifo" else lock.symlink_to("/dev/zero")
    r = subprocess.run([sys.executable, "-m", "bimu", "status", str(root)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "Traceback" not in r.stderr
    assert "unreadable:" in r.stdout and "not a regular file" in r.stdout
    code = ("import sys; sys.path.insert(0, %r); import test_runner_fakes; from bimu import cli; raise SystemExit("
            "cli.main(['run', 'fake-test', '--tasks', '2', '--seeds', '1', '--engine', 'torch', '--out', %r]))"
            % (os.path.dirname(__file__), str(root)))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    _one_line(r.stderr, f"{lock}: not a regular file", "remove", "by hand")


# ------------------------------------------------------------------------------- JSON files
def test_deeply_nested_json_is_one_line_in_run_report_and_status(runs, tmp_path, capsys):
    deep = "[" * 100000 + "]" * 100000
    (tmp_path / "c.json").write_text(deep)
    assert cli.main(["run", "fake-test", "--config", str(tmp_path / "c.json"), "--out", str(tmp_path / "o")]) == 2
    _one_line(capsys.readouterr().err, "c.json: JSON nested deeper than 64 levels; refused")
    root, seed1 = _copy(runs, tmp_path)
    (seed1 / "summary.json").write_text('{"a": ' + deep + "}")
    assert cli.main(["report", str(root), "--plot", str(tmp_path / "p.png")]) == 0
    err = capsys.readouterr().err
    assert "summary.json: JSON nested deeper than 64 levels" in err and "Traceback" not in err
    (seed1 / "metrics.jsonl").write_text(deep + "\n")
    assert cli.main(["status", str(root)]) == 0
    out = capsys.readouterr().out
    assert "metrics.jsonl:1: JSON nested deeper than 64 levels" in out


def test_wrong_types_and_a_broken_metrics_line_fail_that_run_only(runs, tmp_path, capsys):
    root, seed1 = _copy(runs, tmp_path)
    lines = (seed1 / "metrics.jsonl").read_text().splitlines()
    (seed1 / "metrics.jsonl").write_text(lines[0] + "\n{not json\n")
    assert cli.main(["status", str(root)]) == 0
    out = capsys.readouterr().out
    assert f"{seed1 / 'metrics.jsonl'}:2: not valid JSON" in out and "1 complete, 1 failed" not in out
    assert "seed-0" in out and "complete" in out
    rec = json.loads(lines[0])
    rec["steps_per_s"] = "fast"
    (seed1 / "metrics.jsonl").write_text(json.dumps(rec) + "\n")
    summ = json.loads((seed1 / "summary.json").read_text())
    summ["last_k_acc"] = "high"
    (seed1 / "summary.json").write_text(json.dumps(summ))
    assert cli.main(["status", str(root)]) == 0
    assert "'steps_per_s' holds string 'fast', not a number" in capsys.readouterr().out
    assert cli.main(["report", str(root), "--plot", str(tmp_path / "p.png")]) == 0
    err = capsys.readouterr().err
    assert "Traceback" not in err and "skipping" in err and "not a number" in err


def test_a_results_manifest_without_scale_is_one_line(tmp_path, capsys):
    (tmp_path / "repro").mkdir()
    (tmp_path / "repro" / "x.json").write_text(json.dumps({"format": 1, "name": "x", "title": "t", "command": "c",
                                                            "table": {"header": [], "rows": []}}))
    assert cli.main(["report", "--results-page", str(tmp_path / "page.md"), str(tmp_path / "repro")]) == 2
    _one_line(capsys.readouterr().err, "x.json: a reproduction manifest without scale")


def test_a_journal_with_an_unknown_op_code_or_wrong_types_is_one_line(tmp_path):
    from bimu.tune.journal import check_journal

    j = tmp_path / "optuna.journal"
    j.write_text('{"op_code": 42, "worker_id": "w"}\n')
    with pytest.raises(ValueError, match=r"optuna.journal:1: unknown journal operation op_code=42"):
        check_journal(j)
    j.write_text('{"op_code": 4, "worker_id": "w", "study_id": "zero"}\n')
    with pytest.raises(ValueError, match=r"optuna.journal:1: 'study_id' holds string 'zero', not an integer"):
        check_journal(j)


# ------------------------------------------------------------------------------- state preconditions
def test_report_shows_a_nan_seed_as_failed_never_drops_it(runs, tmp_path, capsys):
    root, seed1 = _copy(runs, tmp_path)
    summ = json.loads((seed1 / "summary.json").read_text())
    summ.update(last_k_acc=float("nan"), first_task_acc=float("nan"), bwt=float("nan"))
    (seed1 / "summary.json").write_text(json.dumps(summ))
    np.save(seed1 / "accuracy_matrix.npy", np.full((2, 2), np.nan))
    assert cli.main(["report", str(root), "--plot", str(tmp_path / "p.png")]) == 0
    out = capsys.readouterr().out
    assert "| fake-test | bimu | - | 0 (FAILED: 1) |" in out
    assert "seed 1: FAILED, its summary holds no finite last-k accuracy (not in the means)" in out


def _poison(state):
    """``state`` with its method's first float tensor set to NaN (a diverged lambda)."""
    def walk(v):
        if isinstance(v, torch.Tensor) and v.is_floating_point():
            v.fill_(float("nan"))
            return True
        items = v.values() if isinstance(v, dict) else v if isinstance(v, (list, tuple)) else ()
        return any(walk(x) for x in items)

    assert walk(state["method_state"]["modules"])
    return state


@pytest.mark.parametrize("damage, message", [
    (_poison, "holds NaN or infinite values (a diverged or damaged model)"),
    (lambda s: {**s, "task": 10**9}, "the checkpoint says task 1000000000 is done, outside its stream of 2 tasks"),
    (lambda s: {**s, "method_state": "weights"}, "its method_state is a str, not a dict"),
])
def test_a_nan_or_impossible_checkpoint_is_refused_by_evaluate_and_resume(damage, message, runs, tmp_path, capsys):
    root, seed1 = _copy(runs, tmp_path)
    ckpt = seed1 / "checkpoint.pt"
    ckpt.write_bytes(checkpoint_bytes(damage(load_checkpoint_file(ckpt))))
    with pytest.raises(CheckpointError, match="refused"):
        load_checkpoint_file(ckpt)
    assert cli.main(["evaluate", str(seed1), "--no-ood"]) == 2
    _one_line(capsys.readouterr().err, f"{ckpt}: refused: ", message)
    (seed1 / "summary.json").unlink()  # an unfinished run: resume would read the checkpoint
    assert cli.main(["run", "fake-test", "--tasks", "2", "--seeds", "1", "--engine", "torch", "--out", str(root),
                     "--no-progress"]) == 2
    _one_line(capsys.readouterr().err, f"{ckpt}: refused: ", message)


def test_check_checkpoint_state_is_the_shared_precondition():
    with pytest.raises(CheckpointError, match="the checkpoint is for a stream of 4 tasks, the run has 3"):
        check_checkpoint_state({"task": 1, "n_tasks": 4}, "c.pt", n_tasks=3)
    assert check_checkpoint_state({"task": 1, "n_tasks": 4, "records": [{"task": 0}, {"task": 1}]}, "c.pt")


# ------------------------------------------------------------------------------- up-front bounds
@pytest.mark.parametrize("argv, message", [
    (["--tasks", "99999999999"], "config 'tasks' must be >= 1 or none, at most 100000"),
    (["--eval-samples", "1000000", "--hidden", "1000"], "with 1000000 evaluation samples and eval_batch_size=1000 on "
                                                       "sizes [6, 1000, 3] needs at least"),
])
def test_bounds_and_the_eval_memory_preflight_come_before_any_run_directory(argv, message, tmp_path, capsys):
    assert cli.main(["run", "fake-test", "--engine", "torch", "--out", str(tmp_path / "o"), *argv]) == 2
    _one_line(capsys.readouterr().err, message)
    assert not (tmp_path / "o").exists()

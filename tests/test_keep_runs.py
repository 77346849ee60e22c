"""scripts/keep_runs.py: which run directories are copied into the repository, and with which files."""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
import keep_runs  # noqa: E402 - scripts/ is not a package


def _run(root: Path, rel: str, files: dict[str, str]) -> Path:
    d = root / "runs" / rel
    d.mkdir(parents=True)
    for name, text in files.items():
        (d / name).write_text(text)
    return d


def test_finished_runs_are_copied_without_checkpoint_or_lock_and_unfinished_ones_are_not(tmp_path):
    src, dst = tmp_path / "src", tmp_path / "dst"
    cfg = json.dumps({"seed": 0})
    _run(src, "full/pmnist-1000/sgd/seed-0", {"config.json": cfg, "summary.json": '{"complete": true}',
                                              "metrics.jsonl": "{}\n", "checkpoint.pt": "x", ".lock": ""})
    _run(src, "full/pmnist-1000/sgd/seed-1", {"config.json": cfg, "summary.json": '{"complete": false}',
                                              "checkpoint.pt": "x"})
    _run(src, "full/animals-al/bimu-vr-0.3/seed-0", {"config.json": cfg, "result.json": '{"accuracy": 0.5}'})
    _run(src, "full/animals-al/bimu-vr-0.3/seed-1", {"config.json": cfg})  # started, not finished
    lines = keep_runs.keep(src, dst, partial=False)
    assert sorted(line.split()[0] for line in lines) == ["finished", "finished"]
    done = dst / "runs/full/pmnist-1000/sgd/seed-0"
    assert sorted(p.name for p in done.iterdir()) == ["config.json", "metrics.jsonl", "summary.json"]
    al = dst / "runs/full/animals-al/bimu-vr-0.3"
    assert sorted(p.name for p in (al / "seed-0").iterdir()) == ["config.json", "result.json"]
    assert not (al / "seed-1").exists() and not (dst / "runs/full/pmnist-1000/sgd/seed-1").exists()


def test_partial_copies_an_unfinished_run_with_its_checkpoint(tmp_path):
    src, dst = tmp_path / "src", tmp_path / "dst"
    _run(src, "full/pmnist-1000/sgd/seed-1", {"config.json": "{}", "summary.json": '{"complete": false}',
                                              "checkpoint.pt": "x"})
    assert [line.split()[0] for line in keep_runs.keep(src, dst, partial=True)] == ["partial"]
    assert (dst / "runs/full/pmnist-1000/sgd/seed-1/checkpoint.pt").read_text() == "x"


def test_partial_never_replaces_a_newer_checkpoint_or_a_finished_run(tmp_path):
    """Two computing folders seeded from the repository: the one still training a run wins, the stale
    copy in the other does not overwrite it, and no unfinished copy replaces a finished run."""
    import os

    fresh, stale, dst = tmp_path / "fresh", tmp_path / "stale", tmp_path / "dst"
    rel = "full/pmnist-1000/bimu/seed-0"
    files = {"config.json": "{}", "summary.json": '{"complete": false}'}
    old = _run(stale, rel, {**files, "checkpoint.pt": "task 10"})
    new = _run(fresh, rel, {**files, "checkpoint.pt": "task 90"})
    os.utime(old / "checkpoint.pt", (1_000, 1_000))
    os.utime(new / "checkpoint.pt", (2_000, 2_000))
    assert [line.split()[0] for line in keep_runs.keep(fresh, dst, partial=True)] == ["partial"]
    assert keep_runs.keep(stale, dst, partial=True) == []
    assert (dst / "runs" / rel / "checkpoint.pt").read_text() == "task 90"
    _run(fresh, "full/pmnist-1000/sgd/seed-0", {"config.json": "{}", "summary.json": '{"complete": true}'})
    _run(stale, "full/pmnist-1000/sgd/seed-0", {**files, "checkpoint.pt": "task 3"})
    keep_runs.keep(fresh, dst, partial=True)
    assert keep_runs.keep(stale, dst, partial=True) == []
    kept = dst / "runs/full/pmnist-1000/sgd/seed-0"
    assert sorted(p.name for p in kept.iterdir()) == ["config.json", "summary.json"]


def test_a_run_directory_is_copied_whole_and_a_stale_copy_never_mixes_with_a_finished_run(tmp_path):
    """Seeding a computing folder from the repository (and keeping back from it): the repository's
    finished run replaces a stale unfinished copy whole (its checkpoint and old metrics go), and keeping
    the folder back afterwards changes nothing."""
    kept, out = tmp_path / "kept", tmp_path / "out"
    rel = "full/pmnist-1000/bimu/seed-0"
    done = _run(kept, rel, {"config.json": "{}", "summary.json": '{"complete": true}',
                            "metrics.jsonl": "{}\n" * 1000, "accuracy_matrix.csv": "1000 rows"})
    _run(out, rel, {"config.json": "{}", "metrics.jsonl": "{}\n" * 503, "accuracy_matrix.csv": "503 rows",
                    "checkpoint.pt": "task 503", "notes.txt": "left by hand"})
    assert [line.split()[0] for line in keep_runs.keep(kept, out, partial=True)] == ["finished"]
    seeded = out / "runs" / rel
    assert sorted(p.name for p in seeded.iterdir()) == sorted(p.name for p in done.iterdir())
    assert (seeded / "metrics.jsonl").read_text().count("\n") == 1000
    assert (seeded / "accuracy_matrix.csv").read_text() == "1000 rows"
    assert keep_runs.keep(out, kept, partial=True) == []  # the same run: nothing to copy
    assert not list((out / "runs" / "full/pmnist-1000/bimu").glob(".*"))  # no temporary directory left


def test_a_different_finished_run_is_reported_as_a_conflict_and_not_replaced(tmp_path):
    src, dst = tmp_path / "src", tmp_path / "dst"
    rel = "full/pmnist-1000/sgd/seed-0"
    _run(src, rel, {"config.json": "{}", "summary.json": '{"complete": true}', "metrics.jsonl": "{}\n" * 503})
    _run(dst, rel, {"config.json": "{}", "summary.json": '{"complete": true}', "metrics.jsonl": "{}\n" * 1000})
    (line,) = keep_runs.keep(src, dst, partial=True)
    assert line.startswith("conflict ") and line.endswith("a different finished run is there, not replaced")
    assert (dst / "runs" / rel / "metrics.jsonl").read_text().count("\n") == 1000


def test_an_unfinished_run_with_more_tasks_is_never_replaced_by_a_newer_file_with_fewer(tmp_path):
    """Progress is counted in tasks (lines of metrics.jsonl) before the checkpoint's time: a checkout of
    an older checkpoint has a fresh file time but fewer tasks behind it."""
    import os

    src, dst = tmp_path / "src", tmp_path / "dst"
    rel = "full/pmnist-1000/bimu/seed-1"
    older = _run(src, rel, {"config.json": "{}", "metrics.jsonl": "{}\n" * 197, "checkpoint.pt": "task 197"})
    ahead = _run(dst, rel, {"config.json": "{}", "metrics.jsonl": "{}\n" * 240, "checkpoint.pt": "task 240"})
    os.utime(ahead / "checkpoint.pt", (1_000, 1_000))
    os.utime(older / "checkpoint.pt", (2_000, 2_000))
    assert keep_runs.keep(src, dst, partial=True) == []
    assert (dst / "runs" / rel / "checkpoint.pt").read_text() == "task 240"
    assert [line.split()[0] for line in keep_runs.keep(dst, src, partial=True)] == ["partial"]
    assert (src / "runs" / rel / "checkpoint.pt").read_text() == "task 240"


def test_compact_copies_leave_out_what_the_metrics_rebuild_and_a_plain_copy_restores_it(tmp_path):
    """Into the repository (``--compact``) an unfinished run goes without ``accuracy_matrix.npy`` and
    with a checkpoint without its matrix; the run resumes from that copy to the same numbers as an
    uninterrupted run, and a plain copy back has the original matrix file and checkpoint matrix again."""
    import numpy as np
    import pytest
    from bimu.methods import create_method
    from bimu.rundir import RunDir, load_checkpoint_file
    from bimu.experiments.stream import run_stream
    from test_runner_fakes import N_CLASSES, N_FEATURES, FakeBenchmark, strip_timing

    class Crash(Exception):
        pass

    def crash_after_1(t):
        if t == 1:
            raise Crash

    def method():
        return create_method("bimu", [N_FEATURES, N_CLASSES], 2, preset="pmnist-100")

    b = FakeBenchmark(n_tasks=4)
    full = run_stream(b, method(), seed=2, run_dir=tmp_path / "full", progress=False)
    rel = "full/fake/bimu/seed-2"
    computing, repo, back = tmp_path / "computing", tmp_path / "repo", tmp_path / "back"
    with pytest.raises(Crash):
        run_stream(b, method(), seed=2, run_dir=computing / "runs" / rel, progress=False, on_task_end=crash_after_1)
    RunDir(computing / "runs" / rel).write_json("config.json", {"tasks": 4})
    assert [line.split()[0] for line in keep_runs.keep(computing, repo, partial=True, compact=True)] == ["partial"]
    kept = repo / "runs" / rel
    assert sorted(p.name for p in kept.iterdir()) == ["accuracy_matrix.csv", "checkpoint.pt", "config.json",
                                                      "metrics.jsonl"]
    original = computing / "runs" / rel / "checkpoint.pt"
    assert "R" not in load_checkpoint_file(kept / "checkpoint.pt")
    assert (kept / "checkpoint.pt").stat().st_size < original.stat().st_size
    np.testing.assert_array_equal(RunDir(kept).read_matrix(), np.load(computing / "runs" / rel / "accuracy_matrix.npy"))
    assert keep_runs.keep(computing, repo, partial=True, compact=True) == []  # the same progress: kept as it is

    assert [line.split()[0] for line in keep_runs.keep(repo, back, partial=True)] == ["partial"]
    restored = back / "runs" / rel
    assert (restored / "accuracy_matrix.npy").read_bytes() == (computing / "runs" / rel / "accuracy_matrix.npy").read_bytes()
    np.testing.assert_array_equal(load_checkpoint_file(restored / "checkpoint.pt")["R"], load_checkpoint_file(original)["R"])
    # the restored checkpoint's numpy values are plain numpy, as a bimu that predates tagged numpy values
    # (the frozen code a queue trains with) reads them: torch.load(weights_only=False), R used as an array
    import torch
    legacy = torch.load(restored / "checkpoint.pt", map_location="cpu", weights_only=False)
    assert isinstance(legacy["R"], np.ndarray)
    np.testing.assert_array_equal(np.asarray(legacy["R"], dtype=np.float64), load_checkpoint_file(original)["R"])
    assert "__bimu_ndarray__" not in repr(legacy)  # no tagged numpy value anywhere in it
    res = run_stream(b, method(), seed=2, run_dir=restored, progress=False)  # and today's bimu resumes from it
    np.testing.assert_array_equal(res["R"], full["R"])

    res = run_stream(b, method(), seed=2, run_dir=kept, progress=False)  # resumes from the compact copy itself
    np.testing.assert_array_equal(res["R"], full["R"])
    assert strip_timing(res["records"]) == strip_timing(full["records"])


def test_a_finished_run_kept_compact_is_the_same_run_as_its_full_copy(tmp_path):
    import numpy as np
    from bimu.rundir import RunDir, matrix_from_records

    src, repo = tmp_path / "src", tmp_path / "repo"
    recs = [{"task": 0, "evaluated": {"0": 0.5}}, {"task": 1, "evaluated": {"0": 0.25, "1": 1 / 3}}]
    d = _run(src, "full/pmnist-1000/sgd/seed-0", {"config.json": '{"tasks": 2}', "summary.json": '{"complete": true, "n_tasks": 2}',
                                                  "metrics.jsonl": "".join(json.dumps(r) + "\n" for r in recs)})
    RunDir(d).write_matrix(matrix_from_records(2, recs))
    assert [line.split()[0] for line in keep_runs.keep(src, repo, partial=False, compact=True)] == ["finished"]
    kept = repo / "runs/full/pmnist-1000/sgd/seed-0"
    assert not (kept / "accuracy_matrix.npy").exists()
    assert RunDir(kept).read_matrix()[1, 1] == 1 / 3  # full precision, not the CSV's six decimals
    assert keep_runs.keep(src, repo, partial=False, compact=True) == []  # the same run, no conflict
    # a matrix the metrics do not rebuild is kept as it is
    other = _run(src, "full/pmnist-1000/sgd/seed-1", {"config.json": '{"tasks": 2}', "summary.json": '{"complete": true, "n_tasks": 2}',
                                                      "metrics.jsonl": json.dumps(recs[0]) + "\n"})
    RunDir(other).write_matrix(matrix_from_records(2, recs))
    keep_runs.keep(src, repo, partial=False, compact=True)
    assert (repo / "runs/full/pmnist-1000/sgd/seed-1/accuracy_matrix.npy").exists()


def test_a_checkpoint_that_cannot_be_read_is_copied_as_it_is(tmp_path):
    src, dst = tmp_path / "src", tmp_path / "dst"
    _run(src, "full/pmnist-1000/sgd/seed-1", {"config.json": "{}", "checkpoint.pt": "not a checkpoint"})
    keep_runs.keep(src, dst, partial=True, compact=True)
    assert (dst / "runs/full/pmnist-1000/sgd/seed-1/checkpoint.pt").read_text() == "not a checkpoint"

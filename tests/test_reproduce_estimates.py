"""`bimu reproduce NAME` says what it will do before doing it: the runs it trains, reuses and resumes and
the core-hours, estimated from the committed runs' summaries (also with --dry-run on a fresh folder), and
with --jobs N every line a job prints carries its run label, with no leaked-semaphore warning at the end."""

import json
import os
import statistics
import subprocess
import sys
import textwrap
from io import StringIO
from pathlib import Path

import pytest

from bimu.cli import REPRODUCTIONS, main
from bimu.experiments.config import RunConfig
from bimu.reproduce import entries, estimate, spec
from bimu.reproduce.plan import plan

TESTS = Path(__file__).resolve().parent
COMMITTED = Path(__file__).resolve().parents[1] / "results" / "reproduce-full" / "runs"
needs_committed = pytest.mark.skipif(not (COMMITTED / "full" / "pmnist-1000").is_dir(),
                                     reason="the committed full-scale runs are not in this checkout")


def _committed_run(root, row, method, seed, seconds, tasks=4, examples=192, benchmark="fake-test"):
    d = root / "full" / "fake-est" / row / f"{benchmark}-{method}" / f"seed-{seed}"
    d.mkdir(parents=True)
    (d / "config.json").write_text(json.dumps({"benchmark": benchmark, "method": method, "tasks": tasks,
                                               "hidden": [], "benchmark_options": {}}))
    (d / "summary.json").write_text(json.dumps({
        "complete": True, "n_tasks": tasks, "examples_seen": examples, "train_seconds": seconds[0],
        "eval_seconds": seconds[1], "seed": seed, "method": method, "benchmark": benchmark, "hidden": []}))


def _fake_entry(name):
    def rows(opts):
        cfg = RunConfig.from_dict(dict(benchmark="fake-test", tasks=2, seeds=list(opts.seeds), ood=True, ood_every=0,
                                       train_limit=24))
        return [spec.Row(["BiMU"], "r", cfg, {}), spec.Row(["SGD"], "s", cfg.replace(method="sgd"), {})]
    return spec.Entry(name, "fake", ("Row",), ("acc",), rows)


@pytest.fixture
def fake_committed(tmp_path, monkeypatch):
    """A committed-runs folder: row r (BiMU) took 7 200 s and 12 000 s for 4 tasks of 48 examples; another
    row's BiMU run, far slower, is not the one a row-r run is estimated from; no SGD run at all."""
    import test_runner_fakes  # noqa: F401 - registers the fake-test benchmark

    root = tmp_path / "committed"
    _committed_run(root, "r", "bimu", 0, (7000.0, 200.0))
    _committed_run(root, "r", "bimu", 1, (11000.0, 1000.0))
    _committed_run(root, "other", "bimu", 0, (1e6, 0.0))
    monkeypatch.setenv(estimate.COMMITTED_ENV, str(root))
    monkeypatch.setitem(entries.ENTRIES, "fake-est", _fake_entry("fake-est"))
    monkeypatch.setitem(REPRODUCTIONS, "fake-est", "reproduce")
    return root


def test_the_summary_before_training_counts_the_runs_and_the_core_hours(tmp_path, fake_committed, capsys):
    out = tmp_path / "out"
    args = ["reproduce", "fake-est", "--scale", "quick", "--engine", "torch", "--seeds", "3", "--jobs", "1",
            "--out", str(out)]
    assert main(args) == 0
    err = capsys.readouterr().err.splitlines()
    # a row-r run: the mean of 7 200 s and 12 000 s, for 2 of 4 tasks and 24 of 48 examples a task: 2 400 s;
    # 3 seeds: 7 200 s = 2 core-hours; SGD has no committed run: "?", said so
    assert err[:2] == ["fake-est (quick scale): 6 runs: 6 to train (0 resume from a checkpoint), 0 complete (reused)",
                       "estimated work: 2.00 core-hours + ? for 3 runs (no committed run of sgd on fake-test)"]
    assert main(args) == 0  # everything reused: nothing to train
    assert capsys.readouterr().err.splitlines()[:2] == [
        "fake-est (quick scale): 6 runs: 0 to train (0 resume from a checkpoint), 6 complete (reused)",
        "estimated work: 0 core-hours"]


def test_the_summary_counts_a_run_that_resumes_from_its_checkpoint(tmp_path, fake_committed):
    from bimu.rundir import RunDir, seed_dir

    opts = spec.Options(seeds=(0, 1), scale="quick", out=str(tmp_path / "out"), rows=("r",))
    row = entries.ENTRIES["fake-est"].rows(opts)[0]
    rd = RunDir(seed_dir(spec.row_dir(opts, "fake-est", row), "fake-test", "bimu", 1))
    rd.write_json("config.json", {"benchmark": "fake-test", "method": "bimu", "tasks": 2, "hidden": []})
    rd.write_metrics([{"task": 0, "acc": 0.5, "train_seconds": 5000.0, "eval_seconds": 1000.0}])
    (rd.path / "checkpoint.pt").write_bytes(b"state")
    text = estimate.summary("fake-est", plan("fake-est", opts), "quick", jobs=2)
    # seed 1: 1 task left at its own 6 000 s a task; seed 0 not started: 6 000 s a task (the started run of
    # its kind under OUT/runs) x 2 tasks; 18 000 s in all, 9 000 s on 2 jobs at best
    assert text.splitlines() == [
        "fake-est (quick scale): 2 runs: 2 to train (1 resumes from a checkpoint), 0 complete (reused)",
        "estimated work: 5.00 core-hours (at best 2.5 h on 2 jobs)"]


def test_scaling_by_tasks_examples_and_weights():
    m = estimate.Measured("e", "r", "pmnist", "bimu", (100,), "{}", 1000, 60_000_000, (784, 100, 10), 3600.0)
    cfg = RunConfig.from_dict(dict(benchmark="pmnist", method="bimu", hidden=(200,), tasks=100, train_limit=600))
    # the same row: tasks and examples; widths differ only for a run of another row
    assert estimate.run_seconds([m], "e", "r", cfg) == pytest.approx(3600.0 * 0.1 * 0.01 * 158800 / 79400)
    assert estimate.run_seconds([m], "e", "other", cfg.replace(hidden=(100,))) == pytest.approx(3.6)
    assert estimate.run_seconds([m], "e", "r", cfg.replace(method="sgd")) is None


def _hours_by_row(entry):
    """Mean training + evaluation seconds of each committed row of ``entry``, read straight from the files."""
    out = {}
    for row in sorted((COMMITTED / "full" / entry).iterdir()):
        secs = [json.loads(f.read_text())["train_seconds"] + json.loads(f.read_text())["eval_seconds"]
                for f in row.glob("*/seed-*/summary.json")]
        out[row.name] = statistics.fmean(secs)
    return out


@needs_committed
def test_dry_run_on_a_fresh_folder_estimates_every_run_from_the_committed_runs(tmp_path, capsys, monkeypatch):
    from bimu.experiments.status import format_duration

    monkeypatch.delenv(estimate.COMMITTED_ENV, raising=False)
    assert main(["reproduce", "pmnist-1000", "--dry-run", "--out", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "pmnist-1000: 40 runs (40 to run)"
    per_row = _hours_by_row("pmnist-1000")
    runs = [line.split() for line in lines[2:-1]]
    assert len(runs) == 40 and all(r[-1] != "?" for r in runs)
    for r in runs:  # each row's seed: its row's committed mean (same tasks and examples at full scale)
        assert " ".join(r[5:]) == format_duration(per_row[r[0]])
    total = 5 * sum(per_row.values())
    assert lines[-1] == (f"work left: {format_duration(total)} of one core "
                         "(40 estimated from the committed runs' seconds)")
    # and the same numbers before a real run trains anything (not started here)
    from bimu.reproduce.cli import print_summary

    buf = StringIO()
    print_summary("pmnist-1000", spec.Options(seeds=(0, 1, 2, 3, 4), scale="full", out=str(tmp_path), jobs=1), buf)
    assert buf.getvalue().splitlines() == [
        "pmnist-1000 (full scale): 40 runs: 40 to train (0 resume from a checkpoint), 0 complete (reused)",
        f"estimated work: {total / 3600:.2f} core-hours"]
    assert not any(tmp_path.iterdir())  # nothing written


@needs_committed
def test_dry_run_at_quick_scale_scales_the_committed_runs(tmp_path, capsys):
    assert main(["reproduce", "memory-window", "--dry-run", "--scale", "quick", "--out", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert all(line.split()[-1] != "?" for line in lines[2:-1])
    assert "not estimated" not in lines[-1] and "estimated from the committed runs" in lines[-1]


# ----------------------------------------------------------------------------------------- --jobs N
def locking_job(name: str) -> int:
    """A job that prints on both streams (one line straight to the descriptor, as a library would) and makes
    a lock in its process, as numba does when it starts its threads (the cause of the leak warning)."""
    import multiprocessing

    lock = multiprocessing.RLock()  # noqa: F841 - kept until the process ends, as numba keeps its own
    try:
        from numba.np.ufunc.parallel import _launch_threads
    except ImportError:  # pragma: no cover
        pass
    else:
        _launch_threads()
    print(f"{name} on stdout")
    print(f"{name} on stderr", file=sys.stderr)
    sys.stderr.flush()
    os.write(2, f"{name} from the descriptor\n".encode())
    return 0


def _python(script: str, cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]))
    return subprocess.run([sys.executable, "-c", textwrap.dedent(script)], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


def test_jobs_label_every_line_and_leak_no_semaphore(tmp_path):
    r = _python("""
        from bimu.experiments.parallel import Job, run_jobs
        from test_reproduce_estimates import locking_job
        jobs = [Job(f"k{i}", locking_job, (f"job{i}",), label=f"e row{i} seed {i}") for i in range(3)]
        print(run_jobs(jobs, n=2))
        """, tmp_path)
    assert r.returncode == 0, r.stderr
    for i in range(3):
        assert f"[e row{i} seed {i}] job{i} on stdout" in r.stdout.splitlines()
        assert f"[e row{i} seed {i}] job{i} on stderr" in r.stderr.splitlines()
        assert f"[e row{i} seed {i}] job{i} from the descriptor" in r.stderr.splitlines()
    assert "leaked semaphore" not in r.stderr and "resource_tracker" not in r.stderr, r.stderr


def test_reproduce_jobs_output_is_labelled_by_run(tmp_path):
    r = _python(f"""
        import sys
        import test_runner_fakes
        from bimu.cli import REPRODUCTIONS, main
        from bimu.reproduce import entries
        from test_reproduce_estimates import _fake_entry
        entries.ENTRIES["fake-est"] = _fake_entry("fake-est")
        REPRODUCTIONS["fake-est"] = "reproduce"
        sys.exit(main(["reproduce", "fake-est", "--scale", "quick", "--engine", "torch", "--seeds", "2",
                       "--jobs", "2", "--out", {str(tmp_path / "out")!r}]))
        """, tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stderr.splitlines()[0].startswith("fake-est (quick scale): 4 runs: 4 to train")
    job_lines = [x for x in r.stderr.splitlines() if "task " in x and "acc" in x]
    assert len(job_lines) == 8  # 2 tasks of 4 runs
    for line in job_lines:  # "[fake-est r seed 1] seed 1 task 2/2: acc ..."
        label, _, rest = line.partition("] ")
        _, row, _, seed = label.lstrip("[").split()
        assert row in ("r", "s") and rest.startswith(f"seed {seed} task ")
    assert "leaked semaphore" not in r.stderr and "resource_tracker" not in r.stderr

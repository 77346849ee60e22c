"""``--scheduler`` end to end: the ``bimu`` command against ``dask scheduler`` and ``dask worker`` processes
on loopback (tests/dask_cluster.py), the run directories on this machine's filesystem shared by all."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("distributed")

from dask_cluster import LoopbackCluster  # noqa: E402

from bimu.process import Owner  # noqa: E402

DATA = os.environ.get("BIMU_DATA_DIR", "")
needs_mnist = pytest.mark.skipif(not (Path(DATA) / "mnist").is_dir(), reason="needs MNIST under $BIMU_DATA_DIR")
RUN = ["run", "pmnist", "--method", "bimu", "--hidden", "16", "--train-limit", "200", "--test-limit", "100",
       "--eval-final", "last", "--eval-final-last", "1", "--no-ood", "--no-progress"]


def bimu(*args, timeout=600):
    return subprocess.run([sys.executable, "-m", "bimu", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with LoopbackCluster(tmp_path_factory.mktemp("dask"), n_workers=2) as c:
        yield c


@needs_mnist
def test_reproduce_on_two_workers_gives_the_local_table_to_the_bit(cluster, tmp_path):
    a, b = tmp_path / "A", tmp_path / "B"
    remote = bimu("reproduce", "memory-window", "--scale", "quick", "--scheduler", cluster.address, "--out", a)
    assert remote.returncode == 0, remote.stderr
    start = [line for line in remote.stderr.splitlines() if line.startswith("dask: ")]
    assert start and f"scheduler {cluster.address}, dashboard http://127.0.0.1:" in start[0]
    n = int(start[0].split("; ")[1].split()[0])
    assert n >= 2 and start[0].endswith(f"2 workers; {n} runs submitted (0 already done)")
    local = bimu("reproduce", "memory-window", "--scale", "quick", "--jobs", "1", "--out", b)
    assert local.returncode == 0, local.stderr
    assert (a / "memory-window.csv").read_bytes() == (b / "memory-window.csv").read_bytes()
    assert _table(a) == _table(b)
    again = bimu("reproduce", "memory-window", "--scale", "quick", "--scheduler", cluster.address, "--out", a)
    assert again.returncode == 0, again.stderr
    assert f"0 runs submitted ({n} already done)" in again.stderr
    assert (a / "memory-window.csv").read_bytes() == (b / "memory-window.csv").read_bytes()


def _table(out) -> str:
    """The report of ``out`` with its folder written OUT, without the compute note (wall-clock times)."""
    lines = (out / "memory-window.md").read_text().replace(str(out), "OUT").splitlines()
    kept = [line for line in lines if not line.startswith("- compute, core-hours")]
    assert len(kept) == len(lines) - 1  # the note was there
    return "\n".join(kept)


def _matrix(out: Path, seed: int) -> bytes:
    return (out / "pmnist-bimu" / f"seed-{seed}" / "accuracy_matrix.csv").read_bytes()


@needs_mnist
def test_a_killed_worker_run_resumes_on_a_worker_with_the_same_numbers(cluster, tmp_path):
    out = tmp_path / "runs"
    long = ["--tasks", "20", "--train-limit", "1000"]  # long enough to be caught between two checkpoints
    proc = subprocess.Popen([sys.executable, "-m", "bimu", *RUN, *long, "--seeds", "0", "1",
                             "--scheduler", cluster.address, "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    killed = None
    deadline = time.time() + 300
    while killed is None and time.time() < deadline and proc.poll() is None:
        for seed in (0, 1):
            d = out / "pmnist-bimu" / f"seed-{seed}"
            try:
                pid = Owner.parse((d / ".lock").read_text()).pid  # the lock names its owner
            except (OSError, AttributeError):  # no lock yet, or one being written
                continue
            if (d / "checkpoint.pt").is_file() and not (d / "summary.json").is_file():
                os.kill(pid, signal.SIGKILL)  # the dask worker process running this seed, mid-run
                killed = seed, pid
                break
        time.sleep(0.05)
    stdout, stderr = proc.communicate(timeout=600)
    assert killed is not None, f"no run was caught in progress: {stderr}"
    assert proc.returncode == 0, stderr
    seed, pid = killed
    d = out / "pmnist-bimu" / f"seed-{seed}"
    env = json.loads((d / "environment.json").read_text())
    assert env["resumed"] is True  # continued from its checkpoint, not started again
    assert json.loads((d / "summary.json").read_text())["complete"] is True
    local = tmp_path / "local"
    r = bimu(*RUN, *long, "--seeds", seed, "--out", local)
    assert r.returncode == 0, r.stderr
    assert _matrix(out, seed) == _matrix(local, seed)


@needs_mnist
def test_a_worker_without_the_data_fails_its_run_naming_the_file_and_the_others_complete(tmp_path):
    empty = tmp_path / "no-data"
    empty.mkdir()
    with LoopbackCluster(tmp_path / "dask", n_workers=2, worker_env={"w1": {"BIMU_DATA_DIR": str(empty)}}) as c:
        r = bimu(*RUN, "--tasks", "2", "--seeds", "0", "1", "--scheduler", c.address, "--out", tmp_path / "runs")
    assert r.returncode == 1
    failed = [line for line in r.stderr.splitlines() if " FAILED on " in line]
    assert len(failed) == 1, r.stderr
    assert f"mnist: missing train-images-idx3-ubyte.gz (or train-images-idx3-ubyte) in {empty}/mnist" in failed[0]
    ok = 1 - int(failed[0].split("job seed-")[1][0])
    assert json.loads((tmp_path / "runs" / "pmnist-bimu" / f"seed-{ok}" / "summary.json").read_text())["complete"]


def test_a_bad_scheduler_address_is_one_line_before_any_work(tmp_path):
    for args in (["reproduce", "memory-window", "--scale", "quick"], RUN):
        r = bimu(*args, "--scheduler", "http://x:1", "--out", tmp_path / "o")
        assert r.returncode == 2
        assert r.stderr.count("\n") == 1 and "'http://x:1' is not a Dask scheduler address" in r.stderr
        r = bimu(*args, "--scheduler", "127.0.0.1:9", "--out", tmp_path / "o")
        assert r.returncode == 2 and r.stderr.count("\n") == 1
        assert "no Dask scheduler answered at tcp://127.0.0.1:9" in r.stderr
    for args in (["sweep-threshold", "animals-ti"], ["tune", "blobs", "--method", "bimu", "--evaluator", "synthetic"]):
        r = bimu(*args, "--scheduler", "http://x:1", "--out", tmp_path / "o")
        assert r.returncode == 2
        assert r.stderr.count("\n") == 1 and "'http://x:1' is not a Dask scheduler address" in r.stderr
    assert not (tmp_path / "o").exists()


def test_tune_runs_its_optuna_workers_as_dask_tasks_on_one_study(cluster, tmp_path):
    out = tmp_path / "tune"
    proc = subprocess.run([sys.executable, "-m", "bimu", "tune", "blobs", "--method", "bimu", "--evaluator",
                           "synthetic", "--trials", "4", "--out", str(out), "--scheduler", cluster.address,
                           "--workers", "2", "--poll-interval", "0.2", "--option", "n_tasks=2",
                           "--option", "n_train=8", "--option", "n_eval=16", "--option", "hidden=0"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert "2 workers; 2 runs submitted (0 already done)" in proc.stderr
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["n_finished"] == 4 and summary["completed_here"] == []  # every trial ran on the cluster
    import optuna

    storage = optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(str(out / "optuna.journal")))
    trials = optuna.load_study(study_name=summary["study"], storage=storage).get_trials()
    ran_on = {"{host}:{pid}".format(**t.user_attrs["bimu_worker"]) for t in trials}
    assert len(trials) == 4 and summary["worker"] not in ran_on
    assert (out / "best_config.json").is_file()

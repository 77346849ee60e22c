"""Run directories under kills, races and refusals: exact active-learning resume after real SIGKILLs, a
lock that two racing processes never both hold, status consistent with the checkpoint, orphan temporary
files cleaned, refused resumes that leave the other run alone, SIGTERM releasing the lock."""

import importlib.util
import multiprocessing
import os
import signal
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

from bimu import cli
from bimu.experiments.config import RunConfig
from bimu.experiments.runner import run_experiment
from bimu.experiments.status import seed_status
from bimu.process import Owner, start_time
from bimu.rundir import RunDir, seed_dir
from test_runner_fakes import strip_timing

TESTS = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(TESTS, "..", "src")
ACTIVE = dict(benchmark="fake-test", tasks=3, seeds=[0], active="vr", threshold=0.2)
TIMING = {"train_seconds", "eval_seconds", "steps_per_s"}

# One `bimu run`-equivalent process that SIGKILLs itself at a chosen moment: the n-th time it reaches
# `kind` ("predict": an example's query decision; "before:NAME": the temporary file of NAME fully
# written, not yet renamed over NAME; "after:NAME": just renamed). Kind "none": no kill; "term": SIGTERM
# after the first task. The kill is a real signal; only its moment is chosen.
KILLER = textwrap.dedent(f"""
    import importlib.util, os, signal, sys
    sys.path.insert(0, {TESTS!r})
    import test_runner_fakes  # registers the fake-test benchmark
    from bimu import cli
    from bimu.active import ActiveLearner
    out, engine, kind, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    seen = {{}}

    def hit(k):
        seen[k] = seen.get(k, 0) + 1
        if k == kind and seen[k] == n:
            os.kill(os.getpid(), signal.SIGKILL)

    predict_one = ActiveLearner.predict_one
    def counted_predict(self, *a, **kw):
        hit("predict")
        return predict_one(self, *a, **kw)
    ActiveLearner.predict_one = counted_predict
    from bimu.engine.query import QueryPlanes
    block = QueryPlanes.block
    def counted_block(self, *a, **kw):  # the compiled query path decides examples in blocks
        out = block(self, *a, **kw)
        for _ in range(out[0]):
            hit("predict")
        return out
    QueryPlanes.block = counted_block
    replace = os.replace
    def counted_replace(src, dst, *a, **kw):
        hit("before:" + os.path.basename(dst))
        replace(src, dst, *a, **kw)
        hit("after:" + os.path.basename(dst))
    os.replace = counted_replace
    if kind == "term":
        import bimu.experiments.stream as stream
        run_stream = stream.run_stream
        def terminated_after_first_task(*a, **kw):
            kw["on_task_end"] = lambda t: os.kill(os.getpid(), signal.SIGTERM)
            return run_stream(*a, **kw)
        import bimu.experiments.runner as runner
        runner.run_stream = terminated_after_first_task
    # subcommand modules missing from this tree do not stop `bimu run`
    cli.COMMAND_MODULES = tuple(m for m in cli.COMMAND_MODULES if importlib.util.find_spec(m))
    sys.exit(cli.main(["run", "fake-test", "--tasks", "3", "--seeds", "0", "--active", "vr", "--threshold",
                       "0.2", "--engine", engine, "--out", out, "--no-progress"]))
""")


def _env():
    return dict(os.environ, PYTHONPATH=os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")]))


def _killer(out, engine, kind="none", n=0):
    return subprocess.run([sys.executable, "-c", KILLER, str(out), engine, kind, str(n)], env=_env(),
                          capture_output=True, text=True, timeout=600)


def _state(out, engine):
    """What an uninterrupted run and a resumed one must agree on: summary, metrics, accuracy matrix, ledger."""
    rd = RunDir(seed_dir(out, "fake-test", "bimu", 0))
    summary = {k: v for k, v in rd.read_json("summary.json").items() if k not in TIMING}
    ledger = rd.load_checkpoint()["learner_state"]["ledger"]
    return (summary, strip_timing(rd.read_metrics()), rd.read_matrix(), ledger["counters"],
            ledger["asked"].tolist(), ledger["task"].tolist())


# 11 kills over the 3-task stream (24 examples a task), each process starting from what the last one
# left: while the lock is held before training, mid-task (three tasks), inside a checkpoint write
# (temporary file written, not yet in place: tasks 1 and 3), between the checkpoint and the metrics,
# while a resume rewrites the metrics, before the matrix, before the summary. Every process but the
# last must die by SIGKILL.
KILLS = [("after:config.json", 1), ("predict", 10), ("before:checkpoint.pt", 1), ("after:checkpoint.pt", 1),
         ("before:metrics.jsonl", 1), ("predict", 3), ("before:accuracy_matrix.npy", 2), ("predict", 20),
         ("before:checkpoint.pt", 1), ("after:checkpoint.pt", 1), ("before:summary.json", 1)]


def _kill_chain(out, engine, kills, report):
    codes = [_killer(out, engine, kind, n).returncode for kind, n in kills]
    final = _killer(out, engine)
    report[engine] = codes, final


@pytest.mark.parametrize("engine", ["torch", "fused"])
def test_active_run_killed_at_many_moments_resumes_exactly(tmp_path, engine):
    """Item 1: an active-learning run (vr, threshold 0.2, 3 tasks) SIGKILLed 11 times, some kills inside
    checkpoint writes, ends with the summary, metrics, accuracy matrix and ledger of an uninterrupted run."""
    report = {}
    chain = threading.Thread(target=_kill_chain, args=(tmp_path / "killed", engine, KILLS, report))
    chain.start()
    cfg = RunConfig.from_dict(dict(ACTIVE, out=str(tmp_path / "whole"), engine=engine))
    _, code = run_experiment(cfg, progress=False, log=lambda s: None)
    chain.join()
    codes, final = report[engine]
    assert code == 0 and codes == [-signal.SIGKILL] * len(KILLS), (codes, final.stderr)
    assert final.returncode == 0, final.stderr
    whole, killed = _state(tmp_path / "whole", engine), _state(tmp_path / "killed", engine)
    assert whole[0] == killed[0] and whole[0]["complete"]
    assert whole[1] == killed[1]
    np.testing.assert_array_equal(whole[2], killed[2])
    assert whole[3:] == killed[3:]
    assert whole[3]["examples_seen"] == 72 and whole[0]["active"]["labels_queried"] == whole[3]["labels_queried"]
    left = sorted(p.name for p in RunDir(seed_dir(tmp_path / "killed", "fake-test", "bimu", 0)).path.iterdir())
    assert not [n for n in left if ".tmp" in n or n == ".lock"], left  # orphans of the killed writers cleaned


# --------------------------------------------------------------------------------- the lock
def _slow_disk():
    """Every file opened for writing pauses 2 ms first, as on a slow or busy disk: the moment between
    creating a file and writing into it, when a racing reader may see it empty, is then long enough to
    be hit (the check of the lock is the same)."""
    import builtins
    import io
    import time

    def slowed(open_):
        def slow_open(*a, **kw):
            f = open_(*a, **kw)
            if any(c in kw.get("mode", a[1] if len(a) > 1 else "r") for c in "wax+"):
                time.sleep(0.002)
            return f
        return slow_open

    os.fdopen = slowed(os.fdopen)
    io.open = builtins.open = slowed(builtins.open)


def _claimer(dirs, barrier, held, index):
    _slow_disk()  # in the forked claimer only
    for i, d in enumerate(dirs):
        barrier.wait()
        try:
            RunDir(d).acquire_lock()
            held[2 * i + index] = 1
        except RuntimeError:
            pass


def test_concurrent_lock_claims_never_two_holders_and_a_reused_pid_is_not_an_owner(tmp_path):
    """Item 2: 300 pairs of processes claim a directory at the same moment (released together by a
    barrier), on fresh directories and over stale locks, on a slow disk: exactly one of each pair holds it. A lock naming
    a live process that did not write it (pid 1 with another start time, or a bare pid) is taken over,
    and status does not call its run running."""
    dirs = []
    for i in range(300):
        d = tmp_path / f"d{i}"
        d.mkdir()
        if i % 3 == 1:  # a stale lock of a dead process
            (d / ".lock").write_text(Owner(Owner.current().host, 2 ** 22 + 17, 5, Owner.current().boot).dumps())
        elif i % 3 == 2:  # an older bimu's lock: a bare pid, of a dead process
            (d / ".lock").write_text(str(2 ** 22 + 17))
        dirs.append(d)
    ctx = multiprocessing.get_context("fork")
    barrier, held = ctx.Barrier(2), ctx.Array("b", 600)
    procs = [ctx.Process(target=_claimer, args=(dirs, barrier, held, k)) for k in (0, 1)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(600)
    assert [p.exitcode for p in procs] == [0, 0]
    pairs = [(held[2 * i], held[2 * i + 1]) for i in range(300)]
    assert [i for i, pair in enumerate(pairs) if sum(pair) != 1] == []

    rd = RunDir(tmp_path / "stale")
    rd.path.mkdir()
    rd.write_json("config.json", {"benchmark": "pmnist", "method": "bimu", "tasks": 3})
    me = Owner.current()
    for text in (Owner(me.host, 1, start_time(1) + 1, me.boot).dumps(), "1"):  # pid 1 runs, but did not lock
        rd.file(".lock").write_text(text)
        assert not rd.locked_by_live_process() and seed_status(rd.path)["state"] == "not started"
        rd.acquire_lock()
        assert rd.lock_owner() == me
        rd.release_lock()
    rd.file(".lock").write_text(Owner(me.host, 1, start_time(1), me.boot).dumps())  # pid 1 itself: held
    assert seed_status(rd.path)["state"] == "running"
    with pytest.raises(RuntimeError, match="in use by process 1;"):
        rd.acquire_lock()


# --------------------------------------------------------------------------------- item 9
def test_checkpoint_kill_status_orphans_refusals_and_sigterm(tmp_path, monkeypatch, capsys):
    """Item 9. A kill inside the second checkpoint write: status counts the one checkpointed task (not
    the two whose metrics were computed) and the orphan temporary file goes with the next write there.
    A refused resume (another live process holds the directory, or it holds another configuration)
    exits 2 with one line and writes nothing there. SIGTERM stops the run with 143 and releases the lock."""
    out = tmp_path / "a"
    killed = _killer(out, "torch", "before:checkpoint.pt", 2)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    rd = RunDir(seed_dir(out, "fake-test", "bimu", 0))
    assert rd.load_checkpoint()["task"] == 0
    status = seed_status(rd.path)
    assert (status["state"], status["tasks_done"], status["tasks"]) == ("stopped", 1, 3)
    orphans = [p for p in rd.path.iterdir() if p.name.startswith(".checkpoint.")]
    assert len(orphans) == 1
    rd.write_json("probe.json", {})  # any write to the folder
    assert not any(p.exists() for p in orphans)
    rd.file("probe.json").unlink()

    monkeypatch.setattr(cli, "COMMAND_MODULES", tuple(m for m in cli.COMMAND_MODULES if importlib.util.find_spec(m)))
    argv = ["run", "fake-test", "--tasks", "3", "--seeds", "0", "--active", "vr", "--threshold", "0.2",
            "--engine", "torch", "--out", str(out), "--no-progress"]
    other = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        me = Owner.current()
        rd.file(".lock").write_text(Owner(me.host, other.pid, start_time(other.pid), me.boot).dumps())
        before = sorted((p.name, p.stat().st_mtime_ns) for p in rd.path.iterdir())
        capsys.readouterr()
        assert cli.main(argv) == 2
        err = capsys.readouterr().err
        assert err == f"bimu: error: {rd.path} is in use by process {other.pid}; wait for it or stop it\n"
        assert sorted((p.name, p.stat().st_mtime_ns) for p in rd.path.iterdir()) == before  # untouched
    finally:
        other.communicate(b"")
    assert cli.main(argv[:-3] + ["--mc-samples", "4"] + argv[-3:]) == 2  # another configuration
    assert "holds a run with a different configuration" in capsys.readouterr().err
    assert not rd.exists("error.txt")

    term = _killer(out, "torch", "term", 0)
    assert term.returncode == 143, term.stderr
    assert not rd.file(".lock").exists() and not rd.exists("error.txt")
    assert rd.load_checkpoint()["task"] == 1 and seed_status(rd.path)["tasks_done"] == 2

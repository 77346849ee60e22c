"""Dask scheduler addresses: checked and redacted by one parser before Dask sees them; a port that
accepts connections but speaks no Dask is refused by a bounded probe; a lost scheduler says which runs
finished; two commands sharing one output folder share the work."""

import os
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

import test_runner_fakes  # noqa: F401 - registers the fake-test benchmark
from bimu.experiments.distributed import parse_address, probe

pytest.importorskip("distributed")


@pytest.mark.parametrize("address, message", [
    ("tcp://bob:hunter2@127.0.0.1:1", "'tcp://bob:***@127.0.0.1:1' holds a user name or password"),
    ("tcp://[::1", "an IPv6 host is written [ADDRESS]:PORT"),
    ("inproc://x:1", "'inproc://x:1' is not a Dask scheduler address"),
    ("tcp://127.0.0.1:99999", "the port must be a number in 1..65535"),
    ("tcp://a b:1", "is not a Dask scheduler address"),
])
def test_bad_addresses_are_refused_by_the_parser_and_redacted(address, message):
    with pytest.raises(ValueError) as e:
        parse_address(address)
    assert message in str(e.value) and "hunter2" not in str(e.value)


@pytest.mark.parametrize("command", [["run", "pmnist", "--tasks", "1"], ["reproduce", "memory-window", "--scale", "quick"]])
def test_a_password_in_the_address_is_one_line_never_printed(command, tmp_path):
    t = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "bimu", *command, "--scheduler", "tcp://bob:hunter2@127.0.0.1:1",
                        "--out", str(tmp_path / "o")], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and time.monotonic() - t < 15
    assert "hunter2" not in r.stderr + r.stdout and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr


def test_a_port_that_accepts_but_sends_no_handshake_is_refused_within_the_timeout():
    with socket.socket() as srv:  # an HTTP server: it accepts and waits for a request, saying nothing
        srv.bind(("127.0.0.1", 0))
        srv.listen()
        held = []
        threading.Thread(target=lambda: held.append(srv.accept()), daemon=True).start()
        t = time.monotonic()
        with pytest.raises(ValueError, match="sent no Dask handshake within 2 s; is something else listening there"):
            probe(f"tcp://127.0.0.1:{srv.getsockname()[1]}", timeout=2)
        assert time.monotonic() - t < 4


def test_a_run_directory_held_by_another_live_command_is_skipped_not_failed(tmp_path):
    from bimu.experiments.config import RunConfig
    from bimu.experiments.jobs import HELD
    from bimu.experiments.runner import run_config_job
    from bimu.process import Owner, boot_id, start_time
    from bimu.rundir import RunDir, seed_dir

    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        time.sleep(0.5)
        rd = RunDir(seed_dir(tmp_path, "fake-test", "bimu", 0))
        rd.path.mkdir(parents=True)
        rd.file(".lock").write_text(Owner(socket.gethostname(), other.pid, start_time(other.pid), boot_id()).dumps())
        lines = []
        cfg = RunConfig(benchmark="fake-test", tasks=1, engine="torch", out=str(tmp_path)).to_dict()
        assert run_config_job(cfg, False, "test_runner_fakes", lines.append) == HELD
        assert any(f"in use by process {other.pid}" in s and "skipped here" in s for s in lines), lines
    finally:
        other.kill()
        other.wait()


def test_a_lost_scheduler_says_which_runs_finished_without_a_traceback(tmp_path):
    from dask_cluster import LoopbackCluster

    script = tmp_path / "client.py"
    script.write_text(
        "import sys, time\n"
        "from bimu.experiments.distributed import submit_all\n"
        "def quick(): return 0\n"
        "def slow(): time.sleep(30); return 0\n"
        "print(submit_all(sys.argv[1], [('quick', quick, ()), ('slow', slow, ())]))\n")
    with LoopbackCluster(tmp_path, n_workers=1) as cluster:
        cluster.wait_for_workers(1)
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
        client = subprocess.Popen([sys.executable, str(script), cluster.address], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path)
        time.sleep(8)
        os.killpg(cluster.procs[0].pid, signal.SIGKILL)  # the scheduler
        out, err = client.communicate(timeout=60)
    assert "Traceback" not in err, err
    assert "dask: lost the connection to the scheduler" in err and "reported finishing" in err

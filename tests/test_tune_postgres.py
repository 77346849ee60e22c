"""Two ``bimu tune`` workers against one PostgreSQL server on loopback share one study.

The server: ``$BIMU_TEST_POSTGRES_URL`` when set (CI runs ``scripts/ci_postgres.sh``, which installs
and starts Debian's PostgreSQL and prints the URL); otherwise a throwaway cluster made here with the
installed ``initdb`` / ``pg_ctl`` (in a temporary directory, on a free port, trust auth on 127.0.0.1);
otherwise the test is skipped and says why.
"""

import glob
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import pytest

optuna = pytest.importorskip("optuna")

from bimu import tune  # noqa: E402

SRC = Path(tune.__file__).resolve().parents[2]


def _driver_missing() -> bool:
    import importlib.util

    return all(importlib.util.find_spec(m) is None for m in ("psycopg2", "psycopg"))


def _pg_bin() -> str | None:
    for d in sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: [int(x) for x in Path(p).parent.name.split(".") if x.isdigit()]):
        if os.access(os.path.join(d, "initdb"), os.X_OK):
            return d
    initdb = shutil.which("initdb")
    return os.path.dirname(initdb) if initdb else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def postgres_url():
    if _driver_missing():
        pytest.skip("no PostgreSQL driver (pip install psycopg2-binary, part of bimu[tune])")
    url = os.environ.get("BIMU_TEST_POSTGRES_URL")
    if url:
        yield url
        return
    bin_dir = _pg_bin()
    if bin_dir is None:
        pytest.skip("no PostgreSQL server: set BIMU_TEST_POSTGRES_URL (scripts/ci_postgres.sh prints one) "
                    "or install Debian's postgresql package")
    root = os.geteuid() == 0
    if root and shutil.which("runuser") is None:
        pytest.skip("running as root without runuser: cannot start a throwaway PostgreSQL cluster")
    # Not under pytest's 0700 tmp tree: the server runs as the postgres user when we are root.
    base = Path(tempfile.mkdtemp(prefix="bimu-pg-"))
    data, sock = base / "data", base / "sock"
    sock.mkdir()
    prefix = []
    if root:
        subprocess.run(["chown", "-R", "postgres:postgres", str(base)], check=True)
        prefix = ["runuser", "-u", "postgres", "--"]
    port = _free_port()
    run = lambda *cmd: subprocess.run(prefix + list(cmd), check=True, capture_output=True, text=True)  # noqa: E731
    run(f"{bin_dir}/initdb", "-D", str(data), "-A", "trust", "-U", "postgres")
    run(f"{bin_dir}/pg_ctl", "-D", str(data), "-l", str(base / "log"), "-w", "-t", "60",
        "-o", f"-p {port} -c listen_addresses=127.0.0.1 -k {sock} -c fsync=off", "start")
    try:
        yield f"postgresql://postgres@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run(prefix + [f"{bin_dir}/pg_ctl", "-D", str(data), "-m", "immediate", "stop"],
                       capture_output=True)
        shutil.rmtree(base, ignore_errors=True)


def test_two_workers_share_one_study(postgres_url, tmp_path):
    study_name = f"ci-two-workers-{uuid.uuid4().hex[:8]}"
    env = dict(os.environ, PYTHONPATH=str(SRC) + os.pathsep + os.environ.get("PYTHONPATH", ""),
               OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "bimu.tune.cli", "blobs", "--method", "bimu",
           "--evaluator", "synthetic", "--trials", "8", "--storage", postgres_url, "--study-name", study_name,
           "--heartbeat-interval", "5", "--poll-interval", "0.3", "--quiet",
           "--option", "n_tasks=2", "--option", "n_train=12", "--option", "n_eval=24", "--option", "hidden=0"]
    workers = [subprocess.Popen(cmd + ["--out", str(tmp_path / f"w{i}")], env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True) for i in range(2)]
    outputs = [w.communicate(timeout=240) for w in workers]
    for w, (out, err) in zip(workers, outputs):
        assert w.returncode == 0, err
    summaries = [json.loads(out.strip().splitlines()[-1]) for out, _ in outputs]
    print("\n".join(json.dumps(s) for s in summaries))

    storage = tune.make_storage(tune.TuneConfig("blobs", "bimu", storage=postgres_url).resolved())
    study = optuna.load_study(study_name=study_name, storage=storage)
    try:
        trials = study.get_trials()
        states = [t.state for t in trials]
        print({s.name: states.count(s) for s in set(states)}, "trial numbers", [t.number for t in trials])
        complete = sorted(t.number for t in trials if t.state == optuna.trial.TrialState.COMPLETE)
        assert len(complete) == 8                                        # exactly the budget
        assert len({t.number for t in trials}) == len(trials)            # distinct trial numbers
        for t in trials:                                                 # nothing left hanging or lost
            assert t.state == optuna.trial.TrialState.COMPLETE or t.user_attrs.get("bimu_over_budget"), t
        a, b = (set(s["completed_here"]) for s in summaries)
        assert not a & b and sorted(a | b) == complete                   # each trial run by one worker
        assert all(s["n_finished"] == 8 for s in summaries)
        bests = [json.loads(Path(s["best_config"]).read_text()) for s in summaries]
        infos = [json.loads((Path(s["best_config"]).parent / "best_trial.json").read_text()) for s in summaries]
        assert bests[0] == bests[1] and infos[0]["n_finished_trials"] == infos[1]["n_finished_trials"] == 8
        assert infos[0]["storage"] == tune.redact_url(postgres_url)  # no password in files
    finally:
        optuna.delete_study(study_name=study_name, storage=storage)


@pytest.mark.parametrize("secret_at", ["userinfo", "query"])
def test_a_password_with_odd_characters_is_never_printed_or_stored(postgres_url, tmp_path, capsys, secret_at):
    """The server trusts loopback, so any password opens it: the one given must not reach output or files."""
    from urllib.parse import urlsplit

    from bimu.tune import cli as tune_cli

    if urlsplit(postgres_url).password is not None:
        pytest.skip("the test server's URL has its own password")
    secret = "s3cr#t?pa/ss-word"
    head, _, tail = postgres_url.partition("@")
    url = f"{head}:{secret}@{tail}" if secret_at == "userinfo" else f"{postgres_url}?password={secret}"
    study_name = f"ci-secret-{uuid.uuid4().hex[:8]}"
    argv = ["blobs", "--method", "bimu", "--evaluator", "synthetic", "--trials", "1", "--storage", url,
            "--study-name", study_name, "--out", str(tmp_path), "--heartbeat-interval", "5",
            "--option", "n_tasks=2", "--option", "n_train=12", "--option", "n_eval=24", "--option", "hidden=0"]
    try:
        assert tune_cli.main(argv) == 0
        captured = capsys.readouterr()
        written = {p.name: p.read_text() for p in tmp_path.iterdir() if p.suffix == ".json"}
        assert "best_trial.json" in written and any(n.startswith("worker-") for n in written)
        assert json.loads(written["best_trial.json"])["storage"] == tune.redact_url(url)
        for text in (captured.out, captured.err, *written.values()):
            for piece in ("s3cr", "pa/ss", "ss-word"):
                assert piece not in text
    finally:
        storage = tune.make_storage(tune.TuneConfig("blobs", "bimu", storage=postgres_url).resolved())
        optuna.delete_study(study_name=study_name, storage=storage)

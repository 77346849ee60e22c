"""The study journal survives a full disk: whole records only, a torn tail cut with a warning, never appended to."""

import errno
import json
import os
import subprocess
import sys
import textwrap

import pytest

optuna = pytest.importorskip("optuna")

EVALUATOR = '''
import numpy as np

def evaluate(method_name, hparams, seed, benchmark_options):
    acc = 0.5 + 0.4 / (1.0 + abs(np.log(hparams["lr"])))
    T = int(benchmark_options["n_tasks"])
    R = np.full((T, T), np.nan)
    for i in range(T):
        R[i, : i + 1] = acc
    return R
'''

# A worker whose files may not grow past argv[1] bytes: the kernel cuts the write that crosses the limit
# short and fails the next one with EFBIG, as a full disk does with ENOSPC.
WORKER = '''
import resource, signal, sys
limit = int(sys.argv[1])
if limit:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
from bimu.tune.cli import main
sys.exit(main(sys.argv[2:]))
'''


def tune(tmp_path, out, trials, limit=0):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    argv = ["blobs", "--method", "bimu", "--evaluator", "fake_eval:evaluate", "--trials", str(trials),
            "--out", str(out), "--sampler-seed", "0", "--quiet", "--option", "n_tasks=2"]
    return subprocess.run([sys.executable, "-c", WORKER, str(limit), *argv], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)


def test_a_full_disk_leaves_a_readable_study_that_goes_on(tmp_path):
    (tmp_path / "fake_eval.py").write_text(EVALUATOR)
    out = tmp_path / "out"
    first = tune(tmp_path, out, trials=2)
    assert first.returncode == 0, first.stderr
    path = out / "optuna.journal"
    size = path.stat().st_size

    # The disk fills up 150 bytes into the next records: the worker fails on the write.
    full = tune(tmp_path, out, trials=4, limit=size + 150)
    assert full.returncode != 0 and "File too large" in full.stderr
    data = path.read_bytes()
    assert len(data) <= size + 150 and data.endswith(b"\n")  # whole records only
    assert all(json.loads(line) for line in data.splitlines())

    # Space is back: the same command goes on with the study (the interrupted trial is retried).
    again = tune(tmp_path, out, trials=4)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout.strip().splitlines()[-1])["n_finished"] == 4
    # Optuna's own journal reader reads every record.
    plain = optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(str(path)))
    study = optuna.load_study(study_name="blobs-bimu", storage=plain)
    states = [t.state for t in study.get_trials()]
    assert states.count(optuna.trial.TrialState.COMPLETE) == 4


def test_a_failed_write_in_the_middle_of_a_record_leaves_no_partial_record(tmp_path, monkeypatch):
    from bimu.tune import journal

    path = tmp_path / "optuna.journal"
    backend = journal.JournalFile(str(path))
    backend.append_logs([{"op_code": 0, "study_name": "s", "directions": [1]}])
    before = path.read_bytes()

    real_write = os.write
    calls = []

    def write_half_then_fail(fd, data):
        calls.append(len(data))
        if len(calls) == 1:
            return real_write(fd, bytes(data[: len(data) // 2]))  # the disk takes half of the record...
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))  # ...and is full

    monkeypatch.setattr(os, "write", write_half_then_fail)
    with pytest.raises(OSError, match="No space left"):
        backend.append_logs([{"op_code": 5, "study_id": 0, "datetime_start": "x" * 64}])
    monkeypatch.setattr(os, "write", real_write)
    assert len(calls) == 2 and path.read_bytes() == before

    backend.append_logs([{"op_code": 5, "study_id": 0}])
    assert [json.loads(line)["op_code"] for line in path.read_bytes().splitlines()] == [0, 5]


def test_a_torn_tail_is_cut_with_a_warning_before_anything_is_appended(tmp_path, capsys):
    from bimu.tune import journal

    path = tmp_path / "optuna.journal"
    path.write_bytes(b'{"op_code":0,"study_name":"s","directions":[1]}\n{"op_code":5,"stu')
    backend = journal.JournalFile(str(path))
    err = capsys.readouterr().err
    assert err == f"bimu tune: warning: removed 17 bytes of a torn record (an interrupted write) from the end of {path}\n"
    assert path.read_bytes() == b'{"op_code":0,"study_name":"s","directions":[1]}\n'

    # A worker killed in mid-write after this one opened the file: cut again, under the lock, before appending.
    with open(path, "ab") as fh:
        fh.write(b'{"op_')
    backend.append_logs([{"op_code": 5, "study_id": 0}])
    assert "removed 5 bytes" in capsys.readouterr().err
    assert [json.loads(line)["op_code"] for line in path.read_bytes().splitlines()] == [0, 5]


def test_a_journal_corrupt_before_its_last_line_is_refused_in_one_line(tmp_path):
    from bimu.tune import journal

    path = tmp_path / "optuna.journal"
    torn_then_appended = b'{"op_code":0,"study_name":"s","directions":[1]}\n{"op_code":5,"stu{"op_code":5}\n'
    path.write_bytes(torn_then_appended)
    with pytest.raises(ValueError) as info:
        journal.JournalFile(str(path))
    assert str(info.value) == textwrap.dedent(f"""\
        the study journal {path} is corrupt at line 2 (a record cut short by an interrupted write, with records \
after it); restore it from a copy or start a new study (another --out or --study-name)""")
    assert path.read_bytes() == torn_then_appended  # nothing is changed

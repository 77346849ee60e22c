"""No password of a storage URL or scheduler address reaches what bimu prints or stores."""

import pytest

from bimu.experiments.distributed import check_address
from bimu.tune import storage
from bimu.tune.storage import storage_label

SECRET = "s3cr#t?pa/ss@word"  # unencoded '#', '?', '/', '@': a standard URL parser splits it apart

CASES = [
    ("postgresql://bimu:s3cret-pw@db-host:5432/bimu", "postgresql://bimu:***@db-host:5432/bimu"),
    (f"postgresql://bimu:{SECRET}@db-host:5432/bimu", "postgresql://bimu:***@db-host:5432/bimu"),
    ("postgresql://bimu:pa#ss-word@db-host/bimu", "postgresql://bimu:***@db-host/bimu"),
    ("postgresql://bimu:pa?ss-word@db-host/bimu", "postgresql://bimu:***@db-host/bimu"),
    ("postgresql://bimu:pa/ss-word@db-host/bimu", "postgresql://bimu:***@db-host/bimu"),
    ("postgresql+psycopg2://bimu:p%23ss-word@db-host/bimu", "postgresql+psycopg2://bimu:***@db-host/bimu"),
    ("postgresql://:pass-word@db-host/bimu", "postgresql://:***@db-host/bimu"),
    ("postgresql://bimu@db-host/bimu?password=pass-word", "postgresql://bimu@db-host/bimu?password=***"),
    ("postgresql://bimu@db-host/bimu?sslmode=require&PASSWORD=pa#ss&word&connect_timeout=5",
     "postgresql://bimu@db-host/bimu?sslmode=require&PASSWORD=***&connect_timeout=5"),
    ("mysql+pymysql://bimu:pa:ss@word@db-host/bimu?passwd=pass-word2",
     "mysql+pymysql://bimu:***@db-host/bimu?passwd=***"),
    ("postgresql://bimu@db-host/bimu", "postgresql://bimu@db-host/bimu"),
    ("sqlite:///runs/tune/study.db", "sqlite:///runs/tune/study.db"),
]


@pytest.mark.parametrize("url, shown", CASES)
def test_storage_labels_carry_no_password(url, shown):
    assert storage_label(url, "runs") == shown
    for secret in ("s3cret-pw", "cr#t", "pa/ss", "pa?ss", "pa#ss", "ss-word", "p%23ss", "pass-word", "ss@word"):
        assert secret not in storage_label(url, "runs")


@pytest.mark.parametrize("url, shown", [
    ("postgresql://bimu:s3cr#t?pa/ss-word@127.0.0.1:1/bimu?sslmode=disable",
     "postgresql+psycopg2://bimu:***@127.0.0.1:1/bimu?sslmode=disable"),
    ("postgresql://bimu@127.0.0.1:1/bimu?sslmode=disable&password=s3cr#t?pa/ss-word",
     "postgresql+psycopg2://bimu@127.0.0.1:1/bimu?sslmode=disable&password=***"),
    ("postgresql://bimu:s3cr#t?pa/ss-word@127.0.0.1:no-port/bimu",
     "postgresql+psycopg2://bimu:***@127.0.0.1:no-port/bimu"),
])
def test_a_storage_that_cannot_be_opened_is_named_without_its_password(url, shown, tmp_path, capsys, monkeypatch):
    pytest.importorskip("optuna")
    pytest.importorskip("psycopg2")
    from bimu.tune import cli as tune_cli

    monkeypatch.setattr(storage.time, "sleep", lambda s: None)  # the retries of an unreachable server
    code = tune_cli.main(["blobs", "--method", "bimu", "--evaluator", "synthetic", "--trials", "1",
                          "--storage", url, "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith(f"bimu tune: error: cannot open the study storage {shown}: ")
    for piece in ("s3cr", "pa/ss", "ss-word"):
        assert piece not in err


def test_scheduler_addresses_carry_no_password():
    with pytest.raises(ValueError) as info:
        check_address("http://user:pa#ss-word@host:8786")
    assert str(info.value) == ("--scheduler: 'http://user:***@host:8786' is not a Dask scheduler address "
                               "(tcp://HOST:PORT)")

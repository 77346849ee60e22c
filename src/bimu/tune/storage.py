"""Where a study lives, and the trials whose worker died.

Without ``storage`` the study lives in an Optuna journal file ``<out>/optuna.journal`` (one machine,
any number of worker processes), written in whole records and repaired after a full disk
(:mod:`bimu.tune.journal`). A URL (``postgresql://user:pw@host/db``, ``mysql://...``,
``sqlite:///file.db``) selects Optuna's RDBStorage for many workers on many machines, with a heartbeat
(``heartbeat_interval`` seconds, ``grace_period`` before a silent trial counts as dead): a dead trial
is marked FAIL and re-enqueued with the same parameters (at most ``max_retry`` times). On a journal
file, where Optuna has no heartbeat, a RUNNING trial whose worker process (same host, recorded pid) no
longer exists is marked FAIL and retried the same way (:func:`fail_dead_local_trials`).

Optuna is imported inside functions (:func:`import_optuna`), so this module works without it.
"""

from __future__ import annotations

import importlib.util
import inspect
import os
import random
import socket
import time
import warnings
from pathlib import Path
from typing import Any

from bimu.redact import redact_text, redact_url
from bimu.rundir import pid_alive

RDB_SCHEMES = ("postgresql", "postgres", "mysql", "sqlite", "mariadb", "oracle", "mssql")
"""URL schemes (before any ``+driver``) handled by Optuna's RDBStorage."""

JOURNAL_FILENAME = "optuna.journal"
"""Name of the default journal file inside the output directory."""

INSTALL_HINT = "bimu tune needs Optuna: pip install 'bimu[tune]'"
"""What to tell a user whose environment lacks Optuna."""


def import_optuna():
    """Optuna, or ModuleNotFoundError naming the ``bimu[tune]`` extra."""
    try:
        import optuna
    except ModuleNotFoundError as exc:
        if exc.name == "optuna":
            raise ModuleNotFoundError(INSTALL_HINT, name="optuna") from None
        raise
    return optuna


def storage_kind(storage: str | None) -> str:
    """``"journal"`` or ``"rdb"`` for a storage spec; ValueError for an unknown URL scheme.

    ``None``, a path, or ``journal:PATH`` is a journal file; ``scheme://...`` with an RDB scheme is an
    RDB URL.

    >>> storage_kind(None), storage_kind("runs/x.journal"), storage_kind("postgresql://u@127.0.0.1/db")
    ('journal', 'journal', 'rdb')
    >>> storage_kind("redis://localhost")
    Traceback (most recent call last):
    ...
    ValueError: unknown storage scheme 'redis'; use a journal file path (or journal:PATH) or an RDB URL (postgresql://, mysql://, sqlite:///)
    """
    if storage is None or storage.startswith("journal:"):
        return "journal"
    if "://" not in storage:
        return "journal"
    scheme = storage.split("://", 1)[0].split("+", 1)[0].lower()
    if scheme in RDB_SCHEMES:
        return "rdb"
    raise ValueError(f"unknown storage scheme {scheme!r}; use a journal file path (or journal:PATH) or an "
                     "RDB URL (postgresql://, mysql://, sqlite:///)")


def journal_path(storage: str | None, out_dir: str) -> Path:
    """The journal file of a journal storage spec (default ``<out_dir>/optuna.journal``)."""
    if storage is None:
        return Path(out_dir) / JOURNAL_FILENAME
    return Path(storage[len("journal:"):] if storage.startswith("journal:") else storage)


def storage_label(storage: str | None, out_dir: str) -> str | None:
    """How logs and exported files name a storage: the journal file, or the URL without its passwords
    (:func:`bimu.redact.redact_url`).

    >>> storage_label(None, "runs/tune/x"), storage_label("postgresql://u:p#w@host/db?password=pw", "runs")
    ('runs/tune/x/optuna.journal', 'postgresql://u:***@host/db?password=***')
    """
    return str(journal_path(storage, out_dir)) if storage_kind(storage) == "journal" else redact_url(storage)


def postgres_driver_url(url: str) -> str:
    """``url`` with an installed PostgreSQL driver named when it names none.

    SQLAlchemy's default driver for a bare ``postgresql://`` depends on its version (psycopg2 before
    2.1, psycopg 3 from 2.1 on); the one installed is named explicitly (psycopg2 first, then
    psycopg). ``postgres://`` is accepted as ``postgresql://``; other URLs are returned unchanged.
    """
    if url.startswith("postgres://"):
        url = "postgresql://" + url[len("postgres://"):]
    if not url.startswith("postgresql://"):
        return url
    for module, driver in (("psycopg2", "psycopg2"), ("psycopg", "psycopg")):
        if importlib.util.find_spec(module) is not None:
            return f"postgresql+{driver}://" + url[len("postgresql://"):]
    return url


def _retry_callback(max_retry: int):
    from optuna import storages

    cls = getattr(storages, "RetryHeartbeatStaleTrialCallback", None) or storages.RetryFailedTrialCallback
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return cls(max_retry=max_retry)


def make_storage(config):
    """Build the Optuna storage of a resolved :class:`~bimu.tune.config.TuneConfig` (journal file or RDB
    with heartbeat + retry)."""
    optuna = import_optuna()
    kind = storage_kind(config.storage)
    if kind == "journal":
        path = journal_path(config.storage, config.out_dir)
        path.parent.mkdir(parents=True, exist_ok=True)
        from bimu.tune.journal import JournalFile

        return optuna.storages.JournalStorage(JournalFile(str(path)))

    url = postgres_driver_url(config.storage)
    kwargs: dict[str, Any] = dict(heartbeat_interval=config.heartbeat_interval, grace_period=config.grace_period)
    params = inspect.signature(optuna.storages.RDBStorage.__init__).parameters
    callback_key = ("heartbeat_stale_trial_callback" if "heartbeat_stale_trial_callback" in params
                    else "failed_trial_callback")
    kwargs[callback_key] = _retry_callback(config.max_retry)
    engine_kwargs = {"pool_pre_ping": True} if not url.startswith("sqlite") else None
    last: Exception | None = None
    for attempt in range(6):  # several workers creating the tables at once may collide: retry
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return optuna.storages.RDBStorage(url, engine_kwargs=engine_kwargs, **kwargs)
        except ImportError as exc:
            raise ModuleNotFoundError(
                f"the database driver for {redact_url(url)} is missing "
                f"({redact_text(exc, url, config.storage)}): "
                "pip install 'bimu[tune]' (PostgreSQL: psycopg2-binary)", name="psycopg2") from None
        except Exception as exc:  # sqlalchemy errors: connection refused, concurrent DDL
            last = exc
            time.sleep(0.2 + random.random() * (attempt + 1) * 0.5)
    # The database layer's message may quote the URL: redacted, and not chained (a traceback would show it).
    raise RuntimeError(f"cannot open the study storage {redact_url(url)}: "
                       f"{redact_text(last, url, config.storage)}") from None


def fail_dead_local_trials(study, max_retry: int = 3) -> list[int]:
    """Mark FAIL the RUNNING trials whose worker process on this host has died; retry them.

    Works on any storage (it is the only liveness check a journal file has); a retried trial is a
    WAITING copy with the same parameters, as Optuna's heartbeat retry makes it. Returns the numbers
    of the trials that were failed.
    """
    optuna = import_optuna()
    host, me = socket.gethostname(), os.getpid()
    retry = _retry_callback(max_retry)
    failed = []
    for trial in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
        worker = trial.user_attrs.get("bimu_worker") or {}
        pid = worker.get("pid")
        if worker.get("host") != host or not isinstance(pid, int) or pid == me or pid_alive(pid):
            continue
        try:
            changed = study._storage.set_trial_state_values(trial._trial_id, state=optuna.trial.TrialState.FAIL)
        except Exception:  # finished meanwhile (UpdateFinishedTrialError) or failed by another worker
            continue
        if changed is False:
            continue
        failed.append(trial.number)
        frozen = study._storage.get_trial(trial._trial_id)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            retry(study, frozen)
    return failed


def fail_stale_trials(study, config) -> None:
    """Fail (and retry) the dead trials of ``study``: local dead workers, and on an RDB the heartbeat's stale trials."""
    optuna = import_optuna()
    fail_dead_local_trials(study, config.max_retry)
    if storage_kind(config.storage) == "rdb":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            optuna.storages.fail_stale_trials(study)

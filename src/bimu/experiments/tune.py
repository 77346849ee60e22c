"""Hyperparameter search (``bimu tune``): Optuna maximising the paper's objective H.

The objective (paper, appendix "Hyperparameters tuning"): after learning task ``t``,

    H_t = w1 * Acc_0 + w2 * mean(Acc_0 .. Acc_t) + w3 * Acc_t

where ``Acc_j`` is the accuracy on task ``j`` (``R[t, j]`` of the accuracy matrix, row = after which
task, column = on which task), with weights ``(w1, w2, w3) = (0.5, 0.25, 0.25)`` by default. The
**trial value is H at the final task** (``reduce="final"``); ``reduce="mean"`` takes the mean of
``H_t`` over the tasks instead. ``H_t`` is reported to Optuna after every task (``trial.report``), so
a pruner (``pruner="median"``) can stop poor trials early. With several seeds the trial value is the
mean over seeds (intermediate values come from the first seed).

Weights must be three finite, non-negative numbers summing to 1 (so that ``H`` stays an accuracy in
[0, 1] and studies stay comparable); anything else is a ValueError that suggests the normalised
weights.

**Never the test set.** Every trial is evaluated on the benchmark's *validation* split, built for
tuning: the default evaluator (:func:`runner_evaluate`) builds the benchmark with ``validation=True``
(for Permuted MNIST also ``n_tasks=10``: the paper tunes on 10 tasks whose permutations differ from
those of the evaluation runs) and hands the runner a :class:`ValidationView` whose ``test_task`` is
the benchmark's ``validation_task``. A benchmark without a validation split cannot be tuned, and
``validation`` cannot be switched off.

**Storage.** Without ``storage`` the study lives in an Optuna journal file
``<out>/optuna.journal`` (one machine, any number of worker processes). A URL
(``postgresql://user:pw@host/db``, ``mysql://...``, ``sqlite:///file.db``) selects Optuna's
RDBStorage for many workers on many machines, with a heartbeat (``heartbeat_interval`` seconds,
``grace_period`` before a silent trial counts as dead): a dead trial is marked FAIL and re-enqueued
with the same parameters (at most ``max_retry`` times). On a journal file, where Optuna has no
heartbeat, a RUNNING trial whose worker process (same host, recorded pid) no longer exists is
marked FAIL and retried the same way.

**Budget.** ``trials`` is the number of finished (COMPLETE or PRUNED) trials of the *study*, across
all workers. A worker claims a trial only while ``finished + running < trials``; a trial that finds
itself past the budget (two workers raced for the last slot) is failed at once, before any
evaluation, with the user attribute ``bimu_over_budget``. A worker whose remaining slots are held by
other workers waits for them (and fails/retries them if they die), so every worker returns once the
study is complete and each exports the best trial.

**Export.** The best trial is written to ``<out>/best_config.json`` (and to ``export`` if given), a
config that ``bimu run --config FILE`` accepts (run-config keys only)::

    {"benchmark": "pmnist", "method": "bimu", "preset": "pmnist-100", "overrides": {"lr": 4.9, ...}}

(plus ``"hidden"`` when the study set hidden widths). ``<out>/best_trial.json`` holds the
provenance: study, trial number, value, weights, validation options, H per task. The tuning options
(validation split, 10 tuning tasks) are not part of the exported config.

**Evaluation function.** :func:`run_tune` takes any ``evaluate(method_name, hparams, seed,
benchmark_options) -> R`` (numpy ``[T, T]``, entries above the diagonal ignored). ``hparams`` is the
full resolved dict (defaults, then the preset, then the tuned values); ``benchmark_options`` holds the
benchmark name under ``"benchmark"`` plus the options. If ``evaluate`` accepts a keyword
``on_task_end``, it is called as ``on_task_end(t, accuracies_on_tasks_0_to_t)`` after each task
(this drives pruning). :func:`synthetic_evaluate` is a tiny self-contained stream for smoke tests.

Optuna is an optional dependency (``pip install 'bimu[tune]'``); it is imported inside functions, so
this module and the objective helpers work without it.

>>> R = [[0.9, float("nan")], [0.7, 0.8]]
>>> round(objective_h(R), 4)   # 0.5*0.7 + 0.25*(0.7+0.8)/2 + 0.25*0.8
0.7375
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import inspect
import json
import math
import os
import random
import socket
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import numpy as np

from bimu.rundir import pid_alive
from bimu.experiments.search_spaces import check_search_space, suggest_hparams

DEFAULT_WEIGHTS: tuple[float, float, float] = (0.5, 0.25, 0.25)
"""Default weights (w1, w2, w3) of Acc_0, mean Acc and Acc_t: the paper defines H with these three terms
but gives no values for the weights; 0.5 / 0.25 / 0.25 is bimu's default (``--weights`` changes it)."""

REDUCTIONS = ("final", "mean")
"""How H_t over tasks becomes the trial value: H at the final task, or the mean over tasks."""

BENCHMARK_TUNE_OPTIONS: dict[str, dict[str, Any]] = {
    "pmnist": {"n_tasks": 10, "validation": True},
}
"""Benchmark options used for tuning, per benchmark (others get ``{"validation": True}``)."""

RDB_SCHEMES = ("postgresql", "postgres", "mysql", "sqlite", "mariadb", "oracle", "mssql")
"""URL schemes (before any ``+driver``) handled by Optuna's RDBStorage."""

JOURNAL_FILENAME = "optuna.journal"
"""Name of the default journal file inside the output directory."""

INSTALL_HINT = "bimu tune needs Optuna: pip install 'bimu[tune]'"
"""What to tell a user whose environment lacks Optuna."""


# =========================================================================== the objective H
def check_weights(weights: Sequence[float]) -> tuple[float, float, float]:
    """Validate ``(w1, w2, w3)``: three finite, non-negative numbers summing to 1.

    >>> check_weights([0.5, 0.25, 0.25])
    (0.5, 0.25, 0.25)
    >>> check_weights([2, 1, 1])
    Traceback (most recent call last):
    ...
    ValueError: weights must sum to 1 (got 4); normalised they would be 0.5 0.25 0.25
    """
    try:
        w = tuple(float(v) for v in weights)
    except (TypeError, ValueError):
        raise ValueError(f"weights must be three numbers, got {weights!r}") from None
    if len(w) != 3:
        raise ValueError(f"weights must be three numbers (w1 w2 w3), got {len(w)}: {list(w)}")
    if not all(math.isfinite(v) for v in w):
        raise ValueError(f"weights must be finite, got {list(w)}")
    if any(v < 0 for v in w):
        raise ValueError(f"weights must be non-negative, got {list(w)}")
    total = sum(w)
    if total <= 0:
        raise ValueError("weights must not all be zero")
    if abs(total - 1.0) > 1e-6:
        norm = " ".join(f"{v / total:.6g}" for v in w)
        raise ValueError(f"weights must sum to 1 (got {total:.6g}); normalised they would be {norm}")
    return w


def check_accuracy_matrix(matrix) -> np.ndarray:
    """A float ``[T, T]`` array whose lower triangle (incl. diagonal) is finite and in [0, 1].

    Entries above the diagonal (tasks not learned yet) are ignored and may be NaN.
    """
    R = np.asarray(matrix, dtype=np.float64)
    if R.ndim != 2 or R.shape[0] != R.shape[1] or R.shape[0] < 1:
        raise ValueError(f"accuracy matrix must be square [T, T] with T >= 1, got shape {R.shape}")
    low = R[np.tril_indices(R.shape[0])]
    if not np.isfinite(low).all():
        raise ValueError("accuracy matrix has NaN or infinite entries on or below the diagonal")
    if (low < 0).any() or (low > 1).any():
        raise ValueError("accuracies must be fractions in [0, 1] (not percentages)")
    return R


def h_from_row(row: Sequence[float], t: int, weights: Sequence[float] = DEFAULT_WEIGHTS) -> float:
    """``H_t`` from the accuracies on tasks ``0..t`` measured after learning task ``t``.

    >>> h_from_row([0.6, 0.8, 1.0], 2)   # 0.5*0.6 + 0.25*0.8 + 0.25*1.0
    0.75
    """
    w1, w2, w3 = check_weights(weights)
    t = int(t)
    acc = np.asarray(row, dtype=np.float64)[: t + 1]
    if t < 0 or acc.shape[0] != t + 1:
        raise ValueError(f"need accuracies on tasks 0..{t}, got {acc.shape[0]}")
    return float(w1 * acc[0] + w2 * acc.mean() + w3 * acc[t])


def h_per_task(matrix, weights: Sequence[float] = DEFAULT_WEIGHTS) -> np.ndarray:
    """``[H_0, ..., H_{T-1}]`` of an accuracy matrix ``R[i, j]`` (accuracy on task j after task i)."""
    R = check_accuracy_matrix(matrix)
    w = check_weights(weights)
    return np.array([h_from_row(R[t], t, w) for t in range(R.shape[0])])


def objective_h(matrix, weights: Sequence[float] = DEFAULT_WEIGHTS, reduce: str = "final") -> float:
    """The trial value: ``H`` at the final task (``reduce="final"``) or the mean of ``H_t``."""
    if reduce not in REDUCTIONS:
        raise ValueError(f"reduce must be one of {REDUCTIONS}, got {reduce!r}")
    h = h_per_task(matrix, weights)
    return float(h[-1] if reduce == "final" else h.mean())


# =========================================================================== configuration
def tune_benchmark_options(benchmark: str, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The options the benchmark is built with for tuning: validation split, then ``overrides``.

    ``validation`` cannot be switched off: tuning never evaluates on the test set.

    >>> tune_benchmark_options("pmnist")
    {'n_tasks': 10, 'validation': True}
    """
    opts = dict(BENCHMARK_TUNE_OPTIONS.get(benchmark, {"validation": True}))
    for key, value in dict(overrides or {}).items():
        if key == "validation" and value is not True:
            raise ValueError("tuning always uses the validation split (validation=True); the test set "
                             "is never used")
        if key == "benchmark":
            raise ValueError("'benchmark' is not a benchmark option")
        opts[key] = value
    return opts


def default_study_name(benchmark: str, method: str) -> str:
    """``<benchmark>-<method>``, the default study name.

    >>> default_study_name("pmnist", "bimu")
    'pmnist-bimu'
    """
    return f"{benchmark}-{method}"


@dataclasses.dataclass
class TuneConfig:
    """Everything one ``bimu tune`` worker needs (see the module docstring for the semantics)."""

    benchmark: str
    method: str
    trials: int = 200
    storage: str | None = None
    study_name: str | None = None
    out_dir: str | None = None
    weights: tuple[float, float, float] = DEFAULT_WEIGHTS
    reduce: str = "final"
    seeds: tuple[int, ...] = (0,)
    preset: str | None = None
    benchmark_options: dict[str, Any] = dataclasses.field(default_factory=dict)
    timeout: float | None = None
    heartbeat_interval: int = 60
    grace_period: int | None = None
    max_retry: int = 3
    pruner: str = "none"
    sampler_seed: int | None = None
    strict_space: bool = True
    export: str | None = None
    poll_interval: float = 2.0
    max_consecutive_failures: int = 5
    evaluator: str = "runner"

    def resolved(self) -> TuneConfig:
        """A validated copy with defaults filled in (study name, output dir, tuning options)."""
        c = dataclasses.replace(self)
        if not c.benchmark or not isinstance(c.benchmark, str):
            raise ValueError(f"benchmark must be a non-empty name, got {c.benchmark!r}")
        c.weights = check_weights(c.weights)
        if c.reduce not in REDUCTIONS:
            raise ValueError(f"objective reduction must be one of {REDUCTIONS}, got {c.reduce!r}")
        if int(c.trials) != c.trials or int(c.trials) < 1:
            raise ValueError(f"trials must be a positive integer, got {c.trials!r}")
        c.trials = int(c.trials)
        c.seeds = tuple(int(s) for s in c.seeds)
        if not c.seeds:
            raise ValueError("at least one seed is needed")
        if c.timeout is not None and not c.timeout > 0:
            raise ValueError(f"timeout must be > 0 seconds, got {c.timeout}")
        if int(c.heartbeat_interval) < 1:
            raise ValueError(f"heartbeat interval must be >= 1 s, got {c.heartbeat_interval}")
        c.heartbeat_interval = int(c.heartbeat_interval)
        if c.grace_period is None:
            c.grace_period = 2 * c.heartbeat_interval
        if int(c.grace_period) <= c.heartbeat_interval:
            raise ValueError(f"grace period ({c.grace_period} s) must exceed the heartbeat interval "
                             f"({c.heartbeat_interval} s)")
        c.grace_period = int(c.grace_period)
        if int(c.max_retry) < 0:
            raise ValueError(f"max retry must be >= 0, got {c.max_retry}")
        if c.pruner not in ("none", "median"):
            raise ValueError(f"pruner must be 'none' or 'median', got {c.pruner!r}")
        if not c.poll_interval > 0:
            raise ValueError(f"poll interval must be > 0, got {c.poll_interval}")
        storage_kind(c.storage)  # an unknown scheme fails here, before anything starts
        c.study_name = c.study_name or default_study_name(c.benchmark, c.method)
        c.out_dir = str(c.out_dir or Path("runs") / "tune" / c.study_name)
        c.benchmark_options = tune_benchmark_options(c.benchmark, c.benchmark_options)
        return c

    def study_identity(self) -> dict[str, Any]:
        """What every worker of one study must agree on (stored as a study user attribute)."""
        return {
            "benchmark": self.benchmark,
            "method": self.method,
            "preset": self.preset,
            "weights": list(self.weights),
            "reduce": self.reduce,
            "seeds": list(self.seeds),
            "benchmark_options": dict(self.benchmark_options),
            "evaluator": self.evaluator,
        }


# =========================================================================== storage
def _import_optuna():
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


def redact_url(url: str | None) -> str | None:
    """``url`` without its password (for logs and exported files).

    >>> redact_url("postgresql://bimu:secret@127.0.0.1:5432/bimu")
    'postgresql://bimu:***@127.0.0.1:5432/bimu'
    """
    if url is None or "://" not in url:
        return url
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)
    user = netloc[0].split(":", 1)[0]
    return urlunsplit(parts._replace(netloc=f"{user}:***@{netloc[1]}"))


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


def make_storage(config: TuneConfig):
    """Build the Optuna storage of a resolved config (journal file or RDB with heartbeat + retry)."""
    optuna = _import_optuna()
    kind = storage_kind(config.storage)
    if kind == "journal":
        path = journal_path(config.storage, config.out_dir)
        path.parent.mkdir(parents=True, exist_ok=True)
        journal = optuna.storages.journal
        backend_cls = getattr(journal, "JournalFileBackend", None)
        if backend_cls is None:  # Optuna < 4.0
            backend_cls = optuna.storages.JournalFileStorage
        return optuna.storages.JournalStorage(backend_cls(str(path)))

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
                f"the database driver for {redact_url(url)} is missing ({exc}): "
                "pip install 'bimu[tune]' (PostgreSQL: psycopg2-binary)", name="psycopg2") from None
        except Exception as exc:  # sqlalchemy errors: connection refused, concurrent DDL
            last = exc
            time.sleep(0.2 + random.random() * (attempt + 1) * 0.5)
    raise RuntimeError(f"cannot open the study storage {redact_url(url)}: {last}") from last


# =========================================================================== evaluators
def _accepts_keyword(fn: Callable, name: str) -> bool:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return name in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


class TuneSetupError(RuntimeError):
    """A problem with the setup, not with one trial's hyperparameters: it stops the worker at once."""


class ValidationView:
    """A benchmark seen through its validation split: ``test_task(j)`` is ``validation_task(j)``.

    The runner evaluates ``test_task``; handing it this view is how tuning evaluates on the
    validation split and never on the test set. There is no OOD set (tuning does not score OOD).
    Every other attribute is the wrapped benchmark's.
    """

    def __init__(self, benchmark):
        if not callable(getattr(benchmark, "validation_task", None)):
            raise ValueError(
                f"benchmark {getattr(benchmark, 'name', benchmark)!r} defines no validation split "
                "(validation_task); bimu tune never evaluates on the test set")
        self._benchmark = benchmark

    def test_task(self, task: int):
        """The validation examples of ``task``."""
        return self._benchmark.validation_task(task)

    def ood_set(self):
        """No OOD set while tuning."""
        return None

    def __getattr__(self, name: str):
        return getattr(self._benchmark, name)


def _import_runner():
    try:
        runner = importlib.import_module("bimu.experiments.runner")
        needed = (runner.run_stream, runner.evaluate, runner.eval_generator)
    except (ModuleNotFoundError, AttributeError) as exc:
        if isinstance(exc, ModuleNotFoundError) and exc.name not in ("bimu.experiments.runner", None):
            raise
        raise TuneSetupError(
            "the default tuning evaluator needs bimu.experiments.runner (run_stream, evaluate, "
            "eval_generator), which this installation lacks; pass another evaluate function (or "
            "--evaluator synthetic for a smoke test)") from None
    del needed
    return runner


def runner_evaluate(method_name: str, hparams: Mapping[str, Any], seed: int,
                    benchmark_options: Mapping[str, Any], on_task_end=None) -> np.ndarray:
    """The default evaluator: one online run of the experiment runner, evaluated on validation data.

    Uses, imported lazily, ``bimu.data.benchmarks.benchmark_entry`` and from
    ``bimu.experiments.runner``: ``run_stream(benchmark, method, schedule, *, seed, n_tasks, ood,
    on_task_end)``, ``evaluate(method, x, y, generator=...) -> (acc, scores)``,
    ``eval_generator(seed, after_task, task)`` and (if present) ``make_method`` for the fused engine.

    The benchmark is built by its factory with the tuning options (``validation=True``, e.g.
    ``n_tasks=10``; the trial's ``seed`` when the factory takes one) and must expose
    ``validation_task(task) -> (X, y)``; the runner sees it through :class:`ValidationView`, so only
    validation data is ever evaluated. The runner evaluates the current task; after each task this
    function evaluates tasks ``0..t`` itself with the runner's ``evaluate`` and the same per-entry
    generator, fills ``R[t, :t+1]`` and calls ``on_task_end(t, R[t, :t+1])`` (which may raise
    ``optuna.TrialPruned``). No run directory is written. ``hidden`` in the options sets the hidden
    widths (default: the benchmark's).
    """
    runner = _import_runner()
    bench, widths, opts = _validation_benchmark(benchmark_options, seed)
    sizes = [bench.n_features, *widths, bench.n_classes]
    method = _make_runner_method(runner, benchmark_options["benchmark"], method_name, sizes, int(seed),
                                 dict(hparams))
    n = int(opts.get("n_tasks", bench.n_tasks))
    R = np.full((n, n), np.nan)

    def after_task(t: int) -> None:
        for j in range(t + 1):
            x, y = bench.test_task(j)
            R[t, j], _ = runner.evaluate(method, x, y, generator=runner.eval_generator(int(seed), t, j))
        if on_task_end is not None:
            on_task_end(t, R[t, : t + 1].copy())

    schedule = _minimal_schedule()
    runner.run_stream(bench, method, schedule, seed=int(seed), n_tasks=n, ood=False, on_task_end=after_task)
    return R


def _validation_benchmark(benchmark_options: Mapping[str, Any], seed: int):
    """``(ValidationView, hidden widths, factory options)`` for the tuning options; TuneSetupError if
    the benchmark has no validation split."""
    from bimu.data.benchmarks import benchmark_entry

    opts = dict(benchmark_options)
    name = opts.pop("benchmark")
    hidden = opts.pop("hidden", None)
    try:
        entry = benchmark_entry(name)
    except ValueError as exc:
        raise TuneSetupError(str(exc)) from None
    if not entry.accepts("validation"):
        raise TuneSetupError(f"benchmark {name!r} has no validation split (its factory takes no 'validation' "
                             "option); bimu tune never evaluates on the test set")
    if "seed" not in opts and entry.accepts("seed"):
        opts["seed"] = int(seed)
    try:
        raw = entry.factory(data_dir=opts.pop("data_dir", None), **opts)
    except TypeError as exc:  # a factory taking **options passes 'validation' on to a class without it
        if "validation" in str(exc):
            raise TuneSetupError(f"benchmark {name!r} has no validation split ({exc}); bimu tune never "
                                 "evaluates on the test set") from None
        raise
    try:
        bench = ValidationView(raw)
    except ValueError as exc:
        raise TuneSetupError(str(exc)) from None
    if hidden is None:
        widths = list(entry.default_hidden)
    else:
        widths = [int(v) for v in (hidden if isinstance(hidden, (list, tuple)) else [hidden]) if int(v) > 0]
    return bench, widths, opts


def _runner_preflight(benchmark_options: Mapping[str, Any], seed: int) -> None:
    """Fail before the first trial if the runner or the benchmark's validation split is missing."""
    _import_runner()
    _validation_benchmark(benchmark_options, seed)


runner_evaluate.preflight = _runner_preflight


def _minimal_schedule():
    """The runner's cheapest schedule (current task only); tuning evaluates tasks 0..t itself."""
    try:
        from bimu.experiments.schedule import EvalSchedule
    except ModuleNotFoundError:
        return None
    return EvalSchedule(final="last", final_last=1)


def _make_runner_method(runner, benchmark: str, method_name: str, sizes, seed: int, hparams: dict):
    """The fused engine where the runner would pick it (``engine="auto"``), else the torch method."""
    make_method = getattr(runner, "make_method", None)
    if make_method is not None:
        try:
            from bimu.experiments.config import RunConfig

            config = RunConfig(benchmark=benchmark, method=method_name, engine="auto")
        except Exception:  # an older or newer config: fall back to the torch path
            config = None
        if config is not None:
            method, _engine = make_method(config, sizes, seed, hparams)
            return method
    from bimu.methods import create_method

    return create_method(method_name, sizes, seed, **hparams)


def synthetic_evaluate(method_name: str, hparams: Mapping[str, Any], seed: int,
                       benchmark_options: Mapping[str, Any], on_task_end=None) -> np.ndarray:
    """A tiny self-contained continual stream for smoke tests and CI (never for paper numbers).

    Permuted Gaussian blobs: ``n_classes`` Gaussian clusters in ``n_features`` dimensions; task ``t``
    permutes the features with its own permutation. Options (``benchmark_options``): ``n_tasks`` (3),
    ``n_features`` (20), ``n_classes`` (4), ``hidden`` (16; an int or a list of widths, 0 or [] for
    a linear classifier), ``n_train`` (64 per task, one example
    per online step), ``n_eval`` (128 per task). With ``validation=True`` the permutations and the
    evaluation examples come from a separate seed range (the "validation split"); there is no test
    set here at all.

    >>> R = synthetic_evaluate("bimu", {}, 0, {"n_tasks": 2, "n_train": 8, "n_eval": 16})
    >>> R.shape, bool(np.isnan(R[0, 1]))
    ((2, 2), True)
    """
    import torch

    from bimu.methods import create_method, get_method

    o = dict(benchmark_options)
    n_tasks, d, c = int(o.get("n_tasks", 3)), int(o.get("n_features", 20)), int(o.get("n_classes", 4))
    hidden = o.get("hidden", 16)
    hidden = [int(h) for h in (hidden if isinstance(hidden, (list, tuple)) else [hidden]) if int(h) > 0]
    n_train, n_eval = int(o.get("n_train", 64)), int(o.get("n_eval", 128))
    data_seed = 10_000 + int(o.get("data_seed", 0)) + (5_000 if o.get("validation") else 0)
    rng = np.random.default_rng(data_seed)
    centers = rng.normal(0.0, 1.5, size=(c, d))
    perms = [np.arange(d) if t == 0 else rng.permutation(d) for t in range(n_tasks)]

    def draw(t: int, n: int, gen: np.random.Generator):
        y = gen.integers(0, c, size=n)
        x = centers[y] + gen.normal(0.0, 1.0, size=(n, d))
        return torch.from_numpy(x[:, perms[t]].astype(np.float32)), torch.from_numpy(y.astype(np.int64))

    evals = [draw(t, n_eval, np.random.default_rng(data_seed + 1 + t)) for t in range(n_tasks)]
    needs_boundaries = get_method(method_name).info.needs_task_boundaries
    method = create_method(method_name, [d, *hidden, c], seed=int(seed), **hparams)
    train_rng = np.random.default_rng(20_000 + int(seed))
    R = np.full((n_tasks, n_tasks), np.nan)
    for t in range(n_tasks):
        x, y = draw(t, n_train, train_rng)
        for i in range(n_train):
            method.learn(x[i:i + 1], y[i:i + 1])
        if needs_boundaries:
            method.task_end()
        for j in range(t + 1):
            xe, ye = evals[j]
            R[t, j] = float((method.predict(xe) == ye).float().mean())
        if on_task_end is not None:
            on_task_end(t, R[t, : t + 1].copy())
    return R


EVALUATORS: dict[str, Callable[..., np.ndarray]] = {
    "runner": runner_evaluate,
    "synthetic": synthetic_evaluate,
}
"""Named evaluators selectable with ``--evaluator`` (or give ``module:function``)."""


def resolve_evaluator(spec: str | Callable) -> Callable[..., np.ndarray]:
    """An evaluate callable from a name in :data:`EVALUATORS`, ``module:function``, or a callable."""
    if callable(spec):
        return spec
    if spec in EVALUATORS:
        return EVALUATORS[spec]
    if isinstance(spec, str) and ":" in spec:
        module, _, attr = spec.partition(":")
        fn = getattr(importlib.import_module(module), attr, None)
        if callable(fn):
            return fn
        raise ValueError(f"{spec!r} is not a callable evaluate function")
    raise ValueError(f"unknown evaluator {spec!r}; known: {sorted(EVALUATORS)} or module:function")


# =========================================================================== dead trials
def fail_dead_local_trials(study, max_retry: int = 3) -> list[int]:
    """Mark FAIL the RUNNING trials whose worker process on this host has died; retry them.

    Works on any storage (it is the only liveness check a journal file has); a retried trial is a
    WAITING copy with the same parameters, as Optuna's heartbeat retry makes it. Returns the numbers
    of the trials that were failed.
    """
    optuna = _import_optuna()
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


def _fail_stale(study, config: TuneConfig) -> None:
    optuna = _import_optuna()
    fail_dead_local_trials(study, config.max_retry)
    if storage_kind(config.storage) == "rdb":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            optuna.storages.fail_stale_trials(study)


# =========================================================================== the search
@dataclasses.dataclass
class TuneResult:
    """What one worker did and found."""

    study_name: str
    storage: str
    completed_here: list[int]
    failed_here: list[int]
    n_finished: int
    best: dict[str, Any] | None
    best_config_path: str | None


class _OverBudget(Exception):
    """Raised inside a trial that lost the race for the last slots of the budget."""


def _default_preset(config: TuneConfig, cls) -> str | None:
    if config.preset is not None:
        return config.preset
    try:
        from bimu.data.benchmarks import benchmark_entry

        entry = benchmark_entry(config.benchmark)
        hidden = config.benchmark_options.get("hidden")
        preset, _ = entry.preset_for(tuple(hidden) if isinstance(hidden, (list, tuple)) else entry.default_hidden)
    except Exception:  # no data package, unknown benchmark, older registry
        return None
    return preset if preset in cls.presets else None


def _counts(study) -> dict[str, int]:
    from optuna.trial import TrialState

    out = {"finished": 0, "running": 0, "waiting": 0}
    for t in study.get_trials(deepcopy=False):
        if t.state in (TrialState.COMPLETE, TrialState.PRUNED):
            out["finished"] += 1
        elif t.state == TrialState.RUNNING:
            out["running"] += 1
        elif t.state == TrialState.WAITING:
            out["waiting"] += 1
    return out


def _check_identity(study, config: TuneConfig) -> None:
    key = "bimu_tune"
    mine = json.loads(json.dumps(config.study_identity()))
    theirs = study.user_attrs.get(key)
    if theirs is None:
        study.set_user_attr(key, mine)
        return
    diff = {k: (theirs.get(k), mine.get(k)) for k in set(theirs) | set(mine) if theirs.get(k) != mine.get(k)}
    if diff:
        detail = "; ".join(f"{k}: study has {a!r}, this worker {b!r}" for k, (a, b) in sorted(diff.items()))
        raise ValueError(f"study {config.study_name!r} was created with other settings ({detail}); "
                         "use the same settings or another --study-name")


def _jsonable(value: Any) -> Any:
    if isinstance(value, (np.floating, np.integer)):
        return value.item()
    return value


def run_tune(config: TuneConfig, evaluate: Callable[..., np.ndarray] | str | None = None,
             log: Callable[[str], None] | None = None) -> TuneResult:
    """Run one worker of the study described by ``config`` until the study's budget is spent.

    ``evaluate`` defaults to ``config.evaluator`` (``"runner"``: :func:`runner_evaluate`). Several
    workers (processes, machines) may run this on the same storage and study name at once.
    """
    optuna = _import_optuna()
    from optuna.trial import TrialState

    from bimu.methods import get_method

    config = config.resolved()
    log = log or (lambda msg: None)
    cls = get_method(config.method)
    preset = _default_preset(config, cls)
    if preset is not None and preset not in cls.presets:
        raise ValueError(f"method {config.method!r} has no preset {preset!r}; known: {sorted(cls.presets)}")
    config.preset = preset
    check_search_space(cls, strict=config.strict_space, preset=preset)
    evaluate_fn = resolve_evaluator(evaluate if evaluate is not None else config.evaluator)
    if evaluate is not None and not isinstance(evaluate, str):
        config.evaluator = "custom"  # a callable given in code: its identity is the caller's business
    streams = _accepts_keyword(evaluate_fn, "on_task_end")
    preflight = getattr(evaluate_fn, "preflight", None)
    if callable(preflight):
        preflight({"benchmark": config.benchmark, **config.benchmark_options}, config.seeds[0])

    storage = make_storage(config)
    kind = storage_kind(config.storage)
    storage_label = (str(journal_path(config.storage, config.out_dir)) if kind == "journal"
                     else redact_url(config.storage))
    sampler = optuna.samplers.TPESampler(seed=config.sampler_seed)
    pruner = optuna.pruners.MedianPruner(n_startup_trials=5) if config.pruner == "median" else optuna.pruners.NopPruner()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(storage=storage, study_name=config.study_name, direction="maximize",
                                load_if_exists=True, sampler=sampler, pruner=pruner)
    _check_identity(study, config)
    log(f"study {config.study_name!r} on {storage_label}: {_counts(study)['finished']}/{config.trials} "
        f"trials finished")

    worker = {"host": socket.gethostname(), "pid": os.getpid()}
    opts = {"benchmark": config.benchmark, **config.benchmark_options}

    def objective(trial) -> float:
        trial.set_user_attr("bimu_worker", worker)
        ahead = sum(1 for t in study.get_trials(deepcopy=False,
                                                states=(TrialState.COMPLETE, TrialState.PRUNED, TrialState.RUNNING))
                    if t.number < trial.number)
        if ahead >= config.trials:
            trial.set_user_attr("bimu_over_budget", True)
            frozen = study._storage.get_trial(trial._trial_id)
            if "failed_trial" in frozen.system_attrs:  # a retry popped by mistake: put it back
                study.add_trial(optuna.trial.create_trial(
                    state=TrialState.WAITING, params=frozen.params, distributions=frozen.distributions,
                    user_attrs={k: v for k, v in frozen.user_attrs.items() if not k.startswith("bimu_")},
                    system_attrs={k: v for k, v in frozen.system_attrs.items()
                                  if k in ("failed_trial", "retry_history")}))
            raise _OverBudget(f"trial {trial.number} is past the budget of {config.trials}")
        tuned = suggest_hparams(cls, trial, strict=config.strict_space)
        hparams = cls.resolve_hyperparameters(tuned, preset=preset)
        trial.set_user_attr("hparams", {k: _jsonable(v) for k, v in tuned.items()})

        def on_task_end(t: int, row) -> None:
            trial.report(h_from_row(row, t, config.weights), step=int(t))
            if trial.should_prune():
                raise optuna.TrialPruned(f"pruned after task {t}")

        values, curves = [], []
        for k, seed in enumerate(config.seeds):
            kwargs = {"on_task_end": on_task_end} if (streams and k == 0) else {}
            try:
                R = evaluate_fn(config.method, dict(hparams), seed, dict(opts), **kwargs)
            except TuneSetupError as exc:
                fatal.append(exc)
                raise
            h = h_per_task(R, config.weights)
            if k == 0 and not streams:
                for t, v in enumerate(h):
                    trial.report(float(v), step=t)
            curves.append([round(float(v), 6) for v in h])
            values.append(float(h[-1] if config.reduce == "final" else h.mean()))
        trial.set_user_attr("H_per_task", curves[0] if len(curves) == 1 else curves)
        return float(np.mean(values))

    completed, failed, fatal = [], [], []
    consecutive = [0]

    def record(_study, frozen) -> None:
        if frozen.state in (TrialState.COMPLETE, TrialState.PRUNED):
            completed.append(frozen.number)
            consecutive[0] = 0
        elif frozen.state == TrialState.FAIL and not frozen.user_attrs.get("bimu_over_budget"):
            failed.append(frozen.number)
            consecutive[0] += 1

    start = time.monotonic()
    while True:
        _fail_stale(study, config)
        counts = _counts(study)
        if counts["finished"] >= config.trials:
            break
        if config.timeout is not None and time.monotonic() - start >= config.timeout:
            log(f"timeout after {time.monotonic() - start:.0f} s")
            break
        if consecutive[0] >= config.max_consecutive_failures:
            raise RuntimeError(f"{consecutive[0]} trials in a row failed in this worker (last: "
                               f"{failed[-1]}); see the warnings above")
        if counts["finished"] + counts["running"] >= config.trials:
            time.sleep(config.poll_interval)  # the last slots are held by other workers
            continue
        study.optimize(objective, n_trials=1, catch=(Exception,), callbacks=[record], gc_after_trial=False)
        if fatal:
            raise fatal[0]

    best = None
    path = None
    try:
        best_trial = study.best_trial
    except ValueError:
        best_trial = None
    if best_trial is not None:
        best = best_trial_info(study, config, best_trial)
        path = str(Path(config.out_dir) / "best_config.json")
        write_json(path, best["config"])
        write_json(Path(config.out_dir) / "best_trial.json", best)
        if config.export:
            write_json(config.export, best["config"])
        log(f"best trial {best_trial.number}: H = {best_trial.value:.4f} -> {path}")
    return TuneResult(study_name=config.study_name, storage=storage_label, completed_here=completed,
                      failed_here=failed, n_finished=_counts(study)["finished"], best=best,
                      best_config_path=path)


# =========================================================================== export
RUN_CONFIG_KEYS = ("benchmark", "method", "preset", "overrides", "hidden")
"""The keys of the exported config: all of them are ``bimu run --config`` (RunConfig) keys."""


def best_config(study, config: TuneConfig, trial=None) -> dict[str, Any]:
    """The config ``bimu run --config FILE`` accepts, from the best (or the given) trial.

    Only run-config keys (:data:`RUN_CONFIG_KEYS`): ``preset`` is the preset the study tuned on
    (``"none"`` when it had none, so the run resolves the very same hyperparameters),
    ``overrides`` the tuned values, ``hidden`` only when the study set hidden widths. The tuning
    options (``validation``, the number of tuning tasks) are not exported.
    """
    trial = trial if trial is not None else study.best_trial
    out: dict[str, Any] = {
        "benchmark": config.benchmark,
        "method": config.method,
        "preset": config.preset if config.preset is not None else "none",
        "overrides": dict(trial.user_attrs.get("hparams") or trial.params),
    }
    hidden = config.benchmark_options.get("hidden")
    if hidden is not None:
        out["hidden"] = [int(v) for v in (hidden if isinstance(hidden, (list, tuple)) else [hidden]) if int(v) > 0]
    return out


def best_trial_info(study, config: TuneConfig, trial=None) -> dict[str, Any]:
    """Provenance of the exported config: study, trial, value, objective, validation options."""
    from optuna.trial import TrialState

    trial = trial if trial is not None else study.best_trial
    n_finished = len(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED)))
    return {
        "study": study.study_name,
        "storage": (str(journal_path(config.storage, config.out_dir))
                    if storage_kind(config.storage) == "journal" else redact_url(config.storage)),
        "trial": trial.number,
        "value": trial.value,
        "objective": "H_t = w1*Acc_0 + w2*mean(Acc_0..Acc_t) + w3*Acc_t",
        "reduce": config.reduce,
        "weights": list(config.weights),
        "seeds": list(config.seeds),
        "validation_options": dict(config.benchmark_options),
        "H_per_task": trial.user_attrs.get("H_per_task"),
        "n_finished_trials": n_finished,
        "config": best_config(study, config, trial),
    }


def write_json(path: str | os.PathLike, data: Any) -> None:
    """Write ``data`` as indented JSON atomically (temp file + ``os.replace``)."""
    from bimu.atomic import atomic_write_text

    atomic_write_text(path, json.dumps(data, indent=2, sort_keys=False) + "\n")

"""The search of ``bimu tune``: one worker of an Optuna study maximising H (:func:`run_tune`), and its export.

Each trial draws hyperparameters from the method's search space (:mod:`bimu.tune.spaces`), runs the
evaluate function (:mod:`bimu.tune.evaluators`) for each seed and takes the mean of the objective
(:mod:`bimu.tune.objective`) over seeds as its value. ``H_t`` is reported to Optuna after every task
(``trial.report``; from the first seed), so a pruner (``pruner="median"``) can stop poor trials early.

**Budget.** ``trials`` is the number of finished (COMPLETE or PRUNED) trials of the *study*, across
all workers. A worker claims a trial only while ``finished + running < trials``; a trial that finds
itself past the budget (two workers raced for the last slot) is failed at once, before any
evaluation, with the user attribute ``bimu_over_budget``. A worker whose remaining slots are held by
other workers waits for them (and fails/retries them if they die, :mod:`bimu.tune.storage`), so every
worker returns once the study is complete and each exports the best trial.

**Start at the preset** (``start_from_preset``, ``--start-from-preset``): a new study's first trial is
the preset itself (its values of the searched hyperparameters, :func:`preset_point`), so even a short
search exports nothing that scored below the preset on the validation split.

**Export.** The best trial is written to ``<out>/best_config.json`` (and to ``export`` if given), a
config that ``bimu run --config FILE`` accepts (run-config keys only)::

    {"benchmark": "pmnist", "method": "bimu", "preset": "pmnist-100", "overrides": {"lr": 4.9, ...}}

(plus ``"hidden"`` when the study set hidden widths; ``overrides`` also hold the study's fixed values,
``--set``; for your own data ``"benchmark"`` is the ``.npz`` file's path, so the run trains on all of its
training rows and reports the test rows). ``<out>/best_trial.json`` holds the
provenance: study, trial number, value, weights, validation options, H per task. The tuning options
(validation split, 10 tuning tasks) are not part of the exported config.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import os
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from bimu.tune.config import TuneConfig
from bimu.tune.evaluators import TuneSetupError, resolve_evaluator
from bimu.tune.objective import h_from_row, h_per_task
from bimu.tune.spaces import ALIASES, SpaceRecorder, check_search_space, get_search_space, suggest_hparams
from bimu.tune.storage import fail_stale_trials, import_optuna, make_storage, storage_label


def _accepts_keyword(fn: Callable, name: str) -> bool:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return name in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


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


def _fixed_hparams(cls, overrides, preset) -> dict[str, Any]:
    """The study's fixed hyperparameters (``--set``), each coerced by its declaration; ValueError naming a
    key the method does not declare or a bad value, before any trial."""
    if not overrides:
        return {}
    cls.resolve_hyperparameters(dict(overrides), preset=preset)  # unknown keys and bad values, by name
    return {k: _jsonable(cls.hyperparameters[k].validate(v)) for k, v in overrides.items()}


def preset_point(method, preset: str | None, fixed=None) -> dict[str, Any]:
    """The point of ``method``'s search space that the preset (and the ``fixed`` values) resolve to: each
    searched hyperparameter that is not fixed, at the value the method would run with, when it lies in
    the searched range ({} without a preset).

    >>> preset_point("bimu", "pmnist-100", {"lr": 2.0})
    {'lr_max': 0.0023, 'likelihood_multiplier': 161.3, 'kl_multiplier': 3.76, 'memory_window': 700}
    """
    from bimu.methods import get_method

    cls = get_method(method) if isinstance(method, str) else method
    if preset is None:
        return {}
    values = cls.resolve_hyperparameters({}, preset=preset)
    rec = SpaceRecorder()
    get_search_space(cls)(rec)
    aliases = ALIASES.get(cls.info.name, {})
    point = {}
    for key, d in rec.distributions.items():
        name = key if key in values else next((a for a in aliases.get(key, ()) if a in values), None)
        if name is None or key in (fixed or {}) or name in (fixed or {}):
            continue
        v = values[name]
        if d["kind"] == "categorical":
            if v in d["choices"]:
                point[key] = v
        elif d["low"] <= v <= d["high"]:
            point[key] = int(v) if d["kind"] == "int" else float(v)
    return point


class _FixedTrial:
    """An Optuna trial whose ``suggest_*`` returns the fixed value of a fixed hyperparameter (which is
    then not sampled, so the sampler sees only the tuned ones) and asks the trial for the others."""

    def __init__(self, trial, fixed: dict[str, Any]):
        self._trial, self._fixed = trial, fixed

    def __getattr__(self, name: str):
        attr = getattr(self._trial, name)
        if not name.startswith("suggest_"):
            return attr
        return lambda key, *args, **kwargs: self._fixed[key] if key in self._fixed else attr(key, *args, **kwargs)


def run_tune(config: TuneConfig, evaluate: Callable[..., np.ndarray] | str | None = None,
             log: Callable[[str], None] | None = None) -> TuneResult:
    """Run one worker of the study described by ``config`` until the study's budget is spent.

    ``evaluate`` defaults to ``config.evaluator`` (``"runner"``: :func:`runner_evaluate`). Several
    workers (processes, machines) may run this on the same storage and study name at once.
    """
    optuna = import_optuna()
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
    fixed = _fixed_hparams(cls, config.overrides, preset)
    evaluate_fn = resolve_evaluator(evaluate if evaluate is not None else config.evaluator)
    if evaluate is not None and not isinstance(evaluate, str):
        config.evaluator = "custom"  # a callable given in code: its identity is the caller's business
    streams = _accepts_keyword(evaluate_fn, "on_task_end")
    preflight = getattr(evaluate_fn, "preflight", None)
    if callable(preflight):
        preflight({"benchmark": config.benchmark, **config.benchmark_options}, config.seeds[0])

    storage = make_storage(config)
    label = storage_label(config.storage, config.out_dir)
    sampler = optuna.samplers.TPESampler(seed=config.sampler_seed)
    pruner = optuna.pruners.MedianPruner(n_startup_trials=5) if config.pruner == "median" else optuna.pruners.NopPruner()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(storage=storage, study_name=config.study_name, direction="maximize",
                                load_if_exists=True, sampler=sampler, pruner=pruner)
    _check_identity(study, config)
    if config.start_from_preset and not study.get_trials(deepcopy=False):
        start = preset_point(cls, preset, fixed)
        if start:
            study.enqueue_trial(start, user_attrs={"bimu_start": "preset"})
            log(f"first trial: the preset {preset!r} ({start})")
    log(f"study {config.study_name!r} on {label}: {_counts(study)['finished']}/{config.trials} "
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
        tuned = {**suggest_hparams(cls, _FixedTrial(trial, fixed), strict=config.strict_space), **fixed}
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
        fail_stale_trials(study, config)
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
    return TuneResult(study_name=config.study_name, storage=label, completed_here=completed,
                      failed_here=failed, n_finished=_counts(study)["finished"], best=best,
                      best_config_path=path)


RUN_CONFIG_KEYS = ("benchmark", "method", "preset", "overrides", "hidden")
"""The keys of the exported config: all of them are ``bimu run --config`` (RunConfig) keys."""


def best_config(study, config: TuneConfig, trial=None) -> dict[str, Any]:
    """The config ``bimu run --config FILE`` accepts, from the best (or the given) trial.

    Only run-config keys (:data:`RUN_CONFIG_KEYS`): ``preset`` is the preset the study tuned on
    (``"none"`` when it had none, so the run resolves the very same hyperparameters),
    ``overrides`` the tuned (and fixed) values, ``hidden`` only when the study set hidden widths. The tuning
    options (``validation``, the number of tuning tasks) are not exported; your own data's file is the
    ``benchmark`` (its path), trained on whole and tested on its test rows by ``bimu run``.
    """
    trial = trial if trial is not None else study.best_trial
    path = config.benchmark_options.get("path") if config.benchmark == "npz" else None
    out: dict[str, Any] = {
        "benchmark": path if isinstance(path, str) and path else config.benchmark,
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
        "storage": storage_label(config.storage, config.out_dir),
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


def tune_worker(config: TuneConfig) -> int:
    """One Optuna worker of ``config``'s study as a Dask task of :func:`run_tune_on` (exit code 0)."""
    run_tune(config)
    return 0


def run_tune_on(address: str, config: TuneConfig, workers: int,
                log: Callable[[str], None] | None = None) -> TuneResult:
    """``bimu tune --scheduler ADDRESS --workers N``: ``workers`` Dask tasks, each an Optuna worker
    (:func:`run_tune`) of the one study until its budget of trials is finished, then the best trial
    written here as :func:`run_tune` does. The study's storage must be one every worker reaches: the
    journal file (made absolute, in the shared output folder by default) or a database URL.
    RuntimeError when a worker's task failed (its message is logged)."""
    from bimu.experiments.distributed import check_scheduler, run_jobs_on
    from bimu.experiments.parallel import Job
    from bimu.tune.storage import journal_path, storage_kind

    if int(workers) != workers or workers < 1:
        raise ValueError(f"--workers must be a positive integer, got {workers!r}")
    check_scheduler(address)
    c = config.resolved()
    c.out_dir = str(Path(c.out_dir).resolve())
    if storage_kind(c.storage) == "journal":  # one file, at the same absolute path on every worker
        c.storage = str(journal_path(c.storage, c.out_dir).resolve())
    Path(c.out_dir).mkdir(parents=True, exist_ok=True)
    jobs = [Job(f"tune-worker-{i}", tune_worker, (c,)) for i in range(int(workers))]
    codes = run_jobs_on(address, jobs, log, shared=c.out_dir)
    failed = sum(1 for v in codes.values() if v)
    if failed:
        raise RuntimeError(f"{failed} of {len(jobs)} tuning workers failed (see above); finished trials are "
                           "kept in the study, run the same command to go on")
    return run_tune(c, log=log)

"""The online continual-learning runner: a :class:`~bimu.experiments.config.RunConfig` run seed by seed.

:func:`run_experiment` runs a config over its seeds, one run directory per seed (:func:`run_seed`):
the benchmark (:func:`make_benchmark`), the method on the fused engine or in PyTorch
(:func:`make_method`), the active learner in active mode (:func:`make_learner`), then the stream
(:func:`bimu.experiments.stream.run_stream`) with its checkpoints, resuming a directory that holds one
of the same configuration (and refusing one of another). A failing seed records ``error.txt`` and the
others go on;
:func:`preflight` makes every check that can fail before training.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
import traceback
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from bimu.engine.build import build_method
from bimu.experiments.config import RunConfig
from bimu.methods import get_method
from bimu.methods.footprint import check_eval_memory, check_step_memory
from bimu.rundir import (CONFIG, CONFIG_KEYS_ADDED, ENVIRONMENT, SUMMARY, RunDir, RunDirRefused, environment_info,
                         seed_dir)
from bimu.experiments.stream import run_stream


# --------------------------------------------------------------------------------- building blocks
DEFAULT_STREAM_TASKS = 10
"""Tasks of a configurable-length stream (``pmnist``) when the config does not say."""


def make_benchmark(config: RunConfig, seed: int):
    """The configured benchmark for ``seed`` (the run seed, train/test limits passed if accepted, then
    ``config.benchmark_options``; ``standardize`` wraps it in a training-statistics standardiser,
    ``stream_repeats`` in a :class:`~bimu.data.views.RepeatedStream`)."""
    from bimu.data.benchmarks import benchmark_entry

    entry = benchmark_entry(config.benchmark)
    opts: dict[str, Any] = {}
    n_tasks = config.tasks if config.tasks is not None else DEFAULT_STREAM_TASKS
    for key, value in (("n_tasks", n_tasks), ("seed", seed), ("train_limit", config.train_limit),
                       ("test_limit", config.test_limit)):
        if entry.accepts(key):
            opts[key] = value
    extra = dict(config.benchmark_options)
    standardize = bool(extra.pop("standardize", False))
    repeats = extra.pop("stream_repeats", 1)
    for key in extra:
        if not entry.accepts(key):
            raise ValueError(f"config 'benchmark_options': benchmark {config.benchmark!r} takes no option {key!r}")
    opts.update(extra)
    bench = entry.factory(data_dir=config.data_dir, **opts)
    if standardize:
        from bimu.data.views import StandardizedBenchmark

        bench = StandardizedBenchmark(bench)
    if repeats != 1:
        from bimu.data.views import RepeatedStream

        bench = RepeatedStream(bench, repeats)
    if config.tasks is not None and getattr(bench, "n_tasks", config.tasks) < config.tasks:
        raise ValueError(f"config 'tasks': benchmark {config.benchmark!r} has only {bench.n_tasks} tasks, "
                         f"asked for {config.tasks}")
    return bench


def make_method(config: RunConfig, sizes: Sequence[int], seed: int, hparams: dict[str, Any]):
    """``(method, engine used)`` for ``config`` (:func:`~bimu.engine.build.build_method` with the config's
    engine; one engine thread per run unless the config asks for more: a step split over two threads
    needs a barrier per step, and on a shared machine one run per core is faster)."""
    return build_method(config.method, sizes, seed, hparams, engine=config.engine, threads=config.threads)


def make_acquisition(config: RunConfig, seed: int = 0):
    """The acquisition of ``config.active`` from :mod:`bimu.active` (clear error if it is missing);
    ``seed`` seeds random querying (the run seed, so seeds draw different random subsets)."""
    try:
        from bimu.active import ActiveLearner, make_acquisition as make  # noqa: F401
    except ImportError as e:
        raise RuntimeError(f"--active {config.active}: active learning needs bimu.active "
                           f"(ActiveLearner, make_acquisition), which is not available here ({e})") from None
    return make(config.active, threshold=config.threshold, budget=config.budget,
                budget_exponent=config.budget_exponent, mc_samples=config.mc_samples, seed=seed)


def make_learner(method, config: RunConfig):
    """``ActiveLearner(method, acquisition)`` in active mode, else ``None``."""
    if config.active is None:
        return None
    from bimu.active import ActiveLearner

    return ActiveLearner(method, make_acquisition(config, seed=int(getattr(method, "seed", 0))))


def resolved_config(config: RunConfig, sizes, preset, hparams, note, engine, data_file=None) -> dict[str, Any]:
    """What ``config.json`` holds: the config plus everything resolved from it (``data_file``: the
    ``{"path", "sha256"}`` of an own-data file, :attr:`bimu.data.own.OwnBenchmark.source`)."""
    d = config.to_dict()
    d["hidden"] = list(config.hidden_widths())  # None (benchmark default) resolved, so both spellings resume
    resolved = {"sizes": list(sizes), "preset": preset, "hparams": dict(hparams), "note": note, "engine": engine}
    if data_file is not None:
        resolved["data_file"] = dict(data_file)
    return {**d, "resolved": resolved}


def check_same_data_file(path, old: Mapping[str, Any], new: Mapping[str, Any] | None) -> None:
    """:class:`~bimu.rundir.RunDirRefused` when the run directory ``path`` was run on a data file whose
    SHA-256 differs from the file's now (``old``: its ``config.json``'s resolved ``data_file``)."""
    before = old.get("resolved", {}).get("data_file")
    if new is None or before is None or before.get("sha256") == new.get("sha256"):
        return
    what = "folder" if Path(str(new.get("path"))).is_dir() else "file"
    raise RunDirRefused(f"{path} was run on {before.get('path')} with SHA-256 {before.get('sha256')}; "
                     f"{new.get('path')} now has SHA-256 {new.get('sha256')} (the {what} changed): "
                     "use another --out or remove that directory")


def run_seed(config: RunConfig, seed: int, *, progress: bool | None = None, log=None,
             on_task_end=None) -> dict[str, Any]:
    """One seed of ``config`` in its run directory (resuming if possible); returns the result dict."""
    log = log or (lambda s: None)
    rd = RunDir(seed_dir(config.out, config.benchmark, config.method, seed))
    preset, hparams, note = config.resolve_hparams()
    bench = make_benchmark(config, seed)
    sizes = [bench.n_features, *config.hidden_widths(), bench.n_classes]
    method, engine = make_method(config, sizes, seed, hparams)
    learner = make_learner(method, config)
    resolved = resolved_config(config, sizes, preset, hparams, note, engine, getattr(bench, "source", None))
    if check_run_dir(rd, resolved, hparams, method.hyperparameters, engine):
        log(f"seed {seed}: already complete in {rd.path}")
        return _completed(rd)
    if note:
        log(f"note: {note}")
    rd.acquire_lock()
    try:
        return _run_locked(config, seed, rd, bench, method, engine, learner, resolved, preset, progress, log,
                           on_task_end)
    finally:
        rd.release_lock()


def check_run_dir(rd: RunDir, resolved: Mapping[str, Any], hparams: Mapping[str, Any],
                  declared: Mapping[str, Any], engine: str) -> bool:
    """Whether ``rd`` holds this run complete; raises :class:`~bimu.rundir.RunDirRefused` if it holds a run of
    another configuration or engine, or another live process runs it (``resolved``: the ``config.json``
    this run writes; ``declared``: the method's hyperparameter declarations)."""
    if rd.exists(CONFIG):
        old = {**CONFIG_KEYS_ADDED, **rd.read_json(CONFIG)}  # a key the run predates: the value it had
        check_same_data_file(rd.path, old, resolved.get("resolved", {}).get("data_file"))
        # preset and overrides are compared through the resolved hyperparameters
        skip = ("resolved", "preset", "overrides", *_non_semantic())
        old_sem = {k: v for k, v in old.items() if k not in skip}
        new_sem = {k: v for k, v in _roundtrip(resolved).items() if k not in skip}
        if old_sem != new_sem or not same_hparams(old.get("resolved", {}).get("hparams"), _roundtrip(hparams),
                                                  declared):
            diff = sorted(k for k in set(old_sem) | set(new_sem) if old_sem.get(k) != new_sem.get(k))
            raise RunDirRefused(f"{rd.path} holds a run with a different configuration (differs in "
                                f"{diff or ['hparams']}); use another --out or remove that directory")
        if old.get("resolved", {}).get("engine") not in (None, engine) and rd.exists("checkpoint.pt"):
            raise RunDirRefused(f"{rd.path} was run with engine {old['resolved']['engine']!r}, now {engine!r}; "
                                "pass --engine to match or use another --out")
        if rd.exists(SUMMARY) and rd.read_json(SUMMARY).get("complete"):
            return True
    rd.check_lock()
    return False


def _run_locked(config, seed, rd, bench, method, engine, learner, resolved, preset, progress, log, on_task_end):
    from bimu.experiments.tracking import flat_params

    rd.write_json(CONFIG, resolved)
    rd.write_json(ENVIRONMENT, environment_info(seed, {"engine": engine, "threads": config.threads,
                                                       "resumed": rd.exists("checkpoint.pt")}))
    result = run_stream(bench, method, config.schedule, seed=seed, n_tasks=config.tasks or bench.n_tasks, run_dir=rd,
                        progress=progress, learner=learner, batch_size=config.batch_size,
                        eval_batch_size=config.eval_batch_size, eval_samples=config.eval_samples,
                        ood=config.ood, ood_every=config.ood_every, ood_scores=config.ood_scores,
                        train_limit=config.train_limit, test_limit=config.test_limit, log=log,
                        on_task_end=on_task_end, sinks=list(config.log_to), params=flat_params(resolved),
                        prequential_every=config.prequential_every)
    summary = dict(result["summary"], seed=seed, method=config.method, benchmark=config.benchmark,
                   hidden=list(config.hidden_widths()), engine=engine, preset=preset)
    rd.write_json(SUMMARY, summary)
    rd.clear_error()
    result["summary"] = summary
    result["run_dir"] = str(rd.path)
    return result


def same_hparams(old: Any, new: Mapping[str, Any], declared: Mapping[str, Any]) -> bool:
    """Whether a run directory's stored hyperparameters ``old`` describe the same run as ``new``: equal,
    or equal once every hyperparameter the run predates (declared, in ``new``, absent from ``old``) is
    taken at the value runs had before it existed (:attr:`~bimu.methods.base.Hyperparameter.value_before`:
    its default unless declared otherwise), so runs made before it was added are reused where they are
    the same run and refused where they are not.

    >>> from bimu.methods.bayesbinn import BayesBiNNMethod
    >>> decl = BayesBiNNMethod.hyperparameters
    >>> same_hparams({"lr": 0.77}, {"lr": 0.77, "prior_direction": "towards"}, decl)
    True
    >>> same_hparams({"lr": 0.77}, {"lr": 0.77, "prior_direction": "away"}, decl)
    False
    >>> same_hparams({"lr": 0.5}, {"lr": 0.77}, decl), same_hparams(None, {"lr": 0.77}, decl)
    (False, False)
    """
    if not isinstance(old, Mapping):
        return False
    filled = dict(old)
    for name in new:
        if name not in filled and name in declared:
            filled[name] = _roundtrip(declared[name].value_before)
    return filled == dict(new)


def _non_semantic():
    from bimu.experiments.config import NON_SEMANTIC_KEYS

    return NON_SEMANTIC_KEYS


def _roundtrip(obj):
    import json

    from bimu.rundir import dumps

    return json.loads(dumps(obj))


def preflight(config: RunConfig) -> None:
    """Every check that can fail before training: config names, hyperparameters, data files, engine,
    active-learning availability, that every checkpoint a seed would resume from loads safely
    (:func:`~bimu.rundir.load_checkpoint_file`) and that every seed's run directory may be used
    (:func:`check_run_dir`). Raises ValueError / FileNotFoundError / RuntimeError naming the problem."""
    config.validate()
    from bimu.experiments.tracking import check_sinks

    check_sinks(config.log_to)
    for seed in config.seeds:
        RunDir(seed_dir(config.out, config.benchmark, config.method, seed)).load_checkpoint()
    preset, hparams, note = config.resolve_hparams()
    bench = make_benchmark(config, config.seeds[0])
    sizes = [bench.n_features, *config.hidden_widths(), bench.n_classes]
    cls = get_method(config.method)
    check_step_memory(cls, sizes, hparams)  # before anything is allocated
    n_eval = config.eval_samples if config.eval_samples is not None else hparams.get("n_eval_samples", 1)
    check_eval_memory(cls, sizes, n_eval, config.eval_batch_size)
    method, engine = make_method(config, sizes, config.seeds[0], hparams)
    if config.active is not None:
        make_acquisition(config)
    resolved = resolved_config(config, sizes, preset, hparams, note, engine, getattr(bench, "source", None))
    for seed in config.seeds:
        check_run_dir(RunDir(seed_dir(config.out, config.benchmark, config.method, seed)), resolved, hparams,
                      method.hyperparameters, engine)


def run_experiment(config: RunConfig, *, progress: bool | None = None, log=None,
                   on_task_end=None) -> tuple[dict[int, dict[str, Any]], int]:
    """Run every seed of ``config``; returns ``(results by seed, exit code)``.

    Exit code 0 if every seed completed, 1 if any failed (its traceback is in ``error.txt`` of its
    directory and the other seeds still ran). A run directory this run may not use
    (:class:`~bimu.rundir.RunDirRefused`) stops the whole run, leaving that directory untouched. A
    KeyboardInterrupt, or SIGTERM (raised as :class:`Terminated`), stops the run (completed tasks stay
    checkpointed, the lock is released) and propagates.
    """
    log = log or (lambda s: print(s, file=sys.stderr, flush=True))
    torch.set_num_threads(config.threads)
    with sigterm_interrupts():
        done = complete_runs(config)
        if done is not None:  # nothing to train: no data loaded, no method built
            for seed, result in done.items():
                log(f"seed {seed}: already complete in {result['run_dir']}")
            return done, 0
        preflight(config)
        return _run_seeds(config, progress, log, on_task_end)


def complete_runs(config: RunConfig) -> dict[int, dict[str, Any]] | None:
    """The results of every seed of ``config`` when each seed's run directory holds its run complete, as
    :func:`check_run_dir` decides it (with the run's own sizes, which it does not compare), read without
    loading the data; ``None`` when a seed has work left, or when only the full check can decide (a run
    on an own-data file, whose SHA-256 is compared; a directory it would refuse)."""
    config.validate()
    from bimu.experiments.tracking import check_sinks

    check_sinks(config.log_to)
    preset, hparams, note = config.resolve_hparams()
    declared = get_method(config.method).hyperparameters
    out: dict[int, dict[str, Any]] = {}
    for seed in config.seeds:
        rd = RunDir(seed_dir(config.out, config.benchmark, config.method, seed))
        if not (rd.exists(CONFIG) and rd.exists(SUMMARY)):
            return None
        try:
            old = rd.read_json(CONFIG).get("resolved", {})
            if old.get("data_file") is not None or "sizes" not in old:
                return None
            engine = old.get("engine")
            if rd.exists("checkpoint.pt"):  # the engine this config gets is compared with the checkpoint's
                engine = make_method(config, old["sizes"], seed, hparams)[1]
            resolved = resolved_config(config, old["sizes"], preset, hparams, note, engine)
            if not check_run_dir(rd, resolved, hparams, declared, engine):
                return None
            out[seed] = _completed(rd)
        except (RunDirRefused, ValueError, OSError, TypeError, AttributeError):
            return None  # the full check names the problem
    return out


def _completed(rd: RunDir) -> dict[str, Any]:
    """The result of the complete run in ``rd``, as read back (``skipped``: not trained now)."""
    return {"R": rd.read_matrix(), "records": rd.read_metrics(), "summary": rd.read_json(SUMMARY),
            "run_dir": str(rd.path), "skipped": True}


def _run_seeds(config, progress, log, on_task_end):
    results: dict[int, dict[str, Any]] = {}
    failed = []
    for seed in config.seeds:
        try:
            results[seed] = run_seed(config, seed, progress=progress, log=log, on_task_end=on_task_end)
        except KeyboardInterrupt:
            log(f"seed {seed}: interrupted; completed tasks are checkpointed, run the same command to resume")
            raise
        except RunDirRefused:
            raise
        except Exception as e:  # noqa: BLE001 - one seed failing must not stop the others
            rd = RunDir(seed_dir(config.out, config.benchmark, config.method, seed))
            try:
                rd.write_error(traceback.format_exc())
            except OSError:
                pass
            log(f"seed {seed} FAILED: {type(e).__name__}: {e} (traceback in {rd.path / 'error.txt'})")
            failed.append(seed)
    return results, (1 if failed else 0)


class Terminated(KeyboardInterrupt):
    """SIGTERM stopped the run (handled as an interrupt: completed tasks stay checkpointed, the run
    directory's lock is released); ``exit_code`` is 143, the shell's code for SIGTERM."""

    exit_code = 128 + signal.SIGTERM


@contextlib.contextmanager
def sigterm_interrupts():
    """Within the block, SIGTERM raises :class:`Terminated` (in the main thread only: elsewhere signals
    cannot be handled); the previous handler comes back after it."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum, frame):
        raise Terminated("terminated (SIGTERM)")

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)

def benchmark_module(benchmark: str) -> str:
    """The module whose import registers ``benchmark`` (a job process or Dask worker imports it first)."""
    from bimu.data.benchmarks import benchmark_entry

    factory = benchmark_entry(benchmark).factory
    return getattr(factory, "__module__", None) or "bimu.data.benchmarks"


def run_config_job(config: dict, progress=False, module: str | None = None, log=None) -> int:
    """One seed as a job (a process of ``--jobs N`` or a Dask task of ``--scheduler``): import ``module``
    (registers the benchmark), then :func:`run_experiment` on ``config`` (a dict); returns its exit code,
    :data:`~bimu.experiments.jobs.HELD` when another live process runs the seed's directory."""
    import importlib

    from bimu.experiments.jobs import HELD
    from bimu.rundir import RunDirInUse

    if module:
        importlib.import_module(module)
    try:
        return run_experiment(RunConfig.from_dict(config), progress=progress, log=log)[1]
    except RunDirInUse as e:  # another command sharing the folder runs this seed: it is not failed
        (log or (lambda s: print(s, file=sys.stderr, flush=True)))(f"{e.args[0].split(';')[0]} (another command "
                                                                   "sharing this folder): skipped here")
        return HELD


def is_complete(config: RunConfig, seed: int) -> bool:
    """Whether ``seed`` of ``config`` has a complete run directory under ``config.out``."""
    rd = RunDir(seed_dir(config.out, config.benchmark, config.method, seed))
    return rd.exists(SUMMARY) and bool(rd.read_json(SUMMARY).get("complete"))

"""What a trial runs: an evaluate function ``evaluate(method_name, hparams, seed, benchmark_options) -> R``.

``R`` is the accuracy matrix (numpy ``[T, T]``, entries above the diagonal ignored). ``hparams`` is
the full resolved dict (defaults, then the preset, then the tuned values); ``benchmark_options`` holds
the benchmark name under ``"benchmark"`` plus the options. If ``evaluate`` accepts a keyword
``on_task_end``, it is called as ``on_task_end(t, accuracies_on_tasks_0_to_t)`` after each task (this
drives pruning).

**Never the test set.** The default evaluator (:func:`runner_evaluate`) builds the benchmark with
``validation=True`` and hands the runner's stream a :class:`ValidationView` whose ``test_task`` is the
benchmark's ``validation_task``. A benchmark without a validation split cannot be tuned.
:func:`synthetic_evaluate` is a tiny self-contained stream for smoke tests. :data:`EVALUATORS` names
both for ``--evaluator``; :func:`resolve_evaluator` also takes ``module:function``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from bimu.engine.build import build_method
from bimu.experiments.schedule import EvalSchedule
from bimu.experiments.stream import stream_tasks

STREAM_MODULE = "bimu.experiments.stream"
"""The module whose ``run_stream``, ``evaluate`` and ``eval_generator`` the default evaluator runs."""


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


def _import_stream():
    """The stream module, looked up at call time; TuneSetupError if it lacks what the evaluator runs."""
    try:
        stream = importlib.import_module(STREAM_MODULE)
        for name in ("run_stream", "evaluate", "eval_generator"):
            getattr(stream, name)
    except (ModuleNotFoundError, AttributeError) as exc:
        if isinstance(exc, ModuleNotFoundError) and exc.name not in (STREAM_MODULE, None):
            raise
        raise TuneSetupError(
            f"the default tuning evaluator needs {STREAM_MODULE} (run_stream, evaluate, eval_generator), "
            "which this installation lacks; pass another evaluate function (or --evaluator synthetic for "
            "a smoke test)") from None
    return stream


def runner_evaluate(method_name: str, hparams: Mapping[str, Any], seed: int,
                    benchmark_options: Mapping[str, Any], on_task_end=None) -> np.ndarray:
    """The default evaluator: one online run of the runner's stream, evaluated on validation data.

    The benchmark is built by its factory with the tuning options (``validation=True``, e.g.
    ``n_tasks=10``; the trial's ``seed`` when the factory takes one) and must expose
    ``validation_task(task) -> (X, y)``; the stream (:func:`bimu.experiments.stream.run_stream`,
    no OOD, no run directory) sees it through :class:`ValidationView`, so only validation data is ever
    evaluated. The method is :func:`~bimu.engine.build.build_method`'s (the fused engine where it
    supports the method). After each task this function evaluates tasks ``0..t`` with the stream's
    ``evaluate`` and the run's per-entry generator (``eval_generator``), fills ``R[t, :t+1]`` and calls
    ``on_task_end(t, R[t, :t+1])`` (which may raise ``optuna.TrialPruned``). ``hidden`` in the options
    sets the hidden widths (default: the benchmark's).
    """
    stream = _import_stream()
    bench, widths, opts = _validation_benchmark(benchmark_options, seed)
    sizes = [bench.n_features, *widths, bench.n_classes]
    method, _ = build_method(method_name, sizes, int(seed), dict(hparams))
    n = int(opts.get("n_tasks", bench.n_tasks))
    R = np.full((n, n), np.nan)

    def after_task(t: int) -> None:
        for j in range(t + 1):
            x, y = bench.test_task(j)
            R[t, j], _ = stream.evaluate(method, x, y, generator=stream.eval_generator(int(seed), t, j))
        if on_task_end is not None:
            on_task_end(t, R[t, : t + 1].copy())

    # the cheapest schedule (the current task only): the tasks 0..t are evaluated above
    schedule = EvalSchedule(final="last", final_last=1)
    stream.run_stream(bench, method, schedule, seed=int(seed), n_tasks=n, ood=False, on_task_end=after_task)
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
    widths = list(entry.default_hidden) if hidden is None else _widths(hidden)
    return bench, widths, opts


def _widths(hidden) -> list[int]:
    """Hidden widths from an int or a list (0 or [] for a linear classifier)."""
    return [int(v) for v in (hidden if isinstance(hidden, (list, tuple)) else [hidden]) if int(v) > 0]


def _runner_preflight(benchmark_options: Mapping[str, Any], seed: int) -> None:
    """Fail before the first trial if the stream or the benchmark's validation split is missing."""
    _import_stream()
    _validation_benchmark(benchmark_options, seed)


runner_evaluate.preflight = _runner_preflight


class _Tasks:
    """Fixed training sets, one per task, in presentation order (a benchmark for :func:`stream_tasks`)."""

    def __init__(self, train):
        self._train = train

    def train_task(self, task: int, seed: int):
        return self._train[task]


def synthetic_evaluate(method_name: str, hparams: Mapping[str, Any], seed: int,
                       benchmark_options: Mapping[str, Any], on_task_end=None) -> np.ndarray:
    """A tiny self-contained continual stream for smoke tests and CI (never for paper numbers).

    Permuted Gaussian blobs: ``n_classes`` Gaussian clusters in ``n_features`` dimensions; task ``t``
    permutes the features with its own permutation. Options (``benchmark_options``): ``n_tasks`` (3),
    ``n_features`` (20), ``n_classes`` (4), ``hidden`` (16; an int or a list of widths, 0 or [] for
    a linear classifier), ``n_train`` (64 per task, one example per online step), ``n_eval`` (128 per
    task). With ``validation=True`` the permutations and the evaluation examples come from a separate
    seed range (the "validation split"); there is no test set here at all. The PyTorch method learns
    the stream (:func:`~bimu.experiments.stream.stream_tasks`); after task ``t`` its ``predict`` is
    scored on tasks ``0..t``.

    >>> R = synthetic_evaluate("bimu", {}, 0, {"n_tasks": 2, "n_train": 8, "n_eval": 16})
    >>> R.shape, bool(np.isnan(R[0, 1]))
    ((2, 2), True)
    """
    import torch

    o = dict(benchmark_options)
    n_tasks, d, c = int(o.get("n_tasks", 3)), int(o.get("n_features", 20)), int(o.get("n_classes", 4))
    hidden = _widths(o.get("hidden", 16))
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
    train_rng = np.random.default_rng(20_000 + int(seed))
    tasks = _Tasks([draw(t, n_train, train_rng) for t in range(n_tasks)])
    method, _ = build_method(method_name, [d, *hidden, c], int(seed), hparams, engine="torch")
    R = np.full((n_tasks, n_tasks), np.nan)
    for done in stream_tasks(tasks, method, seed=int(seed), tasks=range(n_tasks)):
        t = done.task
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

"""One method streamed through one benchmark: the one online loop, its evaluation, and the runner's stream.

:func:`stream_tasks` is the loop every stream runs: :func:`run_stream` below, the active-learning sweep
(:func:`bimu.experiments.sweep.run_stream`) and tuning's synthetic stream
(:func:`bimu.tune.evaluators.synthetic_evaluate`). For each task it takes the task's training examples
in presentation order (``benchmark.train_task(task, seed)``, the first ``train_limit`` of them, through
``transform`` if given), checks them once (``method.check_batch``), learns them with :func:`learn_task`,
calls ``task_examples(x, y)`` then ``task_end()`` for methods that declare ``needs_task_boundaries``, checks
that the method's state is finite (:class:`~bimu.methods.divergence.DivergenceError` naming the task otherwise,
before anything of the task is recorded or checkpointed), and yields a :class:`TaskDone`;
the caller evaluates, records or checkpoints before the next task starts. :func:`learn_task` learns
one task: labelled (batch by batch; a method with ``learn_many`` takes 4096 batch-size-1 steps per
compiled call, the same as one ``learn`` per example), or through an active learner (``predict_one``
on each example, ``learn_one`` on those it asks for). With a ``prequential`` sampler it also records
test-then-train predictions, leaving the training as it is (:mod:`bimu.experiments.prequential`).

:func:`evaluate` gives a method's accuracy and uncertainty scores on a set; :func:`evaluate_test_task`
and :func:`evaluate_ood` evaluate a task's test set and the OOD set with the generator a run draws
for them (:func:`eval_generator`).

:func:`run_stream` is the runner's stream of one seed: batch size 1 by default, an explicit
:class:`~bimu.experiments.schedule.EvalSchedule`, OOD ROC-AUC (exact) from the method's uncertainty
scores, a checkpoint after each completed task and exact resume from it; :func:`summarize` condenses
its accuracy matrix and records.

Determinism: the training order comes from the benchmark (seed, task); training randomness from the
method's training generator (saved in checkpoints); every evaluation uses a fresh generator seeded
from (seed, after-task, evaluated task), so evaluation never touches the training stream and the same
entry of the accuracy matrix gets the same value whatever the schedule and whether or not the run was
resumed.

>>> from bimu.methods import create_method
>>> from bimu.data.feature_benchmarks import ArrayBenchmark
>>> rng = np.random.default_rng(0)
>>> bench = ArrayBenchmark("toy", [(rng.normal(size=(20, 4)).astype(np.float32), rng.integers(0, 2, 20))] * 2,
...                        [(rng.normal(size=(8, 4)).astype(np.float32), rng.integers(0, 2, 8))] * 2)
>>> method = create_method("sgd", [4, 2], seed=0)
>>> [(done.task, done.n_train, done.steps) for done in stream_tasks(bench, method, seed=0, tasks=range(2))]
[(0, 20, 20), (1, 20, 20)]
>>> method.examples_seen
40
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from bimu import metrics
from bimu.experiments.prequential import Curve, Prequential, Tested, learn_piece, task_fields
from bimu.experiments.progress import Progress
from bimu.experiments.summary import summarize  # noqa: F401 - the runner's summary, used from here
from bimu.methods.divergence import DivergenceError
from bimu.rundir import PREQUENTIAL, RunDir, RunDirRefused, full_checkpoint
from bimu.experiments.schedule import EvalSchedule, check_checkpoints

CHECKPOINT_FORMAT = 1
"""Version of the checkpoint a run directory holds (a checkpoint of another format is refused)."""
_EVAL_TAG, _OOD_TAG = 0xE1, 0x00D

# --------------------------------------------------------------------------------- the loop
LEARN_MANY_CHUNK = 4096
"""Batch-size-1 steps per ``learn_many`` call (one compiled call of the fused engine)."""
PROGRESS_CHUNK = 256
"""Steps between two progress updates of a per-example loop."""


@dataclasses.dataclass
class TaskDone:
    """One task learned: its training examples and steps, the training time (``task_end`` and sampled
    test-then-train predictions excluded), in active mode the right online predictions and the labels
    asked for, and with a ``prequential`` stream the task's :class:`~bimu.experiments.prequential.Tested`."""

    task: int
    n_train: int
    steps: int
    train_seconds: float
    online_correct: int = 0
    asked: int = 0
    tested: Tested | None = None


def stream_tasks(benchmark, method, *, seed: int, tasks: Iterable[int], learner=None, predict: bool = True,
                 batch_size: int = 1, train_limit: int | None = None,
                 transform: Callable[[torch.Tensor], torch.Tensor] | None = None,
                 progress: Progress | None = None, checkpoints: Sequence[int] = (),
                 on_checkpoint: Callable[[int, int], None] | None = None,
                 on_step: Callable[[int, bool | None], None] | None = None,
                 prequential: Prequential | None = None) -> Iterator[TaskDone]:
    """Learn ``tasks`` of ``benchmark`` in order with ``method`` (see the module docs); yields after each.

    ``learner``, ``predict``, ``batch_size`` and ``on_step`` are :func:`learn_task`'s (checked here, before any task);
    ``learner.task`` is set to the task being learned. ``transform(x)`` maps a task's training inputs
    before they are checked and learned. ``progress`` shows the steps of each task.
    ``checkpoints`` are moments inside every task, in percent of its training examples (0-99):
    ``on_checkpoint(task, percent)`` is called when the first ``len * percent // 100`` examples of the
    task are learned (0: before its first). The task is learned in the pieces between them, which gives
    the same results as learning it whole (every rule's draws are per example), so a callback that
    only reads the method (an evaluation with its own generator) leaves the stream unchanged.
    ``prequential`` (:class:`~bimu.experiments.prequential.Prequential`) records test-then-train
    predictions into each :attr:`TaskDone.tested`, leaving the training as it is.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    if learner is not None and batch_size != 1:
        raise ValueError("active learning runs with batch_size 1")
    points = check_checkpoints(checkpoints)
    if points and on_checkpoint is None:
        raise ValueError("checkpoints need an on_checkpoint callback")
    if points and batch_size != 1:
        raise ValueError("checkpoints inside a task need batch_size 1")
    if prequential is not None and learner is not None and not predict:
        raise ValueError("an active stream records its learner's predictions: prequential needs predict=True")
    return _stream(benchmark, method, seed, tasks, learner, predict, batch_size, train_limit, transform,
                   progress if progress is not None else Progress(0, enabled=False), points, on_checkpoint, on_step,
                   prequential)


def _stream(benchmark, method, seed, tasks, learner, predict, batch_size, train_limit, transform, bar,
            points=(), on_checkpoint=None, on_step=None, prequential=None):
    boundaries = bool(method.info.needs_task_boundaries)
    first = prequential.first if prequential is not None else 0  # global index of the task's first example
    for t in tasks:
        x, y = benchmark.train_task(t, seed)
        if train_limit is not None:
            x, y = x[:train_limit], y[:train_limit]
        if transform is not None:
            x = transform(x)
        method.check_batch(x, y)  # shapes, NaN, label range: once per task, not per step
        if learner is not None:
            learner.task = t
        steps = -(-len(y) // batch_size)
        bar.start_task(t, steps)
        t0 = time.perf_counter()
        tested = Tested() if prequential is not None else None

        def learn(a, b, outcomes):
            return learn_task(method, x[a:b], y[a:b], learner=learner, predict=predict, batch_size=batch_size,
                              task=t, progress=bar, on_step=on_step, outcomes=outcomes)
        try:
            correct = asked = 0
            paused = 0.0  # time in on_checkpoint, not training
            cuts = [len(y) * p // 100 for p in points]
            for start, stop, p in zip([0, *cuts], [*cuts, len(y)], [None, *points]):
                if p is not None:
                    t1 = time.perf_counter()
                    on_checkpoint(t, p)
                    paused += time.perf_counter() - t1
                if stop > start or not points:
                    c, a = learn_piece(prequential, method, x, y, start, stop, first, batch_size, learn,
                                       learner is not None, tested)
                    correct, asked = correct + c, asked + a
            train_s = time.perf_counter() - t0 - paused - (tested.seconds if tested is not None else 0.0)
            if boundaries:
                method.task_examples(x, y)  # a no-op unless the method needs_task_examples
                method.task_end()
            method.check_finite(t)
        except DivergenceError as e:
            raise e.during(t) from None
        n_train, x, y = int(len(y)), None, None  # the caller's evaluation and the next task run without x, y
        first += n_train
        yield TaskDone(task=t, n_train=n_train, steps=steps, train_seconds=train_s, online_correct=correct,
                       asked=asked, tested=tested)


def learn_task(method, x: torch.Tensor, y: torch.Tensor, *, learner=None, predict: bool = True,
               batch_size: int = 1, task: int | None = None, progress: Progress | None = None,
               on_step: Callable[[int | None, bool | None], None] | None = None,
               outcomes: list | None = None) -> tuple[int, int]:
    """Learn one task's examples ``(x, y)`` in order; returns ``(right online predictions, labels asked)``.

    - No ``learner``: every batch of ``batch_size`` examples is learned (``learn_many`` in chunks of
      :data:`LEARN_MANY_CHUNK` where the method has it and ``batch_size`` is 1).
    - ``learner`` (``batch_size`` 1) and ``predict``: per example ``pred, ask = learner.predict_one(x)``
      (with the label too for a rule that needs it, the oracle ``vr-true``), then
      ``learner.learn_one(x, y)`` if asked; for a vote rule on a method with a compiled query sampler,
      the same in compiled blocks (:func:`bimu.active.blocks.learn_in_blocks`).
    - ``learner`` without ``predict``, for the rules that decide without the MC samples: ``all`` learns
      every example as without a learner and records them in ``learner.ledger``; ``random`` draws every
      decision first (its own generator, so the same decisions), then learns the asked examples in order.
    ``on_step(task, asked)`` after every step (``asked``: ``None`` without a learner; not with ``predict=False``)
    learns the steps one call each, with the same results. ``outcomes`` (a list, with a ``learner`` and
    ``predict``) receives whether each example's online prediction was right (1) or not (0), in order.
    """
    bar = progress if progress is not None else Progress(0, enabled=False)
    if learner is None:
        _learn_all(method, x, y, batch_size, bar, on_step, task)
        return 0, 0
    if on_step is not None and not predict:
        raise ValueError("per-step callbacks need predict=True")
    if not predict:
        strategy = learner.acquisition.strategy
        if strategy == "all":
            _learn_all(method, x, y, 1, bar)
            learner.ledger.record_bulk_updates(len(y), task)
            return 0, len(y)
        if strategy == "random":
            return 0, _learn_random_subset(learner, x, y, task, bar)
        raise ValueError(f"acquisition {strategy!r} decides from the MC predictions: it needs predict=True")
    from bimu.active.blocks import decides_in_blocks, learn_in_blocks

    if decides_in_blocks(learner) and on_step is None:  # the same results as the loop below, in compiled blocks
        return learn_in_blocks(learner, x, y, task=task, progress=bar, outcomes=outcomes)
    oracle = bool(getattr(getattr(learner, "acquisition", None), "needs_labels", False))
    xs, ys = x.split(1), y.split(1)
    steps = len(xs)
    correct = asked = 0
    for i in range(0, steps, PROGRESS_CHUNK):
        for xb, yb in zip(xs[i:i + PROGRESS_CHUNK], ys[i:i + PROGRESS_CHUNK]):
            pred, ask = learner.predict_one(xb, yb) if oracle else learner.predict_one(xb)
            right = int(int(torch.as_tensor(pred).reshape(-1)[0]) == int(yb[0]))
            correct += right
            if outcomes is not None:
                outcomes.append(right)
            if ask:
                learner.learn_one(xb, yb)
                asked += 1
            if on_step is not None:
                on_step(task, bool(ask))
        bar.update(min(PROGRESS_CHUNK, steps - i), correct / min(i + PROGRESS_CHUNK, steps))
    return correct, asked


def _learn_all(method, x, y, batch_size, bar, on_step=None, task=None) -> None:
    """Learn every example of ``(x, y)`` in order, ``batch_size`` per step (``on_step(task, None)`` after each)."""
    if batch_size == 1 and hasattr(method, "learn_many") and on_step is None:
        for i in range(0, len(y), LEARN_MANY_CHUNK):
            method.learn_many(x[i:i + LEARN_MANY_CHUNK], y[i:i + LEARN_MANY_CHUNK])
            bar.update(min(LEARN_MANY_CHUNK, len(y) - i))
        return
    xs, ys = x.split(batch_size), y.split(batch_size)
    learn = method.learn
    for i in range(0, len(xs), PROGRESS_CHUNK):
        for xb, yb in zip(xs[i:i + PROGRESS_CHUNK], ys[i:i + PROGRESS_CHUNK]):
            learn(xb, yb)
            if on_step is not None:
                on_step(task, None)
        bar.update(min(PROGRESS_CHUNK, len(xs) - i))


def _learn_random_subset(learner, x, y, task, bar) -> int:
    """One task of random querying: draw every decision, then learn the asked rows in order (the same as
    deciding and learning example by example: the decisions use their own generator); returns how many."""
    acq, ledger, method = learner.acquisition, learner.ledger, learner.method
    asked = []
    for i in range(len(y)):
        ask = acq.decide(None, ledger.labels_queried, ledger.examples_seen)[0]
        ledger.record_prediction(ask, forward_passes=0, task=task)
        if ask:
            asked.append(i)
            ledger.record_update()
    idx = torch.as_tensor(asked, dtype=torch.int64)
    if len(asked) and hasattr(method, "learn_many"):
        method.learn_many(x[idx], y[idx])
    else:
        for i in asked:
            method.learn(x[i:i + 1], y[i:i + 1])
    method.observe_unlabelled(len(y) - len(asked))
    bar.update(len(y))
    return len(asked)


# --------------------------------------------------------------------------------- evaluation
def eval_generator(seed: int, after_task: int, task: int, tag: int = _EVAL_TAG) -> torch.Generator:
    """A fresh generator for one evaluation, seeded from ``(seed, after_task, task, tag)``."""
    state = np.random.SeedSequence([int(seed), int(after_task), int(task) + 1, int(tag)]).generate_state(1, np.uint64)
    return torch.Generator().manual_seed(int(state[0]) & ((1 << 63) - 1))


def score_functions(names: Sequence[str]) -> dict[str, Callable[[torch.Tensor], torch.Tensor]]:
    """Uncertainty score functions by name (see :mod:`bimu.uncertainty`)."""
    from bimu.uncertainty import UNCERTAINTY_SCORES

    return {n: UNCERTAINTY_SCORES[n] for n in names}


@torch.no_grad()
def evaluate(method, x: torch.Tensor, y: torch.Tensor | None, *, batch_size: int = 1000,
             n_samples: int | None = None, generator: torch.Generator | None = None,
             scores: Sequence[str] = (),
             predictions: list | None = None) -> tuple[float | None, dict[str, np.ndarray]]:
    """Accuracy of ``method`` on ``(x, y)`` (``None`` if ``y`` is None) and per-example ``scores``.

    Uses ``method.predict_samples`` in batches; the prediction is the argmax of the mean over samples
    of the log-probabilities (the paper's rule). With a ``predictions`` list (and labels), each batch's
    predicted classes are appended to it.
    """
    fns = score_functions(scores)
    correct, out = 0, {n: [] for n in fns}
    for i in range(0, len(x), batch_size):
        p = method.predict_samples(x[i:i + batch_size], n_samples=n_samples, generator=generator)
        if y is not None:
            pred = torch.log(p.clamp_min(1e-30)).mean(0).argmax(-1)
            correct += int((pred == y[i:i + batch_size]).sum())
            if predictions is not None:
                predictions.append(pred.numpy())
        for n, f in fns.items():
            out[n].append(f(p).to(torch.float64).numpy())
    acc = correct / len(x) if y is not None else None
    return acc, {n: np.concatenate(v) if v else np.zeros(0) for n, v in out.items()}


def evaluate_test_task(method, benchmark, task: int, *, seed: int, after_task: int, test_limit: int | None = None,
                       batch_size: int = 1000, n_samples: int | None = None, scores: Sequence[str] = (),
                       predictions: list | None = None) -> tuple[float, dict[str, np.ndarray]]:
    """:func:`evaluate` on ``task``'s test set (its first ``test_limit`` examples) with the generator a run
    draws for it after ``after_task``: the same accuracy and scores as the run's, wherever it is called.
    ``predictions`` (a list) receives the predicted classes, then the labels, as two arrays."""
    xt, yt = benchmark.test_task(task)
    if test_limit is not None:
        xt, yt = xt[:test_limit], yt[:test_limit]
    preds: list | None = [] if predictions is not None else None
    res = evaluate(method, xt, yt, batch_size=batch_size, n_samples=n_samples,
                   generator=eval_generator(seed, after_task, task), scores=scores, predictions=preds)
    if predictions is not None:
        predictions += [np.concatenate(preds) if preds else np.zeros(0, np.int64), np.asarray(yt)]
    return res


def evaluate_ood(method, ood_x: torch.Tensor, *, seed: int, after_task: int, batch_size: int = 1000,
                 n_samples: int | None = None, scores: Sequence[str] = ()) -> dict[str, np.ndarray]:
    """Per-example ``scores`` on the OOD set with the generator a run draws for it after ``after_task``."""
    return evaluate(method, ood_x, None, batch_size=batch_size, n_samples=n_samples,
                    generator=eval_generator(seed, after_task, -1, _OOD_TAG), scores=scores)[1]


# --------------------------------------------------------------------------------- the runner's stream
def run_stream(benchmark, method, schedule: EvalSchedule | None = None, *, seed: int = 0,
               n_tasks: int | None = None, run_dir: RunDir | str | Path | None = None,
               progress: bool | None = None, learner=None, batch_size: int = 1, eval_batch_size: int = 1000,
               eval_samples: int | None = None, ood: bool = True, ood_every: int = 1,
               ood_scores: Sequence[str] = ("epistemic", "aleatoric", "variation_ratio"),
               train_limit: int | None = None, test_limit: int | None = None,
               log: Callable[[str], None] | None = None, extra_state: dict | None = None,
               on_task_end: Callable[[int], None] | None = None, sinks: Sequence = (), callbacks: Sequence = (),
               params: dict[str, Any] | None = None, prequential_every: int = 0) -> dict[str, Any]:
    """Train ``method`` online on ``benchmark``'s tasks; returns the result dict (see module docs).

    With ``run_dir``, each completed task is checkpointed (method state, learner state, records),
    then ``metrics.jsonl`` and the accuracy matrix are rewritten, each atomically: after a kill they
    hold the checkpoint's tasks or one task fewer, never more. If the directory holds a checkpoint the
    stream resumes after its last completed task, first rewriting metrics and matrix from it.
    ``learner`` (an ``ActiveLearner``) switches to active mode: per example
    ``pred, ask = learner.predict_one(x)`` and ``learner.learn_one(x, y)`` only when asked; its state
    (query generator, acquisition, ledger) is checkpointed and restored with the method's.
    ``on_task_end(task)`` is called after each task is saved (tests use it to inject a crash).
    Each task record and the summary go to the ``bimu`` logger and to ``sinks``
    (:mod:`bimu.experiments.tracking`: names such as ``"csv"``, or :class:`~bimu.experiments.tracking.Sink`
    objects; ``params``, the run's configuration, go to MLflow), closed when the stream ends or fails.
    ``callbacks``: objects with ``on_step(info)`` / ``on_task_end(info)`` (:mod:`bimu.experiments.callbacks`).
    ``prequential_every`` (0: off) records the test-then-train prediction of every this-many-th example (in
    active mode the learner's of every example; :mod:`bimu.experiments.prequential`): per task in the
    records, overall in the summary, the curve in ``prequential.csv`` (after the checkpoint, resumed with
    it) and under the result's ``"prequential"`` (arrays, or None); their time counts as evaluation time.
    """
    from bimu.experiments.callbacks import Callbacks
    from bimu.experiments.tracking import LoggingSink, make_sinks

    hooks = Callbacks(callbacks, method)
    names = [s for s in sinks if isinstance(s, str)]
    folder = rd_path(run_dir)
    built = make_sinks(names, folder, run_name=f"{folder.parent.name}/{folder.name}" if folder else f"seed-{seed}",
                       params=params)
    all_sinks = [LoggingSink(f"seed {seed}"), *built, *(s for s in sinks if not isinstance(s, str)), hooks]
    try:
        return _run_stream(benchmark, method, schedule, seed, n_tasks, run_dir, progress, learner, batch_size,
                           eval_batch_size, eval_samples, ood, ood_every, ood_scores, train_limit, test_limit, log,
                           extra_state, on_task_end, all_sinks, hooks.on_step, int(prequential_every))
    finally:
        for s in all_sinks:
            s.close()


def rd_path(run_dir) -> Path | None:
    """The folder of ``run_dir`` (a RunDir, a path or None)."""
    return None if run_dir is None else Path(getattr(run_dir, "path", run_dir))


def _run_stream(benchmark, method, schedule, seed, n_tasks, run_dir, progress, learner, batch_size, eval_batch_size,
                eval_samples, ood, ood_every, ood_scores, train_limit, test_limit, log, extra_state, on_task_end,
                sinks, on_step=None, every=0):
    schedule = schedule or EvalSchedule()
    n = int(n_tasks if n_tasks is not None else benchmark.n_tasks)
    if n < 1:
        raise ValueError(f"n_tasks must be >= 1, got {n}")
    rd = RunDir(run_dir) if run_dir is not None and not isinstance(run_dir, RunDir) else run_dir
    log = log or (lambda s: None)
    scores = [s for s in ood_scores if s in method.info.uncertainty_scores] if ood else []
    if scores and benchmark.ood_set() is None:  # asked for at each evaluation: none is held while tasks are learned
        scores = []

    if every < 0:
        raise ValueError(f"prequential_every must be >= 0, got {every}")
    R = metrics.new_accuracy_matrix(n)
    records: list[dict[str, Any]] = []
    start = 0
    curve = Curve() if every else None
    if rd is not None:
        ckpt = rd.load_checkpoint()
        if ckpt is not None:
            if ckpt.get("format") != CHECKPOINT_FORMAT or ckpt.get("n_tasks") != n:
                raise RunDirRefused(f"{rd.path}: checkpoint is for a different stream "
                                 f"(format {ckpt.get('format')}, n_tasks {ckpt.get('n_tasks')}); use a new --out")
            if learner is not None and (ckpt.get("learner_state") is None or not hasattr(learner, "load_state_dict")):
                raise RunDirRefused(f"{rd.path}: the checkpoint holds no active-learning state (query generator, "
                                 "ledger), so this run cannot resume exactly; use a new --out")
            method.load_state_dict(ckpt["method_state"])
            if learner is not None:
                learner.load_state_dict(ckpt["learner_state"])
            records = list(ckpt["records"])
            R = np.asarray(full_checkpoint(ckpt)["R"], dtype=np.float64).copy()
            start = int(ckpt["task"]) + 1
            if curve is not None:  # the file's rows of the earlier tasks, the checkpoint's of the last
                curve = Curve.resume(rd.file(PREQUENTIAL), records, ckpt.get("prequential_rows"), log)
            # the checkpoint is the record of progress: metrics and matrix say what it holds
            rd.write_metrics(records)
            rd.write_matrix(R)
            log(f"resuming {rd.path} after task {start} of {n}")

    bar = Progress(n, progress, desc=f"seed {seed} ")
    pq = Prequential(seed, every, eval_samples, sum(int(r["n_train"]) for r in records)) if every else None
    for done in stream_tasks(benchmark, method, seed=seed, tasks=range(start, n), learner=learner,
                             batch_size=batch_size, train_limit=train_limit, progress=bar, on_step=on_step,
                             prequential=pq):
        t, steps = done.task, done.steps
        t1 = time.perf_counter() - (done.tested.seconds if done.tested else 0.0)  # predictions: evaluation time
        evaluated = {}
        for j in schedule.tasks_after(t, n):
            want = scores if (j == t and scores and _ood_due(t, n, ood_every)) else []
            acc, s_in = evaluate_test_task(method, benchmark, j, seed=seed, after_task=t, test_limit=test_limit,
                                           batch_size=eval_batch_size, n_samples=eval_samples, scores=want)
            R[t, j] = acc
            evaluated[str(j)] = acc
            if want:
                s_out = evaluate_ood(method, benchmark.ood_set()[:test_limit], seed=seed, after_task=t,
                                     batch_size=eval_batch_size, n_samples=eval_samples, scores=want)
                ood_auc = {s: metrics.roc_auc(s_in[s], s_out[s]) for s in want}
                # the paper code's approximate AUC beside the exact one, to tell metric from model
                ood_auc_reference = {s: metrics.roc_auc_reference_1000_thresholds(s_in[s], s_out[s]) for s in want}
        eval_s = time.perf_counter() - t1
        rec = {
            "task": t, "n_train": done.n_train, "steps": steps, "acc": R[t, t], "evaluated": evaluated,
            "ood_auc": ood_auc if (scores and _ood_due(t, n, ood_every)) else None,
            "ood_auc_reference": ood_auc_reference if (scores and _ood_due(t, n, ood_every)) else None,
            "train_seconds": done.train_seconds, "steps_per_s": steps / max(done.train_seconds, 1e-12),
            "eval_seconds": eval_s,
            "examples_seen": int(method.examples_seen), "updates_applied": int(method.updates_applied),
            "memory_bytes": int(method.memory_bytes()),
            "state_bytes": metrics.memory_footprint(method.modules_state()),
        }
        if learner is not None:
            rec["active"] = dict(getattr(learner, "accounting", {}) or {})
            rec["active"].update(queried_in_task=done.asked, online_accuracy=done.online_correct / max(steps, 1))
        if done.tested is not None:
            rec.update(task_fields(done.tested.arrays()[1]))
            curve.add(t, *done.tested.arrays())
        records.append(rec)
        bar.end_task(R[t, t])
        if rd is not None:  # the checkpoint first: metrics and matrix never claim a task it does not hold
            state = {"format": CHECKPOINT_FORMAT, "task": t, "n_tasks": n, "method_state": method.state_dict(),
                     "R": R, "records": records, "prequential_rows": curve.last if curve is not None else None,
                     "learner_state": learner.state_dict() if learner is not None and hasattr(learner, "state_dict")
                     else None}
            state.update(extra_state or {})
            rd.save_checkpoint(state)
            rd.write_metrics(records)
            rd.write_matrix(R)
            if curve is not None:
                curve.write(rd.file(PREQUENTIAL))
        log(f"seed {seed} task {t + 1}/{n}: acc {100 * R[t, t]:.2f}% right after training, "
            f"{rec['steps_per_s']:.0f} steps/s"
            + ("" if rec["ood_auc"] is None else ", OOD AUC " + " ".join(
                f"{k}={v:.3f}" for k, v in rec["ood_auc"].items())))
        for sink in sinks:
            sink.task_end(rec, R)
        if on_task_end is not None:
            on_task_end(t)

    summary = summarize(R, records)
    if rd is not None:
        rd.write_matrix(R)
        rd.write_metrics(records)
    for sink in sinks:
        sink.run_end(summary, R)
    return {"R": R, "records": records, "summary": summary,
            "prequential": curve.arrays() if curve is not None else None}


def _ood_due(t: int, n: int, every: int) -> bool:
    return t == n - 1 or (every > 0 and (t + 1) % every == 0)

"""The online continual-learning runner.

:func:`run_stream` trains one method on one benchmark stream (one seed): batch size 1 by default,
one pass per task, ``task_end()`` only for methods that declare ``needs_task_boundaries``, an explicit
:class:`~bimu.experiments.schedule.EvalSchedule`, OOD ROC-AUC (exact) from the method's uncertainty
scores, a checkpoint after each completed task and exact resume from it.

:func:`run_experiment` runs a :class:`~bimu.experiments.config.RunConfig` over its seeds, one run
directory per seed; a failing seed records ``error.txt`` and the others go on.

Determinism: the training order comes from the benchmark (seed, task); training randomness from the
method's training generator (saved in checkpoints); every evaluation uses a fresh generator seeded
from (seed, after-task, evaluated task), so evaluation never touches the training stream and the same
entry of the accuracy matrix gets the same value whatever the schedule and whether or not the run was
resumed.
"""

from __future__ import annotations

import importlib
import math
import sys
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from bimu import metrics
from bimu.experiments.config import RunConfig
from bimu.experiments.schedule import EvalSchedule
from bimu.rundir import CONFIG, ENVIRONMENT, SUMMARY, RunDir, environment_info, seed_dir

CHECKPOINT_FORMAT = 1
_EVAL_TAG, _OOD_TAG = 0xE1, 0x00D


class SeedFailed(RuntimeError):
    """A seed's run raised; its traceback is in the seed directory's ``error.txt``."""


# --------------------------------------------------------------------------------- helpers
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
             scores: Sequence[str] = ()) -> tuple[float | None, dict[str, np.ndarray]]:
    """Accuracy of ``method`` on ``(x, y)`` (``None`` if ``y`` is None) and per-example ``scores``.

    Uses ``method.predict_proba`` in batches; the prediction is the argmax of the mean over samples
    of the log-probabilities (the paper's rule).
    """
    fns = score_functions(scores)
    correct, out = 0, {n: [] for n in fns}
    for i in range(0, len(x), batch_size):
        p = method.predict_proba(x[i:i + batch_size], n_samples=n_samples, generator=generator)
        if y is not None:
            pred = torch.log(p.clamp_min(1e-30)).mean(0).argmax(-1)
            correct += int((pred == y[i:i + batch_size]).sum())
        for n, f in fns.items():
            out[n].append(f(p).to(torch.float64).numpy())
    acc = correct / len(x) if y is not None else None
    return acc, {n: np.concatenate(v) if v else np.zeros(0) for n, v in out.items()}


def evaluate_test_task(method, benchmark, task: int, *, seed: int, after_task: int, test_limit: int | None = None,
                       batch_size: int = 1000, n_samples: int | None = None,
                       scores: Sequence[str] = ()) -> tuple[float, dict[str, np.ndarray]]:
    """:func:`evaluate` on ``task``'s test set (its first ``test_limit`` examples) with the generator a run
    draws for it after ``after_task``: the same accuracy and scores as the run's, wherever it is called."""
    xt, yt = benchmark.test_task(task)
    if test_limit is not None:
        xt, yt = xt[:test_limit], yt[:test_limit]
    return evaluate(method, xt, yt, batch_size=batch_size, n_samples=n_samples,
                    generator=eval_generator(seed, after_task, task), scores=scores)


def evaluate_ood(method, ood_x: torch.Tensor, *, seed: int, after_task: int, batch_size: int = 1000,
                 n_samples: int | None = None, scores: Sequence[str] = ()) -> dict[str, np.ndarray]:
    """Per-example ``scores`` on the OOD set with the generator a run draws for it after ``after_task``."""
    return evaluate(method, ood_x, None, batch_size=batch_size, n_samples=n_samples,
                    generator=eval_generator(seed, after_task, -1, _OOD_TAG), scores=scores)[1]


class Progress:
    """A progress display: tqdm if installed, else a throttled stderr line; off when not a TTY.

    ``enabled=None`` means "on iff stderr is a terminal"; ``True`` forces it on.
    """

    def __init__(self, n_tasks: int, enabled: bool | None = None, desc: str = "", stream=None):
        self.stream = stream or sys.stderr
        self.enabled = (self.stream.isatty() if enabled is None else bool(enabled))
        self.n_tasks, self.desc = n_tasks, desc
        self._bar = None
        self._tqdm = None
        if self.enabled:
            try:
                from tqdm import tqdm

                self._tqdm = tqdm
            except ImportError:
                self._tqdm = None
        self._acc: float | None = None

    def start_task(self, task: int, n_steps: int) -> None:
        """Begin the bar of ``task`` (0-based) with ``n_steps`` steps."""
        if not self.enabled:
            return
        self._task, self._n, self._done, self._t0, self._last = task, n_steps, 0, time.perf_counter(), 0.0
        label = f"{self.desc}task {task + 1}/{self.n_tasks}"
        if self._tqdm is not None:
            self._bar = self._tqdm(total=n_steps, desc=label, unit="step", file=self.stream, leave=False,
                                   dynamic_ncols=True, mininterval=0.5)
            if self._acc is not None:
                self._bar.set_postfix_str(f"acc {100 * self._acc:.2f}%")
        else:
            self._label = label

    def update(self, n: int, online_acc: float | None = None) -> None:
        """Advance by ``n`` steps (``online_acc``: prequential accuracy in active mode)."""
        if not self.enabled:
            return
        self._done += n
        if self._bar is not None:
            self._bar.update(n)
            if online_acc is not None:
                self._bar.set_postfix_str(f"online acc {100 * online_acc:.2f}%", refresh=False)
            return
        now = time.perf_counter()
        if now - self._last >= 1.0 or self._done == self._n:
            self._last = now
            rate = self._done / max(now - self._t0, 1e-9)
            acc = online_acc if online_acc is not None else self._acc
            acc_s = "" if acc is None else f"  acc {100 * acc:.2f}%"
            self.stream.write(f"\r{self._label}: {self._done}/{self._n} steps  {rate:.0f} steps/s{acc_s}   ")
            self.stream.flush()

    def end_task(self, acc: float | None) -> None:
        """Close the task's bar and remember its accuracy for the next one."""
        self._acc = acc
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        else:
            self.stream.write("\n")
            self.stream.flush()


# --------------------------------------------------------------------------------- one stream
def run_stream(benchmark, method, schedule: EvalSchedule | None = None, *, seed: int = 0,
               n_tasks: int | None = None, run_dir: RunDir | str | Path | None = None,
               progress: bool | None = None, learner=None, batch_size: int = 1, eval_batch_size: int = 1000,
               eval_samples: int | None = None, ood: bool = True, ood_every: int = 1,
               ood_scores: Sequence[str] = ("epistemic", "aleatoric", "variation_ratio"),
               train_limit: int | None = None, test_limit: int | None = None,
               log: Callable[[str], None] | None = None, extra_state: dict | None = None,
               on_task_end: Callable[[int], None] | None = None) -> dict[str, Any]:
    """Train ``method`` online on ``benchmark``'s tasks; returns the result dict (see module docs).

    With ``run_dir``, each completed task is checkpointed and ``metrics.jsonl`` / the accuracy
    matrix rewritten atomically; if the directory holds a checkpoint the stream resumes after its
    last completed task. ``learner`` (an ``ActiveLearner``) switches to active mode: per example
    ``pred, ask = learner.predict_one(x)`` and ``learner.learn_one(x, y)`` only when asked.
    ``on_task_end(task)`` is called after each task is saved (tests use it to inject a crash).
    """
    schedule = schedule or EvalSchedule()
    n = int(n_tasks if n_tasks is not None else benchmark.n_tasks)
    if n < 1:
        raise ValueError(f"n_tasks must be >= 1, got {n}")
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    if learner is not None and batch_size != 1:
        raise ValueError("active learning runs with batch_size 1")
    rd = RunDir(run_dir) if run_dir is not None and not isinstance(run_dir, RunDir) else run_dir
    log = log or (lambda s: None)
    boundaries = bool(method.info.needs_task_boundaries)
    scores = [s for s in ood_scores if s in method.info.uncertainty_scores] if ood else []
    ood_x = benchmark.ood_set() if scores else None
    if ood_x is not None and test_limit is not None:
        ood_x = ood_x[:test_limit]
    if ood_x is None:
        scores = []

    R = metrics.new_accuracy_matrix(n)
    records: list[dict[str, Any]] = []
    start = 0
    if rd is not None:
        ckpt = rd.load_checkpoint()
        if ckpt is not None:
            if ckpt.get("format") != CHECKPOINT_FORMAT or ckpt.get("n_tasks") != n:
                raise ValueError(f"{rd.path}: checkpoint is for a different stream "
                                 f"(format {ckpt.get('format')}, n_tasks {ckpt.get('n_tasks')}); use a new --out")
            method.load_state_dict(ckpt["method_state"])
            if learner is not None and ckpt.get("learner_state") is not None and hasattr(learner, "load_state_dict"):
                learner.load_state_dict(ckpt["learner_state"])
            R = np.asarray(ckpt["R"], dtype=np.float64).copy()
            records = list(ckpt["records"])
            start = int(ckpt["task"]) + 1
            log(f"resuming {rd.path} after task {start} of {n}")

    bar = Progress(n, progress, desc=f"seed {seed} ")
    for t in range(start, n):
        x, y = benchmark.train_task(t, seed)
        if train_limit is not None:
            x, y = x[:train_limit], y[:train_limit]
        method.check_batch(x, y)  # shapes, NaN, label range: once per task, not per step
        xs, ys = x.split(batch_size), y.split(batch_size)
        steps = len(xs)
        bar.start_task(t, steps)
        chunk = 256
        online_correct, asked = 0, 0
        t0 = time.perf_counter()
        if learner is None and batch_size == 1 and hasattr(method, "learn_many"):
            # the fused engine runs a whole chunk of batch-size-1 steps in one compiled call
            # (identical to calling learn once per example)
            chunk = 4096
            for i in range(0, steps, chunk):
                method.learn_many(x[i:i + chunk], y[i:i + chunk])
                bar.update(min(chunk, steps - i))
        elif learner is None:
            learn = method.learn
            for i in range(0, steps, chunk):
                for xb, yb in zip(xs[i:i + chunk], ys[i:i + chunk]):
                    learn(xb, yb)
                bar.update(min(chunk, steps - i))
        else:
            for i in range(0, steps, chunk):
                for xb, yb in zip(xs[i:i + chunk], ys[i:i + chunk]):
                    pred, ask = learner.predict_one(xb)
                    online_correct += int(int(torch.as_tensor(pred).reshape(-1)[0]) == int(yb[0]))
                    if ask:
                        learner.learn_one(xb, yb)
                        asked += 1
                bar.update(min(chunk, steps - i), online_correct / min(i + chunk, steps))
        train_s = time.perf_counter() - t0
        if boundaries:
            method.task_end()

        t1 = time.perf_counter()
        evaluated = {}
        for j in schedule.tasks_after(t, n):
            want = scores if (j == t and scores and _ood_due(t, n, ood_every)) else []
            acc, s_in = evaluate_test_task(method, benchmark, j, seed=seed, after_task=t, test_limit=test_limit,
                                           batch_size=eval_batch_size, n_samples=eval_samples, scores=want)
            R[t, j] = acc
            evaluated[str(j)] = acc
            if want:
                s_out = evaluate_ood(method, ood_x, seed=seed, after_task=t, batch_size=eval_batch_size,
                                     n_samples=eval_samples, scores=want)
                ood_auc = {s: metrics.roc_auc(s_in[s], s_out[s]) for s in want}
                # the paper code's approximate AUC beside the exact one, to tell metric from model
                ood_auc_reference = {s: metrics.roc_auc_reference_1000_thresholds(s_in[s], s_out[s]) for s in want}
        eval_s = time.perf_counter() - t1
        rec = {
            "task": t, "n_train": int(len(y)), "steps": steps, "acc": R[t, t], "evaluated": evaluated,
            "ood_auc": ood_auc if (scores and _ood_due(t, n, ood_every)) else None,
            "ood_auc_reference": ood_auc_reference if (scores and _ood_due(t, n, ood_every)) else None,
            "train_seconds": train_s, "steps_per_s": steps / max(train_s, 1e-12), "eval_seconds": eval_s,
            "examples_seen": int(method.examples_seen), "updates_applied": int(method.updates_applied),
            "memory_bytes": int(method.memory_bytes()),
            "state_bytes": metrics.memory_footprint(method.modules_state()),
        }
        if learner is not None:
            rec["active"] = dict(getattr(learner, "accounting", {}) or {})
            rec["active"].update(queried_in_task=asked, online_accuracy=online_correct / max(steps, 1))
        records.append(rec)
        bar.end_task(R[t, t])
        if rd is not None:
            rd.write_metrics(records)
            rd.write_matrix(R)
            state = {"format": CHECKPOINT_FORMAT, "task": t, "n_tasks": n, "method_state": method.state_dict(),
                     "R": R, "records": records,
                     "learner_state": learner.state_dict() if learner is not None and hasattr(learner, "state_dict")
                     else None}
            state.update(extra_state or {})
            rd.save_checkpoint(state)
        log(f"seed {seed} task {t + 1}/{n}: acc {100 * R[t, t]:.2f}% right after training, "
            f"{rec['steps_per_s']:.0f} steps/s"
            + ("" if rec["ood_auc"] is None else ", OOD AUC " + " ".join(
                f"{k}={v:.3f}" for k, v in rec["ood_auc"].items())))
        if on_task_end is not None:
            on_task_end(t)

    summary = summarize(R, records)
    if rd is not None:
        rd.write_matrix(R)
        rd.write_metrics(records)
    return {"R": R, "records": records, "summary": summary}


def _ood_due(t: int, n: int, every: int) -> bool:
    return t == n - 1 or (every > 0 and (t + 1) % every == 0)


def summarize(R: np.ndarray, records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The summary of one completed stream (fractions in [0, 1]; NaN where undefined)."""
    n = R.shape[0]
    k = min(5, n)
    final = R[-1]
    try:
        last_k = metrics.last_k_mean(R, k)
    except ValueError:
        last_k = float("nan")
    train_s = sum(r["train_seconds"] for r in records)
    steps = sum(r["steps"] for r in records)
    last = records[-1] if records else {}
    ood = next((r["ood_auc"] for r in reversed(records) if r.get("ood_auc")), None)
    ood_ref = next((r["ood_auc_reference"] for r in reversed(records) if r.get("ood_auc_reference")), None)
    out = {
        "complete": len(records) == n and bool(records) and records[-1]["task"] == n - 1,
        "n_tasks": n, "last_k": k, "last_k_acc": last_k,
        "final_mean_acc": float(np.nanmean(final)) if not np.isnan(final).all() else float("nan"),
        "first_task_acc": float(R[0, 0]), "just_trained_mean_acc": float(np.nanmean(np.diagonal(R))),
        "mmrr": metrics.mmrr(R) if not np.isnan(R[-1, -1]) else float("nan"),
        "bwt": metrics.bwt(R), "ood_auc": ood, "ood_auc_reference": ood_ref,
        "steps_per_s": steps / train_s if train_s > 0 else float("nan"),
        "train_seconds": train_s, "eval_seconds": sum(r["eval_seconds"] for r in records),
        "memory_bytes": last.get("memory_bytes"), "state_bytes": last.get("state_bytes"),
        "examples_seen": last.get("examples_seen"), "updates_applied": last.get("updates_applied"),
    }
    if last.get("active") is not None:
        out["active"] = last["active"]
    return out


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


def _engine_max_threads() -> int:
    import numba

    return int(numba.config.NUMBA_NUM_THREADS)


def make_method(config: RunConfig, sizes: Sequence[int], seed: int, hparams: dict[str, Any]):
    """``(method, engine used)``: the fused engine when chosen / supported, else the torch method."""
    from bimu.methods import create_method

    if config.engine != "torch":
        supports = create_fused = None
        try:
            engine = importlib.import_module("bimu.engine")
            supports, create_fused = engine.supports, engine.create_fused
        except (ImportError, AttributeError) as e:
            if config.engine == "fused":
                raise RuntimeError(f"--engine fused: the fused engine is not available ({e}); "
                                   "use --engine torch or auto") from None
        if supports is not None and supports(config.method, list(sizes), dict(hparams)):
            # one engine thread per run unless asked (a step split over two threads needs a barrier per
            # step; on a shared machine one run per core is faster); results do not depend on it
            threads = min(int(config.threads), _engine_max_threads())
            return create_fused(config.method, list(sizes), seed, dict(hparams), threads=threads), "fused"
        if config.engine == "fused":
            raise ValueError(f"--engine fused does not support method {config.method!r} with sizes {list(sizes)} "
                             "and these hyperparameters; use --engine torch or auto")
    return create_method(config.method, list(sizes), seed, **hparams), "torch"


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


def resolved_config(config: RunConfig, sizes, preset, hparams, note, engine) -> dict[str, Any]:
    """What ``config.json`` holds: the config plus everything resolved from it."""
    d = config.to_dict()
    d["hidden"] = list(config.hidden_widths())  # None (benchmark default) resolved, so both spellings resume
    return {**d, "resolved": {"sizes": list(sizes), "preset": preset, "hparams": dict(hparams),
                                             "note": note, "engine": engine}}


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
    resolved = resolved_config(config, sizes, preset, hparams, note, engine)
    if rd.exists(CONFIG):
        old = rd.read_json(CONFIG)
        # preset and overrides are compared through the resolved hyperparameters
        skip = ("resolved", "preset", "overrides", *_non_semantic())
        old_sem = {k: v for k, v in old.items() if k not in skip}
        new_sem = {k: v for k, v in _roundtrip(resolved).items() if k not in skip}
        if old_sem != new_sem or not same_hparams(old.get("resolved", {}).get("hparams"), _roundtrip(hparams),
                                                  method.hyperparameters):
            diff = sorted(k for k in set(old_sem) | set(new_sem) if old_sem.get(k) != new_sem.get(k))
            raise ValueError(f"{rd.path} holds a run with a different configuration (differs in {diff or ['hparams']}); "
                             "use another --out or remove that directory")
        if old.get("resolved", {}).get("engine") not in (None, engine) and rd.exists("checkpoint.pt"):
            raise ValueError(f"{rd.path} was run with engine {old['resolved']['engine']!r}, now {engine!r}; "
                             "pass --engine to match or use another --out")
        if rd.exists(SUMMARY) and rd.read_json(SUMMARY).get("complete"):
            log(f"seed {seed}: already complete in {rd.path}")
            return {"R": rd.read_matrix(), "records": rd.read_metrics(), "summary": rd.read_json(SUMMARY),
                    "run_dir": str(rd.path), "skipped": True}
    if note:
        log(f"note: {note}")
    rd.acquire_lock()
    try:
        return _run_locked(config, seed, rd, bench, method, engine, learner, resolved, preset, progress, log,
                           on_task_end)
    finally:
        rd.release_lock()


def _run_locked(config, seed, rd, bench, method, engine, learner, resolved, preset, progress, log, on_task_end):
    rd.write_json(CONFIG, resolved)
    rd.write_json(ENVIRONMENT, environment_info(seed, {"engine": engine, "threads": config.threads,
                                                       "resumed": rd.exists("checkpoint.pt")}))
    result = run_stream(bench, method, config.schedule, seed=seed, n_tasks=config.tasks or bench.n_tasks, run_dir=rd,
                        progress=progress, learner=learner, batch_size=config.batch_size,
                        eval_batch_size=config.eval_batch_size, eval_samples=config.eval_samples,
                        ood=config.ood, ood_every=config.ood_every, ood_scores=config.ood_scores,
                        train_limit=config.train_limit, test_limit=config.test_limit, log=log,
                        on_task_end=on_task_end)
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
    active-learning availability. Raises ValueError / FileNotFoundError / RuntimeError naming the problem."""
    config.validate()
    preset, hparams, _ = config.resolve_hparams()
    bench = make_benchmark(config, config.seeds[0])
    sizes = [bench.n_features, *config.hidden_widths(), bench.n_classes]
    make_method(config, sizes, config.seeds[0], hparams)
    if config.active is not None:
        make_acquisition(config)


def run_experiment(config: RunConfig, *, progress: bool | None = None, log=None,
                   on_task_end=None) -> tuple[dict[int, dict[str, Any]], int]:
    """Run every seed of ``config``; returns ``(results by seed, exit code)``.

    Exit code 0 if every seed completed, 1 if any failed (its traceback is in ``error.txt`` of its
    directory and the other seeds still ran). A KeyboardInterrupt stops the run (completed tasks stay
    checkpointed) and propagates.
    """
    log = log or (lambda s: print(s, file=sys.stderr, flush=True))
    torch.set_num_threads(config.threads)
    preflight(config)
    results: dict[int, dict[str, Any]] = {}
    failed = []
    for seed in config.seeds:
        try:
            results[seed] = run_seed(config, seed, progress=progress, log=log, on_task_end=on_task_end)
        except KeyboardInterrupt:
            log(f"seed {seed}: interrupted; completed tasks are checkpointed, run the same command to resume")
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


def is_finite(v) -> bool:
    """Whether ``v`` is a finite number."""
    return isinstance(v, (int, float)) and math.isfinite(v)

"""BiMU (or any registered method) on your own stream from Python: :func:`fit_stream`.

The data may be given as

- arrays or tensors ``(x, y)``: one task, or several with ``task_train`` / ``task_test`` (a task index
  per row, as in a ``.npz`` for ``bimu run``, :mod:`bimu.data.own`);
- a list with one entry per task, each ``(x, y)``, a ``torch.utils.data.Dataset`` of ``(x, y)``
  examples, a ``DataLoader`` or any iterable of ``(x, y)`` batches or examples;
- a single ``Dataset``, ``DataLoader`` or iterable: one task;
- streams with task ids, as Avalanche and CapyMOA hand them out: ``(x, y, t)`` arrays, or a
  ``Dataset``, ``DataLoader`` or iterable of ``(x, y, t)`` examples or batches (``t`` any hashable
  id, or a ``[batch]`` tensor of them). The stream is one task per id, in the order the ids first
  appear, each task's examples in the order given; the test data's ids name the same tasks (an id
  the training stream lacks is an error; tasks given as a list are named 0, 1, ...). In a list of
  tasks, each entry may yield triples with one id throughout (the entry's place in the list is its
  task, whatever its id: Avalanche's class-incremental experiences all have task id 0).

Inputs with more than one feature axis (images) are flattened per example. The stream is the order
given; the checks of :func:`bimu.data.own.own_benchmark` (shapes, NaN/inf, labels, empty tasks) run
before any training. The method is built on the fused engine when it supports it (``engine="auto"``),
with the hyperparameters ``bimu run FILE.npz`` uses (the paper's Permuted-MNIST preset for BiMU,
overridable by keyword); ``active="vr"`` with a ``threshold`` or ``budget`` learns actively.

>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> x = rng.normal(size=(200, 4)).astype(np.float32); y = (x[:, 0] > 0).astype(np.int64)
>>> result = fit_stream((x[:150], y[:150]), (x[150:], y[150:]), method="sgd", hidden=[8], engine="torch",
...                     lr=0.05)
>>> result.accuracy.shape, result.summary["n_tasks"], bool(result.accuracy[0, 0] > 0.8)
((1, 1), 1, True)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from bimu.data.own import OwnBenchmark, own_benchmark
from bimu.experiments.config import RunConfig
from bimu.experiments.runner import make_learner, make_method, resolved_config
from bimu.experiments.schedule import DEFAULT_ALL_MAX, PREQUENTIAL_EVERY
from bimu.experiments.stream import run_stream


@dataclasses.dataclass
class StreamResult:
    """What :func:`fit_stream` returns.

    Attributes:
        accuracy: the accuracy matrix ``R[i, j]``, accuracy on task ``j`` after training task ``i``
            (NaN where not evaluated), fractions in [0, 1].
        summary: the run's metrics (``final_mean_acc``, ``last_k_acc``, ``bwt``, ``mmrr``,
            ``first_task_acc``, ``ood_auc`` with ``x_ood``, ``active`` counters, ``steps_per_s``...).
        records: one dict per task (the ``metrics.jsonl`` rows of ``bimu run``).
        method: the trained method (``predict_proba``, ``state_dict``...).
        learner: the active learner in active mode, else ``None``.
        engine: ``"fused"`` or ``"torch"``.
        prequential: the test-then-train curve (:mod:`bimu.experiments.prequential`), numpy arrays
            ``example`` (global index of each predicted training example), ``task`` (from 1), ``correct``
            (0/1) and ``window_acc`` (accuracy of the last ``window`` predictions), as ``prequential.csv``
            holds it; ``None`` with ``prequential_every=0``. ``summary["prequential_acc"]`` is its mean.

    :meth:`to_frame` gives the matrix, the task records or the summary as a pandas DataFrame; in a
    notebook the result shows as a table (``_repr_html_``: the summary and the matrix in %).
    """

    accuracy: np.ndarray
    summary: dict[str, Any]
    records: list[dict[str, Any]]
    method: Any
    learner: Any = None
    engine: str = "torch"
    prequential: dict[str, Any] | None = None

    def to_frame(self, what: str = "accuracy"):
        """A pandas DataFrame (pandas must be installed) of ``what``:

        - ``"accuracy"``: the accuracy matrix, one row per task trained (index ``trained``), one column per
          task evaluated (``task``), fractions, NaN where not evaluated; 0-based task indices, so
          ``frame.loc[i, j] == accuracy[i, j]``;
        - ``"tasks"``: one row per task record (its numbers, flattened as in ``metrics.csv``: ``task``
          0-based, ``task_number`` from 1, ``acc_task_J`` with J from 1);
        - ``"summary"``: one row, the summary's numbers (``ood_auc.epistemic``, ``active.asked``...);
        - ``"prequential"``: one row per test-then-train prediction (:attr:`prequential`).
        """
        try:
            import pandas as pd
        except ModuleNotFoundError:
            raise ModuleNotFoundError("StreamResult.to_frame needs pandas (pip install pandas)",
                                      name="pandas") from None
        from bimu.experiments.tracking import scalars

        if what == "accuracy":
            n = self.accuracy.shape[0]
            return pd.DataFrame(self.accuracy, index=pd.RangeIndex(n, name="trained"),
                                columns=pd.RangeIndex(self.accuracy.shape[1], name="task"))
        if what == "tasks":
            rows = [scalars(r) for r in self.records]
            return pd.DataFrame([{"task": int(r.pop("task")), "task_number": int(rec["task"]) + 1, **r}
                                 for r, rec in zip(rows, self.records)]).set_index("task")
        if what == "summary":
            return pd.DataFrame([scalars(self.summary)])
        if what == "prequential":
            return pd.DataFrame({k: v for k, v in (self.prequential or {}).items() if k != "window"},
                                columns=["example", "task", "correct", "window_acc"])
        raise ValueError(f"to_frame: what is 'accuracy', 'tasks', 'summary' or 'prequential', got {what!r}")

    def _repr_html_(self) -> str:
        """The summary and the accuracy matrix (%) as HTML, for notebooks (tasks numbered from 1 here)."""
        import html

        def pct(v) -> str:
            return "" if v is None or not np.isfinite(v) else f"{100 * v:.2f}"

        s = self.summary
        head = (f"<p><b>{html.escape(type(self.method).__name__)}</b> ({html.escape(self.engine)} engine), "
                f"{s.get('n_tasks')} task(s): final mean accuracy {pct(s.get('final_mean_acc'))}%, "
                f"last-{s.get('last_k')} {pct(s.get('last_k_acc'))}%, BWT {pct(s.get('bwt'))} points, "
                f"{s.get('steps_per_s', float('nan')):.0f} steps/s</p>")
        n = self.accuracy.shape[1]
        rows = ["<tr><th>after task</th>" + "".join(f"<th>task {j + 1}</th>" for j in range(n)) + "</tr>"]
        for i, row in enumerate(self.accuracy):
            rows.append(f"<tr><th>{i + 1}</th>" + "".join(f"<td>{pct(v)}</td>" for v in row) + "</tr>")
        return head + "<table><caption>accuracy (%)</caption>" + "".join(rows) + "</table>"


def _is_array(a) -> bool:
    return isinstance(a, (np.ndarray, torch.Tensor))


def _numpy(a) -> np.ndarray:
    return a.detach().cpu().numpy() if isinstance(a, torch.Tensor) else np.asarray(a)


def _flat(x: np.ndarray, n: int) -> np.ndarray:
    return x.reshape(n, -1) if x.ndim > 2 and n else x


def _one_task(data, what: str) -> tuple[np.ndarray, np.ndarray, list | None]:
    """``(x [n, d], y [n], task ids [n] or None)`` of data given in any of the module's forms: ``(x, y)``
    or ``(x, y, t)`` arrays, or a Dataset / DataLoader / iterable of pairs or triples (examples or batches)."""
    if isinstance(data, tuple) and len(data) in (2, 3) and _is_array(data[0]):
        x, y = _numpy(data[0]), _numpy(data[1])
        t = None if len(data) == 2 else _numpy(data[2]).reshape(-1).tolist()
        if t is not None and len(t) != len(y):
            raise ValueError(f"{what}: {len(t)} task ids for {len(y)} labels")
        return _flat(x, len(x)), y, t
    is_dataset = hasattr(data, "__getitem__") and hasattr(data, "__len__") and not isinstance(
        data, (torch.utils.data.DataLoader, list, tuple, dict, str))
    items = (data[i] for i in range(len(data))) if is_dataset else data
    try:
        iterator = iter(items)
    except TypeError:
        raise ValueError(f"{what}: expected (x, y) or (x, y, t) arrays, a Dataset, a DataLoader or an iterable of "
                         f"(x, y) or (x, y, t), got {type(data).__name__}") from None
    xs, ys, ts, width = [], [], [], None
    for i, item in enumerate(iterator):
        if not (isinstance(item, (tuple, list)) and len(item) in (2, 3)):
            raise ValueError(f"{what}: item {i} is not an (x, y) pair or an (x, y, t) triple "
                             f"(got {type(item).__name__})")
        if width is not None and len(item) != width:
            raise ValueError(f"{what}: item {i} has {len(item)} fields, the items before it {width}")
        width = len(item)
        x, y = torch.as_tensor(item[0]), torch.as_tensor(item[1])
        if y.ndim == 0:  # one example
            x, y = x.unsqueeze(0), y.reshape(1)
        xs.append(x.reshape(len(y), -1))
        ys.append(y)
        if width == 3:
            t = item[2].reshape(-1).tolist() if _is_array(item[2]) else [item[2]]
            ts.extend(t * len(y) if len(t) == 1 else t)
            if len(ts) != sum(len(b) for b in ys):
                raise ValueError(f"{what}: item {i} has {len(t)} task ids for {len(y)} labels")
    if not xs:
        raise ValueError(f"{what}: no examples")
    return torch.cat(xs).numpy(), torch.cat(ys).numpy(), (ts if width == 3 else None)


def _split(x, y, t, order: list, what: str) -> list[tuple[np.ndarray, np.ndarray]]:
    """The rows of each task id of ``order``, in the order given."""
    index = {v: k for k, v in enumerate(order)}
    ids = np.array([index.get(v, -1) for v in t], dtype=np.int64)
    if (ids < 0).any():
        unknown = t[int(np.argmax(ids < 0))]
        raise ValueError(f"{what}: task id {unknown!r} is not a task of the training stream (its tasks: {order})")
    return [(x[ids == k], y[ids == k]) for k in range(len(order))]


def _tasks(data, what: str, order: list | None = None) -> tuple[list[tuple[np.ndarray, np.ndarray]], list]:
    """One ``(x, y)`` per task, and the tasks' ids.

    A list holds one task per entry, named by its place (an entry of triples has one task id
    throughout); anything else is one task (id 0), or with task ids one task per id, in the order of the
    ids' first appearance. Test data with task ids are split by the training stream's ids (``order``)."""
    if isinstance(data, list):
        if not data:
            raise ValueError(f"{what}: an empty list of tasks")
        tasks = []
        for i, entry in enumerate(data):
            x, y, t = _one_task(entry, f"{what}[{i}]")
            if t is not None and len(set(t)) > 1:
                raise ValueError(f"{what}[{i}]: task ids {sorted(set(t), key=str)} in one entry of a list of tasks; "
                                 "give one entry per task, or the whole stream (not in a list)")
            tasks.append((x, y))
        return tasks, list(range(len(data)))
    x, y, t = _one_task(data, what)
    if t is None:
        return [(x, y)], [0]
    order = list(dict.fromkeys(t)) if order is None else order
    return _split(x, y, t, order, what), order


def as_benchmark(train, test, *, task_train=None, task_test=None, x_ood=None, n_classes: int | None = None,
                 name: str = "own") -> OwnBenchmark:
    """The :class:`~bimu.data.own.OwnBenchmark` of ``train`` and ``test`` given in any of the module's
    forms (as many test tasks as training tasks)."""
    tr, order = _tasks(train, "train")
    te, _ = _tasks(test, "test", order)
    if len(tr) != len(te):
        raise ValueError(f"train has {len(tr)} tasks and test {len(te)}; give one test set per task")
    if len(tr) > 1:
        if task_train is not None or task_test is not None:
            raise ValueError("task_train / task_test go with (x, y) arrays, not with a list of tasks or task ids")
        task_train = np.concatenate([np.full(len(y), t, np.int64) for t, (_, y) in enumerate(tr)])
        task_test = np.concatenate([np.full(len(y), t, np.int64) for t, (_, y) in enumerate(te)])
    xtr, ytr = np.concatenate([x for x, _ in tr]), np.concatenate([y for _, y in tr])
    xte, yte = np.concatenate([x for x, _ in te]), np.concatenate([y for _, y in te])
    ood = None if x_ood is None else _one_task((x_ood, np.zeros(len(x_ood))), "x_ood")[0]
    return own_benchmark(xtr, ytr, xte, yte, task_train=task_train, task_test=task_test, x_ood=ood,
                         n_classes=n_classes, name=name)


def fit_stream(train, test, method: str = "bimu", *, hidden: Sequence[int] = (100,), seed: int = 0,
               preset: str = "auto", engine: str = "auto", task_train=None, task_test=None, x_ood=None,
               n_classes: int | None = None, active: str | None = None, threshold: float | None = None,
               budget: float | None = None, budget_exponent: float = 0.5, mc_samples: int = 10,
               batch_size: int = 1, eval_all_every: int = 0, eval_all_max: int = DEFAULT_ALL_MAX,
               eval_samples: int | None = None, prequential_every: int = PREQUENTIAL_EVERY,
               threads: int = 1, progress: bool = False, callbacks: Sequence = (), log_to: Sequence | str = (),
               log_dir=None, **overrides) -> StreamResult:
    """Train ``method`` online on your stream, task after task, and evaluate it; see the module docs.

    ``hidden``: hidden widths (``[]``: a linear head). ``preset``: ``"auto"`` (the paper's Permuted-MNIST
    preset for the width), ``"none"`` (the method's defaults) or a preset key; ``overrides``: method
    hyperparameters by name (e.g. ``memory_window=700``). ``engine``: ``"auto"``, ``"fused"`` or
    ``"torch"``. ``active``: an acquisition of :func:`bimu.active.make_acquisition` (``"vr"``,
    ``"entropy"``, ``"random"``...) with ``threshold`` or ``budget``. Evaluation, the same default as
    ``bimu run``: every seen task after every task for streams of up to ``eval_all_max`` tasks (100: the
    full accuracy matrix), else the current task after each task and the final row; ``eval_all_every``
    K also evaluates every seen task every K tasks (1: the full matrix at any length). ``x_ood``: OOD
    inputs for the OOD ROC-AUC of the uncertainty scores. The same arguments and seed give the same result.

    ``prequential_every``: the test-then-train prediction of every this-many-th training example (an
    active learner's of every example; 0: none), in :attr:`StreamResult.prequential`, the records and the
    summary (:mod:`bimu.experiments.prequential`); it changes no other result.

    ``threads``: torch's thread count while the stream runs (and the fused engine's), restored after it
    (1 by default, as ``bimu run --threads``: one core per run; results do not depend on it).

    ``callbacks``: objects with an ``on_step(info)`` and/or an ``on_task_end(info)`` method, called after
    every step (info: ``task``, ``step``, ``global_step``, ``asked``, ``method``) and after every task is
    learned and evaluated (info: ``task``, ``n_tasks``, ``record``, ``accuracy`` so far, ``method``);
    :mod:`bimu.experiments.callbacks`. They do not change the results; an ``on_step`` makes the fused
    engine learn one step per call (slower). Tasks are 0-based there, as in ``records``.

    ``log_to``: the sinks of ``bimu run --log-to`` (``"csv"``, ``"tensorboard"``, ``"mlflow"``, as a list
    or comma-separated; or :class:`~bimu.experiments.tracking.Sink` objects): ``csv`` writes
    ``log_dir/metrics.csv`` and ``tensorboard`` ``log_dir/tensorboard/`` (both need ``log_dir``);
    ``mlflow`` logs the run's configuration and metrics to MLflow's store and prints where it is.
    """
    from bimu.experiments.callbacks import Callbacks

    if isinstance(log_to, str):
        log_to = [n.strip() for n in log_to.split(",") if n.strip()]
    names = [s for s in log_to if isinstance(s, str)]
    for n in names:
        if n in ("csv", "tensorboard") and log_dir is None:
            raise ValueError(f"log_to {n} writes its files into a folder: pass log_dir")
    Callbacks(callbacks, None)  # a bad callback fails here, before anything runs
    config = RunConfig(benchmark="npz", method=method, hidden=tuple(hidden), seeds=(seed,), preset=preset,
                       overrides=overrides, engine=engine, threads=threads, active=active, threshold=threshold,
                       budget=budget, budget_exponent=budget_exponent, mc_samples=mc_samples,
                       batch_size=batch_size, eval_all_every=eval_all_every, eval_all_max=eval_all_max,
                       eval_samples=eval_samples, prequential_every=prequential_every,
                       log_to=tuple(names)).validate()
    bench = as_benchmark(train, test, task_train=task_train, task_test=task_test, x_ood=x_ood, n_classes=n_classes)
    preset_key, hparams, note = config.resolve_hparams()
    sizes = [bench.n_features, *config.hidden_widths(), bench.n_classes]
    before = torch.get_num_threads()
    torch.set_num_threads(config.threads)  # as bimu run does; put back below
    try:
        model, used = make_method(config, sizes, seed, hparams)
        learner = make_learner(model, config)
        sinks = _sinks(names, log_dir, config, resolved_config(config, sizes, preset_key, hparams, note, used))
        out = run_stream(bench, model, config.schedule, seed=seed, n_tasks=bench.n_tasks, learner=learner,
                         progress=progress, batch_size=batch_size, eval_samples=eval_samples, ood=x_ood is not None,
                         sinks=[*sinks, *(s for s in log_to if not isinstance(s, str))], callbacks=callbacks,
                         prequential_every=config.prequential_every)
    finally:
        torch.set_num_threads(before)
    return StreamResult(accuracy=out["R"], summary=out["summary"], records=out["records"], method=model,
                        learner=learner, engine=used, prequential=out["prequential"])


def _sinks(names, log_dir, config: RunConfig, resolved) -> list:
    """The sinks named in ``log_to`` (:func:`~bimu.experiments.tracking.make_sinks`) writing into ``log_dir``."""
    from bimu.experiments.tracking import flat_params, make_sinks

    if not names:
        return []
    if log_dir is not None:
        from pathlib import Path

        Path(log_dir).mkdir(parents=True, exist_ok=True)
    return make_sinks(names, log_dir, run_name=f"fit_stream/{config.method}-seed-{config.seeds[0]}",
                      params=flat_params(resolved))

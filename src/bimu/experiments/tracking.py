"""Where a run's results go besides its run directory: Python ``logging`` and optional sinks.

A sink receives the stream's moments: :meth:`Sink.task_end` after each completed task (the record that
``metrics.jsonl`` gets, and the accuracy matrix so far), :meth:`Sink.run_end` with the summary, then
:meth:`Sink.close`. Every run logs each task record to the ``bimu`` logger (:class:`LoggingSink`, level
INFO, the record in ``extra={"bimu_record": ...}``); ``bimu run --log-to csv,tensorboard,mlflow`` or
``run_stream(..., sinks=[...])`` adds:

- ``csv``: ``metrics.csv`` in the run directory, one row per task (always available): the numbers of
  the task's ``metrics.jsonl`` record, ``task`` 0-based as there, ``task_number`` the same task from 1 as
  the console and the plots number it, ``acc_task_J`` the accuracy on task number J (from 1);
- ``tensorboard``: event files in ``RUN_DIR/tensorboard`` (needs the ``tensorboard`` package);
- ``mlflow``: one MLflow run per seed in the tracking store MLflow is configured with (needs ``mlflow``),
  with the run's configuration as parameters (:func:`flat_params`); it prints where that store is
  (``$MLFLOW_TRACKING_URI``, else MLflow's default: ``mlflow.db`` in the working directory).

A sink whose package is missing is refused before the run starts, naming the package.

>>> sinks = make_sinks(["csv"], run_dir=None)
Traceback (most recent call last):
...
ValueError: --log-to csv writes RUN_DIR/metrics.csv: it needs a run directory
"""

from __future__ import annotations

import csv
import importlib.util
import io
import logging
import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bimu.experiments.config import LOG_SINKS as SINKS  # the names ``--log-to`` accepts
PACKAGES = {"tensorboard": "tensorboard", "mlflow": "mlflow"}
"""The package each optional sink needs."""

logger = logging.getLogger("bimu")


class Sink:
    """The interface: override what the sink needs (each method does nothing by default)."""

    def task_end(self, record: Mapping[str, Any], R: np.ndarray) -> None:
        """Task ``record["task"]`` is complete (``record`` as in ``metrics.jsonl``; ``R`` the matrix so far)."""

    def run_end(self, summary: Mapping[str, Any], R: np.ndarray) -> None:
        """The stream is complete (``summary`` as in ``summary.json``)."""

    def close(self) -> None:
        """Release files or connections (called once, also after a failure)."""


def scalars(record: Mapping[str, Any]) -> dict[str, float]:
    """The numeric entries of a task record or summary, flattened (``ood_auc.epistemic``, ``active.asked``...);
    ``evaluated`` becomes ``acc_task_J`` (tasks from 1).

    >>> scalars({"task": 1, "acc": 0.5, "evaluated": {"0": 0.25}, "ood_auc": {"epistemic": 0.75}, "x": None})
    {'task': 1.0, 'acc': 0.5, 'acc_task_1': 0.25, 'ood_auc.epistemic': 0.75}
    """
    out: dict[str, float] = {}
    for k, v in record.items():
        if k == "evaluated" and isinstance(v, Mapping):
            out.update({f"acc_task_{int(j) + 1}": float(a) for j, a in v.items() if _number(a)})
        elif isinstance(v, Mapping):
            out.update({f"{k}.{kk}": float(vv) for kk, vv in v.items() if _number(vv)})
        elif _number(v):
            out[k] = float(v)
    return out


def flat_params(config: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """A run's configuration (``config.json``: the config and what was resolved from it) as MLflow
    parameters: nested mappings flattened with dotted keys, every value as text.

    >>> flat_params({"method": "bimu", "hidden": [100], "resolved": {"hparams": {"lr": 4.9}, "note": ""}})
    {'method': 'bimu', 'hidden': '[100]', 'resolved.hparams.lr': '4.9', 'resolved.note': ''}
    """
    out: dict[str, str] = {}
    for k, v in config.items():
        if isinstance(v, Mapping):
            out.update(flat_params(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = str(v)
    return out


def store_location(uri: str) -> str:
    """Where an MLflow tracking URI keeps its runs: the absolute path of a local SQLite database or file
    store, else the URI with any password hidden.

    >>> store_location("sqlite:////tmp/runs/mlflow.db"), store_location("postgresql://u:pw@db/mlflow")
    ('/tmp/runs/mlflow.db', 'postgresql://u:***@db/mlflow')
    """
    from bimu.redact import redact_url

    for scheme in ("sqlite:///", "file://"):
        if uri.startswith(scheme):
            return str(Path(uri[len(scheme):]).resolve())
    return str(Path(uri).resolve()) if "://" not in uri else str(redact_url(uri))


def _number(v) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool) and np.isfinite(v)


class LoggingSink(Sink):
    """Each task record and the summary to the ``bimu`` logger (INFO)."""

    def __init__(self, name: str = ""):
        self.name = name

    def task_end(self, record, R):
        logger.info("%stask %d: acc %.4f", self.name and self.name + " ", int(record["task"]) + 1,
                    float(record["acc"]), extra={"bimu_record": dict(record)})

    def run_end(self, summary, R):
        logger.info("%srun complete: final mean acc %.4f", self.name and self.name + " ",
                    float(summary.get("final_mean_acc", float("nan"))), extra={"bimu_summary": dict(summary)})


class CSVSink(Sink):
    """``path`` rewritten atomically after each task: one row per task record, columns :func:`scalars`
    (a resumed run keeps the rows of the tasks before it)."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.rows: list[dict[str, float]] = []
        if self.path.is_file():
            with self.path.open(newline="", encoding="utf-8") as f:
                self.rows = [{k: float(v) for k, v in row.items() if v not in ("", None)} for row in csv.DictReader(f)]

    def task_end(self, record, R):
        row = scalars(record)
        row = {"task": row.pop("task"), "task_number": float(record["task"]) + 1, **row}  # 0-based and from 1
        self.rows = [r for r in self.rows if r.get("task", -1) < float(record["task"])] + [row]
        columns = list(dict.fromkeys(k for r in self.rows for k in r))
        buf = io.StringIO()
        w = csv.DictWriter(buf, columns, lineterminator="\n")
        w.writeheader()
        w.writerows(self.rows)
        from bimu.atomic import atomic_write_text

        atomic_write_text(self.path, buf.getvalue())


class TensorBoardSink(Sink):
    """Scalars per task (step = tasks completed) to event files in ``log_dir``."""

    def __init__(self, log_dir: str | os.PathLike):
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(log_dir=str(log_dir))

    def task_end(self, record, R):
        for k, v in scalars(record).items():
            self.writer.add_scalar(k, v, global_step=int(record["task"]) + 1)
        self.writer.flush()

    def run_end(self, summary, R):
        for k, v in scalars(summary).items():
            self.writer.add_scalar(f"summary/{k}", v, global_step=int(R.shape[0]))
        self.writer.flush()

    def close(self):
        self.writer.close()


class MLflowSink(Sink):
    """One MLflow run: ``params`` logged at the start, metrics per task (step = tasks completed), the
    summary as ``summary.*`` metrics at the end."""

    def __init__(self, run_name: str, params: Mapping[str, Any] | None = None):
        import mlflow

        self.mlflow = mlflow
        self.run = mlflow.start_run(run_name=run_name)
        print(f"mlflow: run {run_name} ({self.run.info.run_id}) logged to {store_location(mlflow.get_tracking_uri())}"
              " (set MLFLOW_TRACKING_URI to change it)", file=sys.stderr, flush=True)
        if params:
            mlflow.log_params({k: str(v)[:500] for k, v in params.items()})

    def task_end(self, record, R):
        self.mlflow.log_metrics(scalars(record), step=int(record["task"]) + 1)

    def run_end(self, summary, R):
        self.mlflow.log_metrics({f"summary.{k}": v for k, v in scalars(summary).items()}, step=int(R.shape[0]))

    def close(self):
        self.mlflow.end_run()


def check_sinks(names: Iterable[str]) -> list[str]:
    """``names`` checked: known, and their packages installed; ValueError naming the problem."""
    names = list(names)
    for n in names:
        if n not in SINKS:
            raise ValueError(f"--log-to {n}: unknown sink; choose from {', '.join(SINKS)}")
        pkg = PACKAGES.get(n)
        if pkg and importlib.util.find_spec(pkg) is None:
            raise ValueError(f"--log-to {n} needs the '{pkg}' package, which is not installed (pip install {pkg})")
    return names


def make_sinks(names: Sequence[str], run_dir: str | os.PathLike | None, run_name: str = "bimu",
               params: Mapping[str, Any] | None = None) -> list[Sink]:
    """The sinks named (see the module docs) for one seed's run in ``run_dir``."""
    out: list[Sink] = []
    for n in check_sinks(names):
        if n in ("csv", "tensorboard") and run_dir is None:
            where = "metrics.csv" if n == "csv" else "tensorboard/"
            raise ValueError(f"--log-to {n} writes RUN_DIR/{where}: it needs a run directory")
        if n == "csv":
            out.append(CSVSink(Path(run_dir) / "metrics.csv"))
        elif n == "tensorboard":
            out.append(TensorBoardSink(Path(run_dir) / "tensorboard"))
        else:
            out.append(MLflowSink(run_name, params))
    return out

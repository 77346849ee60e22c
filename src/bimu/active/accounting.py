"""Per-run accounting of an active stream: labels, backward passes, weight writes, forward passes.

:class:`Accounting` also keeps the query decision of every example (and its task) so that the query
fraction over time and the paper's querying-dynamics table (share of a task's updates in its first
quarter, middle half and last quarter) can be computed.

>>> a = Accounting()
>>> for asked in [1, 1, 0, 0, 1, 0, 0, 0]:
...     a.record_prediction(bool(asked), forward_passes=10, task=0)
>>> a.record_update(); a.record_update(); a.record_update()
>>> d = a.as_dict(); d["labels_queried"], d["forward_passes"], d["examples_seen"], d["query_fraction"]
(3, 80, 8, 0.375)
>>> a.task_quarters()[0]["first_quarter"], a.task_quarters()[0]["last_quarter"]
(0.6666666666666666, 0.0)
"""

from __future__ import annotations

import numpy as np


_COUNTERS = ("labels_queried", "backward_passes", "weight_writes", "forward_passes", "examples_seen")


class Accounting:
    """Counters of one active run, and the per-example query record."""

    def __init__(self):
        self.labels_queried = 0
        self.backward_passes = 0
        self.weight_writes = 0
        self.forward_passes = 0
        self.examples_seen = 0
        self._asked: list[bool] = []
        self._task: list[int] = []

    def record_prediction(self, asked: bool, forward_passes: int, task: int | None = None) -> None:
        """One example went through ``predict_one`` (``forward_passes`` MC forward passes)."""
        self.examples_seen += 1
        self.forward_passes += int(forward_passes)
        self._asked.append(bool(asked))
        self._task.append(-1 if task is None else int(task))

    def record_predictions(self, asked, forward_passes: int, task: int | None = None) -> None:
        """One :meth:`record_prediction` per entry of ``asked`` (bools, in stream order)."""
        asked = [bool(a) for a in asked]
        self.examples_seen += len(asked)
        self.forward_passes += int(forward_passes) * len(asked)
        self._asked.extend(asked)
        self._task.extend([-1 if task is None else int(task)] * len(asked))

    def record_update(self) -> None:
        """One label was given and one update (one backward pass, one weight write) was applied."""
        self.labels_queried += 1
        self.backward_passes += 1
        self.weight_writes += 1

    def record_unpredicted_update(self, task: int | None = None) -> None:
        """An update on an example that did not go through ``predict_one`` (full-stream training)."""
        self.examples_seen += 1
        self._asked.append(True)
        self._task.append(-1 if task is None else int(task))
        self.record_update()

    def record_bulk_updates(self, n: int, task: int | None = None) -> None:
        """``n`` consecutive :meth:`record_unpredicted_update` calls (a whole task learned at once)."""
        n = int(n)
        self.examples_seen += n
        self._asked.extend([True] * n)
        self._task.extend([-1 if task is None else int(task)] * n)
        self.labels_queried += n
        self.backward_passes += n
        self.weight_writes += n

    @property
    def query_fraction(self) -> float:
        """Labels queried / examples seen (0 before any example)."""
        return self.labels_queried / self.examples_seen if self.examples_seen else 0.0

    @property
    def asked(self) -> np.ndarray:
        """Query decision of every example, in stream order (bool)."""
        return np.asarray(self._asked, dtype=bool)

    def query_fraction_series(self, window: int | None = None) -> np.ndarray:
        """Cumulative query fraction after each example, or the moving fraction over ``window`` examples."""
        asked = self.asked.astype(np.float64)
        if asked.size == 0:
            return asked
        if window is None:
            return np.cumsum(asked) / np.arange(1, asked.size + 1)
        window = int(window)
        if window < 1:
            raise ValueError(f"window must be >= 1, got {window}")
        c = np.concatenate([[0.0], np.cumsum(asked)])
        idx = np.arange(1, asked.size + 1)
        lo = np.maximum(idx - window, 0)
        return (c[idx] - c[lo]) / (idx - lo)

    def task_quarters(self) -> dict[int, dict[str, float]]:
        """Per task: queried fraction and the share of its queries in the first quarter (0-24% of
        the task's examples), the middle (25-74%) and the last quarter (75-99%), as in the paper's
        querying-dynamics table."""
        asked, tasks = self.asked, np.asarray(self._task)
        out = {}
        for t in sorted(set(tasks.tolist())):
            a = asked[tasks == t]
            n = a.size
            pos = np.floor(np.arange(n) * 100 / n)  # percentile bucket 0..99
            total = int(a.sum())

            def share(mask):
                return float(a[mask].sum() / total) if total else 0.0

            out[t] = {
                "examples": int(n),
                "queried": total,
                "query_fraction": total / n if n else 0.0,
                "first_quarter": share(pos < 25),
                "middle": share((pos >= 25) & (pos < 75)),
                "last_quarter": share(pos >= 75),
            }
        return out

    def state_dict(self) -> dict:
        """The counters and the per-example record (tensors), for a checkpoint."""
        import torch

        return {"counters": {k: getattr(self, k) for k in _COUNTERS},
                "asked": torch.as_tensor(self._asked, dtype=torch.bool),
                "task": torch.as_tensor(self._task, dtype=torch.int64)}

    def load_state_dict(self, state) -> None:
        """Restore what :meth:`state_dict` saved.

        >>> a = Accounting(); a.record_bulk_updates(3, task=1); b = Accounting(); b.load_state_dict(a.state_dict())
        >>> b.as_dict() == a.as_dict(), b.task_quarters() == a.task_quarters()
        (True, True)
        """
        counters = state["counters"]
        if set(counters) != set(_COUNTERS) or len(state["asked"]) != len(state["task"]):
            raise ValueError("active-learning ledger state is malformed")
        for k in _COUNTERS:
            setattr(self, k, int(counters[k]))
        self._asked = [bool(v) for v in state["asked"].tolist()]
        self._task = [int(v) for v in state["task"].tolist()]

    def as_dict(self) -> dict:
        """The counters and the overall query fraction."""
        return {
            "labels_queried": self.labels_queried,
            "backward_passes": self.backward_passes,
            "weight_writes": self.weight_writes,
            "forward_passes": self.forward_passes,
            "examples_seen": self.examples_seen,
            "query_fraction": self.query_fraction,
        }

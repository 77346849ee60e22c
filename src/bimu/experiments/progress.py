"""The progress display of a stream: tqdm if installed, else a throttled stderr line; off when not a TTY."""

from __future__ import annotations

import sys
import time


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

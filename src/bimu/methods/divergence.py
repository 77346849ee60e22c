"""The divergence guard: a method whose loss or state stops being finite stops with a clear error.

Every method checks the loss of each update before writing it (:meth:`OnlineMethod.guard_loss
<bimu.methods.base.OnlineMethod.guard_loss>`), and its whole state after each compiled chunk of the
fused engine and after each task of a stream (:meth:`OnlineMethod.check_finite
<bimu.methods.base.OnlineMethod.check_finite>`). Both raise :class:`DivergenceError`, whose message
names the method, the task (when known) and what became non-finite; a stream stops before the task is
checkpointed, so the run directory keeps its last good checkpoint.

>>> import torch
>>> nonfinite_entries({"lam": [torch.zeros(2), torch.tensor([1.0, float("nan")])], "step": 3})
['lam[1]']
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import torch

SHOWN = 4
"""Non-finite entries named in a message (the rest are counted)."""


class DivergenceError(RuntimeError):
    """A method's loss, weights or update state became NaN or infinite: ``method`` (its name), ``what``
    (the entries or quantity) and ``task`` (the task being learned, ``None`` where unknown).

    >>> str(DivergenceError("bimu", "lam[0]").during(2))
    "method 'bimu' diverged during task 3: lam[0] became non-finite (NaN or infinite); lower the learning rate or check the inputs' scale"
    """

    def __init__(self, method: str, what: str, task: int | None = None):
        self.method, self.what, self.task = method, what, task
        super().__init__(describe(method, what, task))

    def during(self, task: int) -> DivergenceError:
        """The same error, naming ``task`` (the error itself if it already names one)."""
        return self if self.task is not None else DivergenceError(self.method, self.what, task)


def _walk(obj: Any, name: str) -> Iterator[tuple[str, Any]]:
    if isinstance(obj, Mapping):
        for k, v in obj.items():
            yield from _walk(v, f"{name}.{k}" if name else str(k))
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            yield from _walk(v, f"{name}[{i}]")
    elif isinstance(obj, (torch.Tensor, np.ndarray, float)):
        yield name, obj


def _finite(value: Any) -> bool:
    if isinstance(value, torch.Tensor):
        return not (value.is_floating_point() or value.is_complex()) or bool(torch.isfinite(value).all())
    if isinstance(value, np.ndarray):
        return value.dtype.kind not in "fc" or bool(np.isfinite(value).all())
    return bool(np.isfinite(value))


def nonfinite_entries(state: Any) -> list[str]:
    """Names (dotted keys, ``[i]`` for list items) of the floating tensors, arrays and floats of a nested
    ``state`` that hold a NaN or an infinity, in order."""
    return [name for name, value in _walk(state, "") if not _finite(value)]


def describe(method_name: str, what: str, task: int | None) -> str:
    """The message of a :class:`DivergenceError`."""
    where = "" if task is None else f" during task {task + 1}"
    return (f"method {method_name!r} diverged{where}: {what} became non-finite (NaN or infinite); "
            "lower the learning rate or check the inputs' scale")


def check_state(method_name: str, state: Any, task: int | None = None) -> None:
    """:class:`DivergenceError` naming the non-finite entries of ``state``, if any."""
    bad = nonfinite_entries(state)
    if bad:
        shown = ", ".join(bad[:SHOWN]) + (f" and {len(bad) - SHOWN} more" if len(bad) > SHOWN else "")
        raise DivergenceError(method_name, shown, task)


def check_loss(method_name: str, loss: torch.Tensor, task: int | None = None) -> torch.Tensor:
    """``loss``, after checking it is finite (:class:`DivergenceError` otherwise)."""
    if not bool(torch.isfinite(loss.detach()).all()):
        raise DivergenceError(method_name, f"the training loss ({float(loss.detach().sum())})", task)
    return loss

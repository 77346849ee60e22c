"""The anchored quadratic penalty that Online EWC and Synaptic Intelligence share.

Per protected parameter the penalty keeps an importance ``I``, an anchor ``theta*`` (the parameters at
the last task end) and a running tensor that collects what the current task adds to ``I``::

    R(theta) = k * sum_i I_i (theta_i - theta*_i)^2 ;  dR/dtheta = 2 k I (theta - theta*)

The anchor is the list ``anchor``; a subclass names the importance and running lists
(:attr:`QuadraticPenalty.importance_key`, :attr:`QuadraticPenalty.running_key`) and its integer
counters (:attr:`QuadraticPenalty.counter_keys`), gives ``k`` (:attr:`QuadraticPenalty.penalty_scale`)
and writes how a task is collected and folded into ``I``.

>>> import torch
>>> class Constant(QuadraticPenalty):
...     importance_key, running_key, penalty_scale = "weight", "running", 3.0
>>> p = torch.nn.Parameter(torch.tensor([1.0, 2.0]))
>>> q = Constant([p])
>>> with torch.no_grad(): _ = q.weight[0].fill_(1.0), p.add_(1.0)
>>> q.penalty([p]).item(), q.penalty_gradient([p])[0].tolist()    # 3 * (1 + 1), 2 * 3 * 1 * 1
(6.0, [6.0, 6.0])
>>> list(q.state_dict())
['weight', 'anchor', 'running', 'tasks_seen']
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import torch


class QuadraticPenalty:
    """Importance, anchor and running tensors, one per protected parameter, and the penalty
    ``penalty_scale * sum I (theta - theta*)^2`` with its gradient.

    Args:
        params: the parameters to protect (their order fixes the order of every list here).
    """

    importance_key: ClassVar[str]
    """Attribute name of the importance list ``I``."""
    running_key: ClassVar[str]
    """Attribute name of the list that collects the current task's contribution."""
    counter_keys: ClassVar[tuple[str, ...]] = ("tasks_seen",)
    """Attribute names of the integer counters kept in the state."""
    penalty_scale: float
    """``k`` of the penalty ``k * sum I (theta - theta*)^2``."""

    def __init__(self, params: Sequence[torch.Tensor]):
        params = list(params)
        if not params:
            raise ValueError("params must not be empty")
        importance = [torch.zeros_like(p, memory_format=torch.contiguous_format).detach() for p in params]
        setattr(self, self.importance_key, importance)
        self.anchor = [p.detach().clone(memory_format=torch.contiguous_format) for p in params]
        setattr(self, self.running_key, [torch.zeros_like(t) for t in importance])
        for key in self.counter_keys:
            setattr(self, key, 0)

    @property
    def tensor_keys(self) -> tuple[str, str, str]:
        """Attribute names of the importance, anchor and running lists, in state order."""
        return (self.importance_key, "anchor", self.running_key)

    def _importance(self) -> list[torch.Tensor]:
        return getattr(self, self.importance_key)

    def _check(self, tensors: Sequence[torch.Tensor], what: str) -> list[torch.Tensor]:
        tensors = list(tensors)
        importance = self._importance()
        if len(tensors) != len(importance) or any(t.shape != i.shape for t, i in zip(tensors, importance)):
            raise ValueError(f"{what} must match the protected parameters' shapes")
        return tensors

    def penalty(self, params: Sequence[torch.Tensor]) -> torch.Tensor:
        """``k * sum I (theta - theta*)^2`` (differentiable in ``params``)."""
        params = self._check(params, "params")
        pairs = zip(params, self.anchor, self._importance())
        return self.penalty_scale * sum(((p - a).pow(2) * i).sum() for p, a, i in pairs)

    @torch.no_grad()
    def penalty_gradient(self, params: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        """``dR/dtheta = 2 k I (theta - theta*)``."""
        params = self._check(params, "params")
        scale = 2.0 * self.penalty_scale
        return [scale * i * (p - a) for p, a, i in zip(params, self.anchor, self._importance())]

    def tensors(self) -> list[torch.Tensor]:
        """Every persistent tensor (importance, anchor, running), for memory accounting."""
        return [t for key in self.tensor_keys for t in getattr(self, key)]

    def to(self, device: torch.device | str):
        """Move every persistent tensor to ``device``; returns ``self``."""
        for key in self.tensor_keys:
            setattr(self, key, [t.to(device) for t in getattr(self, key)])
        return self

    def state_dict(self) -> dict[str, Any]:
        """Copies of the importance, anchor and running tensors, and the counters."""
        state: dict[str, Any] = {key: [t.clone() for t in getattr(self, key)] for key in self.tensor_keys}
        state.update((key, getattr(self, key)) for key in self.counter_keys)
        return state

    @torch.no_grad()
    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Inverse of :meth:`state_dict`."""
        for key in self.tensor_keys:
            for dst, src in zip(getattr(self, key), self._check(state[key], key)):
                dst.copy_(src)
        for key in self.counter_keys:
            setattr(self, key, int(state[key]))

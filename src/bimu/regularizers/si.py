"""Synaptic Intelligence (Zenke, Poole & Ganguli, ICML 2017).

While a task is learned, each parameter's contribution to the decrease of the loss is integrated
along the parameter trajectory (Zenke et al. Eq. 3, discretised per update)::

    omega_i += -g_i * Delta theta_i

with ``g`` the gradient of the data loss (without the penalty) at the step and ``Delta theta`` the
change the step applied. At the end of task ``mu`` the importance grows by the normalised path
integral (Eq. 5) and the anchor moves::

    Omega_i += omega_i / ((theta_i - theta*_i)^2 + xi) ;  omega <- 0 ;  theta* <- theta

and the penalty (Eq. 4) is ``c * sum_i Omega_i (theta_i - theta*_i)^2`` (the paper's table calls
``c`` "Coeff." and ``xi`` "damping"). ``omega_relu=True`` clips each task's increment at 0, as the
paper's reference run did (a compatibility option, not in Zenke et al.).

>>> import torch
>>> p = torch.nn.Parameter(torch.tensor([0.0, 0.0]))
>>> si = SynapticIntelligence([p], coefficient=1.0, damping=1.0)
>>> si.accumulate([torch.tensor([-2.0, 1.0])], [torch.tensor([1.0, 1.0])])   # omega = [2, -1]
>>> with torch.no_grad(): _ = p.add_(torch.tensor([1.0, 1.0]))
>>> si.task_end([p]); si.omega[0].tolist()                                   # [2/(1+1), -1/(1+1)]
[1.0, -0.5]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from bimu.optim._checks import check_number


class SynapticIntelligence:
    """Synaptic Intelligence as a penalty with path-integral / task-end hooks.

    Args:
        params: the parameters to protect.
        coefficient: ``c`` (>= 0).
        damping: ``xi`` (> 0).
        omega_relu: clip each task's importance increment at 0 (reference-run compatibility).
    """

    def __init__(self, params: Sequence[torch.Tensor], coefficient: float, damping: float, omega_relu: bool = False):
        self.coefficient = check_number("coefficient", coefficient, low=0)
        self.damping = check_number("damping", damping, low=0, low_inclusive=False)
        self.omega_relu = bool(omega_relu)
        params = list(params)
        if not params:
            raise ValueError("params must not be empty")
        self.omega = [torch.zeros_like(p, memory_format=torch.contiguous_format).detach() for p in params]
        self.anchor = [p.detach().clone(memory_format=torch.contiguous_format) for p in params]
        self.path_integral = [torch.zeros_like(o) for o in self.omega]
        self.tasks_seen = 0

    def _check(self, tensors: Sequence[torch.Tensor], what: str) -> list[torch.Tensor]:
        tensors = list(tensors)
        if len(tensors) != len(self.omega) or any(t.shape != o.shape for t, o in zip(tensors, self.omega)):
            raise ValueError(f"{what} must match the protected parameters' shapes")
        return tensors

    def penalty(self, params: Sequence[torch.Tensor]) -> torch.Tensor:
        """``c * sum Omega (theta - theta*)^2`` (differentiable in ``params``)."""
        params = self._check(params, "params")
        return self.coefficient * sum(((p - a).pow(2) * o).sum() for p, a, o in zip(params, self.anchor, self.omega))

    @torch.no_grad()
    def penalty_gradient(self, params: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        """``dR/dtheta = 2 c Omega (theta - theta*)``."""
        params = self._check(params, "params")
        return [2.0 * self.coefficient * o * (p - a) for p, a, o in zip(params, self.anchor, self.omega)]

    @torch.no_grad()
    def accumulate(self, data_grads: Sequence[torch.Tensor], deltas: Sequence[torch.Tensor]) -> None:
        """``omega += -g * Delta theta`` for one update."""
        for w, g, d in zip(self.path_integral, self._check(data_grads, "data_grads"), self._check(deltas, "deltas")):
            w.sub_(g * d)

    @torch.no_grad()
    def task_end(self, params: Sequence[torch.Tensor]) -> None:
        """``Omega += omega / ((theta - theta*)^2 + xi)``, then ``omega <- 0`` and ``theta* <- theta``."""
        params = self._check(params, "params")
        for o, w, a, p in zip(self.omega, self.path_integral, self.anchor, params):
            increment = w / ((p - a).pow(2) + self.damping)
            if self.omega_relu:
                increment = increment.clamp_min(0.0)
            o.add_(increment)
            w.zero_()
            a.copy_(p)
        self.tasks_seen += 1

    def tensors(self) -> list[torch.Tensor]:
        """Every persistent tensor (Omega, anchor, running path integral), for memory accounting."""
        return [*self.omega, *self.anchor, *self.path_integral]

    def to(self, device: torch.device | str):
        """Move every persistent tensor to ``device``; returns ``self``."""
        for key in ("omega", "anchor", "path_integral"):
            setattr(self, key, [t.to(device) for t in getattr(self, key)])
        return self

    def state_dict(self) -> dict[str, Any]:
        """Copies of Omega, the anchor and the path integral, and the task counter."""
        return {"omega": [t.clone() for t in self.omega], "anchor": [t.clone() for t in self.anchor],
                "path_integral": [t.clone() for t in self.path_integral], "tasks_seen": self.tasks_seen}

    @torch.no_grad()
    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Inverse of :meth:`state_dict`."""
        for key in ("omega", "anchor", "path_integral"):
            for dst, src in zip(getattr(self, key), self._check(state[key], key)):
                dst.copy_(src)
        self.tasks_seen = int(state["tasks_seen"])

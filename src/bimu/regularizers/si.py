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
paper's reference run did (a compatibility option, not in Zenke et al.). The path integral is a sum
over the task's updates, as in Zenke et al. and the paper's code; ``omega_norm="mean"`` divides it by
the number of updates of the task (``n_integrated``) before the fold (an alternative normalisation:
the importance then no longer grows with the task's length).

>>> import torch
>>> p = torch.nn.Parameter(torch.tensor([0.0, 0.0]))
>>> si = SynapticIntelligence([p], coefficient=1.0, damping=1.0)
>>> si.accumulate([torch.tensor([-2.0, 1.0])], [torch.tensor([1.0, 1.0])])   # omega = [2, -1]
>>> with torch.no_grad(): _ = p.add_(torch.tensor([1.0, 1.0]))
>>> si.task_end([p]); si.omega[0].tolist()                                   # [2/(1+1), -1/(1+1)]
[1.0, -0.5]
>>> mean = SynapticIntelligence([p], coefficient=1.0, damping=1.0, omega_norm="mean")
>>> for _ in range(4): mean.accumulate([torch.tensor([-2.0, 1.0])], [torch.tensor([1.0, 1.0])])
>>> mean.n_integrated, mean.path_integral[0].tolist()
(4, [8.0, -4.0])
>>> mean.task_end([p]); mean.omega[0].tolist()                               # [8/4/(0+1), -4/4/(0+1)]
[2.0, -1.0]
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from bimu.optim._checks import check_number
from bimu.regularizers.quadratic import QuadraticPenalty

OMEGA_NORMS = ("sum", "mean")
"""What a task's path integral is before the fold: its sum over the task's updates (Zenke et al.), or
that sum divided by the number of updates."""


class SynapticIntelligence(QuadraticPenalty):
    """Synaptic Intelligence as a penalty with path-integral / task-end hooks.

    The importance is ``omega`` (``Omega``), the running path integral ``path_integral``
    (``omega`` of the equations above).

    Args:
        params: the parameters to protect.
        coefficient: ``c`` (>= 0).
        damping: ``xi`` (> 0).
        omega_relu: clip each task's importance increment at 0 (reference-run compatibility).
        omega_norm: ``"sum"`` (the path integral as summed over the task's updates) or ``"mean"``
            (divided by their number ``n_integrated``; :data:`OMEGA_NORMS`).
    """

    importance_key, running_key = "omega", "path_integral"
    counter_keys = ("n_integrated", "tasks_seen")

    def __init__(self, params: Sequence[torch.Tensor], coefficient: float, damping: float, omega_relu: bool = False,
                 omega_norm: str = "sum"):
        self.coefficient = check_number("coefficient", coefficient, low=0)
        self.damping = check_number("damping", damping, low=0, low_inclusive=False)
        self.omega_relu = bool(omega_relu)
        if omega_norm not in OMEGA_NORMS:
            raise ValueError(f"omega_norm must be one of {', '.join(OMEGA_NORMS)}, got {omega_norm!r}")
        self.omega_norm = omega_norm
        super().__init__(params)

    @property
    def penalty_scale(self) -> float:
        """``c``: the penalty is ``c * sum Omega (theta - theta*)^2``."""
        return self.coefficient

    @torch.no_grad()
    def accumulate(self, data_grads: Sequence[torch.Tensor], deltas: Sequence[torch.Tensor]) -> None:
        """``omega += -g * Delta theta`` for one update."""
        for w, g, d in zip(self.path_integral, self._check(data_grads, "data_grads"), self._check(deltas, "deltas")):
            w.sub_(g * d)
        self.n_integrated += 1

    @torch.no_grad()
    def task_end(self, params: Sequence[torch.Tensor]) -> None:
        """``Omega += omega / ((theta - theta*)^2 + xi)`` (``omega / n_integrated`` with ``omega_norm="mean"``),
        then ``omega <- 0`` and ``theta* <- theta``."""
        params = self._check(params, "params")
        for o, w, a, p in zip(self.omega, self.path_integral, self.anchor, params):
            if self.omega_norm == "mean" and self.n_integrated:
                w = w / self.n_integrated
            increment = w / ((p - a).pow(2) + self.damping)
            if self.omega_relu:
                increment = increment.clamp_min(0.0)
            o.add_(increment)
            a.copy_(p)
        for w in self.path_integral:
            w.zero_()
        self.n_integrated = 0
        self.tasks_seen += 1

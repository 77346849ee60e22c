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

from collections.abc import Sequence

import torch

from bimu.optim._checks import check_number
from bimu.regularizers.quadratic import QuadraticPenalty


class SynapticIntelligence(QuadraticPenalty):
    """Synaptic Intelligence as a penalty with path-integral / task-end hooks.

    The importance is ``omega`` (``Omega``), the running path integral ``path_integral``
    (``omega`` of the equations above).

    Args:
        params: the parameters to protect.
        coefficient: ``c`` (>= 0).
        damping: ``xi`` (> 0).
        omega_relu: clip each task's importance increment at 0 (reference-run compatibility).
    """

    importance_key, running_key = "omega", "path_integral"

    def __init__(self, params: Sequence[torch.Tensor], coefficient: float, damping: float, omega_relu: bool = False):
        self.coefficient = check_number("coefficient", coefficient, low=0)
        self.damping = check_number("damping", damping, low=0, low_inclusive=False)
        self.omega_relu = bool(omega_relu)
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

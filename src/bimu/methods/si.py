"""Synaptic Intelligence (Zenke et al. 2017) on the ReLU MLP, trained with plain SGD.

Each update: ``theta <- theta - lr * (dCE/dtheta + 2 c Omega (theta - theta*))``, then the path
integral ``omega += -dCE/dtheta * Delta theta`` (data gradient only); at a task end
``Omega += omega / ((theta - theta*)^2 + xi)`` (see :mod:`bimu.regularizers.si`). Needs task
boundaries. ``omega_relu`` reproduces the reference run's ReLU on the importance increment;
``omega_norm="mean"`` divides the path integral by the number of the task's updates before the fold.

>>> import torch
>>> m = SynapticIntelligenceMethod([4, 3], seed=0)
>>> m.learn(torch.randn(1, 4), torch.tensor([1]))
>>> bool(m.regularizer.path_integral[0].sum() > 0)   # first step: -g * (-lr g) >= 0
True
>>> m.task_end(); m.regularizer.tasks_seen, bool(m.regularizer.path_integral[0].abs().sum() == 0)
(1, True)
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from bimu.methods.base import Hyperparameter, hyperparameter_table, non_negative, positive
from bimu.methods.sgd import PenalisedSGDMethod, bias_switch, learning_rate, real_mlp_info
from bimu.regularizers.si import OMEGA_NORMS, SynapticIntelligence


class SynapticIntelligenceMethod(PenalisedSGDMethod):
    """Synaptic Intelligence: online path-integral importance, quadratic penalty.

    While a task is learned, ``omega += -g * Delta theta`` integrates each parameter's contribution to the
    decrease of the data loss along its trajectory (a sum over the task's updates, as in Zenke et al.
    and the paper's code); at the task's end ``Omega += omega / ((theta - theta*)^2 + xi)`` and the
    penalty is ``c * sum Omega (theta - theta*)^2``. ``omega_relu`` (a compatibility switch) clips each
    task's increment at 0, as the paper's run did. ``omega_norm="mean"`` divides the path integral by
    the number of the task's updates before the fold, so that the importance no longer grows with the
    task's length (the counterpart of Online EWC's ``fisher_norm``; Zenke et al. and the paper's code
    sum, the default).
    """

    info = real_mlp_info("si", needs_task_boundaries=True)
    hyperparameters = hyperparameter_table(
        learning_rate(0.003),
        non_negative("coefficient", float, 1e-4, "c: scale of the penalty c sum Omega d^2"),
        positive("damping", float, 1.0, "xi: damping of Omega += omega / (Delta^2 + xi)"),
        Hyperparameter("omega_relu", bool, False,
                       "clip each task's importance increment at 0 (reference-run compatibility)"),
        bias_switch(),
        Hyperparameter("omega_norm", str, "sum",
                       "the task's path integral: sum over its updates (Zenke et al., the paper's code) or "
                       "mean (divided by their number, so the importance does not grow with the task's length)", choices=OMEGA_NORMS),
    )
    presets = {
        "pmnist-100": dict(lr=0.003, coefficient=1e-4, damping=1.0),
        "pmnist-2000": dict(lr=0.0015, coefficient=1e-4, damping=1.0),
        "openloris-25088": dict(lr=0.002, coefficient=7e-5, damping=12.6),
        # Appendix table hpo-openloris-std (standardised 8,192 features)
        "openloris-8192-std": dict(lr=4e-4, coefficient=4.5e-5, damping=0.05),
        "openloris-8192": dict(lr=0.001, coefficient=0.025, damping=0.15),
        "openloris-1024": dict(lr=0.006, coefficient=0.003, damping=0.13),
    }

    penalty_class = SynapticIntelligence
    penalty_arguments = {"coefficient": "coefficient", "damping": "damping", "omega_relu": "omega_relu",
                         "omega_norm": "omega_norm"}

    def _after_step(self, data_grads: Sequence[torch.Tensor], deltas: Sequence[torch.Tensor]) -> None:
        """Integrate ``-g * Delta theta`` along the trajectory."""
        self.regularizer.accumulate(data_grads, deltas)

"""Online EWC (Schwarz et al. 2018) on the ReLU MLP, trained with plain SGD.

Each update: ``theta <- theta - lr * (dCE/dtheta + importance * F (theta - theta*))`` (see
:mod:`bimu.regularizers.ewc`). The squared per-example gradients of the cross-entropy at the
observed labels are accumulated online during a task (no replay buffer) and averaged into the
empirical Fisher at :meth:`~OnlineEWCMethod.task_end`; for a batch of ``B > 1`` each example's
gradient is computed separately. Needs task boundaries.

>>> import torch
>>> m = OnlineEWCMethod([4, 3], seed=0)
>>> m.learn(torch.randn(2, 4), torch.tensor([1, 0])); m.regularizer.n_accumulated   # one per example
2
>>> m.task_end(); bool(m.regularizer.fisher[0].abs().sum() > 0), m.regularizer.penalty(m.params).item()
(True, 0.0)
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F

from bimu.methods.base import Hyperparameter, hyperparameter_table, non_negative
from bimu.methods.sgd import PenalisedSGDMethod, bias_switch, learning_rate, real_mlp_info
from bimu.regularizers.ewc import OnlineEWC


class OnlineEWCMethod(PenalisedSGDMethod):
    """Online elastic weight consolidation (empirical Fisher accumulated online)."""

    info = real_mlp_info("ewc-online", needs_task_boundaries=True)
    hyperparameters = hyperparameter_table(
        learning_rate(0.003),
        non_negative("importance", float, 4.1, "EWC lambda: scale of the penalty importance/2 sum F d^2"),
        Hyperparameter("downweighting", float, 0.7, "gamma: F <- gamma F + F_task at each task end",
                       check=lambda v: 0.0 <= v <= 1.0, requirement="in [0, 1]"),
        bias_switch(),
    )
    presets = {
        "pmnist-100": dict(lr=0.003, importance=4.1, downweighting=0.7),
        "pmnist-2000": dict(lr=0.006, importance=4.0, downweighting=0.4),
        "openloris-25088": dict(lr=3.9e-4, importance=0.12, downweighting=0.03),
        # Appendix table hpo-openloris-std (standardised 8,192 features)
        "openloris-8192-std": dict(lr=4e-4, importance=0.124, downweighting=0.7),
        "openloris-8192": dict(lr=0.001, importance=0.069, downweighting=0.2),
        "openloris-1024": dict(lr=0.005, importance=0.028, downweighting=0.6),
    }

    penalty_class = OnlineEWC
    penalty_arguments = {"importance": "importance", "gamma": "downweighting"}

    def _observe(self, x: torch.Tensor, y: torch.Tensor, data_grads: Sequence[torch.Tensor]) -> None:
        """Accumulate each example's squared data gradient into the task's Fisher sum."""
        if x.shape[0] == 1:
            self.regularizer.accumulate(data_grads)
            return
        params = self.params
        for i in range(x.shape[0]):
            loss = F.cross_entropy(self.model(x[i:i + 1]), y[i:i + 1])
            self.regularizer.accumulate(torch.autograd.grad(loss, params))

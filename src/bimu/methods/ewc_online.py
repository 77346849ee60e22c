"""Online EWC (Schwarz et al. 2018) on the ReLU MLP, trained with plain SGD.

Each update: ``theta <- theta - lr * (dCE/dtheta + importance * F (theta - theta*))`` (see
:mod:`bimu.regularizers.ewc`). The squared per-example gradients of the cross-entropy at the
observed labels are accumulated online during a task (no replay buffer) and averaged into the
empirical Fisher at :meth:`~OnlineEWCMethod.task_end`; for a batch of ``B > 1`` each example's
gradient is computed separately. Needs task boundaries.

>>> import torch
>>> m = OnlineEWCMethod([4, 3], seed=0)
>>> m.learn(torch.randn(1, 4), torch.tensor([1])); m.task_end()
>>> bool(m.regularizer.fisher[0].abs().sum() > 0)
True
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F

from bimu.methods.base import Hyperparameter, MethodInfo, hyperparameter_table, non_negative, positive
from bimu.methods.sgd import DETERMINISTIC_SCORES, SGDMethod
from bimu.paper import METHOD_FULL_NAMES
from bimu.regularizers.ewc import OnlineEWC


class OnlineEWCMethod(SGDMethod):
    """Online elastic weight consolidation (empirical Fisher accumulated online)."""

    info = MethodInfo(
        name="ewc-online",
        paper_name=METHOD_FULL_NAMES["ewc-online"],
        network="real-relu-mlp",
        needs_task_boundaries=True,
        uncertainty_scores=DETERMINISTIC_SCORES,
        binary_weights=False,
        bayesian=False,
    )
    hyperparameters = hyperparameter_table(
        positive("lr", float, 0.003, "SGD learning rate"),
        non_negative("importance", float, 4.1, "EWC lambda: scale of the penalty importance/2 sum F d^2"),
        Hyperparameter("downweighting", float, 0.7, "gamma: F <- gamma F + F_task at each task end",
                       check=lambda v: 0.0 <= v <= 1.0, requirement="in [0, 1]"),
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

    def _build_regularizer(self) -> None:
        self.regularizer = OnlineEWC(self.params, importance=self.hparams["importance"],
                                     gamma=self.hparams["downweighting"])

    def _observe(self, x: torch.Tensor, y: torch.Tensor, data_grads: Sequence[torch.Tensor]) -> None:
        """Accumulate each example's squared data gradient into the task's Fisher sum."""
        if x.shape[0] == 1:
            self.regularizer.accumulate(data_grads)
            return
        params = self.params
        for i in range(x.shape[0]):
            loss = F.cross_entropy(self.model(x[i:i + 1]), y[i:i + 1])
            self.regularizer.accumulate(torch.autograd.grad(loss, params))

"""Online EWC (Schwarz et al. 2018) on the ReLU MLP, trained with plain SGD.

Each update: ``theta <- theta - lr * (dCE/dtheta + importance * F (theta - theta*))`` (see
:mod:`bimu.regularizers.ewc`). The squared per-example gradients of the cross-entropy at the
observed labels are accumulated online during a task (no replay buffer) and averaged into the
empirical Fisher at :meth:`~OnlineEWCMethod.task_end`; for a batch of ``B > 1`` each example's
gradient is computed separately. Needs task boundaries.

Two switches (off by default) change ``F_task``:

- ``fisher="task-end"`` (a compatibility switch: the paper's code) recomputes the task's Fisher at the
  task's end, at the final parameters, over the task's training examples (a second pass over them):
  the stream gives them to :meth:`~OnlineEWCMethod.task_examples` before
  :meth:`~OnlineEWCMethod.task_end` (:attr:`~OnlineEWCMethod.needs_task_examples`), and they are not
  kept after it;
- ``fisher_norm="sum"`` folds in the sum of the task's squared gradients instead of their mean (for
  tasks of ``n`` examples each, the mean with an ``importance`` ``n`` times larger).

>>> import torch
>>> m = OnlineEWCMethod([4, 3], seed=0)
>>> m.learn(torch.randn(2, 4), torch.tensor([1, 0])); m.regularizer.n_accumulated   # one per example
2
>>> m.task_end(); bool(m.regularizer.fisher[0].abs().sum() > 0), m.regularizer.penalty(m.params).item()
(True, 0.0)
>>> end = OnlineEWCMethod([4, 3], seed=0, fisher="task-end")
>>> x, y = torch.randn(5, 4), torch.tensor([0, 1, 2, 0, 1])
>>> end.learn(x, y); end.needs_task_examples, end.task_examples(x, y), end.regularizer.n_accumulated
(True, None, 5)
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F

from bimu.methods.base import Hyperparameter, hyperparameter_table, non_negative
from bimu.methods.sgd import PenalisedSGDMethod, bias_switch, learning_rate, real_mlp_info
from bimu.nn.real_mlp import squared_gradient_sums
from bimu.regularizers.ewc import FISHER_NORMS, OnlineEWC

FISHER_SOURCES = ("online", "task-end")
"""Where a task's squared gradients come from: accumulated while the task is learned (each at the
parameters of its step), or recomputed over the task's examples at its end (a second pass)."""


def task_end_error(name: str) -> ValueError:
    """The error of a ``fisher="task-end"`` method whose task ends without its examples."""
    return ValueError(f"{name} with fisher='task-end' recomputes the Fisher over the task's examples: call "
                      "task_examples(x, y) with them before task_end()")


class OnlineEWCMethod(PenalisedSGDMethod):
    """Online elastic weight consolidation: ``F <- gamma F + F_task`` and the penalty
    ``importance / 2 * sum F (theta - theta*)^2`` at each task end, where ``F_task`` is the mean over the
    task's examples of the squared gradient of the cross-entropy at each example's label.

    By default the squared gradients are accumulated while the task is learned (each at the parameters
    of its step; the stream keeps no data). ``fisher="task-end"``, a compatibility switch for the
    paper's code, recomputes them at the task's end, at the final parameters, over the task's training
    examples (a second pass; the stream hands the task's examples to ``task_examples(x, y)`` before
    ``task_end()``, which an active learner that labels only some examples cannot do).
    ``fisher_norm="sum"`` folds in their sum over the task's examples instead of their mean: the
    penalty then grows with the task's size (60,000 times the mean on a Permuted-MNIST task, the mean
    with an ``importance`` 60,000 times larger).
    """

    info = real_mlp_info("ewc-online", needs_task_boundaries=True)
    hyperparameters = hyperparameter_table(
        learning_rate(0.003),
        non_negative("importance", float, 4.1, "EWC lambda: scale of the penalty importance/2 sum F d^2"),
        Hyperparameter("downweighting", float, 0.7, "gamma: F <- gamma F + F_task at each task end",
                       check=lambda v: 0.0 <= v <= 1.0, requirement="in [0, 1]"),
        bias_switch(),
        Hyperparameter("fisher", str, "online",
                       "the task's squared gradients: online (accumulated while it is learned) or task-end "
                       "(COMPATIBILITY: the paper's code, a second pass over the task's examples at its end, "
                       "at the final parameters)", choices=FISHER_SOURCES),
        Hyperparameter("fisher_norm", str, "mean",
                       "F_task: mean of the task's squared gradients, or their sum (which grows with the "
                       "task's size)", choices=FISHER_NORMS),
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
    penalty_arguments = {"importance": "importance", "gamma": "downweighting", "fisher_norm": "fisher_norm"}

    def _build_regularizer(self) -> None:
        super()._build_regularizer()
        self._examples_given = False

    @property
    def needs_task_examples(self) -> bool:
        """True with ``fisher="task-end"``: the task's examples are needed at its end."""
        return self.hparams["fisher"] == "task-end"

    def task_examples(self, x: torch.Tensor, y: torch.Tensor) -> None:
        """With ``fisher="task-end"``: replace the task's accumulated squared gradients by their sum over
        ``(x, y)`` at the current parameters (:func:`~bimu.nn.real_mlp.squared_gradient_sums`); called
        at the task's end, before :meth:`task_end`. No-op with ``fisher="online"``."""
        if not self.needs_task_examples:
            return
        x, y = self.prepare_batch(x, y)
        layers = self.model.layers
        w_sums, b_sums = squared_gradient_sums([layer.weight for layer in layers],
                                               [layer.bias for layer in layers] if self.hparams["bias"] else None,
                                               x, y)
        sums = [s for pair in zip(w_sums, b_sums) for s in pair] if b_sums is not None else w_sums
        self.regularizer.load_task_sums(sums, x.shape[0])
        self._examples_given = True

    def task_end(self) -> None:
        """``F <- gamma F + F_task``, ``theta* <- theta``; with ``fisher="task-end"``, ValueError unless
        :meth:`task_examples` was given the task's examples."""
        if self.needs_task_examples and not self._examples_given:
            raise task_end_error(self.info.name)
        self._examples_given = False
        super().task_end()

    def _observe(self, x: torch.Tensor, y: torch.Tensor, data_grads: Sequence[torch.Tensor]) -> None:
        """Accumulate each example's squared data gradient into the task's Fisher sum."""
        if x.shape[0] == 1:
            self.regularizer.accumulate(data_grads)
            return
        params = self.params
        for i in range(x.shape[0]):
            loss = F.cross_entropy(self.model(x[i:i + 1]), y[i:i + 1])
            self.regularizer.accumulate(torch.autograd.grad(loss, params))

"""Plain SGD on the real-valued ReLU MLP, and the shared machinery of the real-valued baselines.

Loss: cross-entropy averaged over the batch (batch size 1 in every paper run, where sum and mean
agree). One update per :meth:`SGDMethod.learn` call: ``theta <- theta - lr * dL/dtheta``, no momentum.
Deterministic: :meth:`~bimu.methods.base.OnlineMethod.predict_samples` returns one sample.
:class:`PenalisedSGDMethod` adds a quadratic penalty of :mod:`bimu.regularizers` (Online EWC, SI).

>>> import torch
>>> m = SGDMethod([4, 8, 3], seed=0)
>>> m.learn(torch.randn(2, 4), torch.tensor([0, 2]))
>>> m.updates_applied, m.examples_seen, tuple(m.predict_samples(torch.randn(5, 4)).shape)
(1, 2, (1, 5, 3))
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import torch
import torch.nn.functional as F

from bimu.methods.base import Hyperparameter, MethodInfo, OnlineMethod, hyperparameter_table, positive, tensor_bytes
from bimu.nn.real_mlp import RealMLP
from bimu.paper import METHOD_FULL_NAMES
from bimu.regularizers.quadratic import QuadraticPenalty

DETERMINISTIC_SCORES = ("predictive_entropy", "aleatoric")
"""Scores a deterministic network can give: with one sample, predictive entropy = aleatoric."""

PRESET_KEYS = ("pmnist-100", "pmnist-2000", "openloris-1024", "openloris-8192", "openloris-25088",
               "openloris-8192-imbalanced", "animals", "openloris-8192-std", "openloris-8192-imbalanced-std",
               "animals-std")
"""Benchmark keys of :attr:`~bimu.methods.base.OnlineMethod.presets` (docs/contracts.md)."""


def real_mlp_info(name: str, needs_task_boundaries: bool) -> MethodInfo:
    """The :class:`~bimu.methods.base.MethodInfo` of a deterministic method on the real-valued ReLU MLP.

    >>> real_mlp_info("si", needs_task_boundaries=True).paper_name
    'Synaptic Intelligence'
    """
    return MethodInfo(name=name, paper_name=METHOD_FULL_NAMES[name], network="real-relu-mlp",
                      needs_task_boundaries=needs_task_boundaries, uncertainty_scores=DETERMINISTIC_SCORES,
                      binary_weights=False, bayesian=False)


def learning_rate(default: float) -> Hyperparameter:
    """The SGD learning rate ``lr`` (> 0) with the method's default."""
    return positive("lr", float, default, "SGD learning rate")


def bias_switch() -> Hyperparameter:
    """``bias``: whether the layers have biases (true); false runs the network without them, as the
    paper's code ran the real-valued baselines (the weights are those of the biased network of the
    same seed, :class:`~bimu.nn.real_mlp.RealMLP`)."""
    return Hyperparameter("bias", bool, True, "layers with biases; false: none, as the paper's code "
                          "(reference-run compatibility)")


class SGDMethod(OnlineMethod):
    """Stochastic gradient descent on a ReLU MLP (no continual-learning mechanism)."""

    info = real_mlp_info("sgd", needs_task_boundaries=False)
    hyperparameters = hyperparameter_table(learning_rate(9e-4), bias_switch())
    presets = {
        # Appendix tables "Hyperparameter configurations" (PMNIST 100 / 2000 neurons, OpenLORIS).
        "pmnist-100": dict(lr=9e-4),
        "pmnist-2000": dict(lr=0.001),
        "openloris-25088": dict(lr=0.002),
        # Appendix table hpo-openloris-std (standardised 8,192 features)
        "openloris-8192-std": dict(lr=3e-4),
        "openloris-8192": dict(lr=0.01),
        "openloris-1024": dict(lr=89.5),  # as printed in the paper's table
    }

    def _build(self, generator: torch.Generator) -> None:
        self.model = RealMLP(self.sizes, bias=self.hparams["bias"])
        self.model.reset_parameters(generator)
        self._build_regularizer()

    def _build_regularizer(self) -> None:
        """Create the penalty (none for SGD)."""
        self.regularizer = None

    @property
    def params(self) -> list[torch.nn.Parameter]:
        """The trained parameters (weight and bias of each layer in turn; weights only without biases)."""
        return list(self.model.parameters())

    def _observe(self, x: torch.Tensor, y: torch.Tensor, data_grads: Sequence[torch.Tensor]) -> None:
        """Hook called with the batch's data gradient before the step (EWC accumulates here)."""

    def _after_step(self, data_grads: Sequence[torch.Tensor], deltas: Sequence[torch.Tensor]) -> None:
        """Hook called with the data gradient and the applied change after the step (SI integrates)."""

    def learn(self, x: torch.Tensor, y: torch.Tensor) -> None:
        """``theta <- theta - lr * (dL/dtheta + dR/dtheta)`` with ``R`` the penalty (if any)."""
        x, y = self.prepare_batch(x, y)
        params = self.params
        loss = self.guard_loss(F.cross_entropy(self.model(x), y))
        data_grads = torch.autograd.grad(loss, params)
        self._observe(x, y, data_grads)
        grads = list(data_grads)
        if self.regularizer is not None:
            grads = [g + r for g, r in zip(grads, self.regularizer.penalty_gradient(params))]
        lr = self.hparams["lr"]
        deltas = [-lr * g for g in grads]
        with torch.no_grad():
            for p, d in zip(params, deltas):
                p.add_(d)
        self._after_step(data_grads, deltas)
        self.count_update(x.shape[0])

    def task_end(self) -> None:
        """Fold the finished task into the penalty (a no-op without one)."""
        if self.regularizer is not None:
            self.regularizer.task_end(self.params)

    def _predict_logits(self, x: torch.Tensor, n_samples: int, generator: torch.Generator) -> torch.Tensor:
        x, _ = self.prepare_batch(x)
        return self.model(x).unsqueeze(0)

    def modules_state(self) -> dict[str, Any]:
        """A copy of the network parameters and of the penalty's state."""
        state = {"model": copy.deepcopy(self.model.state_dict())}
        if self.regularizer is not None:
            state["regularizer"] = self.regularizer.state_dict()
        return state

    def load_modules_state(self, state: Mapping[str, Any]) -> None:
        """Restore what :meth:`modules_state` returned."""
        self.model.load_state_dict(state["model"])
        if self.regularizer is not None:
            self.regularizer.load_state_dict(state["regularizer"])

    def memory_bytes(self) -> int:
        """Parameters, plus the penalty's persistent tensors."""
        extra = self.regularizer.tensors() if self.regularizer is not None else []
        return tensor_bytes(self.params) + tensor_bytes(extra)


class PenalisedSGDMethod(SGDMethod):
    """SGD plus a quadratic penalty that anchors the parameters at the last task end.

    A subclass names the penalty class (:attr:`penalty_class`) and which hyperparameter gives each of
    its constructor arguments (:attr:`penalty_arguments`), and feeds the penalty through the
    :meth:`SGDMethod._observe` / :meth:`SGDMethod._after_step` hooks.
    """

    penalty_class: ClassVar[type[QuadraticPenalty]]
    """The penalty built over :attr:`SGDMethod.params`."""
    penalty_arguments: ClassVar[dict[str, str]]
    """Keyword argument of :attr:`penalty_class` -> the hyperparameter that gives its value."""

    def _build_regularizer(self) -> None:
        kwargs = {arg: self.hparams[name] for arg, name in self.penalty_arguments.items()}
        self.regularizer = self.penalty_class(self.params, **kwargs)

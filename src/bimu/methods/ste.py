"""STE baseline (Courbariaux et al. 2016, BinaryNet): sign weights and sign activations trained
through straight-through estimators with AdamW on the latent real weights, no normalisation.

Forward: ``a_l = h_{l-1} @ sign(W_l)^T`` and ``h_l = sign(a_l)`` for hidden layers (the last ``a`` are
the logits). Backward: identity STE for the weights (``dL/dW := dL/dW_b``) and hard-tanh STE for the
activations (``dL/da := dL/dh * 1[|a| <= 1]``), Courbariaux et al. Alg. 1. Update: AdamW on ``W``
(decoupled weight decay, the paper's table gives it), then ``W <- clip(W, -1, 1)`` (Courbariaux et al.,
Alg. 1; ``clip_latent=False`` turns it off). Loss: cross-entropy averaged over the batch.
Deterministic: one prediction sample.

>>> import torch
>>> m = STEMethod([4, 8, 3], seed=0)
>>> m.learn(torch.randn(1, 4), torch.tensor([2]))
>>> float(m.model.layers[0].weight.detach().abs().max()) <= 1.0, m.memory_bytes() == 3 * 4 * (4 * 8 + 8 * 3)
(True, True)
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import torch
import torch.nn.functional as F

from bimu.methods.base import Hyperparameter, MethodInfo, OnlineMethod, hyperparameter_table, non_negative, positive, tensor_bytes
from bimu.methods.footprint import nested_tensor_bytes
from bimu.methods.sgd import DETERMINISTIC_SCORES
from bimu.nn.sign_linear import SignMLP
from bimu.optim.metaplastic_adam import MetaplasticAdam
from bimu.paper import METHOD_FULL_NAMES


class STEMethod(OnlineMethod):
    """Binary network with straight-through estimators and AdamW on latent weights."""

    info = MethodInfo(
        name="ste",
        paper_name=METHOD_FULL_NAMES["ste"],
        network="sign-mlp",
        needs_task_boundaries=False,
        uncertainty_scores=DETERMINISTIC_SCORES,
        binary_weights=True,
        bayesian=False,
    )
    hyperparameters = hyperparameter_table(
        positive("lr", float, 1e-4, "AdamW learning rate"),
        non_negative("weight_decay", float, 2.2e-9, "AdamW decoupled weight decay"),
        Hyperparameter("clip_latent", bool, True, "clip latent weights to [-1, 1] after each step"),
    )
    presets = {
        # Appendix tables; "--" (no weight decay reported) is read as 0.
        "pmnist-100": dict(lr=1e-4, weight_decay=2.2e-9),
        "pmnist-2000": dict(lr=1e-4, weight_decay=9.7e-5),
        "openloris-25088": dict(lr=1e-4, weight_decay=0.0),
        # Appendix table hpo-openloris-std (standardised 8,192 features)
        "openloris-8192-std": dict(lr=1e-4, weight_decay=0.0),
        "openloris-8192": dict(lr=0.003, weight_decay=0.0),
        "openloris-1024": dict(lr=0.0035, weight_decay=0.0),
        "openloris-8192-imbalanced": dict(lr=0.005, weight_decay=5e-7),
        "animals": dict(lr=1e-4, weight_decay=2.4e-9),
    }

    def _build(self, generator: torch.Generator) -> None:
        self.model = SignMLP(self.sizes, batch_norm=False)
        self.model.reset_parameters(generator)
        self.optimizer = MetaplasticAdam(self.model.latent_weights(), lr=self.hparams["lr"], metaplasticity=0.0,
                                         weight_decay=self.hparams["weight_decay"], decoupled_weight_decay=True)

    def learn(self, x: torch.Tensor, y: torch.Tensor) -> None:
        """Forward with sign weights/activations, STE backward, AdamW step, clip."""
        x, y = self.prepare_batch(x, y)
        self.optimizer.zero_grad(set_to_none=True)
        self.guard_loss(F.cross_entropy(self.model(x), y)).backward()
        self.optimizer.step()
        if self.hparams["clip_latent"]:
            with torch.no_grad():
                for w in self.model.latent_weights():
                    w.clamp_(-1.0, 1.0)
        self.count_update(x.shape[0])

    def _predict_logits(self, x: torch.Tensor, n_samples: int, generator: torch.Generator) -> torch.Tensor:
        x, _ = self.prepare_batch(x)
        return self.model(x).unsqueeze(0)

    def modules_state(self) -> dict[str, Any]:
        """Copies of the latent weights and of the Adam state."""
        return {"model": copy.deepcopy(self.model.state_dict()),
                "optimizer": copy.deepcopy(self.optimizer.state_dict())}

    def load_modules_state(self, state: Mapping[str, Any]) -> None:
        """Restore what :meth:`modules_state` returned."""
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])

    def memory_bytes(self) -> int:
        """Latent weights and Adam's two moments."""
        return tensor_bytes(self.model.parameters()) + nested_tensor_bytes(self.optimizer.state_dict()["state"])

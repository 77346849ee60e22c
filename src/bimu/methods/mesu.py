"""MESU (Bonnet et al. 2025) on a Gaussian mean-field ReLU MLP (no normalisation; ``activation="rbg"``
puts the Reverse Binary Gate between the layers instead, the paper's activation ablation).

Per update: ``K`` reparameterised samples ``w_k = mu + sigma eps_k`` (one per MC draw, shared by the
batch), ``C`` = the negative log-likelihood averaged over samples and summed over the batch, autograd
gives ``dC/dmu`` and ``dC/dsigma``, then the MESU step of :mod:`bimu.optim.mesu` (clipped gradients,
memory window ``N``, prior ``N(mu_prior, sigma_prior^2)``). No task boundaries. Prediction: ``K`` MC
samples (10 in the paper), so every uncertainty score, epistemic included, is available.

>>> import torch
>>> m = MESUMethod([4, 3], seed=0)
>>> m.learn(torch.randn(1, 4), torch.tensor([2]))
>>> tuple(m.predict_samples(torch.randn(2, 4)).shape), m.memory_bytes() == 2 * 4 * (4 * 3 + 3)
((10, 2, 3), True)
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import torch

from bimu.methods.base import Hyperparameter, MethodInfo, OnlineMethod, SCORE_NAMES, hyperparameter_table, non_negative, positive, tensor_bytes
from bimu.methods.bimu import mc_nll
from bimu.methods.footprint import nested_tensor_bytes
from bimu.nn.gaussian import GAUSSIAN_ACTIVATIONS, GaussianMLP
from bimu.optim.mesu import MESU
from bimu.paper import METHOD_FULL_NAMES


class MESUMethod(OnlineMethod):
    """Metaplasticity from Synaptic Uncertainty: bounded-memory Gaussian mean-field learning."""

    info = MethodInfo(
        name="mesu",
        paper_name=METHOD_FULL_NAMES["mesu"],
        network="gaussian-relu-mlp",
        needs_task_boundaries=False,
        uncertainty_scores=SCORE_NAMES,
        binary_weights=False,
        bayesian=True,
    )
    hyperparameters = hyperparameter_table(
        positive("lr_mu", float, 1.6, "alpha_mu"),
        positive("lr_sigma", float, 2.1, "alpha_sigma"),
        positive("sigma_prior", float, 0.3, "prior standard deviation"),
        Hyperparameter("mu_prior", float, 0.0, "prior mean"),
        positive("memory_window", float, 600_000.0, "N: memory window in updates"),
        positive("clamp_grad", float, 0.36, "gradients clipped to +-clamp_grad/|sigma|"),
        positive("n_samples", int, 10, "K: MC samples for the gradient"),
        positive("n_eval_samples", int, 10, "MC samples for prediction and scores"),
        non_negative("mu_init_scale", float, 4.0, "mu ~ U(+-mu_init_scale/sqrt(fan_in))"),
        positive("sigma_init_scale", float, 1.0, "sigma = sigma_init_scale/sqrt(fan_in)"),
        Hyperparameter("activation", str, "relu", "hidden activation (rbg: the paper's activation ablation)",
                       choices=GAUSSIAN_ACTIVATIONS),
        positive("gate_width", float, 1.0, "RBG threshold (activation rbg)"),
    )
    _k10 = dict(n_samples=10, n_eval_samples=10)
    presets = {
        "pmnist-100": dict(lr_mu=1.6, lr_sigma=2.1, sigma_prior=0.3, memory_window=600_000, clamp_grad=0.36, **_k10),
        "pmnist-2000": dict(lr_mu=2.2, lr_sigma=0.47, sigma_prior=0.46, memory_window=1.6e6, clamp_grad=0.83, **_k10),
        "openloris-25088": dict(lr_mu=71.91, lr_sigma=0.015, sigma_prior=0.69, memory_window=449_000,
                                clamp_grad=0.61, **_k10),
        # Appendix table hpo-openloris-std (standardised 8,192 features)
        "openloris-8192-std": dict(lr_mu=4.0, lr_sigma=5.0, sigma_prior=0.76, memory_window=5_000_000,
                                  clamp_grad=0.53, **_k10),
        "openloris-8192": dict(lr_mu=16.34, lr_sigma=0.04, sigma_prior=0.9, memory_window=460_000, clamp_grad=0.9,
                               **_k10),
        "openloris-1024": dict(lr_mu=2.96, lr_sigma=11.27, sigma_prior=0.92, memory_window=275_000,
                               clamp_grad=0.34, **_k10),
        "openloris-8192-imbalanced": dict(lr_mu=60.16, lr_sigma=2.95, mu_prior=0.0, sigma_prior=0.36,
                                          memory_window=328_000, clamp_grad=0.7, **_k10),
        # MESU (standardized) rows of the imbalanced OpenLORIS and Animals hyperparameter tables
        "openloris-8192-imbalanced-std": dict(lr_mu=20.2, lr_sigma=0.005, mu_prior=0.0, sigma_prior=0.61,
                                              memory_window=485_000, clamp_grad=0.05, **_k10),
        "animals-std": dict(lr_mu=65.6, lr_sigma=4.7, sigma_prior=0.86, memory_window=397_000, clamp_grad=0.41, **_k10),
        "animals": dict(lr_mu=42.4, lr_sigma=97.7, sigma_prior=0.56, memory_window=61_000, clamp_grad=0.1, **_k10),
    }

    def _build(self, generator: torch.Generator) -> None:
        hp = self.hparams
        self.model = GaussianMLP(self.sizes, mu_init_scale=hp["mu_init_scale"],
                                 sigma_init_scale=hp["sigma_init_scale"], activation=hp["activation"],
                                 gate_width=hp["gate_width"])
        self.model.reset_parameters(generator)
        self.optimizer = MESU(self.model.parameters(), lr_mu=hp["lr_mu"], lr_sigma=hp["lr_sigma"],
                              sigma_prior=hp["sigma_prior"], mu_prior=hp["mu_prior"],
                              memory_window=hp["memory_window"], clamp_grad=hp["clamp_grad"])

    def learn(self, x: torch.Tensor, y: torch.Tensor) -> None:
        """K reparameterised samples, autograd gradients w.r.t. mu and sigma, MESU step."""
        x, y = self.prepare_batch(x, y)
        self.optimizer.zero_grad(set_to_none=True)
        logits = self.model(x, n_samples=self.hparams["n_samples"], generator=self.train_generator)
        self.guard_loss(mc_nll(logits, y)).backward()
        self.optimizer.step()
        self.count_update(x.shape[0])

    def _predict_logits(self, x: torch.Tensor, n_samples: int, generator: torch.Generator) -> torch.Tensor:
        x, _ = self.prepare_batch(x)
        return self.model(x, n_samples=n_samples, generator=generator)

    def modules_state(self) -> dict[str, Any]:
        """Copies of ``mu`` and ``sigma`` (the optimizer keeps no state)."""
        return {"model": copy.deepcopy(self.model.state_dict()),
                "optimizer": copy.deepcopy(self.optimizer.state_dict())}

    def load_modules_state(self, state: Mapping[str, Any]) -> None:
        """Restore what :meth:`modules_state` returned."""
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])

    def memory_bytes(self) -> int:
        """``mu`` and ``sigma`` of every weight and bias."""
        return tensor_bytes(self.model.parameters()) + nested_tensor_bytes(self.optimizer.state_dict()["state"])

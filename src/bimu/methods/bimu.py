"""BiMU as a registered method: the binary Bayesian MLP trained with the BiMU update.

>>> import torch
>>> m = BiMUMethod([4, 3], seed=0, **BiMUMethod.presets["pmnist-100"])
>>> m.learn(torch.randn(1, 4), torch.tensor([2]))
>>> m.updates_applied, m.examples_seen, m.predict_samples(torch.randn(2, 4)).shape
(1, 1, torch.Size([5, 2, 3]))
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from bimu.methods.base import (
    SCORE_NAMES,
    Hyperparameter,
    MethodInfo,
    OnlineMethod,
    hyperparameter_table,
    non_negative,
    positive,
    tensor_bytes,
)
from bimu.nn.mlp import ACTIVATIONS, BinaryBayesianMLP
from bimu.optim.bimu import BiMU
from bimu.paper import METHOD_FULL_NAMES


def mc_nll(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """NLL with log-probabilities averaged over MC samples and summed over the batch (paper's loss)."""
    logp = torch.log_softmax(logits, dim=-1)  # [K, B, C]
    picked = logp.gather(-1, y.view(1, -1, 1).expand(logp.shape[0], -1, 1)).squeeze(-1)
    return -picked.mean(0).sum()


BINARY_BAYESIAN_MLP_HYPERPARAMETERS = (
    positive("n_samples", int, 5, "K: relaxed MC samples for the gradient"),
    positive("n_eval_samples", int, 5, "hard MC samples for prediction and scores"),
    positive("temperature", float, 1.0, "relaxation temperature T"),
    Hyperparameter("activation", str, "rbg", "hidden activation", choices=ACTIVATIONS),
    Hyperparameter("output_norm", bool, True, "LayerNorm on the logits (paper's network)"),
    positive("gate_width", float, 1.0, "RBG threshold"),
)
"""The sampling and network hyperparameters that every method on :class:`BinaryBayesianMLP` declares
(BiMU and BayesBiNN), in their declaration order."""

EVAL_SUMS = ("dot8", "grouped")
"""How the fused engine sums the first layer of a hard-sample evaluation: ``dot8``, in the order of the
training kernels (:mod:`bimu.engine.hard_eval`); ``grouped``, by groups of four inputs from tables of
their signed sums (:mod:`bimu.engine.grouped_eval`: fewer operations, a different rounding)."""

EVAL_SUM = Hyperparameter(
    "eval_sum", str, "dot8",
    "fused engine's evaluation sums: dot8 (training's order) or grouped (the first layer by groups of four "
    "inputs: faster, deterministic across machines and threads, rounds differently); the torch engine "
    "takes dot8 only", choices=EVAL_SUMS)
"""The evaluation-sum switch of the fused BiMU and BayesBiNN (:data:`EVAL_SUMS`)."""


def binary_bayesian_mlp(sizes, hparams: Mapping[str, Any]) -> BinaryBayesianMLP:
    """The paper's binary Bayesian MLP of ``sizes`` configured by the hyperparameters of
    :data:`BINARY_BAYESIAN_MLP_HYPERPARAMETERS` in ``hparams`` (its lambdas as the layers create them).
    ``eval_sum="grouped"`` is refused: the PyTorch network evaluates with dense float32 products, and a
    run records the switch as the fused engine's evaluation it did not use.

    >>> binary_bayesian_mlp([4, 3], {"eval_sum": "grouped"})
    Traceback (most recent call last):
    ...
    ValueError: eval_sum='grouped' is an evaluation of the fused engine; the PyTorch method takes eval_sum='dot8' (use engine 'fused' or 'auto' on the CPU)
    """
    if hparams.get("eval_sum", "dot8") != "dot8":
        raise ValueError(f"eval_sum={hparams['eval_sum']!r} is an evaluation of the fused engine; the PyTorch method "
                         "takes eval_sum='dot8' (use engine 'fused' or 'auto' on the CPU)")
    return BinaryBayesianMLP(sizes, activation=hparams["activation"], output_norm=hparams["output_norm"],
                             temperature=hparams["temperature"], gate_width=hparams["gate_width"])


class BiMUMethod(OnlineMethod):
    """Binary Metaplasticity from Uncertainty (this paper)."""

    info = MethodInfo(
        name="bimu",
        paper_name=METHOD_FULL_NAMES["bimu"],
        network="binary-bayesian-mlp",
        needs_task_boundaries=False,
        uncertainty_scores=SCORE_NAMES,
        binary_weights=True,
        bayesian=True,
    )
    hyperparameters = hyperparameter_table(
        positive("lr", float, 1.0, "gamma: learning rate scaling the data term"),
        positive("lr_max", float, 1.0, "alpha_max: largest metaplastic step size"),
        positive("likelihood_multiplier", float, 1.0, "beta_L: scale of the likelihood term"),
        non_negative("kl_multiplier", float, 1.0, "beta_KL: scale of the KL terms"),
        positive("memory_window", float, 1000.0, "N: forgetting horizon in updates"),
        Hyperparameter("prior", float, 0.0, "lambda_prior (natural parameter of the prior)"),
        *BINARY_BAYESIAN_MLP_HYPERPARAMETERS,
        EVAL_SUM,
    )
    presets = {
        # Appendix, Table "Hyperparameter configurations ... Permuted MNIST ... 100 neurons".
        "pmnist-100": dict(lr=4.9, lr_max=0.0023, likelihood_multiplier=161.3, kl_multiplier=3.76,
                           memory_window=700, n_samples=5, n_eval_samples=5, activation="rbg"),
        # Appendix, the same table for 2000 neurons.
        "pmnist-2000": dict(lr=60.0, lr_max=0.005, likelihood_multiplier=280.7, kl_multiplier=6.2,
                            memory_window=900, n_samples=5, n_eval_samples=5, activation="rbg"),
        # Appendix, OpenLORIS-Object tables (25,088 / 8,192 features).
        "openloris-25088": dict(lr=2.16, lr_max=0.06, likelihood_multiplier=164.9, kl_multiplier=0.156,
                                memory_window=6900, n_samples=10, n_eval_samples=10),
        # Appendix table hpo-openloris-std (standardised 8,192 features)
        "openloris-8192-std": dict(lr=1.2, lr_max=0.07, likelihood_multiplier=184.0, kl_multiplier=0.14,
                                  memory_window=7900, n_samples=10, n_eval_samples=10),
        "openloris-8192": dict(lr=33.2, lr_max=0.08, likelihood_multiplier=187.8, kl_multiplier=1.5,
                               memory_window=6700, n_samples=10, n_eval_samples=10),
        "openloris-1024": dict(lr=0.87, lr_max=0.092, likelihood_multiplier=27.26, kl_multiplier=1.6,
                               memory_window=8900, n_samples=10, n_eval_samples=10),
        # Appendix, "Hyperparameters ... OpenLORIS-Object ... imbalanced training set with 8,192 features".
        "openloris-8192-imbalanced": dict(lr=48.7, lr_max=0.065, likelihood_multiplier=16.7, kl_multiplier=0.53,
                                          memory_window=1600, n_samples=10, n_eval_samples=10),
        # Appendix, "Baseline hyperparameter configurations for the Animals Detection dataset".
        "animals": dict(lr=5.8, lr_max=0.054, likelihood_multiplier=14.0, kl_multiplier=0.16, memory_window=4600,
                        n_samples=10, n_eval_samples=10),
    }

    def _build(self, generator: torch.Generator) -> None:
        hp = self.hparams
        self.model = binary_bayesian_mlp(self.sizes, hp)
        for layer in self.model.layers:
            layer.reset_parameters(generator)
        self.optimizer = BiMU(self.model.parameters(), lr=hp["lr"], lr_max=hp["lr_max"],
                              likelihood_multiplier=hp["likelihood_multiplier"],
                              kl_multiplier=hp["kl_multiplier"], memory_window=hp["memory_window"],
                              prior=hp["prior"])

    def learn(self, x: torch.Tensor, y: torch.Tensor) -> None:
        """Relaxed forward with K samples, autograd gradient w.r.t. lambda, BiMU step."""
        x, y = self.prepare_batch(x, y)
        self.optimizer.zero_grad(set_to_none=True)
        logits = self.model(x, n_samples=self.hparams["n_samples"], mode="relaxed", generator=self.train_generator)
        self.guard_loss(mc_nll(logits, y)).backward()
        self.optimizer.step()
        self.count_update(x.shape[0])

    def _predict_logits(self, x: torch.Tensor, n_samples: int, generator: torch.Generator) -> torch.Tensor:
        x, _ = self.prepare_batch(x)
        return self.model(x, n_samples=n_samples, mode="hard", generator=generator)

    def modules_state(self) -> dict[str, Any]:
        """Network parameters and optimizer state."""
        return {"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict()}

    def load_modules_state(self, state: Mapping[str, Any]) -> None:
        """Restore what :meth:`modules_state` returned."""
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])

    def memory_bytes(self) -> int:
        """Only lambda: BiMU keeps no other persistent training state."""
        return tensor_bytes(self.model.parameters())

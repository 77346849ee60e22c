"""Synaptic Metaplasticity (Laborieux et al., Nat. Commun. 2021) as a registered method.

Network: :class:`~bimu.nn.SignMLP` with batch norm after every layer (sign weights from hidden
weights ``W_h``, identity STE; sign activations, hard-tanh STE; ``activation="rbg"``: the Reverse
Binary Gate instead, the paper's activation ablation). Update: metaplastic Adam
(:mod:`bimu.optim.metaplastic_adam`) on ``W_h`` - an Adam step that would shrink ``|W_h|`` is
multiplied by ``1 - tanh^2(m |W_h|)`` - and plain Adam (``m = 0``) on the norms' affine parameters,
both with L2 weight decay. Loss: cross-entropy averaged over the batch.

Batch norm at batch size 1: normalising a single example by its own batch statistics maps every
unit to ``beta`` (no information; the paper's runs used batch size 1). The norm here
(:class:`~bimu.nn.OnlineBatchNorm`) folds each training batch into running statistics (momentum
``bn_momentum``) and normalises with them; prediction uses the running statistics unchanged.
``bn_statistics="equinox"`` is a compatibility switch for the norm of the paper's runs
(``equinox.nn.BatchNorm`` at batch size 1). There the running variance is each batch's own
variance, 0 at batch size 1, so every unit is ``gamma (x - m) / sqrt(eps) + beta``. This degrades the sign network and leaves the Reverse Binary Gate, whose
threshold 1 every scaled unit clears, with constant outputs
(:mod:`bimu.reproduce.gaps` has the measurements).

Task identity (``task_affine=True``, off by default): as in the paper's runs, the norms' affine
parameters are stored at every task end and :meth:`SynapticMetaplasticityMethod.use_task` reloads
a stored task's parameters for prediction. **This uses the task identity at test time**, which no
other method gets; the stored parameters accumulate with the number of tasks and are counted in
:meth:`~SynapticMetaplasticityMethod.memory_bytes`. Needs task boundaries (as in the paper's table).

>>> import torch
>>> m = SynapticMetaplasticityMethod([4, 8, 3], seed=0, task_affine=True)
>>> m.learn(torch.randn(1, 4), torch.tensor([2])); m.task_end()
>>> len(m.task_affine_bank), tuple(m.task_affine_bank[0].shape)   # 2 * (8 + 3) per task
(1, (22,))
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
from bimu.nn.sign_linear import BATCH_NORM_STATISTICS, SIGN_MLP_ACTIVATIONS, SignMLP
from bimu.optim.metaplastic_adam import MetaplasticAdam
from bimu.paper import METHOD_FULL_NAMES


class SynapticMetaplasticityMethod(OnlineMethod):
    """Binary network with metaplastic hidden weights (Laborieux et al. 2021)."""

    info = MethodInfo(
        name="synaptic-metaplasticity",
        paper_name=METHOD_FULL_NAMES["synaptic-metaplasticity"],
        network="sign-mlp-batchnorm",
        needs_task_boundaries=True,
        uncertainty_scores=DETERMINISTIC_SCORES,
        binary_weights=True,
        bayesian=False,
    )
    hyperparameters = hyperparameter_table(
        positive("lr", float, 3.7e-5, "Adam learning rate"),
        non_negative("metaplasticity", float, 7.2, "m in f_meta = 1 - tanh^2(m |W_h|)"),
        non_negative("weight_decay", float, 2.9e-9, "L2 weight decay (added to the gradient)"),
        Hyperparameter("bn_momentum", float, 0.01, "momentum of the norms' running statistics",
                       check=lambda v: 0.0 < v <= 1.0, requirement="in (0, 1]"),
        Hyperparameter("bn_statistics", str, "online",
                       "the norms' statistics: online (running statistics, usable at batch size 1) or equinox "
                       "(COMPATIBILITY: the paper's runs, whose variance stays 0 at batch size 1)",
                       choices=BATCH_NORM_STATISTICS),
        Hyperparameter("activation", str, "sign", "hidden activation (rbg: the paper's activation ablation)",
                       choices=SIGN_MLP_ACTIVATIONS),
        positive("gate_width", float, 1.0, "RBG threshold (activation rbg)"),
        Hyperparameter("task_affine", bool, False,
                       "store the norms' affine parameters per task and reload them with use_task() "
                       "- USES TASK IDENTITY AT TEST TIME"),
    )
    presets = {
        "pmnist-100": dict(lr=3.7e-5, metaplasticity=7.2, weight_decay=2.9e-9),
        "pmnist-2000": dict(lr=1e-5, metaplasticity=6.3, weight_decay=1.46e-6),
        "openloris-25088": dict(lr=3e-4, metaplasticity=5.6, weight_decay=3.3e-12),
        # Appendix table hpo-openloris-std (standardised 8,192 features)
        "openloris-8192-std": dict(lr=4.5e-5, metaplasticity=13.7, weight_decay=8e-12),
        "openloris-8192": dict(lr=6e-4, metaplasticity=6.0, weight_decay=6.4e-12),
        "openloris-1024": dict(lr=6e-4, metaplasticity=2.15, weight_decay=5.22e-6),
    }

    def _build(self, generator: torch.Generator) -> None:
        hp = self.hparams
        self.model = SignMLP(self.sizes, batch_norm=True, bn_momentum=hp["bn_momentum"], activation=hp["activation"],
                             gate_width=hp["gate_width"], bn_statistics=hp["bn_statistics"])
        self.model.reset_parameters(generator)
        self.optimizer = MetaplasticAdam(
            [{"params": self.model.latent_weights(), "metaplasticity": hp["metaplasticity"]},
             {"params": self.model.norm_parameters(), "metaplasticity": 0.0}],
            lr=hp["lr"], metaplasticity=hp["metaplasticity"], weight_decay=hp["weight_decay"])
        self.task_affine_bank: list[torch.Tensor] = []
        self._eval_task: int | None = None

    def learn(self, x: torch.Tensor, y: torch.Tensor) -> None:
        """Fold the batch into the norms' statistics, STE backward, metaplastic Adam step."""
        x, y = self.prepare_batch(x, y)
        self.optimizer.zero_grad(set_to_none=True)
        self.guard_loss(F.cross_entropy(self.model(x, update_stats=True), y)).backward()
        self.optimizer.step()
        self.count_update(x.shape[0])

    def _affine_vector(self) -> torch.Tensor:
        return torch.cat([p.detach().reshape(-1) for p in self.model.norm_parameters()])

    def _move_modules(self, device: torch.device) -> None:
        super()._move_modules(device)
        self.task_affine_bank = [t.to(device) for t in self.task_affine_bank]

    def task_end(self) -> None:
        """With ``task_affine``, store a copy of the norms' affine parameters for this task."""
        if self.hparams["task_affine"]:
            self.task_affine_bank.append(self._affine_vector().clone())

    def use_task(self, task: int | None) -> None:
        """Predict with the affine parameters stored for ``task`` (task identity at test time);
        ``None`` (or the current, unfinished task) uses the live parameters."""
        if task is not None:
            if not self.hparams["task_affine"]:
                raise ValueError("use_task needs task_affine=True (it uses task identity at test time)")
            if int(task) < 0 or int(task) > len(self.task_affine_bank):
                raise ValueError(f"task must be in [0, {len(self.task_affine_bank)}], got {task}")
            task = int(task)
        self._eval_task = task

    def _predict_logits(self, x: torch.Tensor, n_samples: int, generator: torch.Generator) -> torch.Tensor:
        x, _ = self.prepare_batch(x)
        task = self._eval_task
        if task is None or task >= len(self.task_affine_bank):
            return self.model(x).unsqueeze(0)
        params = self.model.norm_parameters()
        live = [p.detach().clone() for p in params]
        stored = torch.split(self.task_affine_bank[task], [p.numel() for p in params])
        with torch.no_grad():
            for p, s in zip(params, stored):
                p.copy_(s.view_as(p))
            try:
                return self.model(x).unsqueeze(0)
            finally:
                for p, v in zip(params, live):
                    p.copy_(v)

    def modules_state(self) -> dict[str, Any]:
        """Copies of the network (weights, affine parameters, running statistics), the Adam state and
        the per-task affine bank."""
        return {"model": copy.deepcopy(self.model.state_dict()),
                "optimizer": copy.deepcopy(self.optimizer.state_dict()),
                "task_affine_bank": [t.clone() for t in self.task_affine_bank]}

    def load_modules_state(self, state: Mapping[str, Any]) -> None:
        """Restore what :meth:`modules_state` returned."""
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.task_affine_bank = [t.clone() for t in state["task_affine_bank"]]

    def memory_bytes(self) -> int:
        """Hidden weights, affine parameters, running statistics, Adam moments, per-task affine bank."""
        return (tensor_bytes(self.model.state_dict().values())
                + nested_tensor_bytes(self.optimizer.state_dict()["state"])
                + tensor_bytes(self.task_affine_bank))

"""Metaplastic Adam (Laborieux, Ernoult, Hirtzlin & Querlioz, Nat. Commun. 2021).

Binary weights are ``W_b = sign(W_h)``; the hidden weights ``W_h`` are trained with Adam, except
that an update pushing ``W_h`` towards zero (towards a sign flip of ``W_b``) is attenuated by
``f_meta(m, W_h) = 1 - tanh^2(m |W_h|)`` (Laborieux et al. 2021, Eq. 1 and Algorithm 1). With the
Adam step ``U`` (``W_h <- W_h - U``)::

    g   = dL/dW_b + weight_decay * W_h          (L2 weight decay folded into the gradient)
    m_t = beta1 m + (1 - beta1) g ;  v_t = beta2 v + (1 - beta2) g^2
    U   = lr * (m_t / (1 - beta1^t)) / (sqrt(v_t / (1 - beta2^t)) + eps)
    W_h <- W_h - U * f_meta(m, W_h)   where U * W_h > 0   (the step decreases |W_h|)
    W_h <- W_h - U                    elsewhere           (the step increases |W_h|)

so growing ``|W_h|`` (consolidation) is free while shrinking it becomes ever harder: synapses
become rigid as they consolidate. ``metaplasticity = 0`` is plain Adam (``f_meta = 1``); the batch
norm parameters of the network are trained that way. The decision uses the sign of ``W_h`` before
the step. With ``decoupled_weight_decay=True`` the decay is instead applied as in AdamW (Loshchilov &
Hutter 2019), ``W_h <- W_h (1 - lr * weight_decay)`` before the Adam step, and is not folded into
``g``; with ``metaplasticity = 0`` that is exactly AdamW (used by the STE baseline).

>>> import torch
>>> w = torch.tensor([1.0, 1.0]); g = torch.tensor([1.0, -1.0])
>>> m, v = torch.zeros(2), torch.zeros(2)
>>> _ = metaplastic_adam_update_(w, g, m, v, step=1, lr=0.1, metaplasticity=1.0, eps=0.0)
>>> [round(x, 4) for x in w.tolist()]   # first Adam step is lr*sign(g); only the shrinking one is scaled
[0.958, 1.1]
"""

from __future__ import annotations

from collections.abc import Iterable

import torch

from bimu.optim._base import BimuOptimizer, run_closure
from bimu.optim._checks import check_number


def metaplastic_factor(w: torch.Tensor, metaplasticity: float) -> torch.Tensor:
    """``f_meta = 1 - tanh^2(m |W_h|)``."""
    t = torch.tanh(metaplasticity * w.abs())
    return 1.0 - t * t


@torch.no_grad()
def metaplastic_adam_update_(w: torch.Tensor, grad: torch.Tensor, exp_avg: torch.Tensor, exp_avg_sq: torch.Tensor,
                             *, step: int, lr: float, metaplasticity: float, beta1: float = 0.9,
                             beta2: float = 0.999, eps: float = 1e-8, weight_decay: float = 0.0,
                             decoupled_weight_decay: bool = False) -> torch.Tensor:
    """One metaplastic Adam step on ``w`` in place (``step`` counts from 1); returns the applied change."""
    before = w.clone()
    if weight_decay and decoupled_weight_decay:
        w.mul_(1.0 - lr * weight_decay)
    elif weight_decay:
        grad = grad + weight_decay * w
    exp_avg.mul_(beta1).add_((1.0 - beta1) * grad)
    exp_avg_sq.mul_(beta2).add_((1.0 - beta2) * grad * grad)
    m_hat = exp_avg / (1.0 - beta1 ** step)
    v_hat = exp_avg_sq / (1.0 - beta2 ** step)
    update = lr * m_hat / (v_hat.sqrt() + eps)
    if metaplasticity:
        shrinking = update * w > 0
        update = torch.where(shrinking, update * metaplastic_factor(w, metaplasticity), update)
    w.sub_(update)
    return w - before


class MetaplasticAdam(BimuOptimizer):
    """Adam with the metaplastic attenuation of updates that shrink ``|W_h|`` (module docstring).

    Args:
        params: hidden weights and/or parameter groups; a group may set any hyperparameter below
            (e.g. ``metaplasticity`` 0 for batch-norm parameters).
        lr: Adam step size (> 0).
        metaplasticity: ``m`` (>= 0).
        betas: Adam's ``(beta1, beta2)``, each in [0, 1).
        eps: Adam's epsilon (> 0).
        weight_decay: L2 coefficient added to the gradient (>= 0).
        decoupled_weight_decay: apply ``weight_decay`` AdamW-style instead.

    The moments and the step count live in ``state[p]``, are created when a parameter is added (at
    construction or by ``add_param_group``, so the training-state memory is fixed from the start)
    and survive ``state_dict()``.
    """

    def __init__(self, params: Iterable, lr: float = 3.7e-5, metaplasticity: float = 7.2,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8, weight_decay: float = 0.0,
                 decoupled_weight_decay: bool = False):
        defaults = dict(lr=lr, metaplasticity=metaplasticity, betas=betas, eps=eps, weight_decay=weight_decay,
                        decoupled_weight_decay=decoupled_weight_decay)
        super().__init__(params, defaults)

    def _check_group(self, group):
        group["lr"] = check_number("lr", group["lr"], low=0, low_inclusive=False)
        group["metaplasticity"] = check_number("metaplasticity", group["metaplasticity"], low=0)
        betas = tuple(group["betas"])
        if len(betas) != 2:
            raise ValueError(f"betas must hold two numbers, got {group['betas']!r}")
        group["betas"] = (check_number("beta1", betas[0], low=0, high=1, high_inclusive=False),
                          check_number("beta2", betas[1], low=0, high=1, high_inclusive=False))
        group["eps"] = check_number("eps", group["eps"], low=0, low_inclusive=False)
        group["weight_decay"] = check_number("weight_decay", group["weight_decay"], low=0)
        group["decoupled_weight_decay"] = bool(group["decoupled_weight_decay"])

    def _init_state(self, p, group):
        self.state[p]["step"] = 0
        self.state[p]["exp_avg"] = torch.zeros_like(p, memory_format=torch.contiguous_format)
        self.state[p]["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.contiguous_format)

    @torch.no_grad()
    def step(self, closure=None):
        """One step for every parameter with a gradient; returns the closure's loss if given."""
        loss = run_closure(closure)
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                state["step"] += 1
                metaplastic_adam_update_(p, p.grad, state["exp_avg"], state["exp_avg_sq"], step=state["step"],
                                         lr=group["lr"], metaplasticity=group["metaplasticity"], beta1=beta1,
                                         beta2=beta2, eps=group["eps"], weight_decay=group["weight_decay"],
                                         decoupled_weight_decay=group["decoupled_weight_decay"])
        return loss

"""BayesBiNN (Meng, Bachmann & Khan, ICML 2020): the Bayesian learning rule for Bernoulli weights.

Derivation (Meng et al. 2020, Sec. 3). The posterior over ``w in {-1, +1}`` is mean-field
Bernoulli with natural parameter ``lambda`` (``p(w = +1) = sigmoid(2 lambda)``) and expectation
parameter ``mu = tanh(lambda)``. The Bayesian learning rule with step ``alpha`` is a natural-gradient
step in ``lambda``, which for an exponential family is an ordinary gradient in ``mu``::

    lambda <- (1 - alpha) lambda - alpha (N * grad_mu E_q[l] - lambda_0)

with ``l`` the mean loss of the mini-batch, ``N`` the dataset size and ``lambda_0`` the prior's natural
parameter. ``grad_mu`` is estimated with the Gumbel/Concrete relaxation
``w_r = tanh((lambda + delta) / T)``, ``delta = 0.5 log(u / (1 - u))``, and the chain rule through
``mu = tanh(lambda)``::

    grad_mu ~= (1/K) sum_k dl/dw_r,k * (1 - w_r,k^2) / (T (1 - tanh^2 lambda))

(the paper's ``s * g / N``). Writing ``lr = alpha N`` and ``prior_strength = 1 / N`` (the two
quantities of the paper's appendix tables) gives the form implemented here::

    lambda <- lambda - lr * (grad_mu + prior_strength * (lambda - lambda_prior))

i.e. the prior term pulls ``lambda`` towards ``lambda_prior``. For continual learning the prior is
reset to the current posterior at each task boundary (:meth:`BayesBiNN.reset_prior`), Meng et al.
Sec. 5. No momentum (as run for the paper).

Numerics: ``(1 - w^2) / (1 - tanh^2 lambda) = cosh^2(lambda) / cosh^2((lambda + delta)/T)`` is computed
from log-cosh, so that the estimator stays finite and non-zero once ``|lambda|`` saturates ``tanh``
in float32 (the naive ratio is 0/0 there).

>>> import torch
>>> lam = torch.tensor([0.0, 1.0]); g_mu = torch.tensor([0.5, -0.5]); prior = torch.tensor([0.0, 2.0])
>>> [round(v, 6) for v in bayesbinn_update_(lam, g_mu, lr=0.1, prior_strength=0.5, prior=prior).tolist()]
[-0.05, 1.1]
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import torch
from torch.optim import Optimizer

from bimu.optim._checks import check_number

_LOG2 = math.log(2.0)


def log_cosh(x: torch.Tensor) -> torch.Tensor:
    """``log(cosh(x))`` without overflow: ``|x| + log1p(exp(-2|x|)) - log 2``.

    >>> import torch
    >>> round(log_cosh(torch.tensor(1000.0)).item(), 3), round(log_cosh(torch.tensor(0.0)).item(), 6)
    (999.307, 0.0)
    """
    a = x.abs()
    return a + torch.log1p(torch.exp(-2.0 * a)) - _LOG2


def relaxation_jacobian_ratio(lam: torch.Tensor, delta: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """``(1 - w_r^2) / (T (1 - tanh^2 lambda))`` with ``w_r = tanh((lambda + delta)/T)``, computed stably.

    ``lam`` broadcasts against ``delta`` (``delta`` may carry a leading sample axis).

    >>> import torch
    >>> lam, delta = torch.tensor([0.3]), torch.tensor([[-0.2]])
    >>> naive = (1 - torch.tanh(lam + delta) ** 2) / (1 - torch.tanh(lam) ** 2)
    >>> bool(torch.allclose(relaxation_jacobian_ratio(lam, delta), naive))
    True
    """
    return torch.exp(2.0 * (log_cosh(lam) - log_cosh((lam + delta) / temperature))) / temperature


def bayesbinn_mu_gradient(grad_w: torch.Tensor, lam: torch.Tensor, delta: torch.Tensor,
                          temperature: float = 1.0) -> torch.Tensor:
    """The BayesBiNN ``mu``-gradient estimator ``mean_k dL/dw_k (1 - w_k^2) / (T (1 - tanh^2 lambda))``.

    ``grad_w`` and ``delta`` are ``[K, *lam.shape]``: the gradient of sample ``k``'s own loss
    ``l(w_k)`` w.r.t. its relaxed weights (not of the loss averaged over samples, which would carry an
    extra ``1/K``) and the logistic noise that produced ``w_k``.
    """
    if grad_w.shape != delta.shape or grad_w.shape[1:] != lam.shape:
        raise ValueError(f"grad_w {tuple(grad_w.shape)} and delta {tuple(delta.shape)} must be [K, "
                         f"*{tuple(lam.shape)}]")
    return (grad_w * relaxation_jacobian_ratio(lam, delta, temperature)).mean(0)


@torch.no_grad()
def bayesbinn_update_(lam: torch.Tensor, grad_mu: torch.Tensor, *, lr: float, prior_strength: float,
                      prior: float | torch.Tensor = 0.0) -> torch.Tensor:
    """``lambda <- lambda - lr (grad_mu + prior_strength (lambda - prior))`` in place; returns ``lam``."""
    step = grad_mu + prior_strength * (lam - prior)
    return lam.sub_(lr * step)


class BayesBiNN(Optimizer):
    """The BayesBiNN update of Bernoulli natural parameters (see the module docstring).

    ``p.grad`` is read as the ``mu``-gradient estimate (:func:`bayesbinn_mu_gradient`), not as
    ``dL/dlambda``. The prior natural parameter of every parameter is kept in ``state[p]["prior"]``
    (initially ``prior``, a float), so it survives ``state_dict()``.

    Args:
        params: natural parameters ``lambda``.
        lr: ``alpha N``.
        prior_strength: ``1 / N`` (>= 0).
        prior: initial ``lambda_prior`` (0: ``p(w = +1) = 1/2``).
    """

    def __init__(self, params: Iterable, lr: float = 0.77, prior_strength: float = 1.25e-5, prior: float = 0.0):
        defaults = dict(lr=check_number("lr", lr, low=0, low_inclusive=False),
                        prior_strength=check_number("prior_strength", prior_strength, low=0))
        prior = check_number("prior", prior)
        super().__init__(params, defaults)
        for group in self.param_groups:
            for p in group["params"]:
                self.state[p]["prior"] = torch.full_like(p, prior, memory_format=torch.contiguous_format)

    @torch.no_grad()
    def reset_prior(self) -> None:
        """Task boundary: the prior becomes the current posterior (``lambda_prior <- lambda``)."""
        for group in self.param_groups:
            for p in group["params"]:
                self.state[p]["prior"].copy_(p)

    @torch.no_grad()
    def step(self, closure=None):
        """One BayesBiNN step from ``p.grad`` (parameters without a gradient are left unchanged)."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                bayesbinn_update_(p, p.grad, lr=group["lr"], prior_strength=group["prior_strength"],
                                  prior=self.state[p]["prior"])
        return loss

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

``prior_direction="away"`` is a compatibility switch for the paper's runs, whose update was
``lambda -= lr g - lr prior_strength (lambda - lambda_prior)``: the prior term with the opposite sign,
pushing ``lambda`` away from ``lambda_prior`` (within a task, by a factor ``exp(lr prior_strength n)``
over ``n`` steps: 1.78 for a 60,000-example Permuted-MNIST task at the paper's 0.77 and 1.25e-5).

Numerics: ``(1 - w^2) / (1 - tanh^2 lambda) = cosh^2(lambda) / cosh^2((lambda + delta)/T)`` is computed
from log-cosh, so that the estimator stays finite and non-zero once ``|lambda|`` saturates ``tanh``
in float32 (the naive ratio is 0/0 there).

Saturation. Once ``|lambda|`` is large the exact ratio is about ``exp(-2 delta sign(lambda)) = (1 - u) /
u`` (``T = 1``): median 1, but its mean grows like the log of the smallest uniform, so rare draws step
``lambda`` by up to about ``1e7 lr |dL/dw|``. Over a long stream those kicks throw ``lambda`` to huge
values of either sign: on 100-task Permuted MNIST with the paper's hyperparameters the exact estimator
loses even the task it has just trained on by task 30 (10.5% on the last five tasks, seeds 0 and 1).
Meng et al.'s code adds ``eps = 1e-10`` to both sides of the ratio, which makes it ``1/T`` where both
tanh round to +-1. ``ratio_eps`` (:func:`relaxation_jacobian_ratio`) is that ``eps``; 0 is the exact
ratio.

>>> import torch
>>> lam = torch.tensor([0.0, 1.0]); g_mu = torch.tensor([0.5, -0.5]); prior = torch.tensor([0.0, 2.0])
>>> [round(v, 6) for v in bayesbinn_update_(lam, g_mu, lr=0.1, prior_strength=0.5, prior=prior).tolist()]
[-0.05, 1.1]
>>> lam = torch.tensor([0.0, 1.0])
>>> [round(v, 6) for v in bayesbinn_update_(lam, g_mu, lr=0.1, prior_strength=0.5, prior=prior,
...                                         prior_direction="away").tolist()]
[-0.05, 1.0]
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import torch
from torch.optim import Optimizer

from bimu.optim._checks import check_number

_LOG2 = math.log(2.0)

PRIOR_DIRECTIONS = {"towards": 1.0, "away": -1.0}
"""``prior_direction`` -> sign ``s`` of the prior term in ``lambda -= lr (g_mu + s prior_strength (lambda -
lambda_prior))``: ``"towards"`` (Meng et al. 2020) or ``"away"`` (the paper's runs, a sign defect kept as
a compatibility switch)."""


def prior_sign(prior_direction: str) -> float:
    """The sign of the prior term for ``prior_direction`` (see :data:`PRIOR_DIRECTIONS`).

    >>> prior_sign("towards"), prior_sign("away")
    (1.0, -1.0)
    >>> prior_sign("up")
    Traceback (most recent call last):
    ...
    ValueError: prior_direction must be one of 'towards', 'away', got 'up'
    """
    try:
        return PRIOR_DIRECTIONS[prior_direction]
    except (KeyError, TypeError):
        raise ValueError(f"prior_direction must be one of {', '.join(map(repr, PRIOR_DIRECTIONS))}, "
                         f"got {prior_direction!r}") from None


def log_cosh(x: torch.Tensor) -> torch.Tensor:
    """``log(cosh(x))`` without overflow: ``|x| + log1p(exp(-2|x|)) - log 2``.

    >>> import torch
    >>> round(log_cosh(torch.tensor(1000.0)).item(), 3), round(log_cosh(torch.tensor(0.0)).item(), 6)
    (999.307, 0.0)
    """
    a = x.abs()
    return a + torch.log1p(torch.exp(-2.0 * a)) - _LOG2


def relaxation_jacobian_ratio(lam: torch.Tensor, delta: torch.Tensor, temperature: float = 1.0,
                              ratio_eps: float = 0.0) -> torch.Tensor:
    """``(1 - w_r^2) / (T (1 - tanh^2 lambda))`` with ``w_r = tanh((lambda + delta)/T)``, computed stably.

    ``lam`` broadcasts against ``delta`` (``delta`` may carry a leading sample axis).

    ``ratio_eps > 0``: Meng et al.'s regularised ratio ``((1 - w_r^2) + eps) / (T ((1 - mu^2) + eps))``,
    ``mu = tanh(lambda)``, computed as written in ``lam``'s dtype. Where both tanh round to +-1 (float32:
    ``|lambda|`` and ``|lambda + delta|`` above about 9) it is ``1 / T``: a saturated weight keeps
    receiving the plain gradient instead of the exact ratio ``cosh^2(lambda) / cosh^2(lambda + delta)``,
    whose mean over the noise grows without bound (see the module).

    >>> import torch
    >>> lam, delta = torch.tensor([0.3]), torch.tensor([[-0.2]])
    >>> naive = (1 - torch.tanh(lam + delta) ** 2) / (1 - torch.tanh(lam) ** 2)
    >>> bool(torch.allclose(relaxation_jacobian_ratio(lam, delta), naive))
    True
    """
    if ratio_eps:
        w = torch.tanh((lam + delta) / temperature)
        mu = torch.tanh(lam)
        return ((1.0 - w * w) + ratio_eps) / (temperature * ((1.0 - mu * mu) + ratio_eps))
    return torch.exp(2.0 * (log_cosh(lam) - log_cosh((lam + delta) / temperature))) / temperature


def bayesbinn_mu_gradient(grad_w: torch.Tensor, lam: torch.Tensor, delta: torch.Tensor,
                          temperature: float = 1.0, ratio_eps: float = 0.0) -> torch.Tensor:
    """The BayesBiNN ``mu``-gradient estimator ``mean_k dL/dw_k (1 - w_k^2) / (T (1 - tanh^2 lambda))``.

    ``grad_w`` and ``delta`` are ``[K, *lam.shape]``: the gradient of sample ``k``'s own loss
    ``l(w_k)`` w.r.t. its relaxed weights (not of the loss averaged over samples, which would carry an
    extra ``1/K``) and the logistic noise that produced ``w_k``. ``ratio_eps``: see
    :func:`relaxation_jacobian_ratio`.
    """
    if grad_w.shape != delta.shape or grad_w.shape[1:] != lam.shape:
        raise ValueError(f"grad_w {tuple(grad_w.shape)} and delta {tuple(delta.shape)} must be [K, "
                         f"*{tuple(lam.shape)}]")
    return (grad_w * relaxation_jacobian_ratio(lam, delta, temperature, ratio_eps)).mean(0)


@torch.no_grad()
def bayesbinn_update_(lam: torch.Tensor, grad_mu: torch.Tensor, *, lr: float, prior_strength: float,
                      prior: float | torch.Tensor = 0.0, prior_direction: str = "towards") -> torch.Tensor:
    """``lambda <- lambda - lr (grad_mu + s prior_strength (lambda - prior))`` in place, ``s`` from
    ``prior_direction`` (:func:`prior_sign`); returns ``lam``."""
    step = grad_mu + (prior_sign(prior_direction) * prior_strength) * (lam - prior)
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
        prior_direction: ``"towards"`` (Meng et al.) or ``"away"`` (the paper's runs' sign, a
            compatibility switch; :data:`PRIOR_DIRECTIONS`).
    """

    def __init__(self, params: Iterable, lr: float = 0.77, prior_strength: float = 1.25e-5, prior: float = 0.0,
                 prior_direction: str = "towards"):
        prior_sign(prior_direction)
        defaults = dict(lr=check_number("lr", lr, low=0, low_inclusive=False),
                        prior_strength=check_number("prior_strength", prior_strength, low=0),
                        prior_direction=prior_direction)
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
                                  prior=self.state[p]["prior"],
                                  prior_direction=group.get("prior_direction", "towards"))
        return loss

"""MESU: Metaplasticity from Synaptic Uncertainty (Bonnet et al. 2025, "Bayesian continual learning
and forgetting in neural networks").

Gaussian mean-field posterior ``N(mu, sigma^2)`` per synapse, prior ``N(mu_prior, sigma_prior^2)``,
memory window ``N`` (the posterior approximates ``p(w | D_{t-N..t})``). From a second-order expansion
of the windowed free energy, with the diagonal Hessian estimated from ``dC/dsigma / sigma``, the
updates are (``C``: expected negative log-likelihood of the batch, ``g_mu = dC/dmu``,
``g_sigma = dC/dsigma``, all at the previous ``mu, sigma``)::

    Delta mu    = lr_mu * ( -sigma^2 g_mu + sigma^2 (mu_prior - mu) / (N sigma_prior^2) )
    Delta sigma = 0.5 * lr_sigma * ( -sigma^2 g_sigma + sigma (sigma_prior^2 - sigma^2) / (N sigma_prior^2) )

As run for the paper, both gradients are first clipped to ``[-clamp_grad / |sigma|, +clamp_grad /
|sigma|]`` (so the data part of ``Delta mu`` is at most ``lr_mu * clamp_grad * |sigma|``). The
distribution depends on ``sigma`` only through ``sigma^2`` and the rule is odd in ``sigma``, so a
``sigma`` that changes sign (possible when ``0.5 lr_sigma clamp_grad > 1``) describes the same
Gaussian; ``|sigma|`` is used in the clip bound.

>>> import torch
>>> mu, sigma = torch.tensor([0.5]), torch.tensor([0.2])
>>> _ = mesu_update_(mu, sigma, torch.tensor([1.0]), torch.tensor([-1.0]), lr_mu=1.0, lr_sigma=1.0,
...                  sigma_prior=0.1, memory_window=100.0, clamp_grad=10.0)
>>> round(mu.item(), 6), round(sigma.item(), 6)   # 0.5 - 0.04 - 0.04*0.5/1 ; 0.2 + 0.5*(0.04 - 0.2*0.03/1)
(0.44, 0.217)
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch.optim import Optimizer

from bimu.optim._checks import check_number


@torch.no_grad()
def mesu_update_(mu: torch.Tensor, sigma: torch.Tensor, grad_mu: torch.Tensor, grad_sigma: torch.Tensor, *,
                 lr_mu: float, lr_sigma: float, sigma_prior: float, memory_window: float, clamp_grad: float,
                 mu_prior: float = 0.0) -> tuple[torch.Tensor, torch.Tensor]:
    """One MESU step on ``(mu, sigma)`` in place, both computed from the previous values."""
    bound = clamp_grad / sigma.abs()
    g_mu = torch.maximum(torch.minimum(grad_mu, bound), -bound)
    g_sigma = torch.maximum(torch.minimum(grad_sigma, bound), -bound)
    s2 = sigma * sigma
    n_prior_var = memory_window * sigma_prior ** 2
    d_mu = lr_mu * (-s2 * g_mu + s2 * (mu_prior - mu) / n_prior_var)
    d_sigma = 0.5 * lr_sigma * (-s2 * g_sigma + sigma * (sigma_prior ** 2 - s2) / n_prior_var)
    mu.add_(d_mu)
    sigma.add_(d_sigma)
    return mu, sigma


class MESU(Optimizer):
    """The MESU update over ``(mu, sigma)`` pairs (see the module docstring).

    Args:
        pairs: iterable of ``(mu, sigma)`` parameter pairs of the same shape (e.g.
            :meth:`bimu.nn.GaussianMLP.pairs`); their ``.grad`` are ``dC/dmu`` and ``dC/dsigma``.
        lr_mu, lr_sigma: ``alpha_mu``, ``alpha_sigma`` (> 0).
        sigma_prior: prior standard deviation (> 0).
        mu_prior: prior mean.
        memory_window: ``N`` (> 0), in updates.
        clamp_grad: gradients are clipped to ``+-clamp_grad / |sigma|`` (> 0).
    """

    def __init__(self, pairs: Iterable, lr_mu: float = 1.6, lr_sigma: float = 2.1, sigma_prior: float = 0.3,
                 mu_prior: float = 0.0, memory_window: float = 600_000.0, clamp_grad: float = 0.36):
        pairs = [tuple(pair) for pair in pairs]
        for i, pair in enumerate(pairs):
            if len(pair) != 2 or pair[0].shape != pair[1].shape:
                raise ValueError(f"pairs[{i}] must be a (mu, sigma) pair of equal shapes")
        if not pairs:
            raise ValueError("pairs must not be empty")
        defaults = dict(
            lr_mu=check_number("lr_mu", lr_mu, low=0, low_inclusive=False),
            lr_sigma=check_number("lr_sigma", lr_sigma, low=0, low_inclusive=False),
            sigma_prior=check_number("sigma_prior", sigma_prior, low=0, low_inclusive=False),
            mu_prior=check_number("mu_prior", mu_prior),
            memory_window=check_number("memory_window", memory_window, low=0, low_inclusive=False),
            clamp_grad=check_number("clamp_grad", clamp_grad, low=0, low_inclusive=False),
        )
        super().__init__([p for pair in pairs for p in pair], defaults)

    @torch.no_grad()
    def step(self, closure=None):
        """One MESU step; a pair whose two gradients are both ``None`` is left unchanged."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            params = group["params"]
            for mu, sigma in zip(params[0::2], params[1::2]):
                if mu.grad is None and sigma.grad is None:
                    continue
                g_mu = mu.grad if mu.grad is not None else torch.zeros_like(mu)
                g_sigma = sigma.grad if sigma.grad is not None else torch.zeros_like(sigma)
                mesu_update_(mu, sigma, g_mu, g_sigma, lr_mu=group["lr_mu"], lr_sigma=group["lr_sigma"],
                             sigma_prior=group["sigma_prior"], memory_window=group["memory_window"],
                             clamp_grad=group["clamp_grad"], mu_prior=group["mu_prior"])
        return loss

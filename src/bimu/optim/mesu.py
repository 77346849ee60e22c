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

from collections.abc import Iterable, Sequence

import torch

from bimu.nn.gaussian import gaussian_partner
from bimu.optim._base import BimuOptimizer, run_closure
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


def _pair_indices(params: Sequence[torch.Tensor]) -> list[list[int]]:
    """``[[i_mu, i_sigma], ...]`` within one group, from the layers' :func:`bimu.nn.pair_gaussian` declarations."""
    position = {id(p): i for i, p in enumerate(params)}
    pairs = []
    for i, p in enumerate(params):
        found = gaussian_partner(p)
        if found is None:
            raise ValueError(f"parameter {i} of the group (shape {tuple(p.shape)}) is neither the mu nor the "
                             f"sigma of a declared Gaussian: bimu.nn.GaussianLinear declares its own, other "
                             f"layers call bimu.nn.pair_gaussian(mu, sigma)")
        role, partner = found
        if id(partner) not in position:
            raise ValueError(f"parameter {i} of the group is a {role} whose partner is not in the same param "
                             f"group: MESU updates mu and sigma together")
        if role == "mu":
            pairs.append([i, position[id(partner)]])
    return pairs


class MESU(BimuOptimizer):
    """The MESU update of Gaussian mean-field parameters (see the module docstring).

    Args:
        params: ordinary parameters or param groups holding, for every Gaussian, its ``mu`` and its
            ``sigma`` (``model.parameters()`` of a :class:`bimu.nn.GaussianMLP`); each parameter's
            role and partner come from the layers' :func:`bimu.nn.pair_gaussian` declarations, and
            the pairs found are kept in the group as ``mu_sigma`` (index pairs). Their ``.grad`` are
            ``dC/dmu`` and ``dC/dsigma``.
        lr_mu, lr_sigma: ``alpha_mu``, ``alpha_sigma`` (> 0).
        sigma_prior: prior standard deviation (> 0).
        mu_prior: prior mean.
        memory_window: ``N`` (> 0), in updates.
        clamp_grad: gradients are clipped to ``+-clamp_grad / |sigma|`` (> 0).

    A group may set any of these (its own prior, say). MESU keeps no state besides its groups.

    >>> import torch
    >>> from bimu.nn import GaussianLinear
    >>> layer = GaussianLinear(3, 2)
    >>> opt = MESU(layer.parameters(), memory_window=100.0)
    >>> opt.param_groups[0]["mu_sigma"]          # mu_weight/sigma_weight, mu_bias/sigma_bias
    [[0, 1], [2, 3]]
    """

    def __init__(self, params: Iterable, lr_mu: float = 1.6, lr_sigma: float = 2.1, sigma_prior: float = 0.3,
                 mu_prior: float = 0.0, memory_window: float = 600_000.0, clamp_grad: float = 0.36):
        defaults = dict(lr_mu=lr_mu, lr_sigma=lr_sigma, sigma_prior=sigma_prior, mu_prior=mu_prior,
                        memory_window=memory_window, clamp_grad=clamp_grad)
        super().__init__(params, defaults)

    def _check_group(self, group):
        for name in ("lr_mu", "lr_sigma", "sigma_prior", "memory_window", "clamp_grad"):
            group[name] = check_number(name, group[name], low=0, low_inclusive=False)
        group["mu_prior"] = check_number("mu_prior", group["mu_prior"])
        group["mu_sigma"] = _pair_indices(group["params"])

    @torch.no_grad()
    def step(self, closure=None):
        """One MESU step; a pair whose two gradients are both ``None`` is left unchanged."""
        loss = run_closure(closure)
        for group in self.param_groups:
            params = group["params"]
            for i, j in group["mu_sigma"]:
                mu, sigma = params[i], params[j]
                if mu.grad is None and sigma.grad is None:
                    continue
                g_mu = mu.grad if mu.grad is not None else torch.zeros_like(mu)
                g_sigma = sigma.grad if sigma.grad is not None else torch.zeros_like(sigma)
                mesu_update_(mu, sigma, g_mu, g_sigma, lr_mu=group["lr_mu"], lr_sigma=group["lr_sigma"],
                             sigma_prior=group["sigma_prior"], memory_window=group["memory_window"],
                             clamp_grad=group["clamp_grad"], mu_prior=group["mu_prior"])
        return loss

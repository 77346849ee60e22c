"""BiMU: the bounded-memory metaplastic update of the natural parameters (appendix Eq. 16-17).

With ``g = dL/dlambda`` at ``lambda_{t-1}`` and ``t = tanh(lambda_{t-1})``::

    eta    = 1 / (beta_KL (1 - t^2) + 2 beta_L t g + 2 beta_L |g| + 1 / alpha_max)
    lambda = lambda - eta * (gamma beta_L g + beta_KL / N (lambda - lambda_prior) (1 - t^2))

Since ``|t| < 1``, ``t g + |g| >= 0``: the denominator is at least ``1 / alpha_max`` and
``0 < eta <= alpha_max`` always. Consolidation (``lambda g < 0``, the step grows ``|lambda|``) gets a
larger ``eta`` than de-consolidation. ``1 - tanh^2`` is used, never ``cosh``, so ``|lambda|`` up to
1e4 stays finite. With ``beta_L = beta_KL = gamma = 1`` this is the paper's Eq. 6-7.

>>> import torch
>>> lam = torch.tensor([0.0, 2.0, -2.0]); g = torch.tensor([0.1, -0.1, -0.1])
>>> eta = bimu_learning_rate(lam, g, lr_max=1.0)
>>> bool((eta > 0).all() and (eta <= 1.0).all()), bool(eta[1] > eta[2])   # consolidation wins
(True, True)
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import torch

from bimu.optim._base import BimuOptimizer, run_closure
from bimu.optim._checks import check_number, check_prior


def bimu_learning_rate(
    lam: torch.Tensor,
    grad: torch.Tensor,
    lr_max: float,
    likelihood_multiplier: float = 1.0,
    kl_multiplier: float = 1.0,
) -> torch.Tensor:
    """Metaplastic step size ``eta(lambda, g)`` of the appendix (element-wise)."""
    t = torch.tanh(lam)
    var = 1.0 - t * t
    denom = kl_multiplier * var + 2.0 * likelihood_multiplier * (t * grad + grad.abs()) + 1.0 / lr_max
    return 1.0 / denom


@torch.no_grad()
def bimu_update_(
    lam: torch.Tensor,
    grad: torch.Tensor,
    *,
    lr: float,
    lr_max: float,
    likelihood_multiplier: float,
    kl_multiplier: float,
    memory_window: float,
    prior: float | torch.Tensor = 0.0,
) -> torch.Tensor:
    """Apply one BiMU step to ``lam`` in place; returns the step size ``eta`` used."""
    t = torch.tanh(lam)
    var = 1.0 - t * t
    eta = 1.0 / (kl_multiplier * var + 2.0 * likelihood_multiplier * (t * grad + grad.abs()) + 1.0 / lr_max)
    direction = (lr * likelihood_multiplier) * grad + (kl_multiplier / memory_window) * (lam - prior) * var
    lam.sub_(eta * direction)
    return eta


class BiMU(BimuOptimizer):
    """Binary Metaplasticity from Uncertainty (Algorithm 1 with the appendix's scaled objective).

    ``p.grad`` is read as ``dL/dlambda`` (for :class:`bimu.nn.BernoulliLinear` parameters, autograd
    through the relaxation gives exactly ``sum_k dL/dw_k (1 - w_k^2) / T``).

    Args:
        params: the natural parameters (iterable of tensors or parameter groups; a group may set any
            of the hyperparameters below, ``prior`` included).
        lr: ``gamma``, scaling the data term.
        lr_max: ``alpha_max``, the largest step size.
        likelihood_multiplier: ``beta_L``.
        kl_multiplier: ``beta_KL`` (0 allowed: no stability/forgetting terms).
        memory_window: ``N``, the forgetting horizon in updates.
        prior: ``lambda_prior``: a float (kept in the param group), a tensor that broadcasts to every
            parameter of the group, or a sequence of one such tensor per parameter (tensors are kept
            per parameter in ``state[p]["prior"]``, with the group's ``prior`` set to ``None``).
        skip_unlabelled: when no parameter has a non-zero gradient (an unqueried example), a group
            with ``skip_unlabelled`` leaves ``lambda`` unchanged, forgetting term included; the example
            is counted as seen either way.

    The counters ``examples_seen`` (steps) and ``updates_applied`` (steps that moved some group) live
    in the state of the first parameter, as ``torch.optim.LBFGS`` keeps its global counters, so
    ``state_dict()`` carries them with the priors and the groups' hyperparameters.

    >>> import torch
    >>> a, b = torch.nn.Parameter(torch.zeros(2)), torch.nn.Parameter(torch.zeros(1))
    >>> opt = BiMU([a], memory_window=10.0)
    >>> opt.add_param_group({"params": [b], "prior": 2.0, "lr_max": 0.5})
    >>> a.grad, b.grad = torch.tensor([0.1, -0.1]), torch.zeros(1)
    >>> opt.step(); opt.updates_applied, opt.examples_seen, b.item() > 0   # b pulled towards its prior
    (1, 1, True)
    """

    _spread_prior = False  # only while the constructor hands out one prior tensor per parameter

    def __init__(
        self,
        params: Iterable,
        lr: float = 1.0,
        lr_max: float = 1.0,
        likelihood_multiplier: float = 1.0,
        kl_multiplier: float = 1.0,
        memory_window: float = 1000.0,
        prior: float | torch.Tensor | Sequence[torch.Tensor] = 0.0,
        skip_unlabelled: bool = True,
    ):
        defaults = dict(lr=lr, lr_max=lr_max, likelihood_multiplier=likelihood_multiplier,
                        kl_multiplier=kl_multiplier, memory_window=memory_window, prior=prior,
                        skip_unlabelled=skip_unlabelled)
        self._spread_prior = not isinstance(prior, (int, float, torch.Tensor))
        if self._spread_prior:  # one tensor per parameter, in order across the groups that take it
            self._pending_priors = list(prior)
            defaults["prior"] = None
        super().__init__(params, defaults)
        if self._spread_prior and self._pending_priors:
            raise ValueError(f"prior must give one tensor per parameter, got {len(self._pending_priors)} "
                             f"more than the parameters")
        del self._spread_prior  # the class default (False) again
        self.__dict__.pop("_pending_priors", None)
        self.defaults["prior"] = 0.0 if defaults["prior"] is None else defaults["prior"]
        first = self.param_groups[0]["params"][0]
        self.state[first].setdefault("examples_seen", 0)
        self.state[first].setdefault("updates_applied", 0)

    def _check_group(self, group):
        for name in ("lr", "lr_max", "likelihood_multiplier", "memory_window"):
            group[name] = check_number(name, group[name], low=0, low_inclusive=False)
        group["kl_multiplier"] = check_number("kl_multiplier", group["kl_multiplier"], low=0)
        group["skip_unlabelled"] = bool(group["skip_unlabelled"])
        prior, params = group["prior"], group["params"]
        if prior is None and self._spread_prior:
            if len(self._pending_priors) < len(params):
                raise ValueError(f"prior must give one tensor per parameter, got "
                                 f"{len(self._pending_priors)} for the {len(params)} parameters left")
            prior, self._pending_priors = self._pending_priors[:len(params)], self._pending_priors[len(params):]
        elif prior is None:
            raise ValueError("prior must be a number, a tensor or one tensor per parameter, got None")
        if isinstance(prior, (int, float)):
            group["prior"] = check_number("prior", prior)
            return
        if isinstance(prior, torch.Tensor):
            prior = [prior] * len(params)
        prior = list(prior)
        if len(prior) != len(params):
            raise ValueError(f"prior must give one tensor per parameter ({len(params)}), got {len(prior)}")
        prior = [check_prior(f"prior {i}", pr, p) for i, (pr, p) in enumerate(zip(prior, params))]
        for p, pr in zip(params, prior):
            self.state[p]["prior"] = pr
        group["prior"] = None

    def _counters(self) -> dict:
        return self.state[self.param_groups[0]["params"][0]]

    @property
    def examples_seen(self) -> int:
        """Steps taken (every example seen, queried or not)."""
        return int(self._counters().get("examples_seen", 0))

    @property
    def updates_applied(self) -> int:
        """Steps that moved ``lambda`` in some group."""
        return int(self._counters().get("updates_applied", 0))

    @property
    def update_rate(self) -> float:
        """Fraction of seen examples that triggered an update (the budget controller's ``Q``)."""
        return self.updates_applied / self.examples_seen if self.examples_seen else 0.0

    @torch.no_grad()
    def step(self, closure=None):
        """One BiMU step from the current ``p.grad``; returns the closure's loss if given."""
        loss = run_closure(closure)
        counters = self._counters()
        counters["examples_seen"] = counters.get("examples_seen", 0) + 1
        has_grad = any(p.grad is not None and bool(p.grad.any()) for g in self.param_groups for p in g["params"])
        updated = False
        for group in self.param_groups:
            if not has_grad and group["skip_unlabelled"]:
                continue
            for p in group["params"]:
                prior = group["prior"] if group["prior"] is not None else self.state[p]["prior"]
                grad = p.grad if p.grad is not None else torch.zeros_like(p)
                bimu_update_(p, grad, lr=group["lr"], lr_max=group["lr_max"],
                             likelihood_multiplier=group["likelihood_multiplier"],
                             kl_multiplier=group["kl_multiplier"], memory_window=group["memory_window"],
                             prior=prior)
            updated = True
        if updated:
            counters["updates_applied"] = counters.get("updates_applied", 0) + 1
        return loss

    def _upgrade_state_dict(self, state_dict):
        """A state dict of the layout that kept the counters beside ``state`` (and the priors outside)."""
        counters = state_dict.pop("counters", None)
        if counters is not None and state_dict["param_groups"]:
            first = state_dict["param_groups"][0]["params"][0]
            state_dict["state"].setdefault(first, {}).update(counters)

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

import math
from collections.abc import Iterable, Sequence

import torch
from torch.optim import Optimizer


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


def _check_positive(name: str, value: float, allow_zero: bool = False) -> float:
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number, got {value!r}") from None
    ok = value >= 0 if allow_zero else value > 0
    if not ok or not math.isfinite(value):
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name} must be finite and {bound}, got {value}")
    return value


class BiMU(Optimizer):
    """Binary Metaplasticity from Uncertainty (Algorithm 1 with the appendix's scaled objective).

    ``p.grad`` is read as ``dL/dlambda`` (for :class:`bimu.nn.BernoulliLinear` parameters, autograd
    through the relaxation gives exactly ``mean_k dL/dw_k (1 - w_k^2) / T``).

    Args:
        params: the natural parameters (iterable of tensors or parameter groups).
        lr: ``gamma``, scaling the data term.
        lr_max: ``alpha_max``, the largest step size.
        likelihood_multiplier: ``beta_L``.
        kl_multiplier: ``beta_KL`` (0 allowed: no stability/forgetting terms).
        memory_window: ``N``, the forgetting horizon in updates.
        prior: ``lambda_prior``; a float, or one tensor per parameter (a single tensor if there is
            one parameter), each broadcastable to its parameter.
        skip_unlabelled: a step whose gradients are all zero or ``None`` (an unqueried example)
            leaves ``lambda`` unchanged, forgetting term included, but counts the example as seen.

    The counters ``updates_applied`` and ``examples_seen`` survive ``state_dict()``.
    """

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
        defaults = dict(
            lr=_check_positive("lr", lr),
            lr_max=_check_positive("lr_max", lr_max),
            likelihood_multiplier=_check_positive("likelihood_multiplier", likelihood_multiplier),
            kl_multiplier=_check_positive("kl_multiplier", kl_multiplier, allow_zero=True),
            memory_window=_check_positive("memory_window", memory_window),
        )
        super().__init__(params, defaults)
        self.skip_unlabelled = bool(skip_unlabelled)
        self.updates_applied = 0
        self.examples_seen = 0
        all_params = [p for g in self.param_groups for p in g["params"]]
        self._priors = self._resolve_prior(prior, all_params)

    @staticmethod
    def _resolve_prior(prior, params):
        if isinstance(prior, (int, float)):
            if not math.isfinite(float(prior)):
                raise ValueError(f"prior must be finite, got {prior}")
            return [float(prior)] * len(params)
        if isinstance(prior, torch.Tensor):
            prior = [prior]
        prior = list(prior)
        if len(prior) != len(params):
            raise ValueError(f"prior must give one tensor per parameter ({len(params)}), got {len(prior)}")
        out = []
        for i, (pr, p) in enumerate(zip(prior, params)):
            pr = torch.as_tensor(pr, dtype=p.dtype, device=p.device)
            try:
                torch.broadcast_shapes(pr.shape, p.shape)
            except RuntimeError:
                raise ValueError(
                    f"prior {i} of shape {tuple(pr.shape)} does not broadcast to parameter shape {tuple(p.shape)}"
                ) from None
            if not torch.isfinite(pr).all():
                raise ValueError(f"prior {i} holds non-finite values")
            out.append(pr)
        return out

    @property
    def update_rate(self) -> float:
        """Fraction of seen examples that triggered an update (the budget controller's ``Q``)."""
        return self.updates_applied / self.examples_seen if self.examples_seen else 0.0

    @torch.no_grad()
    def step(self, closure=None):
        """One BiMU step from the current ``p.grad``; returns the closure's loss if given."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        self.examples_seen += 1
        if self.skip_unlabelled:
            has_grad = any(
                p.grad is not None and bool(p.grad.any()) for g in self.param_groups for p in g["params"]
            )
            if not has_grad:
                return loss
        idx = 0
        for group in self.param_groups:
            for p in group["params"]:
                prior = self._priors[idx]
                idx += 1
                grad = p.grad if p.grad is not None else torch.zeros_like(p)
                bimu_update_(
                    p,
                    grad,
                    lr=group["lr"],
                    lr_max=group["lr_max"],
                    likelihood_multiplier=group["likelihood_multiplier"],
                    kl_multiplier=group["kl_multiplier"],
                    memory_window=group["memory_window"],
                    prior=prior,
                )
        self.updates_applied += 1
        return loss

    def state_dict(self):
        """The optimizer state plus the two counters."""
        state = super().state_dict()
        state["counters"] = {"updates_applied": self.updates_applied, "examples_seen": self.examples_seen}
        return state

    def load_state_dict(self, state_dict):
        """Restore the state and counters written by :meth:`state_dict`."""
        state_dict = dict(state_dict)
        counters = state_dict.pop("counters", None)
        super().load_state_dict(state_dict)
        if counters is not None:
            self.updates_applied = int(counters["updates_applied"])
            self.examples_seen = int(counters["examples_seen"])

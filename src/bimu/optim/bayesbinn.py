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

What the optimizer reads. Like every torch optimizer, :class:`BayesBiNN` takes ``p.grad = dL/dlambda``
of the loss ``L`` that was backpropagated (the Monte-Carlo mean over the ``K`` samples of the batch-mean
loss, say). Through the relaxation autograd gives ``dL/dlambda = sum_k dL/dw_k (1 - w_k^2) / T``, so
the ``mu``-gradient is ``dL/dlambda / (1 - tanh^2 lambda)``; the estimator replaces each sample's
ratio by its stable (or ``eps``-regularised) form, which needs the samples themselves. The optimizer
asks the :class:`bimu.nn.BernoulliLinear` owning each parameter to record its relaxed samples
(:func:`bimu.nn.bernoulli.keep_relaxed_samples`) and computes, with ``dL/dw_k`` filled in by the
backward pass, :func:`relaxed_mu_gradient`::

    grad_mu = sum_k dL/dw_k * relaxation_jacobian_ratio(lambda, delta_k, T, eps)

That is for a loss that averages over the samples (``sample_reduction="mean"``, the default). A loss
that sums them, ``L = sum_k l(w_k)`` (Meng et al.'s code backpropagates each sample's loss), gives
``dL/dw_k = dl(w_k)/dw_k`` and takes ``sample_reduction="sum"``: the estimator is then the mean over
``k`` (as :func:`bayesbinn_mu_gradient`). Several recorded forwards before one step add up, each
reduced over its own samples.

A parameter without recorded samples (no ``BernoulliLinear`` draws it, or it was sampled before the
optimizer existed) gets ``dL/dlambda / ((1 - tanh^2 lambda) + eps)`` (``dL/dlambda cosh^2 lambda`` at
``eps = 0``): the same at ``eps = 0``, without the numerator's ``eps`` otherwise.

Numerics: ``(1 - w^2) / (1 - tanh^2 lambda) = cosh^2(lambda) / cosh^2((lambda + delta)/T)`` is computed
from log-cosh, so that the estimator stays finite and non-zero once ``|lambda|`` saturates ``tanh``
in float32 (the naive ratio is 0/0 there).

Saturation. Once ``|lambda|`` is large the exact ratio is about ``exp(-2 delta sign(lambda)) = (1 - u) /
u`` (``T = 1``): median 1, but its mean grows like the log of the smallest uniform, so rare draws step
``lambda`` by up to about ``1e7 lr |dL/dw|``. Over a long stream those kicks throw ``lambda`` to huge
values of either sign: on 100-task Permuted MNIST with the paper's hyperparameters the exact estimator
loses even the task it has just trained on by task 31 (11.5% on the last five tasks).
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
from collections.abc import Iterable, Sequence

import torch

from bimu.nn.bernoulli import RelaxedSample, keep_relaxed_samples, take_relaxed_samples
from bimu.optim._base import BimuOptimizer, run_closure
from bimu.optim._checks import check_number, check_prior

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
    """The BayesBiNN ``mu``-gradient estimator ``mean_k dl_k/dw_k (1 - w_k^2) / (T (1 - tanh^2 lambda))``.

    ``grad_w`` and ``delta`` are ``[K, *lam.shape]``: the gradient of sample ``k``'s own loss
    ``l(w_k)`` w.r.t. its relaxed weights (not of the loss averaged over samples, which would carry an
    extra ``1/K``) and the logistic noise that produced ``w_k``. ``ratio_eps``: see
    :func:`relaxation_jacobian_ratio`.
    """
    if grad_w.shape != delta.shape or grad_w.shape[1:] != lam.shape:
        raise ValueError(f"grad_w {tuple(grad_w.shape)} and delta {tuple(delta.shape)} must be [K, "
                         f"*{tuple(lam.shape)}]")
    return (grad_w * relaxation_jacobian_ratio(lam, delta, temperature, ratio_eps)).mean(0)


SAMPLE_REDUCTIONS = ("mean", "sum")
"""How the backpropagated loss combines the ``K`` relaxed samples' losses (see the module docstring)."""


@torch.no_grad()
def relaxed_mu_gradient(lam: torch.Tensor, grad: torch.Tensor, samples: Sequence[RelaxedSample] = (),
                        ratio_eps: float = 0.0, sample_reduction: str = "mean") -> torch.Tensor:
    """The ``mu``-gradient from ``grad = dL/dlambda`` and the relaxed samples of ``lam`` (module docstring).

    Samples that no backward pass reached (``grad is None``) are ignored; a sample of an older
    ``lambda`` is an error. ``sample_reduction``: :data:`SAMPLE_REDUCTIONS`.

    >>> import torch
    >>> from bimu.nn import BernoulliLinear
    >>> from bimu.nn.bernoulli import keep_relaxed_samples, take_relaxed_samples
    >>> layer = BernoulliLinear(3, 2); keep_relaxed_samples(layer.lam)
    >>> layer(torch.randn(4, 3), n_samples=5).pow(2).mean().backward()
    >>> g_mu = relaxed_mu_gradient(layer.lam, layer.lam.grad, take_relaxed_samples(layer.lam))
    >>> bool(torch.allclose(g_mu, layer.lam.grad / (1 - torch.tanh(layer.lam) ** 2), rtol=1e-4))
    True
    """
    used = [s for s in samples if s.grad is not None]
    if not used:
        if ratio_eps:
            mu = torch.tanh(lam)
            return grad / ((1.0 - mu * mu) + ratio_eps)
        return grad * torch.exp(2.0 * log_cosh(lam))
    total = None
    for s in used:
        if s.version != lam._version:
            raise RuntimeError("a relaxed sample was drawn before lambda last changed: step (or zero_grad) "
                               "after every backward pass of a forward")
        term = s.grad * relaxation_jacobian_ratio(lam, s.noise, s.temperature, ratio_eps)
        term = term.sum(0) if sample_reduction == "mean" else term.mean(0)
        total = term if total is None else total + term
    return total


@torch.no_grad()
def bayesbinn_update_(lam: torch.Tensor, grad_mu: torch.Tensor, *, lr: float, prior_strength: float,
                      prior: float | torch.Tensor = 0.0, prior_direction: str = "towards") -> torch.Tensor:
    """``lambda <- lambda - lr (grad_mu + s prior_strength (lambda - prior))`` in place, ``s`` from
    ``prior_direction`` (:func:`prior_sign`); returns ``lam``."""
    step = grad_mu + (prior_sign(prior_direction) * prior_strength) * (lam - prior)
    return lam.sub_(lr * step)


class BayesBiNN(BimuOptimizer):
    """The BayesBiNN update of Bernoulli natural parameters (see the module docstring).

    ``p.grad`` is ``dL/dlambda``; the ``mu``-gradient is estimated inside (:func:`relaxed_mu_gradient`)
    from the relaxed samples that the :class:`bimu.nn.BernoulliLinear` owning ``p`` records for this
    optimizer. The prior natural parameter of every parameter is kept in ``state[p]["prior"]``
    (initially the group's ``prior``), so it survives ``state_dict()``.

    Args:
        params: natural parameters ``lambda`` (or param groups, each may set any argument below).
        lr: ``alpha N``.
        prior_strength: ``1 / N`` (>= 0).
        prior: initial ``lambda_prior``: a float, or a tensor that broadcasts to every parameter of the
            group (0: ``p(w = +1) = 1/2``).
        prior_direction: ``"towards"`` (Meng et al.) or ``"away"`` (the paper's runs' sign, a
            compatibility switch; :data:`PRIOR_DIRECTIONS`).
        ratio_eps: ``eps`` of the ``mu``-gradient ratio (:func:`relaxation_jacobian_ratio`; Meng et
            al.'s 1e-10 by default, 0: the exact ratio).
        sample_reduction: ``"mean"`` if the loss averages over the relaxed samples (as the loss of
            a batch averages over its examples), ``"sum"`` if it adds them up (module docstring).

    Use the optimizer's :meth:`zero_grad` between steps (it drops the samples of the gradient it
    clears; ``model.zero_grad()`` would leave them).

    >>> import torch
    >>> from bimu.nn import BinaryBayesianMLP
    >>> net = BinaryBayesianMLP([4, 3])
    >>> opt = BayesBiNN(net.parameters(), lr=0.1)
    >>> before = net.layers[0].lam.detach().clone()
    >>> net(torch.randn(2, 4), n_samples=5).logsumexp(-1).mean().backward()   # train mode: relaxed
    >>> opt.step(); bool((net.layers[0].lam != before).any())
    True
    """

    def __init__(self, params: Iterable, lr: float = 0.77, prior_strength: float = 1.25e-5,
                 prior: float | torch.Tensor = 0.0, prior_direction: str = "towards", ratio_eps: float = 1e-10,
                 sample_reduction: str = "mean"):
        defaults = dict(lr=lr, prior_strength=prior_strength, prior=prior, prior_direction=prior_direction,
                        ratio_eps=ratio_eps, sample_reduction=sample_reduction)
        super().__init__(params, defaults)

    def _check_group(self, group):
        prior_sign(group["prior_direction"])
        group["lr"] = check_number("lr", group["lr"], low=0, low_inclusive=False)
        group["prior_strength"] = check_number("prior_strength", group["prior_strength"], low=0)
        group["ratio_eps"] = check_number("ratio_eps", group["ratio_eps"], low=0)
        if group["sample_reduction"] not in SAMPLE_REDUCTIONS:
            raise ValueError(f"sample_reduction must be one of {SAMPLE_REDUCTIONS}, got {group['sample_reduction']!r}")
        if not isinstance(group["prior"], torch.Tensor):
            group["prior"] = check_number("prior", group["prior"])
        for p in group["params"]:
            check_prior("prior", group["prior"], p)

    def _init_state(self, p, group):
        prior = check_prior("prior", group["prior"], p)
        self.state[p]["prior"] = prior.expand_as(p).clone(memory_format=torch.contiguous_format)
        keep_relaxed_samples(p)

    def __setstate__(self, state):
        """Restored or copied optimizers ask their parameters' layers for samples again."""
        super().__setstate__(state)
        for group in self.param_groups:
            for p in group["params"]:
                keep_relaxed_samples(p)

    @torch.no_grad()
    def reset_prior(self) -> None:
        """Task boundary: the prior becomes the current posterior (``lambda_prior <- lambda``)."""
        for group in self.param_groups:
            for p in group["params"]:
                self.state[p]["prior"].copy_(p)

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Clear the gradients and drop the relaxed samples recorded for them."""
        for group in self.param_groups:
            for p in group["params"]:
                take_relaxed_samples(p)
        super().zero_grad(set_to_none=set_to_none)

    @torch.no_grad()
    def step(self, closure=None):
        """One BayesBiNN step from ``p.grad`` (parameters without a gradient are left unchanged)."""
        loss = run_closure(closure)
        for group in self.param_groups:
            for p in group["params"]:
                samples = take_relaxed_samples(p)
                if p.grad is None:
                    continue
                grad_mu = relaxed_mu_gradient(p, p.grad, samples, group["ratio_eps"], group["sample_reduction"])
                bayesbinn_update_(p, grad_mu, lr=group["lr"], prior_strength=group["prior_strength"],
                                  prior=self.state[p]["prior"], prior_direction=group["prior_direction"])
        return loss

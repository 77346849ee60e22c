"""Gaussian mean-field layers and the MESU network (Bonnet et al. 2025).

Each weight and bias is an independent Gaussian ``w ~ N(mu, sigma^2)``, sampled by
reparameterisation ``w = mu + sigma * eps``, ``eps ~ N(0, 1)``, so that autograd gives
``dL/dmu = mean_k dL/dw_k`` and ``dL/dsigma = mean_k dL/dw_k * eps_k`` for a loss averaged over the
``K`` Monte-Carlo samples. One weight sample per MC draw is shared by every example of a batch.

Initialisation as run for the paper (see ``shared/notes/reference-implementation.md``):
``mu ~ U(-4/sqrt(fan_in), +4/sqrt(fan_in))`` and ``sigma = 1/sqrt(fan_in)`` (the same for biases);
the two scales are arguments.

>>> import torch
>>> net = GaussianMLP([4, 3, 2])
>>> net.reset_parameters(torch.Generator().manual_seed(0))
>>> net(torch.randn(5, 4), n_samples=7, generator=torch.Generator().manual_seed(1)).shape
torch.Size([7, 5, 2])
>>> bool(torch.allclose(net.layers[0].sigma_weight, torch.full((3, 4), 0.5)))
True
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Sequence

import torch
from torch import nn
from torch.utils.weak import WeakTensorKeyDictionary

from bimu.nn.activations import check_activation, hidden_activation
from bimu.nn.real_mlp import check_features, check_sizes, fill_uniform_

GAUSSIAN_MODES = ("sample", "mean")

_PARTNERS = WeakTensorKeyDictionary()
"""Parameter -> (its role ``"mu"`` or ``"sigma"``, a weak reference to the other parameter of its pair)."""


def pair_gaussian(mu: torch.Tensor, sigma: torch.Tensor) -> None:
    """Declare ``sigma`` the standard deviation of the Gaussian whose mean is ``mu``.

    :class:`bimu.optim.MESU` pairs ordinary parameters through these declarations (kept weakly: they
    go with the parameters). :class:`GaussianLinear` declares its two pairs itself; a custom
    Gaussian layer calls this for each of its pairs.

    >>> import torch
    >>> mu, sigma = torch.nn.Parameter(torch.zeros(3)), torch.nn.Parameter(torch.ones(3))
    >>> pair_gaussian(mu, sigma)
    >>> gaussian_partner(sigma)[0], gaussian_partner(sigma)[1] is mu
    ('sigma', True)
    """
    if mu is sigma or mu.shape != sigma.shape:
        raise ValueError(f"mu and sigma must be two tensors of one shape, got {tuple(mu.shape)} and "
                         f"{tuple(sigma.shape)}")
    _PARTNERS[mu] = ("mu", weakref.ref(sigma))
    _PARTNERS[sigma] = ("sigma", weakref.ref(mu))


def gaussian_partner(p: torch.Tensor) -> tuple[str, torch.Tensor] | None:
    """``(role, partner)`` of a parameter declared by :func:`pair_gaussian`, else ``None``."""
    entry = _PARTNERS.get(p)
    if entry is None:
        return None
    partner = entry[1]()
    return None if partner is None else (entry[0], partner)


class GaussianLinear(nn.Module):
    """Linear layer whose weights and biases are mean-field Gaussians ``N(mu, sigma^2)``.

    Parameters ``mu_weight``, ``sigma_weight`` (``[out, in]``) and ``mu_bias``, ``sigma_bias``
    (``[out]``). ``sigma`` is stored directly (not through a softplus), as MESU updates it directly.

    Args:
        in_features: input width.
        out_features: output width.
        mu_init_scale: ``mu ~ U(-a/sqrt(in), a/sqrt(in))`` with ``a = mu_init_scale``.
        sigma_init_scale: ``sigma = b/sqrt(in)`` with ``b = sigma_init_scale``.
    """

    def __init__(self, in_features: int, out_features: int, mu_init_scale: float = 4.0,
                 sigma_init_scale: float = 1.0):
        super().__init__()
        self.in_features, self.out_features = check_features(in_features, out_features)
        if not mu_init_scale >= 0:
            raise ValueError(f"mu_init_scale must be >= 0, got {mu_init_scale}")
        if not sigma_init_scale > 0:
            raise ValueError(f"sigma_init_scale must be > 0, got {sigma_init_scale}")
        self.mu_init_scale = float(mu_init_scale)
        self.sigma_init_scale = float(sigma_init_scale)
        self.mu_weight = nn.Parameter(torch.empty(self.out_features, self.in_features))
        self.sigma_weight = nn.Parameter(torch.empty(self.out_features, self.in_features))
        self.mu_bias = nn.Parameter(torch.empty(self.out_features))
        self.sigma_bias = nn.Parameter(torch.empty(self.out_features))
        self.reset_parameters()
        self._declare_pairs()

    def _declare_pairs(self) -> None:
        for mu, sigma in self.pairs():
            pair_gaussian(mu, sigma)

    def __setstate__(self, state) -> None:
        """Unpickling and ``copy.deepcopy`` give new parameters: declare their pairs again."""
        super().__setstate__(state)
        self._declare_pairs()

    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
        """``mu ~ U(+-mu_init_scale/sqrt(in))``, ``sigma = sigma_init_scale/sqrt(in)``."""
        bound = self.mu_init_scale / math.sqrt(self.in_features)
        sigma0 = self.sigma_init_scale / math.sqrt(self.in_features)
        with torch.no_grad():
            fill_uniform_(self.mu_weight, bound, generator)
            fill_uniform_(self.mu_bias, bound, generator)
            self.sigma_weight.fill_(sigma0)
            self.sigma_bias.fill_(sigma0)

    def pairs(self) -> list[tuple[nn.Parameter, nn.Parameter]]:
        """``[(mu_weight, sigma_weight), (mu_bias, sigma_bias)]``, the pairs MESU updates together
        (declared with :func:`pair_gaussian`)."""
        return [(self.mu_weight, self.sigma_weight), (self.mu_bias, self.sigma_bias)]

    def forward(self, x: torch.Tensor, n_samples: int = 1, mode: str = "sample",
                generator: torch.Generator | None = None) -> torch.Tensor:
        """Pre-activations ``[samples, batch, out]`` for ``x`` ``[batch, in]`` or ``[samples, batch, in]``.

        ``mode="sample"`` draws one ``(W, b)`` per sample (in training and evaluation mode alike: a
        Gaussian network predicts with samples); ``mode="mean"`` uses ``mu`` (``K`` copies).
        """
        if mode not in GAUSSIAN_MODES:
            raise ValueError(f"unknown mode {mode!r}; expected one of {GAUSSIAN_MODES}")
        if x.dim() == 3:
            n_samples = x.shape[0]
        elif x.dim() != 2:
            raise ValueError(f"input must be [batch, in] or [samples, batch, in], got {tuple(x.shape)}")
        if int(n_samples) < 1:
            raise ValueError(f"n_samples must be >= 1, got {n_samples}")
        if x.shape[-1] != self.in_features:
            raise ValueError(f"expected {self.in_features} input features, got {x.shape[-1]}")
        n = int(n_samples)
        if mode == "sample":  # noise drawn where the generator lives, used where the parameters live
            where = self.mu_weight.device if generator is None else generator.device
            eps_w = torch.randn((n, self.out_features, self.in_features), generator=generator,
                                dtype=self.mu_weight.dtype, device=where).to(self.mu_weight.device)
            eps_b = torch.randn((n, self.out_features), generator=generator,
                                dtype=self.mu_bias.dtype, device=where).to(self.mu_bias.device)
            w = self.mu_weight + self.sigma_weight * eps_w
            b = self.mu_bias + self.sigma_bias * eps_b
        else:
            w = self.mu_weight.unsqueeze(0).expand(n, -1, -1)
            b = self.mu_bias.unsqueeze(0).expand(n, -1)
        if x.dim() == 2:
            return torch.einsum("bi,soi->sbo", x, w) + b.unsqueeze(1)
        return torch.einsum("sbi,soi->sbo", x, w) + b.unsqueeze(1)

    def extra_repr(self) -> str:
        """Summary shown by ``repr``."""
        return f"in_features={self.in_features}, out_features={self.out_features}"


GAUSSIAN_ACTIVATIONS = ("relu", "rbg")
"""Hidden activations of :class:`GaussianMLP`: ReLU (MESU's network) or the Reverse Binary Gate (the
paper's activation ablation, Table "gate ablation")."""


class GaussianMLP(nn.Module):
    """Stack of :class:`GaussianLinear` layers with ReLU (or the Reverse Binary Gate) between them and
    no normalisation (MESU).

    Args:
        sizes: widths ``[in, hidden..., out]``.
        mu_init_scale, sigma_init_scale: passed to every layer.
        activation: ``"relu"`` or ``"rbg"`` (:func:`bimu.nn.rbg`, gate ``1[|z| > gate_width]``).
        gate_width: the RBG threshold (1.0 in every paper run).

    >>> import torch
    >>> net = GaussianMLP([4, 3, 2], activation="rbg")
    >>> tuple(net(torch.randn(5, 4), n_samples=2).shape), net.activation
    ((2, 5, 2), 'rbg')
    """

    def __init__(self, sizes: Sequence[int], mu_init_scale: float = 4.0, sigma_init_scale: float = 1.0,
                 activation: str = "relu", gate_width: float = 1.0):
        super().__init__()
        check_activation(activation, GAUSSIAN_ACTIVATIONS)
        self.activation = activation
        self.gate_width = float(gate_width)
        self.sizes = check_sizes(sizes)
        self.layers = nn.ModuleList(
            GaussianLinear(a, b, mu_init_scale, sigma_init_scale) for a, b in zip(self.sizes[:-1], self.sizes[1:])
        )

    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
        """Re-initialise every layer from ``generator`` (layer order, weights before biases)."""
        for layer in self.layers:
            layer.reset_parameters(generator)

    def pairs(self) -> list[tuple[nn.Parameter, nn.Parameter]]:
        """All ``(mu, sigma)`` parameter pairs, layer by layer."""
        return [pair for layer in self.layers for pair in layer.pairs()]

    def forward(self, x: torch.Tensor, n_samples: int = 1, mode: str = "sample",
                generator: torch.Generator | None = None) -> torch.Tensor:
        """Logits ``[n_samples, batch, classes]``."""
        h = x
        last = len(self.layers) - 1
        for i, layer in enumerate(self.layers):
            h = layer(h, n_samples=n_samples, mode=mode, generator=generator)
            if i < last:
                h = hidden_activation(h, self.activation, self.gate_width)
        return h

"""Deterministic binary networks on latent real weights: STE (Courbariaux et al. 2016) and
Synaptic Metaplasticity (Laborieux et al. 2021).

- :class:`SignLinear`: binary weights ``W_b = sign(W_h)`` (``sign(0) = +1``) computed from latent
  ("hidden") real weights ``W_h``, no bias. Backward is the identity straight-through estimator for
  the weights (``dL/dW_h := dL/dW_b``, Courbariaux et al. 2016, Alg. 1, which applies the binary
  weights' gradient to the real weights; Laborieux et al. 2021 do the same).
- Activations: ``sign`` with the hard-tanh straight-through estimator
  (``dL/da := dL/da_b * 1[|a| <= 1]``, :func:`bimu.nn.sign_ste`).
- :class:`OnlineBatchNorm`: batch normalisation usable at batch size 1 (see its docstring).
- :class:`SignMLP`: ``SignLinear -> [BN] -> sign -> ... -> SignLinear -> [BN] -> logits``.

>>> import torch
>>> w = torch.tensor([-0.3, 0.0, 2.0], requires_grad=True)
>>> sign_identity(w).tolist()
[-1.0, 1.0, 1.0]
>>> (sign_identity(w) * torch.tensor([1.0, 2.0, 3.0])).sum().backward(); w.grad.tolist()
[1.0, 2.0, 3.0]
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from bimu.nn.activations import check_activation, hidden_activation
from bimu.nn.real_mlp import check_features, check_sizes, fill_fan_in_uniform_


class _SignIdentityFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, w):
        return torch.where(w >= 0, torch.ones_like(w), -torch.ones_like(w))

    @staticmethod
    def backward(ctx, grad_out):
        return grad_out


def sign_identity(w: torch.Tensor) -> torch.Tensor:
    """``sign(w)`` in {-1, +1} (``sign(0) = +1``) with an identity straight-through gradient."""
    return _SignIdentityFunction.apply(w)


class SignLinear(nn.Module):
    """Linear layer (no bias) with binary weights ``sign(W_h)`` over latent weights ``weight = W_h``.

    ``W_h`` is initialised ``U(-1/sqrt(in), 1/sqrt(in))`` (the choice is not recorded for the paper's
    runs; only the signs matter at initialisation).
    """

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.in_features, self.out_features = check_features(in_features, out_features)
        self.weight = nn.Parameter(torch.empty(self.out_features, self.in_features))
        self.reset_parameters()

    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
        """Draw ``W_h ~ U(-1/sqrt(in), 1/sqrt(in))`` from ``generator``."""
        fill_fan_in_uniform_(self.weight, generator)

    def binary_weight(self) -> torch.Tensor:
        """``W_b = sign(W_h)`` (identity straight-through gradient)."""
        return sign_identity(self.weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x @ sign(W_h)^T`` for ``x`` ``[batch, in]``."""
        if x.shape[-1] != self.in_features:
            raise ValueError(f"expected {self.in_features} input features, got {x.shape[-1]}")
        return x @ self.binary_weight().t()

    def extra_repr(self) -> str:
        """Summary shown by ``repr``."""
        return f"in_features={self.in_features}, out_features={self.out_features}"


BATCH_NORM_STATISTICS = ("online", "equinox")
"""Statistics of :class:`OnlineBatchNorm`: ``online`` (bimu's) or ``equinox`` (the paper's runs, a
compatibility switch)."""


class OnlineBatchNorm(nn.Module):
    """Batch normalisation that works in a stream of batches of size 1.

    Standard batch norm normalises with the statistics of the current mini-batch; at batch size 1
    (every run of the paper) that maps every pre-activation to exactly ``beta`` and carries no
    information (PyTorch refuses it). Here, in training mode, the running statistics are first
    updated with the batch (exponential moving averages with ``momentum``)::

        m <- (1 - momentum) m + momentum * mean_b(x)
        v <- (1 - momentum) v + momentum * mean_b((x - m)^2)

    and the batch is then normalised with them, treated as constants (no gradient flows through
    them): ``y = gamma * (x - m) / sqrt(v + eps) + beta``. In evaluation mode the running statistics
    are used unchanged, as in standard batch norm. Initial ``m = 0``, ``v = 1``, ``gamma = 1``,
    ``beta = 0``.

    >>> import torch
    >>> bn = OnlineBatchNorm(2, momentum=0.5)
    >>> y = bn(torch.tensor([[2.0, -2.0]]), update_stats=True)
    >>> bn.running_mean.tolist(), bn.running_var.tolist()
    ([1.0, -1.0], [1.0, 1.0])
    >>> [round(v, 4) for v in y[0].tolist()]
    [1.0, -1.0]

    ``statistics="equinox"`` is a compatibility switch that reproduces the norm of the paper's
    Synaptic Metaplasticity runs (``equinox.nn.BatchNorm`` in training mode, batch size 1). On the
    first training batch the running statistics *are* that batch's mean and (biased) variance. After
    that, each batch's own mean and variance are folded in with weight ``momentum``. Training
    normalises with these just-updated statistics, and the gradient flows through the batch's share
    of them. At batch size 1 a batch's variance is 0, so the running variance is 0 forever and the
    norm multiplies ``x - m`` by ``1 / sqrt(eps)`` (about 316 with the default ``eps``), in training
    and at test alike:

    >>> bn = OnlineBatchNorm(1, statistics="equinox")
    >>> _ = bn(torch.tensor([[0.5]]), update_stats=True)
    >>> _ = bn(torch.tensor([[1.5]]), update_stats=True)
    >>> round(bn.running_mean.item(), 4), bn.running_var.item()
    (0.51, 0.0)
    >>> round(bn(torch.tensor([[0.52]])).item(), 2)   # (0.52 - 0.51) / sqrt(1e-5)
    3.16
    """

    def __init__(self, num_features: int, momentum: float = 0.01, eps: float = 1e-5, statistics: str = "online"):
        super().__init__()
        if int(num_features) <= 0:
            raise ValueError(f"num_features must be positive, got {num_features}")
        if not 0.0 < momentum <= 1.0:
            raise ValueError(f"momentum must be in (0, 1], got {momentum}")
        if not eps > 0:
            raise ValueError(f"eps must be > 0, got {eps}")
        if statistics not in BATCH_NORM_STATISTICS:
            raise ValueError(f"statistics must be one of {BATCH_NORM_STATISTICS}, got {statistics!r}")
        self.num_features = int(num_features)
        self.momentum = float(momentum)
        self.eps = float(eps)
        self.statistics = statistics
        self.weight = nn.Parameter(torch.ones(self.num_features))
        self.bias = nn.Parameter(torch.zeros(self.num_features))
        self.register_buffer("running_mean", torch.zeros(self.num_features))
        self.register_buffer("running_var", torch.ones(self.num_features))
        if statistics == "equinox":
            # whether the first training batch has been seen (the statistics are then that batch's)
            self.register_buffer("initialised", torch.zeros((), dtype=torch.bool))

    @torch.no_grad()
    def update_statistics(self, x: torch.Tensor) -> None:
        """Fold the batch ``x`` ``[batch, features]`` into the running mean and variance."""
        mom = self.momentum
        self.running_mean.mul_(1.0 - mom).add_(mom * x.mean(0))
        self.running_var.mul_(1.0 - mom).add_(mom * (x - self.running_mean).pow(2).mean(0))

    def forward(self, x: torch.Tensor, update_stats: bool = False) -> torch.Tensor:
        """Normalise ``x`` ``[batch, features]``; with ``update_stats`` first fold ``x`` into the stats."""
        if update_stats and self.statistics == "equinox":
            return self._equinox_train(x)
        if update_stats:
            self.update_statistics(x.detach())
        inv = torch.rsqrt(self.running_var + self.eps)
        return (x - self.running_mean) * inv * self.weight + self.bias

    def _equinox_train(self, x: torch.Tensor) -> torch.Tensor:
        batch_mean = x.mean(0)
        batch_var = (x - batch_mean).pow(2).mean(0)
        if bool(self.initialised):
            mean = (1.0 - self.momentum) * self.running_mean + self.momentum * batch_mean
            var = (1.0 - self.momentum) * self.running_var + self.momentum * batch_var
        else:
            mean, var = batch_mean, batch_var
        with torch.no_grad():
            self.running_mean.copy_(mean)
            self.running_var.copy_(var)
            self.initialised.fill_(True)
        return (x - mean) * torch.rsqrt(var + self.eps) * self.weight + self.bias

    def extra_repr(self) -> str:
        """Summary shown by ``repr``."""
        extra = f", statistics={self.statistics!r}" if self.statistics != "online" else ""
        return f"{self.num_features}, momentum={self.momentum}, eps={self.eps}{extra}"


SIGN_MLP_ACTIVATIONS = ("sign", "rbg")
"""Hidden activations of :class:`SignMLP`."""


class SignMLP(nn.Module):
    """Binary-weight, binary-activation MLP on latent weights, with optional batch norm.

    ``SignLinear -> [OnlineBatchNorm] -> sign -> ... -> SignLinear -> [OnlineBatchNorm] -> logits``.
    Without ``batch_norm`` this is the STE network of the paper's runs; with it, the Synaptic
    Metaplasticity network (a norm after every layer, the output layer included).

    Args:
        sizes: widths ``[in, hidden..., out]``.
        batch_norm: insert :class:`OnlineBatchNorm` after every layer.
        bn_momentum: running-statistics momentum of the norms.
        activation: ``"sign"`` (hard-tanh straight-through estimator) or ``"rbg"`` (the Reverse Binary
            Gate :func:`bimu.nn.rbg`, outputs 0/1: the paper's activation ablation).
        gate_width: the RBG threshold (1.0 in every paper run).
        bn_statistics: the norms' statistics, :data:`BATCH_NORM_STATISTICS` (see :class:`OnlineBatchNorm`).

    >>> import torch
    >>> net = SignMLP([4, 3, 2], batch_norm=True, activation="rbg")
    >>> tuple(net(torch.randn(5, 4)).shape), net.activation
    ((5, 2), 'rbg')
    """

    def __init__(self, sizes: Sequence[int], batch_norm: bool = False, bn_momentum: float = 0.01,
                 activation: str = "sign", gate_width: float = 1.0, bn_statistics: str = "online"):
        super().__init__()
        check_activation(activation, SIGN_MLP_ACTIVATIONS)
        self.activation = activation
        self.gate_width = float(gate_width)
        self.sizes = check_sizes(sizes)
        self.layers = nn.ModuleList(SignLinear(a, b) for a, b in zip(self.sizes[:-1], self.sizes[1:]))
        self.batch_norm = bool(batch_norm)
        self.norms = nn.ModuleList(
            OnlineBatchNorm(b, momentum=bn_momentum, statistics=bn_statistics) for b in self.sizes[1:]
        ) if self.batch_norm else nn.ModuleList()

    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
        """Re-draw the latent weights of every layer from ``generator``."""
        for layer in self.layers:
            layer.reset_parameters(generator)

    def latent_weights(self) -> list[nn.Parameter]:
        """The latent weights ``W_h`` of every layer."""
        return [layer.weight for layer in self.layers]

    def norm_parameters(self) -> list[nn.Parameter]:
        """Batch-norm affine parameters (``gamma``, ``beta`` of every norm); empty without norms."""
        return [p for norm in self.norms for p in (norm.weight, norm.bias)]

    def forward(self, x: torch.Tensor, update_stats: bool = False) -> torch.Tensor:
        """Logits ``[batch, classes]``; ``update_stats`` folds the batch into the norms' statistics."""
        h = x
        last = len(self.layers) - 1
        for i, layer in enumerate(self.layers):
            h = layer(h)
            if self.batch_norm:
                h = self.norms[i](h, update_stats=update_stats)
            if i < last:
                h = hidden_activation(h, self.activation, self.gate_width)
        return h

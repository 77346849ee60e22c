"""The real-valued ReLU MLP of the Online EWC, SI and SGD baselines.

``RealMLP([784, 100, 10])`` is ``Linear(784, 100) -> ReLU -> Linear(100, 10)`` (``torch.nn.Linear``
with bias; ``bias=False``: without). Weights and biases are drawn ``U(-1/sqrt(fan_in), +1/sqrt(fan_in))``
- the bound of PyTorch's default ``Linear`` initialisation - from an explicit generator so that a seed
fixes them. Without biases the generator still draws them (and drops them), so the weights equal those
of the biased network of the same seed.

>>> import torch
>>> net = RealMLP([4, 3, 2])
>>> net.reset_parameters(torch.Generator().manual_seed(0))
>>> net(torch.randn(5, 4)).shape
torch.Size([5, 2])
>>> sum(p.numel() for p in net.parameters())    # (4*3 + 3) + (3*2 + 2)
23
>>> plain = RealMLP([4, 3, 2], bias=False)
>>> plain.reset_parameters(torch.Generator().manual_seed(0))
>>> sum(p.numel() for p in plain.parameters()), torch.equal(plain.layers[1].weight, net.layers[1].weight)
(18, True)

:func:`squared_gradient_sums` gives, for a batch of labelled examples, the sum over the examples of each
example's squared gradient of the cross-entropy (the empirical Fisher of Online EWC times the number of
examples) without a backward pass per example.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

SQUARED_GRADIENT_CHUNK = 4096
"""Examples per matrix product in :func:`squared_gradient_sums` (a fixed order of the sums: the same
result on every call)."""


def check_sizes(sizes: Sequence[int]) -> list[int]:
    """Validate ``[in, hidden..., out]`` widths (at least two, all positive) and return them as ints.

    >>> check_sizes([3, 2])
    [3, 2]
    >>> check_sizes([3])
    Traceback (most recent call last):
    ...
    ValueError: sizes must list at least two positive widths, got [3]
    """
    sizes = [int(s) for s in sizes]
    if len(sizes) < 2 or any(s <= 0 for s in sizes):
        raise ValueError(f"sizes must list at least two positive widths, got {sizes}")
    return sizes


def check_features(in_features: int, out_features: int) -> tuple[int, int]:
    """Validate a layer's widths (both positive) and return them as ints.

    >>> check_features(0, 3)
    Traceback (most recent call last):
    ...
    ValueError: in_features and out_features must be positive, got 0, 3
    """
    if int(in_features) <= 0 or int(out_features) <= 0:
        raise ValueError(f"in_features and out_features must be positive, got {in_features}, {out_features}")
    return int(in_features), int(out_features)


@torch.no_grad()
def fill_uniform_(t: torch.Tensor, bound: float, generator: torch.Generator | None = None) -> torch.Tensor:
    """Fill ``t`` with ``U(-bound, bound)`` drawn from ``generator``, on the generator's device when it
    is not ``t``'s (then copied to ``t``); returns ``t``.

    >>> fill_uniform_(torch.zeros(3), 0.5, torch.Generator().manual_seed(0)).abs().max().item() <= 0.5
    True
    """
    if generator is None or generator.device == t.device:
        return t.uniform_(-bound, bound, generator=generator)
    drawn = torch.empty(t.shape, dtype=t.dtype, device=generator.device).uniform_(-bound, bound, generator=generator)
    return t.copy_(drawn)


def fill_fan_in_uniform_(weight: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
    """Fill an ``[out, in]`` weight with ``U(-1/sqrt(in), 1/sqrt(in))`` (see :func:`fill_uniform_`)."""
    return fill_uniform_(weight, 1.0 / math.sqrt(weight.shape[-1]), generator)


class RealMLP(nn.Module):
    """ReLU multilayer perceptron with biased ``nn.Linear`` layers and raw logits at the output.

    Args:
        sizes: widths ``[in, hidden..., out]``.
        bias: whether the layers have biases.
    """

    def __init__(self, sizes: Sequence[int], bias: bool = True):
        super().__init__()
        self.sizes = check_sizes(sizes)
        self.layers = nn.ModuleList(nn.Linear(a, b, bias=bias) for a, b in zip(self.sizes[:-1], self.sizes[1:]))

    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
        """Draw every weight and bias ``U(-1/sqrt(fan_in), 1/sqrt(fan_in))`` from ``generator`` (without
        biases, each layer's biases are drawn all the same and dropped)."""
        with torch.no_grad():
            for layer in self.layers:
                bound = 1.0 / math.sqrt(layer.in_features)
                fill_uniform_(layer.weight, bound, generator)
                bias = layer.bias if layer.bias is not None else layer.weight.new_empty(layer.out_features)
                fill_uniform_(bias, bound, generator)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits ``[batch, classes]`` for ``x`` of shape ``[batch, in]``."""
        h = x
        last = len(self.layers) - 1
        for i, layer in enumerate(self.layers):
            h = layer(h)
            if i < last:
                h = torch.relu(h)
        return h


@torch.no_grad()
def squared_gradient_sums(weights: Sequence[torch.Tensor], biases: Sequence[torch.Tensor] | None,
                          x: torch.Tensor, y: torch.Tensor) -> tuple[list[torch.Tensor], list[torch.Tensor] | None]:
    """Sum over the examples ``(x, y)`` of each example's squared gradient of the cross-entropy at its
    label, for the network of :class:`RealMLP` with these layer weights (``[out, in]``) and ``biases``
    (None: a network without biases); returns ``(weight sums, bias sums or None)``.

    For a linear layer with inputs ``a_b`` and output deltas ``d_b`` (``softmax - one_hot`` at the logits,
    back through the weights and the ReLU's ``1[z > 0]``), the per-example gradient is ``d_b a_b^T``, so
    ``sum_b (d_b a_b^T)^2 = (d^2)^T (a^2)``, one matrix product per :data:`SQUARED_GRADIENT_CHUNK`
    examples in the weights' dtype and device.

    >>> w = [torch.zeros(2, 2)]; b = [torch.tensor([math.log(3.0), 0.0])]   # softmax (3/4, 1/4)
    >>> ws, bs = squared_gradient_sums(w, b, torch.tensor([[1.0, 2.0], [2.0, 0.0]]), torch.tensor([0, 1]))
    >>> [round(v, 4) for v in ws[0][0].tolist()], [round(v, 4) for v in bs[0].tolist()]
    ([2.3125, 0.25], [0.625, 0.625])
    """
    weights = list(weights)
    biases = list(biases) if biases is not None else None
    w_sums = [torch.zeros_like(w) for w in weights]
    b_sums = [torch.zeros_like(b) for b in biases] if biases is not None else None
    last = len(weights) - 1
    for start in range(0, int(y.shape[0]), SQUARED_GRADIENT_CHUNK):
        inputs = [x[start:start + SQUARED_GRADIENT_CHUNK].to(weights[0])]
        pre = []
        for l, w in enumerate(weights):
            z = inputs[-1] @ w.T
            if biases is not None:
                z = z + biases[l]
            pre.append(z)
            if l < last:
                inputs.append(z.clamp_min(0.0))
        labels = y[start:start + SQUARED_GRADIENT_CHUNK].to(z.device)
        d = torch.softmax(pre[-1], dim=1) - F.one_hot(labels, z.shape[1]).to(z)
        for l in range(last, -1, -1):
            d2 = d * d
            w_sums[l] += d2.T @ inputs[l].square()
            if b_sums is not None:
                b_sums[l] += d2.sum(0)
            if l:
                d = (d @ weights[l]) * (pre[l - 1] > 0)
    return w_sums, b_sums

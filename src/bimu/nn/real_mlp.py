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
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import nn


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

"""Binary activations with surrogate gradients: the Reverse Binary Gate and sign (hard-tanh STE).

The Reverse Binary Gate (paper, appendix "Activation function ablation") as run for the paper:
forward ``1[|x| > width]`` (outputs in {0, 1}); surrogate derivative
``1[width/2 < x < 3 width/2] - 1[-3 width/2 < x < -width/2]``.

>>> import torch
>>> x = torch.tensor([-2.0, -1.2, -0.3, 0.0, 0.7, 1.2, 2.0], requires_grad=True)
>>> rbg(x).tolist()
[1.0, 1.0, 0.0, 0.0, 0.0, 1.0, 1.0]
>>> rbg(x).sum().backward()
>>> x.grad.tolist()
[0.0, -1.0, 0.0, 0.0, 1.0, 1.0, 0.0]
"""

from __future__ import annotations

import torch
from torch import nn


class _RBGFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, width):
        ctx.save_for_backward(x)
        ctx.width = width
        return (x.abs() > width).to(x.dtype)

    @staticmethod
    def backward(ctx, grad_out):
        (x,) = ctx.saved_tensors
        w = ctx.width
        pos = (x > 0.5 * w) & (x < 1.5 * w)
        neg = (x > -1.5 * w) & (x < -0.5 * w)
        surrogate = pos.to(x.dtype) - neg.to(x.dtype)
        return grad_out * surrogate, None


class _SignSTEFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.where(x >= 0, torch.ones_like(x), -torch.ones_like(x))

    @staticmethod
    def backward(ctx, grad_out):
        (x,) = ctx.saved_tensors
        return grad_out * (x.abs() <= 1).to(grad_out.dtype)


def rbg(x: torch.Tensor, width: float = 1.0) -> torch.Tensor:
    """Reverse Binary Gate ``1[|x| > width]`` with the sRBG surrogate derivative."""
    return _RBGFunction.apply(x, float(width))


def sign_ste(x: torch.Tensor) -> torch.Tensor:
    """Sign in {-1, +1} (``sign(0) = +1``) with the hard-tanh straight-through estimator.

    >>> import torch
    >>> x = torch.tensor([-2.0, -0.5, 0.0, 0.5, 2.0], requires_grad=True)
    >>> sign_ste(x).tolist()
    [-1.0, -1.0, 1.0, 1.0, 1.0]
    >>> sign_ste(x).sum().backward(); x.grad.tolist()
    [0.0, 1.0, 1.0, 1.0, 0.0]
    """
    return _SignSTEFunction.apply(x)


class ReverseBinaryGate(nn.Module):
    """Module form of :func:`rbg`; ``width`` is the gate threshold (1.0 in every paper run)."""

    def __init__(self, width: float = 1.0):
        super().__init__()
        if not width > 0:
            raise ValueError(f"width must be > 0, got {width}")
        self.width = float(width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return rbg(x, self.width)

    def extra_repr(self) -> str:
        return f"width={self.width}"


class SignActivation(nn.Module):
    """Module form of :func:`sign_ste` (sign forward, hard-tanh straight-through backward)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return sign_ste(x)


def check_activation(name: str, allowed: tuple[str, ...]) -> None:
    """Refuse an activation name a network does not offer (the one message for every network).

    >>> check_activation("tanh", ("relu", "rbg"))
    Traceback (most recent call last):
    ...
    ValueError: unknown activation 'tanh'; expected one of ('relu', 'rbg')
    """
    if name not in allowed:
        raise ValueError(f"unknown activation {name!r}; expected one of {allowed}")


def hidden_activation(x: torch.Tensor, name: str, gate_width: float = 1.0) -> torch.Tensor:
    """The hidden activation ``name`` between the layers of bimu's networks: ``"relu"``, ``"sign"``
    (:func:`sign_ste`) or ``"rbg"`` (:func:`rbg` with threshold ``gate_width``).

    >>> import torch
    >>> x = torch.tensor([-2.0, -0.5, 0.5, 2.0])
    >>> [hidden_activation(x, a).tolist() for a in ("relu", "sign", "rbg")]
    [[0.0, 0.0, 0.5, 2.0], [-1.0, -1.0, 1.0, 1.0], [1.0, 0.0, 0.0, 1.0]]
    """
    if name == "rbg":
        return rbg(x, gate_width)
    if name == "sign":
        return sign_ste(x)
    if name == "relu":
        return torch.relu(x)
    raise ValueError(f"unknown activation {name!r}; expected one of ('relu', 'sign', 'rbg')")

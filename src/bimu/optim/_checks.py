"""Shared validation helpers of the optimizers (ValueError naming the parameter)."""

from __future__ import annotations

import math

import torch


def check_number(name: str, value, *, low: float | None = None, low_inclusive: bool = True,
                 high: float | None = None, high_inclusive: bool = True) -> float:
    """Return ``float(value)`` if finite and inside the given bounds, else ValueError naming ``name``.

    >>> check_number("lr", "0.5", low=0, low_inclusive=False)
    0.5
    >>> check_number("lr", 0, low=0, low_inclusive=False)
    Traceback (most recent call last):
    ...
    ValueError: lr must be > 0, got 0.0
    """
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number, got {value!r}") from None
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}")
    if low is not None and (value < low or (value == low and not low_inclusive)):
        raise ValueError(f"{name} must be {'>=' if low_inclusive else '>'} {low:g}, got {value}")
    if high is not None and (value > high or (value == high and not high_inclusive)):
        raise ValueError(f"{name} must be {'<=' if high_inclusive else '<'} {high:g}, got {value}")
    return value


def check_prior(name: str, prior, p: torch.Tensor) -> torch.Tensor:
    """A copy of ``prior`` as a tensor on ``p``'s device and dtype; ValueError naming ``name`` unless it is
    finite and broadcasts to ``p``.

    >>> import torch
    >>> check_prior("prior", 1.0, torch.zeros(2, 3)).shape
    torch.Size([])
    >>> check_prior("prior", torch.zeros(2), torch.zeros(2, 3))
    Traceback (most recent call last):
    ...
    ValueError: prior of shape (2,) does not broadcast to parameter shape (2, 3)
    """
    prior = torch.as_tensor(prior, dtype=p.dtype, device=p.device)
    try:
        fits = torch.broadcast_shapes(prior.shape, p.shape) == p.shape
    except RuntimeError:
        fits = False
    if not fits:
        raise ValueError(f"{name} of shape {tuple(prior.shape)} does not broadcast to parameter shape "
                         f"{tuple(p.shape)}")
    if not torch.isfinite(prior).all():
        raise ValueError(f"{name} holds non-finite values")
    return prior.detach().clone()

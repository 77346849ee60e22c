"""Monte-Carlo prediction with hard weight samples.

The paper's prediction rule is the argmax of the mean over samples of the log-softmax.

>>> import torch
>>> net = BinaryBayesianMLP([4, 3])
>>> g = torch.Generator().manual_seed(0)
>>> p = predict_samples(net, torch.randn(6, 4), n_samples=5, generator=g)
>>> p.shape, bool(torch.allclose(p.sum(-1), torch.ones(5, 6)))
(torch.Size([5, 6, 3]), True)
"""

from __future__ import annotations

import torch

from bimu.nn.mlp import BinaryBayesianMLP


@torch.no_grad()
def predict_samples(
    model: BinaryBayesianMLP,
    x: torch.Tensor,
    n_samples: int,
    generator: torch.Generator | None = None,
    mode: str = "hard",
) -> torch.Tensor:
    """Class probabilities ``[n_samples, batch, classes]`` from ``n_samples`` hard weight samples."""
    return torch.softmax(model(x, n_samples=n_samples, mode=mode, generator=generator), dim=-1)


@torch.no_grad()
def predict(
    model: BinaryBayesianMLP,
    x: torch.Tensor,
    n_samples: int,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Predicted classes ``[batch]``: argmax of the mean log-probability over hard samples."""
    logits = model(x, n_samples=n_samples, mode="hard", generator=generator)
    return torch.log_softmax(logits, dim=-1).mean(0).argmax(-1)

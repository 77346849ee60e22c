"""The paper's binary Bayesian network: Bernoulli layers, LayerNorm without affine, RBG or sign.

``BinaryBayesianMLP([784, 100, 10])`` is the Permuted-MNIST network
(BernoulliLinear -> LayerNorm -> RBG -> BernoulliLinear -> LayerNorm -> logits);
``BinaryBayesianMLP([8192, 19])`` is the single-layer head of OpenLORIS-Object and Animals.

>>> import torch
>>> net = BinaryBayesianMLP([784, 100, 10])
>>> net(torch.randn(2, 784), n_samples=5).shape
torch.Size([5, 2, 10])
>>> [tuple(p.shape) for p in net.parameters()]
[(100, 784), (10, 100)]
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from bimu.nn.activations import check_activation, hidden_activation
from bimu.nn.bernoulli import BernoulliLinear
from bimu.nn.real_mlp import check_sizes

ACTIVATIONS = ("rbg", "sign")

LAYER_NORM_EPS = 1e-5


def layer_norm(h: torch.Tensor) -> torch.Tensor:
    """LayerNorm over the last dimension without affine parameters (eps 1e-5, biased variance)."""
    return F.layer_norm(h, (h.shape[-1],), eps=LAYER_NORM_EPS)


class BinaryBayesianMLP(nn.Module):
    """Stack of :class:`BernoulliLinear` layers, each followed by LayerNorm (no affine).

    Args:
        sizes: widths ``[in, hidden..., out]``; at least two entries.
        activation: ``"rbg"`` (Reverse Binary Gate, the paper's choice) or ``"sign"`` (hard-tanh STE),
            applied after every hidden LayerNorm.
        output_norm: apply LayerNorm to the logits too (as in the paper's runs; it caps the largest
            softmax probability, about 0.76 with 10 classes).
        temperature: relaxation temperature of every layer.
        gate_width: RBG threshold ``a`` (1.0 in the paper's runs).
    """

    def __init__(
        self,
        sizes: Sequence[int],
        activation: str = "rbg",
        output_norm: bool = True,
        temperature: float = 1.0,
        gate_width: float = 1.0,
    ):
        super().__init__()
        sizes = check_sizes(sizes)
        check_activation(activation, ACTIVATIONS)
        if not gate_width > 0:
            raise ValueError(f"gate_width must be > 0, got {gate_width}")
        self.sizes = sizes
        self.activation = activation
        self.output_norm = bool(output_norm)
        self.gate_width = float(gate_width)
        self.layers = nn.ModuleList(
            BernoulliLinear(a, b, temperature=temperature) for a, b in zip(sizes[:-1], sizes[1:])
        )

    def _activate(self, h: torch.Tensor) -> torch.Tensor:
        return hidden_activation(h, self.activation, self.gate_width)

    def forward(
        self,
        x: torch.Tensor,
        n_samples: int = 1,
        mode: str | None = None,
        generator: torch.Generator | None = None,
        uniforms: Sequence[torch.Tensor] | None = None,
    ) -> torch.Tensor:
        """Logits ``[n_samples, batch, classes]`` for ``x`` of shape ``[batch, in]``.

        ``mode``: a :data:`bimu.nn.SAMPLING_MODES` entry, or ``None`` for relaxed samples in training
        mode and hard samples in evaluation mode (``net.train()`` / ``net.eval()``).

        ``uniforms``, if given, holds one ``[n_samples, out, in]`` tensor per layer.
        """
        if uniforms is not None and len(uniforms) != len(self.layers):
            raise ValueError(f"uniforms must hold one tensor per layer ({len(self.layers)}), got {len(uniforms)}")
        h = x
        last = len(self.layers) - 1
        for i, layer in enumerate(self.layers):
            h = layer(h, n_samples=n_samples, mode=mode, generator=generator,
                      uniforms=None if uniforms is None else uniforms[i])
            if i < last:
                h = self._activate(layer_norm(h))
            elif self.output_norm:
                h = layer_norm(h)
        return h

"""Mean-field Bernoulli binary linear layer parameterised by natural parameters lambda.

Each weight ``w in {-1, +1}`` follows ``P(w = +1) = sigmoid(2 lambda)`` (paper Sec. 3.1). Four ways to
turn ``lambda`` into weights:

- ``"relaxed"``: ``w = tanh((lambda + delta) / T)``, ``delta = 0.5 * log(u / (1 - u))``, ``u ~ U(0, 1)``
  (the Gumbel/Concrete relaxation; differentiable, used for gradients, Algorithm 1);
- ``"hard"``: ``w = +1`` if ``u < sigmoid(2 lambda)`` else ``-1`` (prediction and query scores);
- ``"mode"``: ``sign(lambda)`` (``+1`` at 0);
- ``"mean"``: ``tanh(lambda)``, the expected weight.

Without an explicit ``mode`` a layer samples as its module mode says: ``"relaxed"`` after
``.train()`` (the default), ``"hard"`` after ``.eval()``.

Relaxed samples for an optimizer: BayesBiNN's estimator needs, besides ``dL/dlambda``, the noise
``delta_k`` of each relaxed sample and ``dL/dw_k``. An optimizer asks for them with
:func:`keep_relaxed_samples`; the layer then records every relaxed forward that autograd tracks (a
:class:`RelaxedSample`, whose ``grad`` the backward pass fills) until the optimizer takes them with
:func:`take_relaxed_samples`. Records of an older ``lambda`` (changed in place since) are dropped at
the next forward.

Uniforms are clipped to ``[1e-10, 1 - 1e-10]`` as in the paper's code (in float32 the upper bound is
1, which ``torch.rand`` never reaches), bounding ``|delta|`` by about 11.5.

>>> import torch
>>> layer = BernoulliLinear(3, 2)
>>> with torch.no_grad():
...     _ = layer.lam.copy_(torch.tensor([[0.0, 1.0, -1.0], [2.0, -2.0, 0.5]]))
>>> u = torch.full((1, 2, 3), 0.5)            # delta = 0: relaxed weight = tanh(lambda)
>>> torch.allclose(layer.sample_weights(1, "relaxed", uniforms=u)[0], torch.tanh(layer.lam))
True
>>> layer.sample_weights(1, "mode")[0].tolist()
[[1.0, 1.0, -1.0], [1.0, -1.0, 1.0]]
>>> layer(torch.ones(4, 3), n_samples=5, mode="hard").shape   # [samples, batch, out]
torch.Size([5, 4, 2])
"""

from __future__ import annotations

import torch
from torch import nn
from torch.utils.weak import WeakTensorKeyDictionary

from bimu.nn.real_mlp import check_features, fill_fan_in_uniform_

SAMPLING_MODES = ("relaxed", "hard", "mode", "mean")

UNIFORM_EPS = 1e-10


def relaxed_noise(u: torch.Tensor) -> torch.Tensor:
    """Logistic noise ``delta = 0.5 * (log u - log(1 - u))`` of the relaxation, with ``u`` clipped."""
    return 0.5 * torch.logit(u, eps=UNIFORM_EPS)


class RelaxedSample:
    """One relaxed forward of a :class:`BernoulliLinear`, kept for an optimizer.

    ``noise`` is ``delta_k`` ``[K, out, in]`` (the weights were ``w_k = tanh((lambda + delta_k) / T)``);
    ``temperature`` is the layer's ``T``; ``version`` is ``lambda._version`` when the sample was drawn;
    ``grad`` is ``dL/dw_k`` once a backward pass went through the sample (summed over backward passes),
    else ``None``.
    """

    __slots__ = ("noise", "temperature", "version", "grad")

    def __init__(self, noise: torch.Tensor, temperature: float, version: int):
        self.noise, self.temperature, self.version = noise, temperature, version
        self.grad = None

    def _add_grad(self, grad: torch.Tensor) -> None:
        self.grad = grad if self.grad is None else self.grad + grad


_KEPT = WeakTensorKeyDictionary()
"""``lambda`` -> the :class:`RelaxedSample` list kept for it (only for parameters an optimizer asked for)."""
_ANY_KEPT = False
"""Whether any optimizer asked for relaxed samples: until then a relaxed forward skips :data:`_KEPT`, which
``torch.compile`` cannot trace (a weak dictionary), so the training forward compiles as one graph."""


def keep_relaxed_samples(lam: torch.Tensor) -> None:
    """Ask every :class:`BernoulliLinear` owning ``lam`` to record its relaxed samples from now on."""
    global _ANY_KEPT
    _ANY_KEPT = True
    if lam not in _KEPT:
        _KEPT[lam] = []


def take_relaxed_samples(lam: torch.Tensor) -> list[RelaxedSample]:
    """The samples recorded for ``lam`` since the last call (oldest first); the record starts empty again."""
    kept = _KEPT.get(lam)
    if not kept:
        return []
    _KEPT[lam] = []
    return kept


def _record(lam: torch.Tensor, weight: torch.Tensor, noise: torch.Tensor, temperature: float) -> None:
    if not _ANY_KEPT:
        return
    kept = _KEPT.get(lam)
    if kept is None or not weight.requires_grad:
        return
    kept[:] = [s for s in kept if s.version == lam._version]
    sample = RelaxedSample(noise, temperature, lam._version)
    weight.register_hook(sample._add_grad)
    kept.append(sample)


class BernoulliLinear(nn.Module):
    """Linear layer (no bias) whose weights are mean-field Bernoulli variables in {-1, +1}.

    Args:
        in_features: input width.
        out_features: output width.
        temperature: relaxation temperature ``T`` (1 in every experiment of the paper).

    The parameter ``lam`` (shape ``[out_features, in_features]``) holds the natural parameters,
    initialised ``U(-1/sqrt(in), +1/sqrt(in))`` as in the paper's runs.
    """

    def __init__(self, in_features: int, out_features: int, temperature: float = 1.0):
        super().__init__()
        self.in_features, self.out_features = check_features(in_features, out_features)
        if not temperature > 0:
            raise ValueError(f"temperature must be > 0, got {temperature}")
        self.temperature = float(temperature)
        self.lam = nn.Parameter(torch.empty(self.out_features, self.in_features))
        self.reset_parameters()

    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
        """Re-draw ``lam ~ U(-1/sqrt(in), 1/sqrt(in))``."""
        fill_fan_in_uniform_(self.lam, generator)

    def _uniforms(self, n_samples, generator, uniforms):
        shape = (n_samples, self.out_features, self.in_features)
        if uniforms is None:  # drawn where the generator lives, used where lambda lives
            if generator is None:  # no generator argument: torch.compile can trace rand of a symbolic shape only so
                return torch.rand(shape, dtype=self.lam.dtype, device=self.lam.device)
            return torch.rand(shape, generator=generator, dtype=self.lam.dtype,
                              device=generator.device).to(self.lam.device)
        if tuple(uniforms.shape) != shape:
            raise ValueError(f"uniforms must have shape {shape}, got {tuple(uniforms.shape)}")
        return uniforms.to(dtype=self.lam.dtype, device=self.lam.device)

    def sample_weights(
        self,
        n_samples: int = 1,
        mode: str | None = None,
        generator: torch.Generator | None = None,
        uniforms: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Weights shaped ``[n_samples, out, in]`` drawn in the given sampling ``mode`` (``None``:
        ``"relaxed"`` in training mode, ``"hard"`` in evaluation mode)."""
        if mode is None:
            mode = "relaxed" if self.training else "hard"
        if mode not in SAMPLING_MODES:
            raise ValueError(f"unknown sampling mode {mode!r}; expected one of {SAMPLING_MODES}")
        if int(n_samples) < 1:
            raise ValueError(f"n_samples must be >= 1, got {n_samples}")
        n_samples = int(n_samples)
        lam = self.lam
        if mode == "relaxed":
            noise = relaxed_noise(self._uniforms(n_samples, generator, uniforms))
            w = torch.tanh((lam + noise) / self.temperature)
            _record(lam, w, noise, self.temperature)
            return w
        if mode == "hard":
            u = self._uniforms(n_samples, generator, uniforms)
            p = torch.sigmoid(2.0 * lam)
            return torch.where(u < p, 1.0, -1.0).to(lam.dtype)
        if mode == "mode":
            w = torch.where(lam >= 0, 1.0, -1.0).to(lam.dtype)
        else:
            w = torch.tanh(lam)
        return w.unsqueeze(0).expand(n_samples, -1, -1)

    def forward(
        self,
        x: torch.Tensor,
        n_samples: int = 1,
        mode: str | None = None,
        generator: torch.Generator | None = None,
        uniforms: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """``x`` is ``[batch, in]`` (shared by all samples) or ``[samples, batch, in]``.

        Returns pre-activations ``[samples, batch, out]``. One weight sample per MC draw is shared by
        all examples of the batch, as in the paper. ``mode=None`` samples as the module mode says
        (``"relaxed"`` in training, ``"hard"`` in evaluation).
        """
        if x.dim() == 3:
            n_samples = x.shape[0]
        elif x.dim() != 2:
            raise ValueError(f"input must be [batch, in] or [samples, batch, in], got {tuple(x.shape)}")
        if x.shape[-1] != self.in_features:
            raise ValueError(f"expected {self.in_features} input features, got {x.shape[-1]}")
        w = self.sample_weights(n_samples, mode, generator, uniforms)
        if x.dim() == 2:
            return torch.einsum("bi,soi->sbo", x, w)
        return torch.einsum("sbi,soi->sbo", x, w)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, temperature={self.temperature}"

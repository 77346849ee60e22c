"""Bit-packed Monte-Carlo inference for the paper's binary Bayesian networks.

A trained network of the paper's family (:class:`bimu.nn.BinaryBayesianMLP`: Bernoulli layers
without bias, LayerNorm without affine, RBG or sign, optional output LayerNorm; as trained by BiMU
or BayesBiNN) becomes a :class:`PackedNetwork`:

**Thresholds.** Weight ``i`` is ``+1`` with probability ``p_i = sigmoid(2 lambda_i)`` (float64).
It is stored as the uint32 ``t_i = ceil(p_i 2^32 - 1/2)`` clamped to ``[0, 2^32 - 1]``, and a hard
sample is ``w_i = +1`` iff ``r_i < t_i`` for a uniform uint32 ``r_i``. Then ``r < t`` iff
``(r + 1/2) / 2^32 < p`` (the float path's rule ``u < p`` with ``u = (r + 1/2)/2^32``), except
that the clamp at ``2^32 - 1`` draws ``-1`` with probability ``2^-32`` when ``p`` rounds to 1.
``t = 0`` (``p < 2^-33``) never draws ``+1``.

**Random integers.** ``r_i`` comes from a counter-based SplitMix64 stream keyed by
``(seed, sample, layer)`` (:func:`bimu.edge._kernels.stream_key`). The 32 bits of the ``r`` of
the 64 weights of one 64-bit word are bit-sliced: bit ``31 - j`` of lane ``i`` is bit ``i`` of
the stream's output number ``(row * n_words + word) * 32 + j + 1``. Comparing MSB first over 64
lanes at a time stops once every lane is decided, after about 7 of the 32 random words: 4-5x
fewer random bits than drawing a 32-bit integer per weight, with identical results.

**Inputs.** The first layer's real input is quantised to ``bits``-bit integers with a power-of-two
scale ``s = 2^e``: ``x_q = clip(rint(x / s), -(2^(bits-1) - 1), 2^(bits-1) - 1)``. The reference
float path is defined on the dequantised input ``x_q * s`` (exact in float32), see
:meth:`PackedNetwork.dequantize`. The first layer computes ``sum_i w_i x_i = 2 sum_{w_i=+1} x_i -
sum_i x_i`` with ``popcount(plane_b & w)`` over the input's two's-complement bit planes. Hidden
layers receive bits (RBG: ``{0,1}``, AND + popcount; sign: ``{-1,+1}``, XNOR + popcount).

**LayerNorm and activations** are decided exactly on the integer pre-activations ``h`` of a layer
of width ``n`` (``S = sum h``, ``Q = sum h^2``, scale ``s`` of the layer's input):
``|LN(s h)_o| > a`` iff ``(n h_o - S)^2 > a^2 (n Q - S^2) + a^2 eps n^2 / s^2`` (exact in integers
for ``a = 1``, the paper's value; one float64 rounding otherwise), and ``sign(LN(s h)_o) = +1`` iff
``n h_o >= S``. The output LayerNorm is monotone, so the vote of a sample is the first argmax of
the integer output pre-activations, as the float path's argmax over equal values.

Agreement: for identical weight samples and the same (dequantised) input, the votes equal those of
``BinaryBayesianMLP`` in float64 (tested over random networks); float32 agrees as well except when
``|LN(h)|`` falls within float32 round-off of the gate width.

>>> import torch
>>> from bimu.nn import BinaryBayesianMLP
>>> torch.manual_seed(0); net = BinaryBayesianMLP([20, 16, 3])  # doctest: +ELLIPSIS
<...>
>>> packed = PackedNetwork.from_model(net, input_max=4.0)
>>> pred = packed.predict(torch.randn(5, 20), n_samples=7, seed=1)
>>> pred.votes.shape, pred.counts.sum(1).tolist()
((7, 5), [7, 7, 7, 7, 7])
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np
import torch

from bimu.edge import _kernels as K
from bimu.nn.mlp import ACTIVATIONS, LAYER_NORM_EPS, BinaryBayesianMLP

THRESHOLD_SCALE = 2**32
"""Thresholds are ``p * 2^32`` rounded; random integers are uniform on ``[0, 2^32)``."""

MAX_INPUT_BITS = 16


def lambda_to_thresholds(lam) -> np.ndarray:
    """uint32 thresholds ``ceil(sigmoid(2 lambda) 2^32 - 1/2)`` clamped to ``[0, 2^32 - 1]``.

    >>> lambda_to_thresholds(np.array([0.0, -100.0, 100.0])).tolist()
    [2147483648, 0, 4294967295]
    """
    lam_t = torch.as_tensor(np.asarray(lam) if not isinstance(lam, torch.Tensor) else lam.detach())
    p = torch.sigmoid(2.0 * lam_t.to(torch.float64)).numpy()
    t = np.ceil(p * float(THRESHOLD_SCALE) - 0.5)
    return np.clip(t, 0, THRESHOLD_SCALE - 1).astype(np.uint32)


def _n_words(n: int) -> int:
    return (n + 63) // 64


def _valid_mask(n: int) -> np.uint64:
    r = n % 64
    return np.uint64(0xFFFFFFFFFFFFFFFF) if r == 0 else np.uint64((1 << r) - 1)


def _pack_lanes(bits: np.ndarray) -> np.ndarray:
    """Pack a 0/1 array ``[..., n]`` into little-endian uint64 words ``[..., ceil(n/64)]``."""
    n = bits.shape[-1]
    pad = _n_words(n) * 64 - n
    if pad:
        bits = np.concatenate([bits, np.zeros(bits.shape[:-1] + (pad,), dtype=bits.dtype)], axis=-1)
    packed = np.packbits(bits.astype(np.uint8), axis=-1, bitorder="little")
    return np.ascontiguousarray(packed).view("<u8").astype(np.uint64)


def _unpack_lanes(words: np.ndarray, n: int) -> np.ndarray:
    """Inverse of :func:`_pack_lanes`: uint8 0/1 array ``[..., n]``."""
    b = np.ascontiguousarray(words.astype("<u8")).view(np.uint8)
    return np.unpackbits(b, axis=-1, bitorder="little")[..., :n]


def threshold_planes(thresholds: np.ndarray) -> np.ndarray:
    """Bit-sliced thresholds ``[out, n_words, 32]``: entry ``j`` holds bit ``31 - j`` of 64 weights."""
    t = np.asarray(thresholds, dtype=np.uint32)
    shifts = np.arange(31, -1, -1, dtype=np.uint32)
    bits = (t[:, None, :] >> shifts[None, :, None]) & np.uint32(1)  # [out, 32, in]
    return np.ascontiguousarray(_pack_lanes(bits).transpose(0, 2, 1))


def input_exponent_for(input_max: float, bits: int) -> int:
    """Smallest ``e`` with ``input_max / 2^e <= 2^(bits-1) - 1`` (the power-of-two input scale).

    >>> input_exponent_for(4.0, 8), 2.0 ** input_exponent_for(4.0, 8) * 127
    (-4, 7.9375)
    """
    if not (input_max > 0 and math.isfinite(input_max)):
        raise ValueError(f"input_max must be a positive finite number, got {input_max}")
    if not (2 <= int(bits) <= MAX_INPUT_BITS):
        raise ValueError(f"input_bits must lie in [2, {MAX_INPUT_BITS}], got {bits}")
    qmax = 2 ** (int(bits) - 1) - 1
    e = math.ceil(math.log2(input_max / qmax))
    while input_max / 2.0**e > qmax:  # guard against log2 round-off
        e += 1
    return int(e)


@dataclasses.dataclass
class PackedPrediction:
    """MC prediction of a :class:`PackedNetwork` for a batch.

    Attributes: ``votes`` ``[K, B]`` predicted class of each sample; ``counts`` ``[B, C]`` votes per
    class; ``prediction`` ``[B]`` modal class (the lowest class index among equal counts);
    ``logits`` ``[K, B, C]`` float64 outputs (after the output LayerNorm if the network has one);
    ``variation_ratio``, ``predictive_entropy``, ``aleatoric`` (expected entropy) and ``epistemic``
    (mutual information) ``[B]``, entropies in bits.
    """

    votes: np.ndarray
    counts: np.ndarray
    prediction: np.ndarray
    logits: np.ndarray
    variation_ratio: np.ndarray
    predictive_entropy: np.ndarray
    aleatoric: np.ndarray
    epistemic: np.ndarray


class PackedNetwork:
    """A binary Bayesian MLP as uint32 thresholds, with bit-packed MC inference (module docstring).

    Args:
        sizes: widths ``[in, hidden..., out]``.
        thresholds: one uint32 array ``[out, in]`` per layer (see :func:`lambda_to_thresholds`).
        activation: ``"rbg"`` or ``"sign"`` (hidden layers).
        output_norm: whether the float network applies LayerNorm to its logits (does not change
            votes; used for the logits and entropies).
        gate_width: RBG threshold ``a``.
        input_bits: bits of the quantised input (2 to 16).
        input_exponent: the input scale is ``2 ** input_exponent``.
    """

    def __init__(self, sizes: Sequence[int], thresholds: Sequence[np.ndarray], activation: str = "rbg",
                 output_norm: bool = True, gate_width: float = 1.0, input_bits: int = 8,
                 input_exponent: int = -4):
        sizes = [int(s) for s in sizes]
        if len(sizes) < 2 or any(s <= 0 for s in sizes):
            raise ValueError(f"sizes must list at least two positive widths, got {sizes}")
        if activation not in ACTIVATIONS:
            raise ValueError(f"unknown activation {activation!r}; expected one of {ACTIVATIONS}")
        if not (gate_width > 0 and math.isfinite(gate_width)):
            raise ValueError(f"gate_width must be a positive finite number, got {gate_width}")
        if not (2 <= int(input_bits) <= MAX_INPUT_BITS):
            raise ValueError(f"input_bits must lie in [2, {MAX_INPUT_BITS}], got {input_bits}")
        if len(thresholds) != len(sizes) - 1:
            raise ValueError(f"expected {len(sizes) - 1} threshold arrays, got {len(thresholds)}")
        self.sizes = sizes
        self.activation = activation
        self.output_norm = bool(output_norm)
        self.gate_width = float(gate_width)
        self.input_bits = int(input_bits)
        self.input_exponent = int(input_exponent)
        self.thresholds = []
        for i, t in enumerate(thresholds):
            t = np.asarray(t)
            if t.shape != (sizes[i + 1], sizes[i]):
                raise ValueError(f"thresholds[{i}] must have shape {(sizes[i + 1], sizes[i])}, got {t.shape}")
            if t.dtype != np.uint32:
                raise ValueError(f"thresholds[{i}] must be uint32, got {t.dtype}")
            self.thresholds.append(np.ascontiguousarray(t))
        self._check_integer_range()
        self.planes = [threshold_planes(t) for t in self.thresholds]
        self._planes_flat = np.ascontiguousarray(np.concatenate([p.ravel() for p in self.planes]))
        offs = np.cumsum([0] + [p.size for p in self.planes])
        self._plane_off = offs[:-1].astype(np.int64)
        self._sizes = np.asarray(sizes, dtype=np.int64)
        self._valid = np.asarray([_valid_mask(n) for n in sizes[:-1]], dtype=np.uint64)
        a2 = self.gate_width**2
        self._a2 = float(a2)
        c = np.zeros(len(sizes) - 1, dtype=np.float64)
        for l in range(len(sizes) - 2):
            n = sizes[l + 1]
            s = self.input_scale if l == 0 else 1.0
            c[l] = a2 * LAYER_NORM_EPS * n * n / (s * s)
        self._c_eps = c
        self._coefs = np.asarray([1 << p for p in range(self.input_bits - 1)] + [-(1 << (self.input_bits - 1))],
                                 dtype=np.int64)

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_model(cls, model: BinaryBayesianMLP, input_bits: int = 8, input_max: float | None = None,
                   input_exponent: int | None = None, calibration=None) -> PackedNetwork:
        """Pack a :class:`BinaryBayesianMLP`.

        The input scale is ``2 ** input_exponent`` if given, else the smallest power of two that
        represents ``input_max`` (or ``max |calibration|``; default 4.0) without clipping.
        """
        if not isinstance(model, BinaryBayesianMLP):
            raise TypeError(f"expected a BinaryBayesianMLP, got {type(model).__name__} (outside the "
                            "supported family: Bernoulli layers + LayerNorm + RBG/sign)")
        exponent = _resolve_exponent(input_bits, input_max, input_exponent, calibration)
        thresholds = [lambda_to_thresholds(layer.lam) for layer in model.layers]
        return cls(model.sizes, thresholds, activation=model.activation, output_norm=model.output_norm,
                   gate_width=model.gate_width, input_bits=input_bits, input_exponent=exponent)

    # ------------------------------------------------------------------ properties
    @property
    def input_scale(self) -> float:
        """The input quantisation step ``2 ** input_exponent``."""
        return 2.0**self.input_exponent

    @property
    def qmax(self) -> int:
        """Largest magnitude of a quantised input, ``2^(bits-1) - 1``."""
        return 2 ** (self.input_bits - 1) - 1

    @property
    def n_classes(self) -> int:
        """Number of output classes."""
        return self.sizes[-1]

    def nbytes(self) -> int:
        """Bytes of the thresholds (32 bits per weight)."""
        return int(sum(t.nbytes for t in self.thresholds))

    def _check_integer_range(self) -> None:
        # every integer of the exact LayerNorm test must fit in int64: |n h - S| <= 2 n max|h|
        for l in range(len(self.sizes) - 2):
            bound = self.sizes[l] * (self.qmax if l == 0 else 1)
            n = self.sizes[l + 1]
            if 4 * n * n * bound * bound >= 2**63:
                raise ValueError(
                    f"layer {l} ({self.sizes[l]}->{n}) with {self.input_bits}-bit inputs can overflow the "
                    "64-bit exact LayerNorm test; use fewer input_bits (outside the supported family)")

    # ------------------------------------------------------------------ inputs
    def quantize(self, x) -> np.ndarray:
        """Integer inputs ``x_q`` (int64 ``[B, in]``), rounded half to even and clipped to ``+-qmax``."""
        x = _as_2d(x, self.sizes[0])
        q = np.rint(x.astype(np.float64) / self.input_scale)
        return np.clip(q, -self.qmax, self.qmax).astype(np.int64)

    def dequantize(self, x) -> torch.Tensor:
        """``x_q * scale`` as float32: the input on which the float path equals the packed path."""
        return torch.from_numpy((self.quantize(x) * self.input_scale).astype(np.float32))

    def _quantize_planes(self, x):
        x = _as_2d(x, self.sizes[0])
        if x.dtype not in (np.float32, np.float64):
            x = x.astype(np.float64)
        planes, sums, _ = K.quantize_planes(np.ascontiguousarray(x), 2.0**-self.input_exponent, float(self.qmax),
                                            self.input_bits)
        return planes, sums

    # ------------------------------------------------------------------ inference
    def logits_int(self, x, n_samples: int, seed: int = 0, sample_offset: int = 0,
                   per_example: bool = False) -> np.ndarray:
        """Integer output pre-activations ``[K, B, C]`` (real value: ``input_scale * h`` for a
        single-layer network, ``h`` otherwise).

        ``per_example=False`` shares sample ``k`` (stream ``sample_offset + k``) across the batch;
        ``per_example=True`` gives example ``b`` its own samples ``sample_offset + b K + k``.
        """
        if int(n_samples) < 1:
            raise ValueError(f"n_samples must be >= 1, got {n_samples}")
        if int(seed) < 0 or int(sample_offset) < 0:
            raise ValueError("seed and sample_offset must be non-negative")
        planes, xsum = self._quantize_planes(x)
        out = np.empty((int(n_samples), planes.shape[0], self.n_classes), dtype=np.int64)
        K.mc_forward(planes, xsum, self._coefs, self._planes_flat, self._plane_off, self._sizes, self._valid,
                     self.activation == "sign", self._a2, self._c_eps, np.uint64(int(seed) % 2**64),
                     int(sample_offset), int(n_samples), bool(per_example), out)
        return out

    def predict(self, x, n_samples: int, seed: int = 0, sample_offset: int = 0,
                per_example: bool = False) -> PackedPrediction:
        """Votes, counts, modal prediction, logits and uncertainty scores (see :class:`PackedPrediction`)."""
        h = self.logits_int(x, n_samples, seed=seed, sample_offset=sample_offset, per_example=per_example)
        votes = h.argmax(-1)
        counts = np.zeros((h.shape[1], self.n_classes), dtype=np.int64)
        for k in range(h.shape[0]):
            np.add.at(counts, (np.arange(h.shape[1]), votes[k]), 1)
        scale = self.input_scale if len(self.sizes) == 2 else 1.0
        logits = torch.from_numpy(h.astype(np.float64) * scale)
        if self.output_norm:
            logits = torch.nn.functional.layer_norm(logits, (self.n_classes,), eps=LAYER_NORM_EPS)
        probs = torch.softmax(logits, dim=-1)
        from bimu import uncertainty as U

        k = h.shape[0]
        return PackedPrediction(
            votes=votes,
            counts=counts,
            prediction=counts.argmax(-1),
            logits=logits.numpy(),
            variation_ratio=1.0 - counts.max(-1) / k,
            predictive_entropy=U.predictive_entropy(probs).numpy(),
            aleatoric=U.expected_entropy(probs).numpy(),
            epistemic=U.mutual_information(probs).numpy(),
        )

    # ------------------------------------------------------------------ samples, for references
    def sample_bits(self, sample: int, layer: int, seed: int = 0) -> np.ndarray:
        """The weight bits ``[out, n_words]`` (1 = ``+1``) that inference draws for ``sample``, ``layer``."""
        pl = self.planes[layer]
        out = np.empty(pl.shape[:2], dtype=np.uint64)
        K.sample_layer_bits(pl, self._valid[layer], _key(seed, sample, layer), out)
        return out

    def sample_weights(self, sample: int, seed: int = 0) -> list[np.ndarray]:
        """The ``+-1`` float32 weights ``[out, in]`` of every layer for MC ``sample`` (as inference draws)."""
        return [(_unpack_lanes(self.sample_bits(sample, l, seed), self.sizes[l]).astype(np.float32) * 2 - 1)
                for l in range(len(self.sizes) - 1)]

    def random_integers(self, sample: int, layer: int, seed: int = 0) -> np.ndarray:
        """All 32-bit random integers ``r [out, in]`` of a layer stream (no early stop; reference)."""
        n_in, n_out = self.sizes[layer], self.sizes[layer + 1]
        words = K.random_words(_key(seed, sample, layer), n_out, _n_words(n_in))
        bits = _unpack_lanes(words[..., None], 64).astype(np.uint32)  # [out, W, 32, 64]
        shifts = np.arange(31, -1, -1, dtype=np.uint32)
        r = (bits << shifts[None, None, :, None]).sum(axis=2, dtype=np.uint64)  # [out, W, 64]
        return r.reshape(n_out, -1)[:, :n_in].astype(np.uint32)

    def __repr__(self) -> str:
        return (f"PackedNetwork(sizes={self.sizes}, activation={self.activation!r}, output_norm={self.output_norm}, "
                f"gate_width={self.gate_width}, input_bits={self.input_bits}, input_scale=2**{self.input_exponent})")


def _key(seed: int, sample: int, layer: int) -> np.uint64:
    return np.uint64(K.stream_key(np.uint64(int(seed) % 2**64), int(sample), int(layer)))


def _resolve_exponent(bits, input_max, input_exponent, calibration) -> int:
    if input_exponent is not None:
        return int(input_exponent)
    if calibration is not None:
        cal = np.abs(np.asarray(calibration, dtype=np.float64))
        if cal.size == 0 or not np.isfinite(cal).all():
            raise ValueError("calibration inputs must be a non-empty finite array")
        input_max = float(cal.max()) or 1.0
    return input_exponent_for(4.0 if input_max is None else float(input_max), int(bits))


def _as_2d(x, n_features: int) -> np.ndarray:
    if isinstance(x, torch.Tensor):
        x = x.detach().cpu().numpy()
    x = np.asarray(x)
    if x.ndim != 2 or x.shape[1] != n_features:
        raise ValueError(f"inputs must be [batch, {n_features}], got {tuple(x.shape)}")
    if not np.isfinite(x).all():
        raise ValueError("inputs contain NaN or infinite values")
    return x


def pack(obj, **kwargs) -> PackedNetwork:
    """Pack a :class:`BinaryBayesianMLP` or a method holding one as ``.model`` (BiMU, BayesBiNN)."""
    model = getattr(obj, "model", obj)
    return PackedNetwork.from_model(model, **kwargs)

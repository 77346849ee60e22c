"""MESU in the fused engine (Gaussian mean-field ReLU MLP, bounded-memory Bayesian update).

:class:`FusedMESU` has the ``info``, hyperparameters, presets, initial ``mu`` and ``sigma`` (same seed),
network, loss, update, counters and memory footprint of :class:`bimu.methods.mesu.MESUMethod`; a chunk
of online steps runs in one call of :func:`bimu.engine.gaussian.mesu_train`. Its weight noise comes
from counters (:func:`bimu.engine.gaussian.gaussian_noise`) instead of a ``torch.Generator``: for the
same seed the two paths start from the same ``(mu, sigma)`` and follow different draws; fed the same
noise (:meth:`FusedMESU.train_noise`) they compute the same steps.

>>> import numpy as np
>>> m = FusedMESU([4, 3], seed=0)
>>> m.learn_many(np.ones((2, 4), np.float32), np.array([0, 2]))
>>> tuple(m.predict_samples(np.ones((5, 4), np.float32)).shape), m.memory_bytes() == 2 * 4 * (4 * 3 + 3)
((10, 5, 3), True)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from bimu.engine.base import FusedMethod, from_tensors, layer_pairs, to_tensors, views
from bimu.engine.dense import dense_forward, offsets
from bimu.engine.gaussian import gaussian_noise, mesu_train
from bimu.engine.hparams import ACT_GATE, ACT_RELU, MesuHP, pack
from bimu.engine.query import QUERY_SALT
from bimu.engine.scores import scores_one
from bimu.methods.mesu import MESUMethod
from bimu.nn.gaussian import GaussianMLP


class FusedMESU(FusedMethod):
    """MESU in the fused engine (see the module docstring). ``mu`` and ``sigma`` are flat arrays: the
    weights of every layer, then the biases of every layer."""

    info = MESUMethod.info
    hyperparameters = MESUMethod.hyperparameters
    presets = MESUMethod.presets

    def _build(self, generator: torch.Generator) -> None:
        hp = self.hparams
        net = GaussianMLP(self.sizes, mu_init_scale=hp["mu_init_scale"], sigma_init_scale=hp["sigma_init_scale"],
                          activation=hp["activation"], gate_width=hp["gate_width"])
        net.reset_parameters(generator)
        self.K = int(hp["n_samples"])
        self._sizes = np.asarray(self.sizes, dtype=np.int64)
        self.woff, self.boff = offsets(self.sizes)
        self.P = int(self.woff[-1] + self.boff[-1])
        layers = net.layers
        self._shapes = [tuple(m.mu_weight.shape) for m in layers] + [tuple(m.mu_bias.shape) for m in layers]
        self.mu = np.concatenate([m.mu_weight.detach().numpy().reshape(-1) for m in layers]
                                 + [m.mu_bias.detach().numpy() for m in layers]).astype(self.dtype)
        self.sigma = np.concatenate([m.sigma_weight.detach().numpy().reshape(-1) for m in layers]
                                    + [m.sigma_bias.detach().numpy() for m in layers]).astype(self.dtype)
        self._hp = pack(MesuHP, {MesuHP.LR_MU: hp["lr_mu"], MesuHP.LR_SIGMA: hp["lr_sigma"],
                                 MesuHP.SIGMA_PRIOR: hp["sigma_prior"], MesuHP.MU_PRIOR: hp["mu_prior"],
                                 MesuHP.MEMORY_WINDOW: hp["memory_window"], MesuHP.CLAMP_GRAD: hp["clamp_grad"],
                                 MesuHP.GATE: hp["gate_width"] if hp["activation"] == "rbg" else 0.0}, np.float64)
        self.train_step = 0
        self._scratch_batch = 0
        self._units = np.zeros(int(self.boff[-1]), dtype=self.dtype)
        self._ones = np.ones(int(self.boff[-1]), dtype=self.dtype)

    def _scratch(self, batch: int) -> tuple:
        if self._scratch_batch != batch:
            n = self.K * batch * int(self.boff[-1])
            width = max(self.sizes)
            self._scratch_arrays = (np.zeros(self.K * self.P, self.dtype), np.zeros(n, self.dtype),
                                    np.zeros(n, self.dtype), np.zeros(n, self.dtype),
                                    *(np.zeros(width, self.dtype) for _ in range(3)),
                                    np.zeros(self.sizes[-1], self.dtype))
            self._scratch_batch = batch
        return self._scratch_arrays

    def _run(self, xn, yn, n_steps, batch) -> None:
        mesu_train(xn, yn, n_steps, batch, self.K, self.mu, self.sigma, self._sizes, self.woff, self.boff, self._hp,
                   self.train_key, np.uint64(self.train_step), *self._scratch(batch))
        self.train_step += n_steps

    def _noise(self, key, draw: int, K: int) -> np.ndarray:
        E = np.empty(K * self.P, dtype=self.dtype)
        gaussian_noise(E, key, np.uint64(draw), K, self._sizes, self.woff, self.boff)
        return E.reshape(K, self.P)

    def train_noise(self, step: int | None = None) -> list[np.ndarray]:
        """The standard normals of training ``step`` (default: the next one), one ``[K, *shape]`` array per
        torch parameter pair (:meth:`bimu.nn.gaussian.GaussianMLP.pairs` order: weight, bias of each
        layer): ``w_k = mu + sigma * eps_k`` replays the step on the torch network."""
        return self._noise_pairs(self.train_key, self.train_step if step is None else int(step), self.K)

    def eval_noise(self, n_samples: int, draw: int | None = None) -> list[np.ndarray]:
        """The normals the next prediction without a generator (or evaluation ``draw``) will use with
        ``n_samples`` samples, laid out as :meth:`train_noise`."""
        return self._noise_pairs(self.eval_key, self.eval_counter if draw is None else int(draw), int(n_samples))

    def _noise_pairs(self, key, draw: int, K: int) -> list[np.ndarray]:
        E = self._noise(key, draw, K)
        L = len(self.sizes) - 1
        ends = np.cumsum([int(np.prod(shape)) for shape in self._shapes])
        v = [E[:, b - int(np.prod(shape)):b].reshape(K, *shape) for b, shape in zip(ends, self._shapes)]
        return layer_pairs(v[:L], v[L:])

    def parameters_np(self) -> list[np.ndarray]:
        """Views of ``mu`` and ``sigma`` in the torch network's ``parameters()`` order (``mu_weight,
        sigma_weight, mu_bias, sigma_bias`` of each layer); writing into them changes the model."""
        L = len(self.sizes) - 1
        mu, sg = views(self.mu, self._shapes), views(self.sigma, self._shapes)
        return [v for l in range(L) for v in (mu[l], sg[l], mu[L + l], sg[L + l])]

    def _logits_np(self, xn, n_samples, key, draw) -> np.ndarray:
        E = self._noise(key, draw, n_samples)
        Wt = self.mu + self.sigma * E  # [S, P]: weights, then biases, of each sample
        Pw = int(self.woff[-1])
        W = np.ascontiguousarray(Wt[:, :Pw]).reshape(-1)
        Bv = np.ascontiguousarray(Wt[:, Pw:]).reshape(-1)
        out = np.empty((n_samples, xn.shape[0], self.sizes[-1]), dtype=self.dtype)
        gate = float(self._hp[MesuHP.GATE])
        dense_forward(xn, W, Bv, self._units, self._ones, self._ones, self._units, self._sizes, self.woff, self.boff,
                      n_samples, ACT_GATE if gate > 0 else ACT_RELU, gate, False, True, self.threads, out)
        return out

    def query_samples(self, x, n_samples: int, key: int) -> tuple[torch.Tensor, int]:
        """Class probabilities ``[S, 1, C]`` (float32) of one example under S fresh draws from the posterior,
        drawn from the 62-bit integer ``key``, and its prediction (argmax of the mean log-softmax).

        The draws are of the units, not the weights: given a layer's input ``h``, the pre-activations
        of a mean-field Gaussian layer are independent Gaussians, ``z_i ~ N(mu_i . h + mu_b_i,
        (sigma_i^2) . (h^2) + sigma_b_i^2)``, so drawing them layer by layer (each sample from its own
        ``h``) gives each forward pass exactly the output distribution of a weight sample, with S
        normals per unit instead of S per weight. The draws differ from :meth:`predict_samples`' and
        use a generator of their own (``numpy`` Philox keyed by ``key``); no counter of the method moves.
        """
        xn, _ = self._as_inputs(x)
        if xn.shape[0] != 1:
            raise ValueError(f"query_samples takes one example [1, D], got {tuple(xn.shape)}")
        S, L = int(n_samples), len(self.sizes) - 1
        rng = np.random.Generator(np.random.Philox(key=int(key) ^ QUERY_SALT))
        gate = float(self._hp[MesuHP.GATE])
        Pw = int(self.woff[-1])
        h = xn  # [1, n_in], then [S, n_out] per layer
        for l in range(L):
            n_in, n_out = self.sizes[l], self.sizes[l + 1]
            w = slice(int(self.woff[l]), int(self.woff[l]) + n_in * n_out)
            b = slice(Pw + int(self.boff[l]), Pw + int(self.boff[l]) + n_out)
            mu_w, sg_w = self.mu[w].reshape(n_out, n_in), self.sigma[w].reshape(n_out, n_in)
            mean = h @ mu_w.T + self.mu[b]
            var = np.square(h) @ np.square(sg_w).T + np.square(self.sigma[b])
            z = mean + np.sqrt(var) * rng.standard_normal((S, n_out), dtype=self.dtype)
            h = z if l == L - 1 else (np.abs(z) > gate).astype(self.dtype) if gate > 0 else np.maximum(z, 0)
        probs, _, pred = scores_one(np.ascontiguousarray(h, dtype=self.dtype).reshape(S, 1, -1))[:3]
        return torch.from_numpy(probs.astype(np.float32, copy=False)), int(pred[0])

    # ----------------------------------------------------------------- state
    def _float_state(self) -> list[np.ndarray]:
        return [self.mu, self.sigma]

    def modules_state(self) -> dict[str, Any]:
        """Copies of ``mu`` and ``sigma`` (per torch tensor), the training step and evaluation counters."""
        return {"mu": to_tensors(self.mu, self._shapes), "sigma": to_tensors(self.sigma, self._shapes),
                "train_step": self.train_step, **self._counters_state()}

    def load_modules_state(self, state: Mapping[str, Any]) -> None:
        """Restore what :meth:`modules_state` returned."""
        self.mu[:] = from_tensors(state["mu"], self._shapes, self.dtype, "mu")
        self.sigma[:] = from_tensors(state["sigma"], self._shapes, self.dtype, "sigma")
        self.train_step = int(state["train_step"])
        self._load_counters(state)

    def memory_bytes(self) -> int:
        """``mu`` and ``sigma`` of every weight and bias."""
        return int(self.mu.nbytes + self.sigma.nbytes)

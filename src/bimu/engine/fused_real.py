"""SGD, Online EWC, Synaptic Intelligence and experience replay in the fused engine (the real-valued
ReLU MLP).

Each class has the ``info``, hyperparameters, presets, initial weights (same seed), update rule,
task-end hook, counters and memory footprint of its torch method (:mod:`bimu.methods.sgd`,
:mod:`bimu.methods.ewc_online`, :mod:`bimu.methods.si`, :mod:`bimu.methods.replay`); a whole chunk of
online steps runs in one call of :func:`bimu.engine.real.real_train` (:func:`~bimu.engine.real.replay_train`
for replay). The methods are deterministic, and replay's draws are counter-based on both paths, so the
two paths compute the same steps (to float32 rounding: the order of a few sums differs) and replay keeps
the same buffer and replays the same slots. Online EWC's task-end Fisher (``fisher="task-end"``) is
computed by the torch method's function, :func:`~bimu.nn.real_mlp.squared_gradient_sums`, on views of
``theta``.

>>> import numpy as np
>>> m = FusedSGD([4, 8, 3], seed=0)
>>> m.learn_many(np.ones((5, 4), np.float32), np.array([0, 1, 2, 0, 1]))
>>> m.examples_seen, tuple(m.predict_samples(np.ones((2, 4), np.float32)).shape)
(5, (1, 2, 3))
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from bimu.engine.base import FusedMethod, from_tensors, layer_pairs, to_tensors, views
from bimu.engine.dense import dense_forward, offsets
from bimu.engine.hparams import ACT_RELU, RealHP, pack
from bimu.engine.real import KIND_EWC, KIND_SGD, KIND_SI, real_train, replay_train
from bimu.methods.ewc_online import OnlineEWCMethod, task_end_error
from bimu.methods.replay import (LABEL_DTYPE, ExperienceReplayMethod, check_buffer_room, check_buffer_state,
                                 replay_key)
from bimu.methods.sgd import SGDMethod
from bimu.methods.si import SynapticIntelligenceMethod
from bimu.nn.real_mlp import RealMLP, squared_gradient_sums


class FusedSGD(FusedMethod):
    """SGD on the ReLU MLP in the fused engine (see the module docstring); base of EWC and SI."""

    info = SGDMethod.info
    hyperparameters = SGDMethod.hyperparameters
    presets = SGDMethod.presets
    _kind = KIND_SGD
    _traces: tuple[str, ...] = ()
    """Names of the parameter-sized arrays the method keeps besides ``theta`` (all start at 0)."""

    def _build(self, generator: torch.Generator) -> None:
        net = RealMLP(self.sizes)
        net.reset_parameters(generator)
        self._bias = bool(self.hparams["bias"])
        self._sizes = np.asarray(self.sizes, dtype=np.int64)
        self.woff, self.boff = offsets(self.sizes)
        self._shapes = [tuple(layer.weight.shape) for layer in net.layers] + [tuple(layer.bias.shape)
                                                                               for layer in net.layers]
        # without biases the bias slots hold 0 and the kernel leaves them there
        biases = [layer.bias.detach().numpy() if self._bias else np.zeros(layer.out_features) for layer in net.layers]
        self.theta = np.concatenate([layer.weight.detach().numpy().reshape(-1) for layer in net.layers]
                                    + biases).astype(self.dtype)
        empty = np.zeros(0, dtype=self.dtype)
        self.pen = self.anchor = self.acc = self.path = empty
        for name in self._traces:
            setattr(self, name, np.zeros_like(self.theta))
        if "anchor" in self._traces:
            self.anchor = self.theta.copy()
        self._units = np.zeros(int(self.boff[-1]), dtype=self.dtype)
        self._ones = np.ones(int(self.boff[-1]), dtype=self.dtype)
        self._hp = pack(RealHP, {RealHP.LR: self.hparams["lr"], RealHP.COEF: self._coefficient(),
                                 RealHP.BIAS: float(self._bias)}, self.dtype)
        self._scratch_batch = 0
        self.tasks_seen = 0

    def _coefficient(self) -> float:
        return 0.0

    def _scratch(self, batch: int) -> tuple:
        if self._scratch_batch != batch:
            n = batch * int(self.boff[-1])
            width = max(self.sizes)
            self._scratch_arrays = (np.zeros(n, self.dtype), np.zeros(n, self.dtype), np.zeros(n, self.dtype),
                                    np.zeros(width, self.dtype), np.zeros(width, self.dtype),
                                    np.zeros(self.sizes[-1], self.dtype))
            self._scratch_batch = batch
        return self._scratch_arrays

    def _run(self, xn, yn, n_steps, batch) -> None:
        real_train(xn, yn, n_steps, batch, self.theta, self.pen, self.anchor, self.acc, self.path, self._sizes,
                   self.woff, self.boff, self._kind, self._hp, *self._scratch(batch))

    def _logits_np(self, xn, n_samples, key, draw) -> np.ndarray:
        out = np.empty((1, xn.shape[0], self.sizes[-1]), dtype=self.dtype)
        Pw = int(self.woff[-1])
        dense_forward(xn, self.theta, self.theta[Pw:], self._units, self._ones, self._ones, self._units,
                      self._sizes, self.woff, self.boff, 1, ACT_RELU, 1.0, False, True, self.threads, out)
        return out

    # ----------------------------------------------------------------- views and state
    def _float_state(self) -> list[np.ndarray]:
        """The parameters and the traces, uncopied: what :meth:`check_finite` tests after every call (a
        walk of :meth:`modules_state` copies them and costs tens of ms per ``learn_many`` call)."""
        return [self.theta, *(getattr(self, name) for name in self._traces)]

    def parameters_np(self) -> list[np.ndarray]:
        """Views of the parameters in the torch method's ``model.parameters()`` order (weight, bias of
        each layer; weights only without biases); writing into them changes the model."""
        L = len(self.sizes) - 1
        v = views(self.theta, self._shapes)
        return layer_pairs(v[:L], v[L:]) if self._bias else v[:L]

    def modules_state(self) -> dict[str, Any]:
        """Copies of the parameters and of the method's traces, the counters, the dtype."""
        state = {"theta": to_tensors(self.theta, self._shapes), "tasks_seen": self.tasks_seen,
                 **self._counters_state()}
        for name in self._traces:
            state[name] = to_tensors(getattr(self, name), self._shapes)
        return state

    def load_modules_state(self, state: Mapping[str, Any]) -> None:
        """Restore what :meth:`modules_state` returned."""
        self.theta[:] = from_tensors(state["theta"], self._shapes, self.dtype, "theta")
        for name in self._traces:
            getattr(self, name)[:] = from_tensors(state[name], self._shapes, self.dtype, name)
        self.tasks_seen = int(state["tasks_seen"])
        self._load_counters(state)

    def memory_bytes(self) -> int:
        """Parameters and the method's parameter-sized traces (as the torch method counts them: no bias
        slots without biases)."""
        trained = self.theta.size if self._bias else int(self.woff[-1])
        return int(trained * self.theta.itemsize * (1 + len(self._traces)))


class FusedOnlineEWC(FusedSGD):
    """Online EWC in the fused engine: ``pen`` is the Fisher, ``acc`` the running sum of squared
    per-example gradients, ``anchor`` the parameters at the last task end."""

    info = OnlineEWCMethod.info
    hyperparameters = OnlineEWCMethod.hyperparameters
    presets = OnlineEWCMethod.presets
    _kind = KIND_EWC
    _traces = ("pen", "anchor", "acc")
    needs_task_examples = OnlineEWCMethod.needs_task_examples

    def _build(self, generator):
        super()._build(generator)
        self.n_accumulated = 0
        self._examples_given = False

    def _coefficient(self):
        return self.hparams["importance"]

    def _run(self, xn, yn, n_steps, batch):
        super()._run(xn, yn, n_steps, batch)
        self.n_accumulated += n_steps * batch

    def task_examples(self, x, y) -> None:
        """With ``fisher="task-end"``: ``acc`` becomes the sum over ``(x, y)`` of the squared per-example
        gradients at the current parameters (no-op with ``fisher="online"``)."""
        if not self.needs_task_examples:
            return
        xn, yn = self._as_inputs(x, y)
        L = len(self.sizes) - 1
        v = [torch.from_numpy(a) for a in views(self.theta, self._shapes)]
        w_sums, b_sums = squared_gradient_sums(v[:L], v[L:] if self._bias else None, torch.from_numpy(xn),
                                               torch.from_numpy(yn))
        self.acc[:] = 0
        for dst, src in zip(views(self.acc, self._shapes), w_sums + (b_sums or [])):
            dst[...] = src.numpy()
        self.n_accumulated = len(yn)
        self._examples_given = True

    def task_end(self) -> None:
        """``F <- gamma F + F_task`` (the mean of the task's squared gradients, or with
        ``fisher_norm="sum"`` their sum); ``theta* <- theta``."""
        if self.needs_task_examples and not self._examples_given:
            raise task_end_error(self.info.name)
        self._examples_given = False
        if self.hparams["fisher_norm"] == "sum":
            scale = 1.0
        else:
            scale = 1.0 / self.n_accumulated if self.n_accumulated else 0.0
        self.pen *= self.dtype.type(self.hparams["downweighting"])
        self.pen += self.acc * self.dtype.type(scale)
        self.acc[:] = 0
        self.anchor[:] = self.theta
        self.n_accumulated = 0
        self.tasks_seen += 1

    def modules_state(self):
        """As :meth:`FusedSGD.modules_state`, plus the number of accumulated examples."""
        return {**super().modules_state(), "n_accumulated": self.n_accumulated}

    def load_modules_state(self, state):
        """Restore what :meth:`modules_state` returned."""
        super().load_modules_state(state)
        self.n_accumulated = int(state["n_accumulated"])


class FusedSynapticIntelligence(FusedSGD):
    """Synaptic Intelligence in the fused engine: ``pen`` is Omega, ``path`` the running path integral,
    ``anchor`` the parameters at the last task end."""

    info = SynapticIntelligenceMethod.info
    hyperparameters = SynapticIntelligenceMethod.hyperparameters
    presets = SynapticIntelligenceMethod.presets
    _kind = KIND_SI
    _traces = ("pen", "anchor", "path")

    def _build(self, generator):
        super()._build(generator)
        self.n_integrated = 0

    def _coefficient(self):
        return 2.0 * self.hparams["coefficient"]

    def _run(self, xn, yn, n_steps, batch):
        super()._run(xn, yn, n_steps, batch)
        self.n_integrated += n_steps

    def task_end(self) -> None:
        """``Omega += path / ((theta - theta*)^2 + xi)`` (``path / n_integrated`` with ``omega_norm="mean"``;
        clipped at 0 with ``omega_relu``), then ``path <- 0`` and ``theta* <- theta``."""
        d = self.theta - self.anchor
        path = self.path
        if self.hparams["omega_norm"] == "mean" and self.n_integrated:
            path = path / self.dtype.type(self.n_integrated)
        increment = path / (d * d + self.dtype.type(self.hparams["damping"]))
        if self.hparams["omega_relu"]:
            np.maximum(increment, 0, out=increment)
        self.pen += increment
        self.path[:] = 0
        self.anchor[:] = self.theta
        self.n_integrated = 0
        self.tasks_seen += 1

    def modules_state(self):
        """As :meth:`FusedSGD.modules_state`, plus the number of the task's updates so far."""
        return {**super().modules_state(), "n_integrated": self.n_integrated}

    def load_modules_state(self, state):
        """Restore what :meth:`modules_state` returned."""
        super().load_modules_state(state)
        self.n_integrated = int(state["n_integrated"])


class FusedReplay(FusedSGD):
    """Experience replay (:class:`~bimu.methods.replay.ExperienceReplayMethod`) in the fused engine: the
    SGD network, a reservoir buffer ``buffer_x`` ``[buffer_size, in]`` (the engine's dtype) and
    ``buffer_y`` (int64), and the counter-based draws of the torch method
    (:func:`bimu.rng.replay_slots`, :func:`bimu.rng.reservoir_slot`), so that for the same seed and
    stream both paths hold the same buffer and replay the same slots at every step
    (:func:`bimu.engine.real.replay_train`)."""

    info = ExperienceReplayMethod.info
    hyperparameters = ExperienceReplayMethod.hyperparameters
    presets = ExperienceReplayMethod.presets

    def _build(self, generator):
        super()._build(generator)
        size, features = self.hparams["buffer_size"], self.sizes[0]
        check_buffer_room(size, features)
        self.buffer_x = np.zeros((size, features), dtype=self.dtype)
        self.buffer_y = np.zeros(size, dtype=np.int64)
        self._seen = np.zeros(1, dtype=np.int64)
        self.replay_key = replay_key(self.seed)
        self._slots = np.zeros(self.hparams["replay_batch_size"] + 1, dtype=np.int64)
        self._batch_arrays: tuple | None = None

    @property
    def buffer_seen(self) -> int:
        """Labelled examples offered to the buffer so far."""
        return int(self._seen[0])

    @property
    def buffer_filled(self) -> int:
        """Slots holding an example: ``min(buffer_seen, buffer_size)``."""
        return min(self.buffer_seen, self.hparams["buffer_size"])

    def buffer(self) -> tuple[np.ndarray, np.ndarray]:
        """The stored inputs ``[buffer_filled, features]`` and labels ``[buffer_filled]`` (views, slot order)."""
        n = self.buffer_filled
        return self.buffer_x[:n], self.buffer_y[:n]

    def last_replay_slots(self) -> np.ndarray:
        """The slots replayed by the last step (a copy; empty before the first step and while the buffer
        was empty)."""
        return self._slots[:int(self._slots[-1])].copy()

    def _run(self, xn, yn, n_steps, batch) -> None:
        k = self.hparams["replay_batch_size"]
        if self._batch_arrays is None or self._batch_arrays[1].shape[0] != batch + k:
            self._batch_arrays = (np.zeros((batch + k, self.sizes[0]), self.dtype), np.zeros(batch + k, np.int64))
        XB, YB = self._batch_arrays
        replay_train(xn, yn, n_steps, batch, self.theta, self._sizes, self.woff, self.boff, self._hp, self.buffer_x,
                     self.buffer_y, self._seen, np.uint64(self.replay_key), k, XB, YB, self._slots,
                     *self._scratch(batch + k))

    def modules_state(self) -> dict[str, Any]:
        """As :meth:`FusedSGD.modules_state`, plus a copy of the buffer, the number of examples offered to
        it and the key of the replay draws (the torch method's names)."""
        return {**super().modules_state(), "buffer_x": torch.from_numpy(self.buffer_x.copy()),
                "buffer_y": torch.from_numpy(self.buffer_y.copy()), "buffer_seen": self.buffer_seen,
                "replay_key": self.replay_key}

    def load_modules_state(self, state) -> None:
        """Restore what :meth:`modules_state` returned; ValueError, changing nothing, for a buffer of another
        shape or dtype, labels out of range, a bad ``buffer_seen`` or key."""
        check_buffer_state(state, self.buffer_x.shape, self.n_classes, self.hparams["buffer_size"],
                           torch.from_numpy(self.buffer_x[:0]).dtype)
        super().load_modules_state(state)
        self.buffer_x[:] = state["buffer_x"].numpy()
        self.buffer_y[:] = state["buffer_y"].numpy()
        self._seen[0] = state["buffer_seen"]
        self.replay_key = state.get("replay_key", replay_key(self.seed))

    def memory_bytes(self) -> int:
        """The parameters plus the buffer, allocated in full (as the torch method counts them)."""
        assert LABEL_DTYPE == torch.int64
        return super().memory_bytes() + int(self.buffer_x.nbytes + self.buffer_y.nbytes)

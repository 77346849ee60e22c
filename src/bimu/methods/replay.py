"""Experience replay with a reservoir buffer (ER; Chaudhry et al. 2019, "On Tiny Episodic Memories in
Continual Learning", arXiv:1902.10486, Algorithm 1 with reservoir sampling) on the ReLU MLP of the SGD
baseline.

Each :meth:`~ExperienceReplayMethod.learn` call on a batch ``B_n`` (one example in the paper's runs):

1. draw a replay minibatch ``B_M`` of ``replay_batch_size`` distinct stored examples from the buffer,
   uniformly without replacement (the whole buffer while it holds no more than that; nothing while it
   is empty);
2. one SGD step on ``B_n`` and ``B_M`` together: ``theta <- theta - lr * dL/dtheta`` with ``L`` the
   cross-entropy averaged over the ``|B_n| + |B_M|`` examples (no momentum, as :mod:`bimu.methods.sgd`);
3. offer each example of ``B_n`` to the buffer by reservoir sampling (Vitter's Algorithm R): the
   example with 0-based stream index ``n`` fills slot ``n`` while ``n < buffer_size``, else replaces slot
   ``j`` drawn uniformly from ``0..n`` when ``j < buffer_size`` (kept with probability
   ``buffer_size / (n + 1)``), so the buffer is always a uniform sample of the labelled stream.

All draws (replay minibatches, reservoir slots) are counter-based (:mod:`bimu.rng`,
:func:`~bimu.rng.replay_slots_int`, :func:`~bimu.rng.reservoir_slot_int`): a pure function of the replay
key ``derive_key(seed, REPLAY_STREAM)`` and of the number of labelled examples offered to the buffer,
both saved by :meth:`~ExperienceReplayMethod.modules_state`. A seed gives one trajectory, a resumed run
continues it exactly, and the fused engine's replay (:class:`bimu.engine.fused_real.FusedReplay`, what
``bimu run`` uses on the CPU) draws the same slots, so the two paths keep the same buffer and replay
the same examples. The network and its initial weights are those of
:class:`~bimu.methods.sgd.SGDMethod` of the same seed, so replay and SGD differ only by the buffer. No
task boundaries are needed; unlabelled examples (:meth:`~bimu.methods.base.OnlineMethod.observe_unlabelled`)
never enter the buffer.

Memory: the buffer is allocated in full when the method is built and is part of the training state
(:meth:`~ExperienceReplayMethod.memory_bytes`, the footprint table of :mod:`bimu.methods.footprint`):
``buffer_size * (4 * features + 8)`` bytes (float32 inputs, int64 labels) on top of the parameters, e.g.
1000 x 3,144 bytes = 3.14 MB on Permuted MNIST. A replay step costs ``1 + replay_batch_size`` examples'
forward and backward passes, and ``O(buffer_size)`` for the draw of the minibatch.

>>> import torch
>>> m = ExperienceReplayMethod([4, 8, 3], seed=0, buffer_size=3, replay_batch_size=2)
>>> for i in range(5):
...     m.learn(torch.randn(1, 4), torch.tensor([i % 3]))
>>> m.updates_applied, m.examples_seen, m.buffer_seen, m.buffer_filled, tuple(m.buffer()[0].shape)
(5, 5, 5, 3, (3, 4))
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
import torch.nn.functional as F

from bimu.methods.base import MethodInfo, hyperparameter_table, positive, tensor_bytes
from bimu.methods.sgd import DETERMINISTIC_SCORES, SGDMethod, bias_switch, learning_rate
from bimu.rng import REPLAY_STREAM, derive_key, replay_slots_int, reservoir_slot_int
from bimu.untrusted import available_memory_bytes

LABEL_DTYPE = torch.int64
"""dtype of the stored labels (what ``cross_entropy`` takes): 8 bytes per buffer slot."""


def buffer_bytes(buffer_size: int, features: int) -> int:
    """Bytes of a replay buffer of ``buffer_size`` examples of ``features`` float32 inputs and an int64 label.

    >>> buffer_bytes(1000, 784)
    3144000
    """
    return int(buffer_size) * (4 * int(features) + 8)


def check_buffer_room(buffer_size: int, features: int) -> None:
    """ValueError when a buffer of ``buffer_size`` examples would not fit in the memory available."""
    need, have = buffer_bytes(buffer_size, features), available_memory_bytes()
    if have is not None and need > have:
        raise ValueError(f"hyperparameter 'buffer_size' = {buffer_size} needs {need / 2**30:.1f} GiB for the replay "
                         f"buffer of {features} features, more than the {have / 2**30:.1f} GiB available")


def replay_key(seed: int) -> int:
    """The key of a seed's replay draws: ``derive_key(seed, REPLAY_STREAM)`` as a Python integer."""
    return int(derive_key(int(seed), REPLAY_STREAM))


def check_buffer_state(state: Mapping[str, Any], shape: tuple[int, int], n_classes: int, buffer_size: int,
                       x_dtype: torch.dtype = torch.float32) -> None:
    """ValueError, naming the problem, unless ``state`` holds a buffer of ``shape`` (``x_dtype`` inputs,
    int64 labels in ``[0, n_classes)``), an integer ``buffer_seen >= 0`` and a 64-bit ``replay_key``
    (absent in states written before the draws were counter-based: then the seed's key is used)."""
    bx, by, seen = state["buffer_x"], state["buffer_y"], state["buffer_seen"]
    if not (isinstance(bx, torch.Tensor) and isinstance(by, torch.Tensor)):
        raise ValueError("replay state: buffer_x and buffer_y must be tensors")
    if tuple(bx.shape) != tuple(shape) or tuple(by.shape) != (shape[0],):
        raise ValueError(f"replay state: a buffer of {tuple(bx.shape)} inputs and {tuple(by.shape)} labels, "
                         f"not {tuple(shape)} and {(shape[0],)} (buffer_size={buffer_size}, {shape[1]} features)")
    if bx.dtype != x_dtype or by.dtype != LABEL_DTYPE:
        raise ValueError(f"replay state: buffer dtypes {bx.dtype} / {by.dtype}, not {x_dtype} / {LABEL_DTYPE}")
    if isinstance(seen, bool) or not isinstance(seen, int) or seen < 0:
        raise ValueError(f"replay state: buffer_seen must be an integer >= 0, got {seen!r}")
    if by.numel() and (int(by.min()) < 0 or int(by.max()) >= n_classes):
        raise ValueError(f"replay state: stored labels must lie in [0, {n_classes - 1}]")
    key = state.get("replay_key", 0)
    if isinstance(key, bool) or not isinstance(key, int) or not 0 <= key < 2**64:
        raise ValueError(f"replay state: replay_key must be an integer in [0, 2**64), got {key!r}")


class ExperienceReplayMethod(SGDMethod):
    """Experience replay: SGD on each incoming example together with a minibatch drawn from a reservoir buffer.

    Chaudhry et al. 2019, "On Tiny Episodic Memories in Continual Learning" (arXiv:1902.10486), ER with
    reservoir sampling: not a method of the paper, the strong simple baseline of online continual
    learning. Each step draws ``replay_batch_size`` distinct stored examples, takes one SGD step on the
    mean cross-entropy of the incoming batch and those, then offers the incoming examples to the buffer
    (Vitter's Algorithm R, so the buffer stays a uniform sample of the labelled stream). Every draw is
    counter-based (the module docstring), the same on this PyTorch path and in the fused engine
    (:class:`bimu.engine.fused_real.FusedReplay`); the buffer and the replay key are saved by
    ``state_dict`` and in checkpoints. The network and its initial weights are the SGD baseline's of the same seed.

    No presets. The default ``lr`` is the SGD baseline's Permuted-MNIST one (``pmnist-100``), so that
    ``bimu run pmnist`` compares the two at the same learning rate. The default replay minibatch is as
    large as the incoming batch of a batch-size-1 stream, as the paper replays as many stored examples
    as the stream brings (10 and 10); a larger one gives the new example a smaller share of the loss,
    ``1 / (1 + replay_batch_size)``: it forgets less and learns each new task more slowly.

    Memory: the parameters plus the buffer, allocated in full, ``buffer_size * (4 * features + 8)``
    bytes (3.14 MB for the default 1000 Permuted-MNIST examples).
    """

    info = MethodInfo(name="replay", paper_name="Experience Replay", network="real-relu-mlp",
                      needs_task_boundaries=False, uncertainty_scores=DETERMINISTIC_SCORES,
                      binary_weights=False, bayesian=False)
    hyperparameters = hyperparameter_table(
        learning_rate(9e-4),
        positive("buffer_size", int, 1000, "M: examples the reservoir buffer holds (allocated in full)"),
        positive("replay_batch_size", int, 1, "stored examples replayed with each incoming batch (1: as many as "
                 "a batch-size-1 stream brings, the paper's equal stream and memory batches)"),
        bias_switch(),
    )
    presets: dict[str, dict[str, Any]] = {}

    def _build(self, generator: torch.Generator) -> None:
        super()._build(generator)  # the SGD baseline's network and initial weights; the buffer draws nothing
        size, features = self.hparams["buffer_size"], self.sizes[0]
        check_buffer_room(size, features)
        self.buffer_x = torch.zeros(size, features)
        self.buffer_y = torch.zeros(size, dtype=LABEL_DTYPE)
        self.buffer_seen = 0
        self.replay_key = replay_key(self.seed)

    # ----------------------------------------------------------------- the buffer
    @property
    def buffer_filled(self) -> int:
        """Slots holding an example: ``min(buffer_seen, buffer_size)``."""
        return min(self.buffer_seen, self.hparams["buffer_size"])

    def buffer(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The stored inputs ``[buffer_filled, features]`` and labels ``[buffer_filled]`` (views, slot order)."""
        n = self.buffer_filled
        return self.buffer_x[:n], self.buffer_y[:n]

    def replay_indices(self) -> torch.Tensor | None:
        """The slots of the next replay minibatch: ``None`` while the buffer is empty, every filled slot
        while it holds at most ``replay_batch_size`` examples (no draw), else ``replay_batch_size``
        distinct slots (:func:`~bimu.rng.replay_slots_int`, in the order drawn)."""
        filled = self.buffer_filled
        if filled == 0:
            return None
        slots = replay_slots_int(self.replay_key, self.buffer_seen, filled, self.hparams["replay_batch_size"])
        return torch.tensor(slots, dtype=torch.int64, device=self.buffer_x.device)

    def reservoir_add(self, x: torch.Tensor, y: torch.Tensor) -> None:
        """Offer each example of ``(x, y)`` in turn to the buffer (Vitter's Algorithm R, see the module
        docstring); one counter-based draw per example once the buffer is full."""
        size = self.hparams["buffer_size"]
        for i in range(x.shape[0]):
            n = self.buffer_seen
            slot = reservoir_slot_int(self.replay_key, n, size)
            if slot < size:
                self.buffer_x[slot] = x[i]
                self.buffer_y[slot] = y[i]
            self.buffer_seen = n + 1

    # ----------------------------------------------------------------- the update
    def learn(self, x: torch.Tensor, y: torch.Tensor) -> None:
        """Replay minibatch, one SGD step on it and the batch together, then the reservoir update."""
        x, y = self.prepare_batch(x, y)
        slots = self.replay_indices()
        xb, yb = x, y.to(LABEL_DTYPE)
        if slots is not None:
            xb, yb = torch.cat([xb, self.buffer_x[slots].to(x.dtype)]), torch.cat([yb, self.buffer_y[slots]])
        params = self.params
        loss = self.guard_loss(F.cross_entropy(self.model(xb), yb))
        grads = torch.autograd.grad(loss, params)
        lr = self.hparams["lr"]
        deltas = [-lr * g for g in grads]
        with torch.no_grad():
            for p, d in zip(params, deltas):
                p.add_(d)
        self.reservoir_add(x, y)
        self.count_update(x.shape[0])

    # ----------------------------------------------------------------- state
    def modules_state(self) -> dict[str, Any]:
        """The network's parameters, a copy of the buffer, the number of examples offered to it and the
        key of the replay draws."""
        state = super().modules_state()
        state.update(buffer_x=self.buffer_x.clone(), buffer_y=self.buffer_y.clone(),
                     buffer_seen=self.buffer_seen, replay_key=self.replay_key)
        return state

    def load_modules_state(self, state: Mapping[str, Any]) -> None:
        """Restore what :meth:`modules_state` returned; ValueError, changing nothing, for a buffer of another
        shape or dtype (another ``buffer_size``), labels out of range, a bad ``buffer_seen`` or key."""
        check_buffer_state(state, tuple(self.buffer_x.shape), self.n_classes, self.hparams["buffer_size"],
                           self.buffer_x.dtype)
        super().load_modules_state(state)
        self.buffer_x.copy_(state["buffer_x"])
        self.buffer_y.copy_(state["buffer_y"])
        self.buffer_seen = state["buffer_seen"]
        self.replay_key = state.get("replay_key", replay_key(self.seed))

    def _move_modules(self, device: torch.device) -> None:
        super()._move_modules(device)
        self.buffer_x, self.buffer_y = self.buffer_x.to(device), self.buffer_y.to(device)

    def memory_bytes(self) -> int:
        """Parameters plus the buffer (:func:`buffer_bytes`)."""
        return super().memory_bytes() + tensor_bytes([self.buffer_x, self.buffer_y])

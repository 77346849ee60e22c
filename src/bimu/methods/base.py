"""The common interface of every continual-learning method, and typed hyperparameters.

A method is an online learner over ``[batch, features]`` float inputs and ``[batch]`` integer labels:

- :meth:`OnlineMethod.learn` - one online update from a (labelled) batch: forward, backward, write;
- :meth:`OnlineMethod.observe_unlabelled` - an example that was seen but not queried: no label,
  no backward pass, no weight write (only the "examples seen" counter moves);
- :meth:`OnlineMethod.predict_samples` - class probabilities ``[samples, batch, classes]`` (``samples``
  is 1 for deterministic methods), drawn from the evaluation generator so that evaluating never
  changes the training trajectory; :meth:`OnlineMethod.predict_proba` - their mean over the samples,
  ``[batch, classes]``;
- :meth:`OnlineMethod.task_end` - called at task boundaries, only if ``info.needs_task_boundaries``,
  after :meth:`OnlineMethod.task_examples` has been given the task's training examples (a no-op unless
  :attr:`OnlineMethod.needs_task_examples`: a second pass over them at the task's end);
- :meth:`OnlineMethod.state_dict` / :meth:`OnlineMethod.load_state_dict` - everything needed to resume
  bit-exactly (parameters, optimizer state, counters, random generator states);
- :meth:`OnlineMethod.memory_bytes` - the training-state footprint (parameters + update state).

Devices: a method built with ``device=`` (or moved with :meth:`OnlineMethod.to`) keeps its network,
update state and random generators there, and moves the batches it is given; initial weights are
drawn on the CPU, so they are the same on every device. Random streams depend on the device type.
"""

from __future__ import annotations

import abc
import dataclasses
import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

import torch

from bimu.methods.divergence import check_loss, check_state
from bimu.uncertainty import UNCERTAINTY_SCORES

SCORE_NAMES = tuple(UNCERTAINTY_SCORES)


@dataclasses.dataclass(frozen=True)
class Hyperparameter:
    """One typed, validated hyperparameter of a method.

    >>> h = Hyperparameter("lr", float, 0.1, "learning rate", check=lambda v: v > 0, requirement="> 0")
    >>> h.validate("3e-2")
    0.03
    >>> h.validate(-1.0)
    Traceback (most recent call last):
    ...
    ValueError: hyperparameter 'lr' must be > 0, got -1.0
    """

    name: str
    type: type
    default: Any
    doc: str
    check: Callable[[Any], bool] | None = None
    requirement: str = ""
    choices: tuple | None = None
    before: Any = ...
    """The value that runs made before this hyperparameter existed had (``...``: ``default``, the usual
    case: a hyperparameter is added with a default that keeps the old behaviour). Run directories that
    predate it are reused only where the run asks for this value."""

    @property
    def value_before(self) -> Any:
        """:attr:`before`, or ``default`` when that is ``...``.

        >>> Hyperparameter("a", float, 1e-10, "").value_before, Hyperparameter("a", float, 1e-10, "", before=0.0).value_before
        (1e-10, 0.0)
        """
        return self.default if self.before is ... else self.before

    def validate(self, value: Any) -> Any:
        """Coerce ``value`` to the declared type and check it; ValueError names the parameter."""
        try:
            if self.type is bool:
                if isinstance(value, str):
                    low = value.strip().lower()
                    if low not in ("true", "false", "1", "0", "yes", "no"):
                        raise ValueError
                    value = low in ("true", "1", "yes")
                else:
                    value = bool(value)
            elif self.type is int:
                f = float(value)
                if f != int(f):
                    raise ValueError
                value = int(f)
            else:
                value = self.type(value)
        except (TypeError, ValueError, OverflowError):
            raise ValueError(
                f"hyperparameter {self.name!r} must be of type {self.type.__name__}, got {value!r}"
            ) from None
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"hyperparameter {self.name!r} must be finite, got {value}")
        if self.choices is not None and value not in self.choices:
            raise ValueError(f"hyperparameter {self.name!r} must be one of {self.choices}, got {value!r}")
        if self.check is not None and not self.check(value):
            raise ValueError(f"hyperparameter {self.name!r} must be {self.requirement}, got {value!r}")
        return value


def positive(name: str, type_: type, default: Any, doc: str) -> Hyperparameter:
    """A hyperparameter that must be > 0."""
    return Hyperparameter(name, type_, default, doc, check=lambda v: v > 0, requirement="> 0")


def non_negative(name: str, type_: type, default: Any, doc: str) -> Hyperparameter:
    """A hyperparameter that must be >= 0."""
    return Hyperparameter(name, type_, default, doc, check=lambda v: v >= 0, requirement=">= 0")


def hyperparameter_table(*hyperparameters: Hyperparameter) -> dict[str, Hyperparameter]:
    """A method's ``hyperparameters`` mapping (name -> declaration, in declaration order); a name
    declared twice is an error.

    >>> list(hyperparameter_table(positive("lr", float, 0.1, "step"), non_negative("decay", float, 0.0, "d")))
    ['lr', 'decay']
    """
    table = {h.name: h for h in hyperparameters}
    if len(table) != len(hyperparameters):
        names = [h.name for h in hyperparameters]
        raise ValueError(f"hyperparameter declared twice: {sorted({n for n in names if names.count(n) > 1})}")
    return table


@dataclasses.dataclass(frozen=True)
class MethodInfo:
    """What a method declares about itself."""

    name: str
    paper_name: str
    network: str
    needs_task_boundaries: bool
    uncertainty_scores: tuple[str, ...]
    binary_weights: bool
    bayesian: bool


def check_labels(y: torch.Tensor, batch: int, n_classes: int) -> None:
    """ValueError unless ``y`` is an integer ``[batch]`` tensor with values in ``[0, n_classes)``, naming
    what is wrong (float labels are refused, never rounded).

    >>> check_labels(torch.tensor([2.7]), 1, 10)
    Traceback (most recent call last):
    ...
    ValueError: labels must be integers, got dtype torch.float32
    """
    if y.dtype.is_floating_point or y.dtype.is_complex or y.dtype == torch.bool:
        raise ValueError(f"labels must be integers, got dtype {y.dtype}")
    if y.dim() != 1 or y.shape[0] != batch:
        raise ValueError(f"labels must be [batch={batch}], got {tuple(y.shape)}")
    if y.numel() and (int(y.min()) < 0 or int(y.max()) >= n_classes):
        raise ValueError(f"labels must lie in [0, {n_classes - 1}], got range [{int(y.min())}, {int(y.max())}]")


def same_device(a: torch.device | str, b: torch.device | str) -> bool:
    """Whether two devices are the same (an index left out matches any index of the type).

    >>> same_device("cuda", "cuda:0"), same_device("cpu", torch.device("cpu")), same_device("cuda:1", "cuda:0")
    (True, True, False)
    """
    a, b = torch.device(a), torch.device(b)
    return a.type == b.type and (a.index is None or b.index is None or a.index == b.index)


def seeded_generator(seed: int, device: torch.device | str | None = None) -> torch.Generator:
    """A ``torch.Generator`` on ``device`` (default CPU) seeded with ``seed``."""
    return torch.Generator(device=torch.device("cpu") if device is None else device).manual_seed(int(seed))


def generator_on(generator: torch.Generator, device: torch.device | str) -> torch.Generator:
    """``generator`` itself if it lives on ``device``, else a new generator there, seeded by one draw
    from ``generator`` (so the stream goes on deterministically, without repeating).

    >>> g = torch.Generator().manual_seed(0)
    >>> generator_on(g, "cpu") is g
    True
    """
    if same_device(generator.device, device):
        return generator
    seed = int(torch.randint(0, 2**62, (1,), generator=generator, device=generator.device))
    return seeded_generator(seed, device)


class OnlineMethod(abc.ABC):
    """Base class of every registered method (see the module docstring for the contract).

    Subclasses set ``info``, ``hyperparameters`` (name -> :class:`Hyperparameter`) and ``presets``
    (benchmark key -> partial hyperparameter dict from the paper's appendix tables), and implement
    :meth:`_build`, :meth:`learn` and :meth:`_predict_logits`.
    """

    info: ClassVar[MethodInfo]
    hyperparameters: ClassVar[dict[str, Hyperparameter]]
    presets: ClassVar[dict[str, dict[str, Any]]] = {}

    def __init__(self, sizes: Sequence[int], seed: int = 0, device: torch.device | str | None = None,
                 **hparams: Any):
        sizes = [int(s) for s in sizes]
        if len(sizes) < 2 or any(s <= 0 for s in sizes):
            raise ValueError(f"sizes must list at least two positive widths, got {sizes}")
        self.sizes = sizes
        self.seed = int(seed)
        self.hparams = self.resolve_hyperparameters(hparams)
        self.examples_seen = 0
        self.updates_applied = 0
        self.train_generator = seeded_generator(self.seed, device)
        self.eval_generator = seeded_generator(self.seed + 0x5EED, device)
        self._build(seeded_generator(self.seed + 0x1217))
        if device is not None and not same_device(device, "cpu"):
            self._move_modules(torch.device(device))

    # ----------------------------------------------------------------- hyperparameters
    @classmethod
    def resolve_hyperparameters(cls, overrides: Mapping[str, Any], preset: str | None = None) -> dict[str, Any]:
        """Defaults, then the named ``preset``, then ``overrides``; unknown keys raise ValueError."""
        values = {name: h.default for name, h in cls.hyperparameters.items()}
        layers = []
        if preset is not None:
            if preset not in cls.presets:
                raise ValueError(
                    f"method {cls.info.name!r} has no preset {preset!r}; known: {sorted(cls.presets)}"
                )
            layers.append(cls.presets[preset])
        layers.append(dict(overrides))
        for layer in layers:
            for key, value in layer.items():
                if key not in cls.hyperparameters:
                    raise ValueError(
                        f"unknown hyperparameter {key!r} for method {cls.info.name!r}; "
                        f"known: {sorted(cls.hyperparameters)}"
                    )
                values[key] = value
        return {k: cls.hyperparameters[k].validate(v) for k, v in values.items()}

    # ----------------------------------------------------------------- to implement
    @abc.abstractmethod
    def _build(self, generator: torch.Generator) -> None:
        """Create the network and the update state; draw initial weights from ``generator``."""

    @abc.abstractmethod
    def learn(self, x: torch.Tensor, y: torch.Tensor) -> None:
        """One online update from a labelled batch (forward, backward, weight write)."""

    @abc.abstractmethod
    def _predict_logits(self, x: torch.Tensor, n_samples: int, generator: torch.Generator) -> torch.Tensor:
        """Logits ``[samples, batch, classes]`` for prediction (hard samples for Bayesian methods)."""

    @abc.abstractmethod
    def modules_state(self) -> dict[str, Any]:
        """Parameters and update state as a dict of tensors / plain values."""

    @abc.abstractmethod
    def load_modules_state(self, state: Mapping[str, Any]) -> None:
        """Inverse of :meth:`modules_state`."""

    @abc.abstractmethod
    def memory_bytes(self) -> int:
        """Training-state footprint in bytes: parameters plus persistent update state."""

    # ----------------------------------------------------------------- shared behaviour
    @property
    def n_classes(self) -> int:
        """Number of output classes."""
        return self.sizes[-1]

    @property
    def default_eval_samples(self) -> int:
        """MC samples used for prediction when not given (1 for deterministic methods)."""
        return int(self.hparams.get("n_eval_samples", 1)) if self.info.bayesian else 1

    @property
    def device(self) -> torch.device:
        """Where the network's parameters live (the CPU for a method without a torch network)."""
        model = getattr(self, "model", None)
        param = next(model.parameters(), None) if isinstance(model, torch.nn.Module) else None
        return torch.device("cpu") if param is None else param.device

    def to(self, device: torch.device | str) -> OnlineMethod:
        """Move the network, the update state and the random generators to ``device``; returns ``self``.

        A generator that changes device is replaced by one seeded from its own stream (random streams
        depend on the device type); on its own device it is kept as it is.
        """
        device = torch.device(device)
        if not same_device(self.device, device):
            self._move_modules(device)
        self.train_generator = generator_on(self.train_generator, device)
        self.eval_generator = generator_on(self.eval_generator, device)
        return self

    def _move_modules(self, device: torch.device) -> None:
        """Move the network, the optimizer's state and the penalty's tensors to ``device``."""
        model = getattr(self, "model", None)
        if not isinstance(model, torch.nn.Module):
            raise NotImplementedError(f"{type(self).__name__} has no torch network to move: it runs on the CPU")
        model.to(device)
        optimizer = getattr(self, "optimizer", None)
        if optimizer is not None:
            optimizer.load_state_dict(optimizer.state_dict())  # casts the state to its parameters' device
        regularizer = getattr(self, "regularizer", None)
        if regularizer is not None:
            regularizer.to(device)

    def check_batch(self, x: torch.Tensor, y: torch.Tensor | None = None) -> None:
        """Reject wrong shapes, NaN inputs and labels out of range with a clear error."""
        if x.dim() != 2 or x.shape[1] != self.sizes[0]:
            raise ValueError(f"inputs must be [batch, {self.sizes[0]}], got {tuple(x.shape)}")
        if not torch.isfinite(x).all():
            raise ValueError("inputs contain NaN or infinite values")
        if y is not None:
            check_labels(y, x.shape[0], self.n_classes)

    def prepare_batch(self, x: torch.Tensor, y: torch.Tensor | None = None):
        """:meth:`check_batch` (and, with labels, a non-empty batch), then ``(x, y)`` on the method's
        device (``y`` may be ``None``); a refused batch consumes no random draw and counts no update."""
        self.check_batch(x, y)
        if y is not None and x.shape[0] == 0:
            raise ValueError("cannot learn from an empty batch")
        device = self.device
        return x.to(device), (None if y is None else y.to(device))

    def guard_loss(self, loss: torch.Tensor) -> torch.Tensor:
        """``loss``, checked to be finite before the update is written (else
        :class:`~bimu.methods.divergence.DivergenceError`)."""
        return check_loss(self.info.name, loss)

    def count_update(self, n_examples: int) -> None:
        """End of one update from ``n_examples`` examples: the network's parameters and update state are
        checked to be finite (:class:`~bimu.methods.divergence.DivergenceError` otherwise, the update not counted),
        then the counters move."""
        check_state(self.info.name, self._live_state())
        self.examples_seen += int(n_examples)
        self.updates_applied += 1

    def _live_state(self) -> dict[str, Any]:
        """The network's parameters, the optimizer's state and the penalty's tensors, uncopied (what
        :meth:`count_update` checks after every update)."""
        model, optimizer = getattr(self, "model", None), getattr(self, "optimizer", None)
        regularizer = getattr(self, "regularizer", None)
        return {"model": dict(model.named_parameters()) if isinstance(model, torch.nn.Module) else {},
                "optimizer": list(optimizer.state.values()) if optimizer is not None else [],
                "regularizer": vars(regularizer) if regularizer is not None else {}}

    def check_finite(self, task: int | None = None) -> None:
        """:class:`~bimu.methods.divergence.DivergenceError` naming every non-finite weight or update
        state of :meth:`modules_state` (``task``: the task just learned, named in the message)."""
        check_state(self.info.name, self.modules_state(), task)

    def observe_unlabelled(self, n: int = 1) -> None:
        """Count ``n`` examples that were seen but not queried (no backward pass, no write)."""
        self.examples_seen += int(n)

    def task_end(self) -> None:
        """Task-boundary hook; a no-op unless the method needs task boundaries."""

    @property
    def needs_task_examples(self) -> bool:
        """Whether :meth:`task_examples` uses the task's training examples, which the stream gives it at
        each task's end, before :meth:`task_end` (false unless a method's hyperparameters ask for it; an
        active learner that labels only some examples refuses such a method)."""
        return False

    def task_examples(self, x: torch.Tensor, y: torch.Tensor) -> None:
        """The finished task's training examples ``(x, y)``, at its end, for a method that
        :attr:`needs_task_examples` (a no-op otherwise); the method must not keep them."""

    @torch.no_grad()
    def predict_samples(
        self, x: torch.Tensor, n_samples: int | None = None, generator: torch.Generator | None = None
    ) -> torch.Tensor:
        """Class probabilities of each weight sample, ``[samples, batch, classes]`` (what the
        uncertainty scores of :mod:`bimu.uncertainty` take)."""
        n = self.default_eval_samples if n_samples is None else int(n_samples)
        if not self.info.bayesian:
            n = 1
        logits = self._predict_logits(x, n, self.eval_generator if generator is None else generator)
        return torch.softmax(logits, dim=-1)

    @torch.no_grad()
    def predict_proba(
        self, x: torch.Tensor, n_samples: int | None = None, generator: torch.Generator | None = None
    ) -> torch.Tensor:
        """Class probabilities ``[batch, classes]``: :meth:`predict_samples` averaged over the samples
        (the posterior predictive, the convention of scikit-learn and river)."""
        return self.predict_samples(x, n_samples, generator).mean(0)

    @torch.no_grad()
    def predict(self, x: torch.Tensor, n_samples: int | None = None, generator=None) -> torch.Tensor:
        """Argmax of the mean log-probability over samples (the paper's rule), ``[batch]``."""
        n = self.default_eval_samples if n_samples is None else int(n_samples)
        if not self.info.bayesian:
            n = 1
        logits = self._predict_logits(x, n, self.eval_generator if generator is None else generator)
        return torch.log_softmax(logits, dim=-1).mean(0).argmax(-1)

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to resume exactly: module state, counters, generator states (and, off the
        CPU, the generators' device type)."""
        state = {
            "method": self.info.name,
            "sizes": list(self.sizes),
            "seed": self.seed,
            "hparams": dict(self.hparams),
            "modules": self.modules_state(),
            "examples_seen": self.examples_seen,
            "updates_applied": self.updates_applied,
            "train_generator": self.train_generator.get_state(),
            "eval_generator": self.eval_generator.get_state(),
        }
        if self.train_generator.device.type != "cpu":
            state["generator_device"] = self.train_generator.device.type
        return state

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore a state written by :meth:`state_dict` of the same method and sizes."""
        if state.get("method") != self.info.name:
            raise ValueError(f"state is for method {state.get('method')!r}, not {self.info.name!r}")
        if list(state["sizes"]) != self.sizes:
            raise ValueError(f"state is for sizes {list(state['sizes'])}, not {self.sizes}")
        self.load_modules_state(state["modules"])
        self.examples_seen = int(state["examples_seen"])
        self.updates_applied = int(state["updates_applied"])
        saved = state.get("generator_device", "cpu")
        if saved == self.train_generator.device.type:
            self.train_generator.set_state(state["train_generator"])
            self.eval_generator.set_state(state["eval_generator"])
        else:
            warnings.warn(f"the state's random generators ran on {saved}, this method's on "
                          f"{self.train_generator.device.type}: their streams are not restored", stacklevel=2)

    def __getstate__(self) -> dict[str, Any]:
        """The attributes for pickle and ``copy``, each ``torch.Generator`` as its device and state bytes:
        a generator pickles its state as a fresh tensor (whose storage address goes into the bytes), so
        the same method would otherwise pickle differently each time.

        >>> import pickle
        >>> from bimu.methods import create_method
        >>> m = create_method("sgd", [3, 2], seed=4)
        >>> copy = pickle.loads(pickle.dumps(m))
        >>> pickle.dumps(m) == pickle.dumps(m), torch.equal(torch.rand(3, generator=copy.train_generator),
        ...                                                 torch.rand(3, generator=m.train_generator))
        (True, True)
        """
        return generators_as_data(self.__dict__)

    def __setstate__(self, state: Mapping[str, Any]) -> None:
        """Inverse of :meth:`__getstate__`."""
        self.__dict__.update(generators_from_data(state))

    def __repr__(self) -> str:
        hp = ", ".join(f"{k}={v!r}" for k, v in self.hparams.items())
        return f"{type(self).__name__}(sizes={self.sizes}, seed={self.seed}, {hp})"


@dataclasses.dataclass(frozen=True)
class _GeneratorState:
    """A ``torch.Generator`` as plain data (see :meth:`OnlineMethod.__getstate__`)."""

    device: str
    state: bytes

    def generator(self) -> torch.Generator:
        g = torch.Generator(device=self.device)
        g.set_state(torch.frombuffer(bytearray(self.state), dtype=torch.uint8))
        return g


def generators_as_data(attributes: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``attributes`` with each ``torch.Generator`` replaced by its device and state as bytes,
    which pickle the same way every time (an object's ``__getstate__``)."""
    return {k: _GeneratorState(str(v.device), v.get_state().numpy().tobytes()) if isinstance(v, torch.Generator)
            else v for k, v in attributes.items()}


def generators_from_data(state: Mapping[str, Any]) -> dict[str, Any]:
    """Inverse of :func:`generators_as_data` (an object's ``__setstate__``)."""
    return {k: v.generator() if isinstance(v, _GeneratorState) else v for k, v in state.items()}


def tensor_bytes(tensors) -> int:
    """Total bytes of an iterable of tensors."""
    return int(sum(t.numel() * t.element_size() for t in tensors))

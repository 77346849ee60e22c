"""Acquisition functions and the streaming active learner (river-style ``predict_one``/``learn_one``).

>>> import torch
>>> from bimu.methods import create_method
>>> m = create_method("bimu", [4, 3], seed=0, preset="pmnist-100")
>>> learner = ActiveLearner(m, make_acquisition("vr", threshold=0.1, mc_samples=10))
>>> pred, ask = learner.predict_one(torch.randn(1, 4))
>>> if ask:
...     learner.learn_one(torch.randn(1, 4), torch.tensor([1]))
>>> acc = learner.accounting; acc["examples_seen"], acc["forward_passes"], acc["labels_queried"] == int(ask)
(1, 10, True)
>>> make_acquisition("bald", threshold=0.1)
Traceback (most recent call last):
...
ValueError: unknown acquisition strategy 'bald'; available: ['aleatoric', 'all', 'entropy', 'epistemic', 'random', 'vr', 'vr-true'] (aliases: [...])
"""

from __future__ import annotations

import math

import torch

from bimu.active.accounting import Accounting
from bimu.active.budget import BudgetController
from bimu.active.scores import SCORES, canonical_score, dissent_count, score_values
from bimu.active.threshold import ThresholdRule, vote_threshold
from bimu.methods.base import (
    OnlineMethod,
    check_labels,
    generator_on,
    generators_as_data,
    generators_from_data,
    seeded_generator,
)

QUERY_KEY_RANGE = 2**62
"""Each example's key for a method's ``query_samples`` is drawn from the query generator in ``[0, this)``."""
QUERY_SAMPLERS = ("auto", "compiled", "predict-samples")
"""How :class:`ActiveLearner` draws a decision's K hard samples (see the class)."""


class Acquisition:
    """A query rule: a named score with a fixed threshold or the budget controller.

    Build it with :func:`make_acquisition`. :meth:`decide` takes the MC probabilities of one example
    (``[K, 1, C]``) and the counters, and returns ``(ask, score, tau)``.
    """

    def __init__(self, strategy: str, threshold: float | None = None, budget: float | None = None,
                 budget_exponent: float = 0.5, mc_samples: int = 10, seed: int = 0):
        self.strategy = canonical_score(strategy)
        self.info = SCORES[self.strategy]
        if int(mc_samples) < 1:
            raise ValueError(f"mc_samples must be >= 1, got {mc_samples}")
        self.mc_samples = int(mc_samples)
        self.seed = int(seed)
        self.threshold = None if threshold is None else float(threshold)
        self.budget = None if budget is None else float(budget)
        self.budget_exponent = float(budget_exponent)
        self.rule = None
        self.controller = None
        self.probability = None
        if self.strategy == "all":
            if threshold is not None or budget is not None:
                raise ValueError("strategy 'all' queries every example: give neither threshold nor budget")
        elif self.strategy == "random":
            if (threshold is None) == (budget is None):
                raise ValueError("random querying needs exactly one of threshold or budget (the query "
                                 "probability)")
            p = self.threshold if budget is None else self.budget
            if not 0.0 <= p <= 1.0:
                raise ValueError(f"random query probability must be in [0, 1], got {p}")
            self.probability = p
            self.generator = torch.Generator().manual_seed(self.seed * 1_000_003 + 0x7A4D)
        else:
            if (threshold is None) == (budget is None):
                raise ValueError(f"strategy {self.strategy!r} needs exactly one of threshold or budget")
            if budget is not None:
                if not self.info.discrete:
                    raise ValueError(f"the budget controller quantises to the K vote levels; it needs a "
                                     f"vote score ('vr' or 'vr-true'), not {self.strategy!r}")
                self.controller = BudgetController(budget, budget_exponent, self.mc_samples)
            else:
                self.rule = ThresholdRule(threshold)
                if self.info.discrete and self.rule.tau > 1.0:
                    raise ValueError(f"threshold {threshold} for {self.strategy!r} is out of range: the score is a "
                                     f"fraction of the K = {self.mc_samples} votes, in [0, 1] (1 queries nothing)")

    @property
    def needs_labels(self) -> bool:
        """True for the oracle VR-True: ``predict_one`` must then receive the label."""
        return self.info.needs_labels

    @property
    def uses_samples(self) -> bool:
        """Whether the decision reads the MC samples (False for 'random' and 'all')."""
        return self.info.uses_samples

    def decide(self, probs: torch.Tensor, queried: int, seen: int,
               label: torch.Tensor | None = None) -> tuple[bool, float, float]:
        """``(ask, score, tau)`` for one example; ``queried``/``seen`` feed the budget controller."""
        if self.strategy == "all":
            return True, math.nan, 0.0
        if self.strategy == "random":
            u = float(torch.rand((), generator=self.generator))
            return u < self.probability, u, self.probability
        if self.needs_labels and label is None:
            raise ValueError("strategy 'vr-true' is an ORACLE: predict_one must receive the label y")
        k = probs.shape[0]
        if self.info.discrete:
            dissent = int(dissent_count(probs, label if self.needs_labels else None)[0])
            if self.controller is not None:
                n = self.controller.vote_threshold(queried, seen)
                return dissent >= n, dissent / k, n / k
            return self.rule.ask_discrete(dissent, k), dissent / k, vote_threshold(self.rule.tau, k) / k
        value = float(score_values(self.strategy, probs)[0])
        return self.rule.ask_continuous(value), value, self.rule.tau

    def state_dict(self) -> dict:
        """The rule (to check a resumed run uses the same) and the random querying generator's state.
        The budget controller keeps no memory: it reads the ledger's counters, saved with the learner."""
        state = {"rule": self.describe(), "mc_samples": self.mc_samples}
        if self.strategy == "random":
            state["generator"] = self.generator.get_state()
        return state

    def load_state_dict(self, state) -> None:
        """Restore :meth:`state_dict`; ValueError if it is another rule's."""
        if state.get("rule") != self.describe() or state.get("mc_samples") != self.mc_samples:
            raise ValueError(f"the saved active-learning state is for {state.get('rule')!r} with "
                             f"K={state.get('mc_samples')}, this learner queries with {self.describe()!r} "
                             f"and K={self.mc_samples}")
        if self.strategy == "random":
            self.generator.set_state(state["generator"])

    def describe(self) -> str:
        """Short label such as ``vr@0.2``, ``vr budget=0.03^0.5``, ``random p=0.1``, ``all``."""
        if self.strategy == "all":
            return "all (100% updates)"
        if self.strategy == "random":
            return f"random p={self.probability:g}"
        if self.controller is not None:
            return f"{self.strategy} budget={self.budget:g} gamma={self.budget_exponent:g}"
        return f"{self.strategy}@{self.threshold:g}"

    def __repr__(self) -> str:
        return f"Acquisition({self.describe()}, K={self.mc_samples})"


def make_acquisition(strategy: str, threshold: float | None = None, budget: float | None = None,
                     budget_exponent: float = 0.5, mc_samples: int = 10, seed: int = 0) -> Acquisition:
    """Build a query rule (docs/contracts.md).

    ``strategy``: ``vr`` (variation ratio), ``entropy`` (predictive), ``aleatoric``, ``epistemic``,
    ``random`` (probability = ``budget`` or ``threshold``), ``vr-true`` (ORACLE, needs labels) or
    ``all`` (every example). Give ``threshold`` for the one-pass fixed-threshold rule, or ``budget``
    (and ``budget_exponent``) for the budget controller (vote scores only).
    """
    return Acquisition(strategy, threshold, budget, budget_exponent, mc_samples, seed)


class ActiveLearner:
    """Streaming active learner around any :class:`~bimu.methods.base.OnlineMethod`.

    - ``predict_one(x[1, D], y=None) -> (prediction, ask)``: ``K`` hard-sample forward passes through
      ``method.predict_samples(x, n_samples=K)`` (with the learner's own query generator, which follows
      the method's device, so evaluation draws never change the stream), or, for a method with
      ``query_samples`` (the fused BiMU, BayesBiNN and MESU), through ``method.query_samples(x, K, key)`` with
      one key per example drawn from the query generator (:mod:`bimu.engine.query`: K fresh samples per
      example; the prediction is the argmax of the mean log-softmax, computed in float64); if not asked,
      ``method.observe_unlabelled(1)`` (no label, no backward pass, no weight write). ``y`` is
      required only by the oracle ``vr-true``. ``query_sampler`` chooses: ``compiled``
      (``query_samples``; a stream of a binary network then decides in compiled blocks,
      :mod:`bimu.active.blocks`),
      ``predict-samples`` (every method), or ``auto`` (compiled where the method has it). The two draw
      different samples, so the sampler is part of the learner's state: a resumed stream goes on with
      the sampler it started with (a state that names none was drawn with ``predict-samples``).
    - ``learn_one(x, y)``: ``method.learn`` on the labelled example (one label, one backward pass,
      one weight write). Call it only after ``predict_one`` asked, or without ``predict_one`` at all
      (full-stream training).
    - A method that ``needs_task_examples`` (Online EWC with ``fisher="task-end"``) is refused unless the
      strategy is ``all``: at a task's end it needs every example of the task, labelled.
    - ``accounting``: dict of ``labels_queried, backward_passes, weight_writes, forward_passes,
      examples_seen, query_fraction``; ``ledger`` holds the per-example record (time series).
    """

    def __init__(self, method: OnlineMethod, acquisition: Acquisition | None = None, seed: int | None = None,
                 query_sampler: str = "auto"):
        if not isinstance(method, OnlineMethod):
            raise TypeError(f"method must be an OnlineMethod, got {type(method).__name__}")
        self.query_sampler = self._check_sampler(query_sampler, method)
        self.method = method
        self.acquisition = acquisition if acquisition is not None else make_acquisition("all")
        if method.needs_task_examples and self.acquisition.strategy != "all":
            raise ValueError(f"{method.info.name} with these hyperparameters needs every labelled example of a task at "
                             f"its end (task_examples); an active learner labels only the examples it asks for")
        qseed = method.seed if seed is None else int(seed)
        self.query_generator = seeded_generator(qseed * 7919 + 0xAC71, method.device)
        self.ledger = Accounting()
        self.task: int | None = None
        self._pending: bool | None = None
        self.last_score = math.nan
        self.last_tau = math.nan
        self.last_probs: torch.Tensor | None = None
        """The class probabilities ``[K, 1, C]`` of the last :meth:`predict_one`'s samples."""

    @staticmethod
    def _check_sampler(name, method) -> str:
        """The resolved sampler name (``compiled`` or ``predict-samples``) of ``name`` for ``method``."""
        if name not in QUERY_SAMPLERS:
            raise ValueError(f"unknown query_sampler {name!r}; choose from {', '.join(QUERY_SAMPLERS)}")
        compiled = hasattr(method, "query_samples")
        if name == "compiled" and not compiled:
            raise ValueError(f"query_sampler 'compiled' needs a method with a compiled query sampler (the fused "
                             f"BiMU, BayesBiNN and MESU); {type(method).__name__} has none")
        return "compiled" if name == "compiled" or (name == "auto" and compiled) else "predict-samples"

    @property
    def accounting(self) -> dict:
        """Counters of this learner (see :class:`~bimu.active.accounting.Accounting`)."""
        return self.ledger.as_dict()

    def _as_row(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.as_tensor(x, dtype=torch.float32)
        if x.dim() == 1:
            x = x.unsqueeze(0)
        if x.dim() != 2 or x.shape[0] != 1:
            raise ValueError(f"predict_one/learn_one take one example [1, D], got {tuple(x.shape)}")
        return x

    def _as_label(self, y) -> torch.Tensor:
        """One label as a ``[1]`` tensor, checked to be an integer in range (a float label such as 2.7 is
        refused, never rounded)."""
        label = torch.as_tensor(y).reshape(-1)
        check_labels(label, 1, self.method.n_classes)
        return label

    def predict_one(self, x: torch.Tensor, y=None) -> tuple[int, bool]:
        """Predict one example and decide whether to query its label."""
        x = self._as_row(x)
        self.method.check_batch(x)
        label = None if y is None else self._as_label(y)
        k = self.acquisition.mc_samples
        self.query_generator = generator_on(self.query_generator, self.method.device)
        if self.query_sampler == "compiled":
            key = int(torch.randint(0, QUERY_KEY_RANGE, (1,), generator=self.query_generator))
            probs, prediction = self.method.query_samples(x, k, key)
        else:
            probs = self.method.predict_samples(x, n_samples=k, generator=self.query_generator)
            prediction = int(torch.log(probs.clamp_min(1e-30)).mean(0).argmax(-1)[0])
        label = None if label is None else label.to(probs.device)
        ask, score, tau = self.acquisition.decide(probs, self.ledger.labels_queried, self.ledger.examples_seen,
                                                  label)
        self.last_score, self.last_tau, self.last_probs = score, tau, probs
        self.ledger.record_prediction(ask, forward_passes=probs.shape[0], task=self.task)
        if not ask:
            self.method.observe_unlabelled(1)
        self._pending = ask
        return prediction, ask

    def learn_one(self, x: torch.Tensor, y) -> None:
        """Update on a labelled example (only if it was queried, or outside ``predict_one``)."""
        if self._pending is False:
            raise RuntimeError("learn_one called for an example that predict_one did not query")
        x = self._as_row(x)
        self.method.learn(x, self._as_label(y))  # refuses a float or out-of-range label before any change
        if self._pending:
            self.ledger.record_update()
        else:
            self.ledger.record_unpredicted_update(self.task)
        self._pending = None

    def state_dict(self) -> dict:
        """Everything a resumed stream needs to go on exactly: the acquisition's state, the query
        generator's state, the ledger (counters and per-example record) and the current task."""
        state = {"acquisition": self.acquisition.state_dict(), "ledger": self.ledger.state_dict(),
                 "query_generator": self.query_generator.get_state(), "task": self.task,
                 "pending": self._pending, "last_score": self.last_score, "last_tau": self.last_tau,
                 "query_sampler": self.query_sampler}
        if self.query_generator.device.type != "cpu":
            state["query_generator_device"] = self.query_generator.device.type
        return state

    def load_state_dict(self, state) -> None:
        """Restore :meth:`state_dict` (ValueError if it is another acquisition's). A query generator saved
        on another device type than the method's is restored there, then follows the method; the saved
        query sampler replaces this learner's (``predict-samples`` if the state names none)."""
        sampler = self._check_sampler(state.get("query_sampler", "predict-samples"), self.method)
        self.acquisition.load_state_dict(state["acquisition"])
        saved = state.get("query_generator_device", "cpu")
        if self.query_generator.device.type != saved:
            self.query_generator = torch.Generator(device=saved)
        self.query_generator.set_state(state["query_generator"])
        self.ledger.load_state_dict(state["ledger"])
        self.task, self._pending = state["task"], state["pending"]
        self.last_score, self.last_tau = state["last_score"], state["last_tau"]
        self.query_sampler = sampler

    def __getstate__(self) -> dict:
        """The attributes for pickle and ``copy``, the query generator as plain data (so the same learner
        pickles the same way every time)."""
        return generators_as_data(self.__dict__)

    def __setstate__(self, state) -> None:
        self.__dict__.update(generators_from_data(state))

    def __repr__(self) -> str:
        return f"ActiveLearner({type(self.method).__name__}, {self.acquisition!r})"

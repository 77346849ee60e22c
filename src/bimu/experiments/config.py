"""Typed, validated run configurations.

:class:`RunConfig` holds everything that defines a run. :meth:`RunConfig.from_dict` rejects unknown
keys and bad values with a ValueError naming them, before any data is read; :meth:`RunConfig.validate`
also checks the method, its hyperparameter overrides (``--set key=value``) against the method's
typed hyperparameters and the paper preset.

The paper's hyperparameters (appendix tables) are the named ``presets`` of each method;
``preset="auto"`` picks the one the benchmark declares for the hidden widths (Permuted MNIST:
100 -> ``pmnist-100``, 2000 -> ``pmnist-2000``, anything else -> ``pmnist-100`` with a note).

>>> c = RunConfig.from_dict({"tasks": 3, "seeds": [0, 1], "overrides": {"memory_window": "500"}})
>>> c.tasks, c.seeds, c.resolve_hparams()[0], c.resolve_hparams()[1]["memory_window"]
(3, (0, 1), 'pmnist-100', 500.0)
>>> RunConfig.from_dict({"taks": 3})
Traceback (most recent call last):
...
ValueError: unknown config key 'taks'; did you mean 'tasks'?
>>> RunConfig.from_dict({"tasks": 0})
Traceback (most recent call last):
...
ValueError: config 'tasks' must be >= 1 or none, at most 100000, got 0
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bimu.experiments.schedule import DEFAULT_ALL_MAX, FINAL_CHOICES, PREQUENTIAL_EVERY, EvalSchedule

ENGINES = ("auto", "torch", "fused")
OOD_SCORES = ("epistemic", "aleatoric", "variation_ratio", "predictive_entropy")

# Keys that do not change results: a run may resume with different values of these.
LOG_SINKS = ("csv", "tensorboard", "mlflow")
"""Names of ``log_to`` (:data:`bimu.experiments.tracking.SINKS`)."""
MAX_SEED = 2**32
"""Seeds lie in ``[0, MAX_SEED)`` (every generator derived from a seed then fits in 64 bits)."""
MAX_SEEDS = 10_000
"""Most seeds one run may have (one run directory each)."""
MAX_TASKS = 100_000
"""Most tasks a stream may have (its accuracy matrix alone is ``8 * tasks**2`` bytes: 80 GB at this bound)."""
MAX_SAMPLES = 1_000_000
"""Most Monte-Carlo samples (``eval_samples``, ``mc_samples``); the memory preflight refuses most below it."""
NON_SEMANTIC_KEYS = ("seeds", "out", "threads", "data_dir", "engine", "log_to", "prequential_every")


def _int(v):
    if isinstance(v, bool):
        raise ValueError
    if isinstance(v, int):
        return v
    f = float(v)
    if not math.isfinite(f) or f != int(f):
        raise ValueError
    return int(f)


def _float(v):
    if isinstance(v, bool):
        raise ValueError
    f = float(v)
    if not math.isfinite(f):
        raise ValueError
    return f


def _bool(v):
    if isinstance(v, bool):
        return v
    if isinstance(v, str) and v.strip().lower() in ("true", "1", "yes", "false", "0", "no"):
        return v.strip().lower() in ("true", "1", "yes")
    if isinstance(v, int) and v in (0, 1):
        return bool(v)
    raise ValueError


def _str(v):
    if not isinstance(v, str) or not v:
        raise ValueError
    return v


def _opt(conv):
    return lambda v: None if v is None or (isinstance(v, str) and v.lower() == "none") else conv(v)


def _tuple(conv):
    def f(v):
        if isinstance(v, (str, bytes)) or not hasattr(v, "__iter__"):
            v = [v]
        return tuple(conv(x) for x in v)
    return f


def _mapping(v):
    if not isinstance(v, Mapping):
        raise ValueError
    return {str(k): v[k] for k in v}


def _is_image_folder(benchmark: str) -> bool:
    """Whether ``benchmark`` names an existing folder rather than a registered benchmark."""
    if not Path(benchmark).expanduser().is_dir():
        return False
    from bimu.data.benchmarks import available_benchmarks

    return benchmark not in available_benchmarks()


@dataclasses.dataclass(frozen=True)
class RunConfig:
    """One experiment: a benchmark, a method, seeds, evaluation schedule and run options.

    Attributes (all validated):
        benchmark, method: registered names; a benchmark ending in ``.npz`` is your own data file
            (:mod:`bimu.data.own`), stored as the benchmark ``npz`` with its absolute ``path`` option; an
            existing folder that is not a registered name is your own images (:mod:`bimu.data.own_images`),
            stored as the benchmark ``image-folder`` with its absolute ``path`` option.
        tasks: number of tasks in the stream (``None``: all of a fixed benchmark's tasks; 10 for
            streams of configurable length such as ``pmnist``).
        seeds: one run (and run directory) per seed.
        hidden: hidden widths (``None``: the benchmark's default, ``()``: a single linear layer).
        preset: ``"auto"``, ``"none"`` or a method preset key.
        overrides: method hyperparameters, name -> value (strings are coerced by the method's types).
        batch_size: examples per update (1 in every paper run).
        eval_*: the :class:`~bimu.experiments.schedule.EvalSchedule` (same defaults, but ``eval_all_max``:
            100, the full lower triangle of the accuracy matrix for streams of up to 100 tasks).
        eval_batch_size: examples per ``predict_samples`` call in evaluation.
        eval_samples: MC samples for evaluation (``None``: the method's default).
        ood, ood_every, ood_scores: OOD ROC-AUC every ``ood_every`` tasks (0: only after the last).
        prequential_every: the test-then-train prediction of every this-many-th training example
            (:mod:`bimu.experiments.prequential`; an active run records its learner's prediction of every
            example; 0: none). It changes no other result, so a run may resume with another value.
        engine: ``auto`` (fused engine when it supports the method, else torch), ``torch`` or ``fused``.
        threads: ``torch.set_num_threads`` and the fused engine's thread count (results do not depend on it).
        out: output root; data_dir: data directory (``None``: ``$BIMU_DATA_DIR``, then user cache).
        train_limit, test_limit: examples kept per task (``None``: all).
        active, threshold, mc_samples, budget, budget_exponent: active learning (``active=None``: off).
        benchmark_options: extra keyword options of the benchmark factory (e.g. ``n_features`` of a
            feature benchmark), plus ``standardize: true`` (features standardised with the training
            data's mean and std, :class:`~bimu.data.views.StandardizedBenchmark`) and ``stream_repeats: R``
            (each task's training data streamed R times, :class:`~bimu.data.views.RepeatedStream`). Left out of
            ``config.json`` when empty, so run directories written before it existed still resume.
        log_to: result sinks besides the run directory (``csv``, ``tensorboard``, ``mlflow``; see
            :mod:`bimu.experiments.tracking`); they do not change results.
    """

    benchmark: str = "pmnist"
    method: str = "bimu"
    tasks: int | None = None
    seeds: tuple[int, ...] = (0,)
    hidden: tuple[int, ...] | None = None
    preset: str = "auto"
    overrides: dict[str, Any] = dataclasses.field(default_factory=dict)
    batch_size: int = 1
    eval_all_every: int = EvalSchedule.all_every
    eval_sample_every: int = EvalSchedule.sample_every
    eval_sample_size: int = EvalSchedule.sample_size
    eval_last: int = EvalSchedule.last_m
    eval_last_every: int = EvalSchedule.last_every
    eval_final: str = EvalSchedule.final
    eval_final_last: int = EvalSchedule.final_last
    eval_final_all_max: int = EvalSchedule.final_all_max
    eval_all_max: int = DEFAULT_ALL_MAX
    eval_batch_size: int = 1000
    eval_samples: int | None = None
    ood: bool = True
    ood_every: int = 1
    ood_scores: tuple[str, ...] = ("epistemic", "aleatoric", "variation_ratio")
    prequential_every: int = PREQUENTIAL_EVERY
    engine: str = "auto"
    threads: int = 1
    out: str = "runs"
    data_dir: str | None = None
    train_limit: int | None = None
    test_limit: int | None = None
    active: str | None = None
    threshold: float | None = None
    mc_samples: int = 10
    budget: float | None = None
    budget_exponent: float = 0.5
    benchmark_options: dict[str, Any] = dataclasses.field(default_factory=dict)
    log_to: tuple[str, ...] = ()

    @classmethod
    def _rules(cls):
        pos, nonneg = (lambda v: v >= 1, ">= 1"), (lambda v: v >= 0, ">= 0")
        opt_pos = (lambda v: v is None or v >= 1, ">= 1 or none")
        return {
            "benchmark": (_str, None), "method": (_str, None),
            "tasks": (_opt(_int), (lambda v: v is None or 1 <= v <= MAX_TASKS, f">= 1 or none, at most {MAX_TASKS}")),
            "seeds": (_tuple(_int), (lambda v: 1 <= len(v) <= MAX_SEEDS and len(set(v)) == len(v)
                                     and all(0 <= s < MAX_SEED for s in v),
                                     f"a non-empty list of distinct seeds in [0, {MAX_SEED}), at most {MAX_SEEDS} of them")),
            "hidden": (_opt(_tuple(_int)), (lambda v: v is None or all(h >= 1 for h in v), "widths >= 1")),
            "preset": (_str, None), "overrides": (_mapping, None),
            "batch_size": (_int, pos),
            "eval_all_every": (_int, nonneg), "eval_sample_every": (_int, nonneg),
            "eval_sample_size": (_int, pos), "eval_last": (_int, nonneg), "eval_last_every": (_int, pos),
            "eval_final": (_str, (lambda v: v in FINAL_CHOICES, f"one of {FINAL_CHOICES}")),
            "eval_final_last": (_int, pos), "eval_final_all_max": (_int, pos), "eval_all_max": (_int, nonneg),
            "eval_batch_size": (_int, pos), "eval_samples": (_opt(_int), (lambda v: v is None or 1 <= v <= MAX_SAMPLES,
                                                                                   f"in 1..{MAX_SAMPLES} or none")),
            "ood": (_bool, None), "ood_every": (_int, nonneg), "prequential_every": (_int, nonneg),
            "ood_scores": (_tuple(_str), (lambda v: all(s in OOD_SCORES for s in v), f"names from {OOD_SCORES}")),
            "engine": (_str, (lambda v: v in ENGINES, f"one of {ENGINES}")),
            "threads": (_int, pos), "out": (_str, None), "data_dir": (_opt(_str), None),
            "train_limit": (_opt(_int), opt_pos), "test_limit": (_opt(_int), opt_pos),
            "active": (_opt(_str), None),
            "threshold": (_opt(_float), (lambda v: v is None or 0 <= v <= 1e6, ">= 0 or none")),
            "mc_samples": (_int, (lambda v: 1 <= v <= MAX_SAMPLES, f"in 1..{MAX_SAMPLES}")),
            "budget": (_opt(_float), (lambda v: v is None or 0 < v <= 1, "in (0, 1] or none")),
            "budget_exponent": (_float, (lambda v: v > 0, "> 0")),
            "benchmark_options": (_mapping, None),
            "log_to": (_tuple(_str), (lambda v: all(n in LOG_SINKS for n in v), f"names from {LOG_SINKS}")),
        }

    def __post_init__(self):
        rules = self._rules()
        for f in dataclasses.fields(self):
            if f.name not in rules:
                continue
            conv, check = rules[f.name]
            raw = getattr(self, f.name)
            try:
                value = conv(raw)
            except (TypeError, ValueError):
                raise ValueError(f"config {f.name!r} has a bad value {raw!r} (expected {_expected(f.type)})") from None
            if check is not None and not check[0](value):
                raise ValueError(f"config {f.name!r} must be {check[1]}, got {raw!r}")
            object.__setattr__(self, f.name, value)
        object.__setattr__(self, "method", method_name(self.method))
        # bimu run FILE.npz / bimu run FOLDER: the registered 'npz' / 'image-folder' benchmark on that path
        own = (("file", "npz") if self.benchmark.lower().endswith(".npz")
               else ("folder", "image-folder") if _is_image_folder(self.benchmark) else None)
        if own is not None:
            what, name = own
            if "path" in self.benchmark_options:
                raise ValueError(f"config 'benchmark' is the {what} {self.benchmark!r} and 'benchmark_options' "
                                 f"names another path; give the {what} once")
            path = str(Path(self.benchmark).expanduser().resolve())
            object.__setattr__(self, "benchmark_options", {**self.benchmark_options, "path": path})
            object.__setattr__(self, "benchmark", name)

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RunConfig:
        """Build from a mapping; unknown keys raise ValueError naming them (with a suggestion)."""
        names = [f.name for f in dataclasses.fields(cls)]
        for key in d:
            if key not in names:
                close = difflib.get_close_matches(str(key), names, n=1)
                hint = f"; did you mean {close[0]!r}?" if close else f"; known keys: {names}"
                raise ValueError(f"unknown config key {key!r}{hint}")
        return cls(**dict(d))

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (tuples as lists; ``benchmark_options`` only when not empty)."""
        out = {}
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if f.name == "benchmark_options" and not v:
                continue
            out[f.name] = list(v) if isinstance(v, tuple) else (dict(v) if isinstance(v, dict) else v)
        return out

    def replace(self, **changes) -> RunConfig:
        """A copy with ``changes`` (validated; unknown keys rejected)."""
        d = self.to_dict()
        d.setdefault("benchmark_options", dict(self.benchmark_options))
        for k in changes:
            if k not in d:
                raise ValueError(f"unknown config key {k!r}")
        d.update(changes)
        return RunConfig.from_dict(d)

    # ------------------------------------------------------------------ derived values
    @property
    def schedule(self) -> EvalSchedule:
        """The evaluation schedule."""
        return EvalSchedule(all_every=self.eval_all_every, sample_every=self.eval_sample_every,
                            sample_size=self.eval_sample_size, last_m=self.eval_last,
                            last_every=self.eval_last_every, final=self.eval_final,
                            final_last=self.eval_final_last, final_all_max=self.eval_final_all_max,
                            all_max=self.eval_all_max)

    def hidden_widths(self) -> tuple[int, ...]:
        """Hidden widths, the benchmark default if not set."""
        if self.hidden is not None:
            return self.hidden
        from bimu.data.benchmarks import benchmark_entry

        return benchmark_entry(self.benchmark).default_hidden

    def preset_key(self) -> tuple[str | None, str]:
        """``(preset key or None, note)`` after resolving ``"auto"`` / ``"none"``."""
        from bimu.data.benchmarks import benchmark_entry
        from bimu.methods import get_method

        cls = get_method(self.method)
        if self.preset == "none":
            return None, ""
        if self.preset != "auto":
            if self.preset not in cls.presets:
                raise ValueError(f"config 'preset': method {self.method!r} has no preset {self.preset!r}; "
                                 f"known: {sorted(cls.presets)}")
            return self.preset, ""
        key, note = benchmark_entry(self.benchmark).preset_for(self.hidden_widths())
        if key is not None and key not in cls.presets:
            return None, f"method {self.method!r} has no paper preset {key!r}; using its defaults"
        return key, note

    def resolve_hparams(self) -> tuple[str | None, dict[str, Any], str]:
        """``(preset key, validated hyperparameters, note)``; ValueError names a bad override."""
        from bimu.methods import get_method

        cls = get_method(self.method)
        key, note = self.preset_key()
        return key, cls.resolve_hyperparameters(self.overrides, preset=key), note

    def validate(self) -> RunConfig:
        """Check names that need the registries (benchmark, method, preset, overrides, active)."""
        from bimu.data.benchmarks import benchmark_entry
        from bimu.methods import get_method

        try:
            benchmark_entry(self.benchmark)
        except ValueError as e:
            raise ValueError(f"config 'benchmark': {e}") from None
        try:
            get_method(self.method)
        except ValueError as e:
            raise ValueError(f"config 'method': {e} (in any letter case, or as the paper names them: "
                             f"{', '.join(sorted(_paper_names()))})") from None
        self.resolve_hparams()
        if self.active is None and (self.threshold is not None or self.budget is not None):
            raise ValueError("config 'threshold' / 'budget' need an active strategy ('active')")
        return self

    def semantic_dict(self) -> dict[str, Any]:
        """The keys that determine results (used to decide whether a run directory can be resumed)."""
        d = self.to_dict()
        for k in NON_SEMANTIC_KEYS:
            d.pop(k, None)
        return d


def _paper_names() -> dict[str, str]:
    """The paper's names of the methods (its tables' and its text's) -> registered name."""
    from bimu.paper import METHOD_FULL_NAMES, METHOD_NAMES

    return {v: k for names in (METHOD_NAMES, METHOD_FULL_NAMES) for k, v in names.items()}


def method_name(name: str) -> str:
    """The registered name of a method written in any letter case or as the paper names it (``BiMU``,
    ``Online EWC``, ``Syn. Meta.``); other names unchanged (the registry then says whether they exist).

    >>> method_name("BiMU"), method_name("Online EWC"), method_name("syn. meta."), method_name("bimu")
    ('bimu', 'ewc-online', 'synaptic-metaplasticity', 'bimu')
    """
    key = name.strip().lower()
    paper = {k.lower(): v for k, v in _paper_names().items()}
    if key in paper:
        return paper[key]
    if name == key:
        return name
    from bimu.methods import available_methods  # only for a name in capitals: the registry imports torch

    return next((m for m in available_methods() if m.lower() == key), name)


def _expected(t) -> str:
    return str(t).replace("typing.", "")


def parse_benchmark_option(text: str) -> tuple[str, Any]:
    """``"key=value"`` -> ``(key, value)`` with the value read as JSON when it is JSON (a number,
    ``true``, a list...), else kept as a string; ValueError naming the text otherwise.

    >>> parse_benchmark_option("n_features=1024"), parse_benchmark_option("backbone=efficientnet-lite0")
    (('n_features', 1024), ('backbone', 'efficientnet-lite0'))
    """
    key, sep, value = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ValueError(f"--option expects KEY=VALUE, got {text!r}")
    try:
        return key, json.loads(value)
    except json.JSONDecodeError:
        return key, value.strip()


def parse_override(text: str) -> tuple[str, str]:
    """``"key=value"`` -> ``(key, value)``; ValueError naming the text otherwise.

    >>> parse_override("memory_window=700")
    ('memory_window', '700')
    """
    if "=" not in text:
        raise ValueError(f"--set expects key=value, got {text!r}")
    k, v = text.split("=", 1)
    k = k.strip()
    if not k:
        raise ValueError(f"--set expects key=value, got {text!r}")
    return k, v.strip()

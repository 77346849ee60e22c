"""The settings of one ``bimu tune`` worker (:class:`TuneConfig`) and the benchmark options it tunes on.

Every trial is evaluated on the benchmark's *validation* split: :func:`tune_benchmark_options` adds
``validation=True`` (for Permuted MNIST also ``n_tasks=10``: the paper tunes on 10 tasks whose
permutations differ from those of the evaluation runs) and refuses to switch it off.

Your own data is tuned like a registered benchmark: a benchmark given as ``FILE.npz`` is the ``npz``
benchmark with the file's absolute ``path`` (:func:`own_data_benchmark`), whose validation split is the
file's ``x_val``/``y_val`` or a share of each task's training rows held out (:mod:`bimu.data.own`).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bimu.tune.objective import DEFAULT_WEIGHTS, REDUCTIONS, check_weights
from bimu.tune.storage import storage_kind

BENCHMARK_TUNE_OPTIONS: dict[str, dict[str, Any]] = {
    "pmnist": {"n_tasks": 10, "validation": True},
}
"""Benchmark options used for tuning, per benchmark (others get ``{"validation": True}``)."""


def tune_benchmark_options(benchmark: str, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The options the benchmark is built with for tuning: validation split, then ``overrides``.

    ``validation`` cannot be switched off: tuning never evaluates on the test set.

    >>> tune_benchmark_options("pmnist")
    {'n_tasks': 10, 'validation': True}
    """
    opts = dict(BENCHMARK_TUNE_OPTIONS.get(benchmark, {"validation": True}))
    for key, value in dict(overrides or {}).items():
        if key == "validation" and value is not True:
            raise ValueError("tuning always uses the validation split (validation=True); the test set "
                             "is never used")
        if key == "benchmark":
            raise ValueError("'benchmark' is not a benchmark option")
        opts[key] = value
    return opts


def own_data_benchmark(benchmark: str, options: Mapping[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
    """``(benchmark, options)`` with a benchmark given as a ``.npz`` file turned into the ``npz`` benchmark
    and its absolute ``path`` option (as ``bimu run FILE.npz`` does); the ``path`` of ``npz`` is made
    absolute too. Any other benchmark is returned unchanged.

    >>> own_data_benchmark("/data/digits5.npz")
    ('npz', {'path': '/data/digits5.npz'})
    """
    opts = dict(options or {})
    if isinstance(benchmark, str) and benchmark.lower().endswith(".npz"):
        if "path" in opts:
            raise ValueError(f"the benchmark is the file {benchmark!r} and --option path names another; give the "
                             "file once")
        opts["path"], benchmark = benchmark, "npz"
    if benchmark == "npz" and isinstance(opts.get("path"), str) and opts["path"]:
        opts["path"] = str(Path(opts["path"]).expanduser().resolve())
    return benchmark, opts


STUDY_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
"""What a study name may be: it names the default output folder ``runs/tune/<study-name>``."""


def check_study_name(name: str) -> str:
    """``name`` if it is a valid study name (:data:`STUDY_NAME`); ValueError (one line) otherwise.

    >>> check_study_name("pmnist-bimu_v2.1")
    'pmnist-bimu_v2.1'
    >>> check_study_name("../../x")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: study name '../../x' must be 1 to 128 letters, digits, '.', '_' or '-', starting with a ...
    """
    if not isinstance(name, str) or not STUDY_NAME.fullmatch(name):
        raise ValueError(f"study name {name!r} must be 1 to 128 letters, digits, '.', '_' or '-', starting with a "
                         "letter or digit (it names the output folder runs/tune/<study-name>)")
    return name


def default_study_name(benchmark: str, method: str) -> str:
    """``<benchmark>-<method>``, the default study name.

    >>> default_study_name("pmnist", "bimu")
    'pmnist-bimu'
    """
    return f"{benchmark}-{method}"


@dataclasses.dataclass
class TuneConfig:
    """Everything one ``bimu tune`` worker needs (see the module docstring for the semantics).

    ``overrides`` are hyperparameters held fixed (``--set KEY=VALUE``): not tuned, applied over the
    preset in every trial and exported with the tuned values. ``start_from_preset``: a new study's first
    trial is the preset (:func:`bimu.tune.search.preset_point`)."""

    benchmark: str
    method: str
    trials: int = 200
    storage: str | None = None
    study_name: str | None = None
    out_dir: str | None = None
    weights: tuple[float, float, float] = DEFAULT_WEIGHTS
    reduce: str = "final"
    seeds: tuple[int, ...] = (0,)
    preset: str | None = None
    benchmark_options: dict[str, Any] = dataclasses.field(default_factory=dict)
    overrides: dict[str, Any] = dataclasses.field(default_factory=dict)
    start_from_preset: bool = False
    timeout: float | None = None
    heartbeat_interval: int = 60
    grace_period: int | None = None
    max_retry: int = 3
    pruner: str = "none"
    sampler_seed: int | None = None
    strict_space: bool = True
    export: str | None = None
    poll_interval: float = 2.0
    max_consecutive_failures: int = 5
    evaluator: str = "runner"

    def resolved(self) -> TuneConfig:
        """A validated copy with defaults filled in (study name, output dir, tuning options)."""
        c = dataclasses.replace(self)
        if not c.benchmark or not isinstance(c.benchmark, str):
            raise ValueError(f"benchmark must be a non-empty name, got {c.benchmark!r}")
        c.weights = check_weights(c.weights)
        if c.reduce not in REDUCTIONS:
            raise ValueError(f"objective reduction must be one of {REDUCTIONS}, got {c.reduce!r}")
        if int(c.trials) != c.trials or int(c.trials) < 1:
            raise ValueError(f"trials must be a positive integer, got {c.trials!r}")
        c.trials = int(c.trials)
        c.seeds = tuple(int(s) for s in c.seeds)
        if not c.seeds:
            raise ValueError("at least one seed is needed")
        if c.timeout is not None and not c.timeout > 0:
            raise ValueError(f"timeout must be > 0 seconds, got {c.timeout}")
        if int(c.heartbeat_interval) < 1:
            raise ValueError(f"heartbeat interval must be >= 1 s, got {c.heartbeat_interval}")
        c.heartbeat_interval = int(c.heartbeat_interval)
        if c.grace_period is None:
            c.grace_period = 2 * c.heartbeat_interval
        if int(c.grace_period) <= c.heartbeat_interval:
            raise ValueError(f"grace period ({c.grace_period} s) must exceed the heartbeat interval "
                             f"({c.heartbeat_interval} s)")
        c.grace_period = int(c.grace_period)
        if int(c.max_retry) < 0:
            raise ValueError(f"max retry must be >= 0, got {c.max_retry}")
        if c.pruner not in ("none", "median"):
            raise ValueError(f"pruner must be 'none' or 'median', got {c.pruner!r}")
        if not c.poll_interval > 0:
            raise ValueError(f"poll interval must be > 0, got {c.poll_interval}")
        storage_kind(c.storage)  # an unknown scheme fails here, before anything starts
        c.benchmark, c.benchmark_options = own_data_benchmark(c.benchmark, c.benchmark_options)
        if not isinstance(c.overrides, Mapping):
            raise ValueError(f"overrides must be a mapping of hyperparameter names to values, got {c.overrides!r}")
        c.overrides = dict(c.overrides)
        c.study_name = check_study_name(c.study_name or default_study_name(_study_base(c), c.method))
        c.out_dir = str(c.out_dir or Path("runs") / "tune" / c.study_name)
        c.benchmark_options = tune_benchmark_options(c.benchmark, c.benchmark_options)
        return c

    def study_identity(self) -> dict[str, Any]:
        """What every worker of one study must agree on (stored as a study user attribute; the fixed
        ``overrides`` only when there are some, so studies from before they existed still match)."""
        return ({"overrides": dict(self.overrides)} if self.overrides else {}) | {
            "benchmark": self.benchmark,
            "method": self.method,
            "preset": self.preset,
            "weights": list(self.weights),
            "reduce": self.reduce,
            "seeds": list(self.seeds),
            "benchmark_options": dict(self.benchmark_options),
            "evaluator": self.evaluator,
        }


def _study_base(config: TuneConfig) -> str:
    """The first part of the default study name: the benchmark, or the stem of the own data file."""
    path = config.benchmark_options.get("path") if config.benchmark == "npz" else None
    if not isinstance(path, str) or not path:
        return config.benchmark
    return re.sub(r"[^A-Za-z0-9._-]", "_", Path(path).stem).lstrip("._-") or config.benchmark

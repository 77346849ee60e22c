"""Hyperparameter search spaces for ``bimu tune``, one per method.

A search space is a function ``space(trial) -> {hyperparameter: value}`` that calls the Optuna-style
``trial.suggest_float / suggest_int / suggest_categorical`` methods. Where it lives:

1. **next to the method** (preferred): an optional classmethod ``search_space(trial)`` on the
   method class (``bimu.methods``); it wins when present;
2. otherwise the entry of :data:`SEARCH_SPACES` keyed by the registered method name (the spaces of
   BiMU and of the paper's baselines are declared here until their classes carry the hook).

Hyperparameters that a space does not suggest come from the method's paper preset (if the study has
one) and then from the method's defaults, so MC samples, activation, etc. stay fixed while tuning.
The ranges span every value of the paper's appendix tables (Permuted MNIST 100 / 2000 neurons,
OpenLORIS-Object 25,088 / 8,192 / 1,024 features, imbalanced and standardised variants).

Keys are validated against the method's declared ``hyperparameters`` when a study starts
(:func:`check_search_space`): a key the method does not declare is an error that names it and the
known keys (``strict=False`` drops such keys with a warning instead). A few baseline keys have
:data:`ALIASES` (e.g. ``importance`` vs ``ewc_lambda``) so that a space keeps working whichever of
the names the method declares.

No Optuna is needed to inspect a space: :class:`SpaceRecorder` is a stand-in trial that records the
declared distributions.

>>> rec = SpaceRecorder()
>>> sorted(SEARCH_SPACES["bimu"](rec))
['kl_multiplier', 'likelihood_multiplier', 'lr', 'lr_max', 'memory_window']
>>> rec.distributions["lr_max"]
{'kind': 'float', 'low': 0.0001, 'high': 0.3, 'log': True, 'step': None}
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping
from typing import Any

SearchSpace = Callable[[Any], dict[str, Any]]
"""The type of a search space: ``space(trial) -> {hyperparameter name: suggested value}``."""


# --------------------------------------------------------------------------- the spaces
def bimu_space(trial) -> dict[str, Any]:
    """BiMU: gamma, alpha_max, beta_L, beta_KL, N (paper values: gamma 0.87-60, alpha_max 0.0023-0.092,
    beta_L 14-280.7, beta_KL 0.14-6.2, N 700-8900)."""
    return {
        "lr": trial.suggest_float("lr", 0.1, 200.0, log=True),
        "lr_max": trial.suggest_float("lr_max", 1e-4, 0.3, log=True),
        "likelihood_multiplier": trial.suggest_float("likelihood_multiplier", 1.0, 1000.0, log=True),
        "kl_multiplier": trial.suggest_float("kl_multiplier", 0.01, 20.0, log=True),
        "memory_window": trial.suggest_int("memory_window", 100, 20000, log=True),
    }


def bayesbinn_space(trial) -> dict[str, Any]:
    """BayesBiNN: learning rate (0.011-10 in the paper) and prior strength (1e-6-4.6e-5)."""
    return {
        "lr": trial.suggest_float("lr", 1e-3, 20.0, log=True),
        "prior_strength": trial.suggest_float("prior_strength", 1e-8, 1e-3, log=True),
    }


def synaptic_metaplasticity_space(trial) -> dict[str, Any]:
    """Synaptic Metaplasticity (Adam on latent weights): lr, metaplasticity m, weight decay."""
    return {
        "lr": trial.suggest_float("lr", 1e-6, 1e-2, log=True),
        "metaplasticity": trial.suggest_float("metaplasticity", 0.5, 20.0),
        "weight_decay": trial.suggest_float("weight_decay", 1e-13, 1e-4, log=True),
    }


def ste_space(trial) -> dict[str, Any]:
    """STE (Adam on latent weights): lr and weight decay."""
    return {
        "lr": trial.suggest_float("lr", 1e-5, 1e-2, log=True),
        "weight_decay": trial.suggest_float("weight_decay", 1e-13, 1e-3, log=True),
    }


def mesu_space(trial) -> dict[str, Any]:
    """MESU: alpha_mu, alpha_sigma, sigma_prior, memory window N, gradient clamp."""
    return {
        "lr_mu": trial.suggest_float("lr_mu", 0.01, 200.0, log=True),
        "lr_sigma": trial.suggest_float("lr_sigma", 1e-3, 200.0, log=True),
        "sigma_prior": trial.suggest_float("sigma_prior", 0.05, 1.0),
        "memory_window": trial.suggest_float("memory_window", 1e4, 1e7, log=True),
        "clamp_grad": trial.suggest_float("clamp_grad", 0.05, 1.0),
    }


def ewc_online_space(trial) -> dict[str, Any]:
    """Online EWC: lr, importance (lambda) and downweighting (gamma) of the running Fisher."""
    return {
        "lr": trial.suggest_float("lr", 1e-4, 1e-1, log=True),
        "importance": trial.suggest_float("importance", 1e-3, 100.0, log=True),
        "downweighting": trial.suggest_float("downweighting", 0.01, 1.0),
    }


def si_space(trial) -> dict[str, Any]:
    """Synaptic Intelligence: lr, coefficient c and damping xi."""
    return {
        "lr": trial.suggest_float("lr", 1e-4, 1e-1, log=True),
        "coefficient": trial.suggest_float("coefficient", 1e-6, 1.0, log=True),
        "damping": trial.suggest_float("damping", 0.01, 50.0, log=True),
    }


def sgd_space(trial) -> dict[str, Any]:
    """Plain SGD: the learning rate only (3e-4 to 89.5 in the paper's tables)."""
    return {"lr": trial.suggest_float("lr", 1e-4, 100.0, log=True)}


SEARCH_SPACES: dict[str, SearchSpace] = {
    "bimu": bimu_space,
    "bayesbinn": bayesbinn_space,
    "synaptic-metaplasticity": synaptic_metaplasticity_space,
    "ste": ste_space,
    "mesu": mesu_space,
    "ewc-online": ewc_online_space,
    "si": si_space,
    "sgd": sgd_space,
}
"""Method name -> search space, used when the method class has no ``search_space`` classmethod."""

ALIASES: dict[str, dict[str, tuple[str, ...]]] = {
    "bayesbinn": {"prior_strength": ("prior_precision", "kl_weight")},
    "synaptic-metaplasticity": {"metaplasticity": ("meta", "m")},
    "mesu": {"memory_window": ("n_memory", "N"), "clamp_grad": ("clamp", "grad_clamp")},
    "ewc-online": {"importance": ("ewc_lambda", "lambda_", "lam"),
                   "downweighting": ("gamma", "decay", "fisher_decay")},
    "si": {"coefficient": ("c", "si_c", "strength"), "damping": ("xi", "epsilon", "eps")},
}
"""Per method: a space key -> other names a method may declare for the same hyperparameter."""


def register_search_space(method_name: str, space: SearchSpace) -> SearchSpace:
    """Declare (or replace) the search space of ``method_name`` in :data:`SEARCH_SPACES`."""
    if not callable(space):
        raise TypeError(f"a search space must be callable(trial) -> dict, got {space!r}")
    SEARCH_SPACES[method_name] = space
    return space


# --------------------------------------------------------------------------- recording trial
class SpaceRecorder:
    """A stand-in for an Optuna trial that returns a point of each distribution and records it.

    ``point`` picks the value returned: ``"low"``, ``"high"`` or ``"mid"`` (geometric middle for
    log scales); categorical choices return the first choice (``"high"``: the last).

    >>> rec = SpaceRecorder(point="high")
    >>> rec.suggest_int("n", 1, 9, log=True), rec.suggest_categorical("a", ["x", "y"])
    (9, 'y')
    >>> rec.params
    {'n': 9, 'a': 'y'}
    """

    def __init__(self, point: str = "mid"):
        if point not in ("low", "mid", "high"):
            raise ValueError(f"point must be 'low', 'mid' or 'high', got {point!r}")
        self.point = point
        self.distributions: dict[str, dict[str, Any]] = {}
        self.params: dict[str, Any] = {}

    def _pick(self, low: float, high: float, log: bool) -> float:
        if self.point == "low":
            return low
        if self.point == "high":
            return high
        return math.sqrt(low * high) if log else (low + high) / 2

    def suggest_float(self, name: str, low: float, high: float, *, step: float | None = None,
                      log: bool = False) -> float:
        """Record a float distribution and return its chosen point."""
        _check_bounds(name, low, high, log)
        self.distributions[name] = {"kind": "float", "low": low, "high": high, "log": log, "step": step}
        value = float(self._pick(low, high, log))
        self.params[name] = value
        return value

    def suggest_int(self, name: str, low: int, high: int, *, step: int = 1, log: bool = False) -> int:
        """Record an integer distribution and return its chosen point."""
        _check_bounds(name, low, high, log)
        self.distributions[name] = {"kind": "int", "low": low, "high": high, "log": log, "step": step}
        value = int(round(self._pick(low, high, log)))
        self.params[name] = value
        return value

    def suggest_categorical(self, name: str, choices) -> Any:
        """Record a categorical distribution and return the first (or last) choice."""
        choices = list(choices)
        if not choices:
            raise ValueError(f"search space {name!r}: empty choices")
        self.distributions[name] = {"kind": "categorical", "choices": choices}
        value = choices[-1] if self.point == "high" else choices[0]
        self.params[name] = value
        return value


def _check_bounds(name: str, low: float, high: float, log: bool) -> None:
    if not (math.isfinite(low) and math.isfinite(high)) or low > high:
        raise ValueError(f"search space {name!r}: bad bounds [{low}, {high}]")
    if log and low <= 0:
        raise ValueError(f"search space {name!r}: log scale needs low > 0, got {low}")


# --------------------------------------------------------------------------- lookup and checks
def _method_class(method):
    if isinstance(method, str):
        from bimu.methods import get_method

        return get_method(method)
    return method


def get_search_space(method) -> SearchSpace:
    """The search space of ``method`` (a registered name or a method class).

    The class's ``search_space`` classmethod wins; else :data:`SEARCH_SPACES` by name; else a
    ValueError listing the methods that have a space.
    """
    cls = _method_class(method)
    hook = getattr(cls, "search_space", None)
    if callable(hook):
        return hook
    name = cls.info.name
    if name in SEARCH_SPACES:
        return SEARCH_SPACES[name]
    raise ValueError(
        f"method {name!r} declares no search space (no 'search_space' classmethod and no entry in "
        f"bimu.tune.spaces.SEARCH_SPACES); methods with one: {sorted(SEARCH_SPACES)}"
    )


def _rename(cls, values: Mapping[str, Any], strict: bool) -> dict[str, Any]:
    """Map space keys onto the names the method declares (aliases), rejecting or dropping the rest."""
    declared = cls.hyperparameters
    aliases = ALIASES.get(cls.info.name, {})
    out: dict[str, Any] = {}
    unknown: list[str] = []
    for key, value in values.items():
        if key in declared:
            out[key] = value
            continue
        alt = next((a for a in aliases.get(key, ()) if a in declared), None)
        if alt is not None:
            out[alt] = value
        else:
            unknown.append(key)
    if unknown:
        msg = (f"search space of method {cls.info.name!r} suggests {sorted(unknown)}, which the method "
               f"does not declare; declared hyperparameters: {sorted(declared)}")
        if strict:
            raise ValueError(msg + " (fix the space or pass strict=False / --skip-unknown-hparams)")
        warnings.warn(msg + "; skipping them", stacklevel=3)
    return out


def suggest_hparams(method, trial, *, strict: bool = True) -> dict[str, Any]:
    """Draw one point of the method's space with ``trial`` and validate it against the method.

    Returns the tuned hyperparameters under the method's own names, each coerced by its
    :class:`~bimu.methods.base.Hyperparameter` (a value outside its check raises ValueError).
    """
    cls = _method_class(method)
    values = get_search_space(cls)(trial)
    if not isinstance(values, Mapping):
        raise TypeError(f"search space of {cls.info.name!r} must return a dict, got {type(values).__name__}")
    values = _rename(cls, values, strict)
    return {k: cls.hyperparameters[k].validate(v) for k, v in values.items()}


def check_search_space(method, *, strict: bool = True, preset: str | None = None) -> dict[str, dict]:
    """Check a method's space before a study starts; return its recorded distributions.

    The space is evaluated at its low, middle and high points; each point must name declared
    hyperparameters (see ``strict``) and pass the method's validation together with ``preset``.

    >>> sorted(check_search_space("bimu", preset="pmnist-100"))
    ['kl_multiplier', 'likelihood_multiplier', 'lr', 'lr_max', 'memory_window']
    """
    cls = _method_class(method)
    recorded: dict[str, dict] = {}
    for point in ("low", "mid", "high"):
        rec = SpaceRecorder(point)
        with warnings.catch_warnings():
            if point != "low":
                warnings.simplefilter("ignore")
            hp = suggest_hparams(cls, rec, strict=strict)
        cls.resolve_hyperparameters(hp, preset=preset)
        recorded = rec.distributions
    return recorded

"""Any bimu method as a `river <https://riverml.xyz>`_ classifier: one example at a time, as dicts.

:class:`RiverClassifier` follows river's classifier protocol: ``learn_one(x, y)``,
``predict_proba_one(x) -> {label: probability}`` and ``predict_one(x)``, with ``x`` a dict of feature
name -> number. Where river is installed it is a ``river.base.Classifier`` that passes
``river.checks.check_estimator``, so river's metrics, ``river.evaluate.progressive_val_score``,
``river.active`` samplers and ``clone()`` accept it; without river it works the same on its own. The
network has a fixed input width: the feature order is ``features`` if given, else the sorted keys of the
first example (:attr:`RiverClassifier.feature_order`), and an example with other keys is refused with a
ValueError, as river's fixed-width models do. Labels are ``classes[i]`` (default ``0..C-1``).
Probabilities are the mean over the method's weight samples
(:meth:`~bimu.methods.base.OnlineMethod.predict_proba`), in float64, summing to 1; ``predict_one`` is
their argmax. The river active learner with bimu's rules is :class:`bimu.active.river.RiverActiveLearner`.

>>> from bimu.methods import create_method
>>> model = RiverClassifier(create_method("sgd", [2, 2], seed=0), classes=["no", "yes"])
>>> for i in range(200):
...     v = (i % 7) / 3.0 - 1.0
...     model.learn_one({"a": v, "b": -v}, "yes" if v > 0 else "no")
>>> model.predict_one({"a": 1.0, "b": -1.0}), model.predict_one({"a": -1.0, "b": 1.0})
('yes', 'no')
>>> p = model.predict_proba_one({"a": 1.0, "b": -1.0})
>>> sorted(p), round(sum(p.values()), 5)
(['no', 'yes'], 1.0)
>>> model.learn_one({"a": 1.0}, "yes")
Traceback (most recent call last):
...
ValueError: example has features ['a'], expected ['a', 'b']

``clone()`` gives a classifier with the same parameters that has learned nothing: its method is in the
state the method had when it was wrapped (same seed, so the same results on the same stream):

>>> fresh = model.clone()
>>> fresh.method is model.method, fresh.method.updates_applied, fresh.feature_order
(False, 0, None)
"""

from __future__ import annotations

import copy
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import torch

from bimu.methods.base import OnlineMethod

try:  # chosen once, at import: a river classifier where river is installed, a plain class otherwise
    from river.base import Classifier as _Base
except ImportError:
    _Base = object


class RiverClassifier(_Base):
    """river's classifier protocol around an :class:`~bimu.methods.base.OnlineMethod` (see the module
    docs); ``n_samples`` is the number of weight samples per prediction (the method's default if None).

    The constructor arguments are the classifier's parameters in river's sense (``_get_params()``);
    the method's state when it is wrapped is kept (a copy of its ``state_dict()``) for :meth:`clone`.
    """

    def __init__(self, method: OnlineMethod, classes: Sequence[Hashable] | None = None,
                 features: Sequence[str] | None = None, n_samples: int | None = None):
        n_classes = int(method.sizes[-1])
        self.method = method
        self.classes = list(range(n_classes)) if classes is None else list(classes)
        if len(self.classes) != n_classes or len(set(self.classes)) != n_classes:
            raise ValueError(f"classes must be {n_classes} distinct labels (the network's outputs), got {classes!r}")
        self.features = None if features is None else list(features)
        if self.features is not None and len(self.features) != int(method.sizes[0]):
            raise ValueError(f"features names {len(self.features)} inputs, the network takes {method.sizes[0]}")
        self.n_samples = n_samples
        self._index = {c: i for i, c in enumerate(self.classes)}
        self.feature_order: list[str] | None = self.features
        """The order of the features in the network's input (set by the first example if not given)."""
        self._initial = copy.deepcopy(method.state_dict())

    @property
    def _multiclass(self) -> bool:  # river: more than two classes (river's checks then use a 7-class data set)
        return len(self.classes) > 2

    @classmethod
    def _unit_test_params(cls):
        """The parameters ``river.checks.check_estimator`` builds the classifier with: BiMU on river's
        Phishing data set (9 features, labels False / True; with two classes the logits are not
        layer-normalised, which would map them to -1 and +1)."""
        from bimu.methods.registry import create_method

        yield {"method": create_method("bimu", [9, 16, 2], seed=0, preset="pmnist-100", output_norm=False),
               "classes": [False, True]}

    def _unit_test_skips(self) -> set[str]:
        """The network has a fixed input width: an example whose features differ from the first one's is
        refused (ValueError), as river's fixed-width models (``river.compat.SKL2RiverClassifier``) do,
        and river's checks of emerging and disappearing features are skipped as for those."""
        return {"check_emerging_features", "check_disappearing_features", "check_radically_disappearing_features"}

    def _vector(self, x: Mapping[str, float]) -> torch.Tensor:
        if self.feature_order is None:
            if len(x) != int(self.method.sizes[0]):
                raise ValueError(f"example has {len(x)} features, the network takes {self.method.sizes[0]}")
            self.feature_order = sorted(x)
        if len(x) != len(self.feature_order) or any(k not in x for k in self.feature_order):
            raise ValueError(f"example has features {sorted(x)}, expected {self.feature_order}")
        return torch.tensor([[float(x[k]) for k in self.feature_order]], dtype=torch.float32)

    def learn_one(self, x: Mapping[str, float], y: Hashable) -> None:
        """One online update on the labelled example ``(x, y)``."""
        if y not in self._index:
            raise ValueError(f"unknown label {y!r}; classes are {self.classes}")
        self.method.learn(self._vector(x), torch.tensor([self._index[y]], dtype=torch.int64))

    def predict_proba_one(self, x: Mapping[str, float], **kwargs: Any) -> dict[Hashable, float]:
        """``{label: probability}``, the mean over weight samples."""
        p = self.method.predict_proba(self._vector(x), n_samples=self.n_samples)[0].double()
        p = (p / p.sum()).tolist()  # in float64: sums to 1 within math.isclose, as river's checks ask
        return {c: p[i] for i, c in enumerate(self.classes)}

    def predict_one(self, x: Mapping[str, float], **kwargs: Any) -> Hashable:
        """The most probable label."""
        p = self.predict_proba_one(x)
        return max(p, key=p.get)

    def clone(self, new_params: Mapping[str, Any] | None = None, include_attributes: bool = False) -> RiverClassifier:
        """A new classifier with the same parameters (``new_params`` replace some) that has learned
        nothing: its method is a copy of the wrapped method in the state it was wrapped in.
        ``include_attributes`` also copies what was learned besides the method (the feature order)."""
        method = copy.deepcopy(self.method)
        method.load_state_dict(copy.deepcopy(self._initial))
        params = {"method": method, "classes": self.classes, "features": self.features, "n_samples": self.n_samples}
        params.update(new_params or {})
        out = type(self)(**{k: v if k == "method" else copy.deepcopy(v) for k, v in params.items()})
        if include_attributes and out.features is None and self.feature_order is not None:
            out.feature_order = list(self.feature_order)
        return out

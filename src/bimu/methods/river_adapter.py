"""Any bimu method as a `river <https://riverml.xyz>`_ classifier: one example at a time, as dicts.

:class:`RiverClassifier` follows river's classifier protocol (duck-typed: river is not needed):
``learn_one(x, y)``, ``predict_proba_one(x) -> {label: probability}`` and ``predict_one(x)``, with
``x`` a dict of feature name -> number. The feature order is ``features`` if given, else the sorted
keys of the first example; every later example must have the same keys. Labels are ``classes[i]``
(default ``0..C-1``). Probabilities are the mean over the method's weight samples
(:meth:`~bimu.methods.base.OnlineMethod.predict_proba`); ``predict_one`` is their argmax.

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
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence

import torch

from bimu.methods.base import OnlineMethod


class RiverClassifier:
    """river's classifier protocol around an :class:`~bimu.methods.base.OnlineMethod` (see the module
    docs); ``n_samples`` is the number of weight samples per prediction (the method's default if None)."""

    def __init__(self, method: OnlineMethod, classes: Sequence[Hashable] | None = None,
                 features: Sequence[str] | None = None, n_samples: int | None = None):
        n_classes = int(method.sizes[-1])
        self.method = method
        self.classes = list(range(n_classes)) if classes is None else list(classes)
        if len(self.classes) != n_classes or len(set(self.classes)) != n_classes:
            raise ValueError(f"classes must be {n_classes} distinct labels (the network's outputs), got {classes!r}")
        self._index = {c: i for i, c in enumerate(self.classes)}
        self.features = None if features is None else list(features)
        if self.features is not None and len(self.features) != int(method.sizes[0]):
            raise ValueError(f"features names {len(self.features)} inputs, the network takes {method.sizes[0]}")
        self.n_samples = n_samples

    def _vector(self, x: Mapping[str, float]) -> torch.Tensor:
        if self.features is None:
            if len(x) != int(self.method.sizes[0]):
                raise ValueError(f"example has {len(x)} features, the network takes {self.method.sizes[0]}")
            self.features = sorted(x)
        if len(x) != len(self.features) or any(k not in x for k in self.features):
            raise ValueError(f"example has features {sorted(x)}, expected {self.features}")
        return torch.tensor([[float(x[k]) for k in self.features]], dtype=torch.float32)

    def learn_one(self, x: Mapping[str, float], y: Hashable) -> None:
        """One online update on the labelled example ``(x, y)``."""
        if y not in self._index:
            raise ValueError(f"unknown label {y!r}; classes are {self.classes}")
        self.method.learn(self._vector(x), torch.tensor([self._index[y]], dtype=torch.int64))

    def predict_proba_one(self, x: Mapping[str, float]) -> dict[Hashable, float]:
        """``{label: probability}``, the mean over weight samples."""
        p = self.method.predict_proba(self._vector(x), n_samples=self.n_samples)[0]
        return {c: float(p[i]) for i, c in enumerate(self.classes)}

    def predict_one(self, x: Mapping[str, float]) -> Hashable:
        """The most probable label."""
        p = self.predict_proba_one(x)
        return max(p, key=p.get)

"""bimu's active learning as a river active learner: :class:`RiverActiveLearner`.

``RiverActiveLearner(classifier, strategy="vr", threshold=0.2)`` is a
``river.active.ActiveLearningClassifier`` around a :class:`~bimu.methods.RiverClassifier`:
``predict_one(x)`` returns ``(label, ask)`` and ``predict_proba_one(x)`` returns ``({label:
probability}, ask)``, both from the same ``mc_samples`` hard weight samples, and river's
``evaluate.progressive_val_score`` calls ``learn_one`` only where it asked. The decision is bimu's
(:class:`bimu.active.ActiveLearner`): the variation ratio of the samples' votes against a fixed
``threshold``, or the budget controller with ``budget`` (and ``budget_exponent``), which keeps the
fraction of labels asked near the budget; any other strategy of :func:`bimu.active.make_acquisition`
works too. An example not asked for costs the forward passes only: no label, no backward pass, no weight
write. :attr:`RiverActiveLearner.accounting` counts them. Needs river (the ``river`` extra).

In river's progressive validation (``docs/integrations/river.md`` has the full example)::

    from river import datasets, evaluate, metrics
    from bimu.methods import RiverClassifier, create_method

    base = RiverClassifier(create_method("bimu", [9, 32, 2], seed=0, preset="pmnist-100", output_norm=False),
                           classes=[False, True])
    model = RiverActiveLearner(base, budget=0.2)
    evaluate.progressive_val_score(datasets.Phishing(), model, metrics.Accuracy())
    model.accounting["labels_queried"]
"""

from __future__ import annotations

import copy
from collections.abc import Hashable, Mapping
from typing import Any

from bimu.active.learner import ActiveLearner, make_acquisition
from bimu.methods.river_adapter import RiverClassifier

try:  # chosen once, at import: river's active-learning base class where river is installed
    from river.active.base import ActiveLearningClassifier as _Base
except ImportError:
    _Base = None


class RiverActiveLearner(_Base or object):
    """A ``river.active.ActiveLearningClassifier`` that asks with bimu's rules (see the module docs).

    Parameters: ``classifier`` (a :class:`~bimu.methods.RiverClassifier`), ``strategy`` (``"vr"``,
    ``"entropy"``, ``"epistemic"``, ``"random"``, ...), ``threshold`` or ``budget`` (one of the two;
    ``budget`` is the vote-based budget controller, for ``vr``), ``budget_exponent``, ``mc_samples``
    (``K``, the weight samples per decision) and ``seed`` (of the query samples; default the method's).
    """

    def __init__(self, classifier: RiverClassifier, strategy: str = "vr", threshold: float | None = None,
                 budget: float | None = None, budget_exponent: float = 0.5, mc_samples: int = 10,
                 seed: int | None = None):
        if _Base is None:
            raise ImportError('RiverActiveLearner needs river: pip install -e ".[river]"')
        if not isinstance(classifier, RiverClassifier):
            raise TypeError(f"classifier must be a bimu.methods.RiverClassifier, got {type(classifier).__name__}")
        if threshold is None and budget is None and strategy not in ("all",):
            threshold = 0.2
        super().__init__(classifier, seed=seed)
        self.strategy, self.threshold, self.budget = strategy, threshold, budget
        self.budget_exponent, self.mc_samples = budget_exponent, mc_samples
        acquisition = make_acquisition(strategy, threshold=threshold, budget=budget, budget_exponent=budget_exponent,
                                       mc_samples=mc_samples, seed=0 if seed is None else seed)
        if acquisition.needs_labels:
            raise ValueError(f"strategy {strategy!r} needs the label before asking for it; river asks first")
        self.learner = ActiveLearner(classifier.method, acquisition, seed=seed, query_sampler="predict-samples")
        """The :class:`~bimu.active.ActiveLearner` that decides, and counts what the stream cost."""

    @classmethod
    def _unit_test_params(cls):
        """What ``river.checks.check_estimator`` builds it with: BiMU on river's Phishing data set."""
        for params in RiverClassifier._unit_test_params():
            yield {"classifier": RiverClassifier(**params), "threshold": 0.2}
            yield {"classifier": RiverClassifier(**params), "budget": 0.3}

    def _unit_test_skips(self) -> set[str]:
        """As :meth:`bimu.methods.RiverClassifier._unit_test_skips` (a fixed input width), and river's
        ``check_predict_proba_one_binary``, which reads the ``(probabilities, ask)`` pair of an active
        learner as a dict (river's own ``EntropySampler`` around a binary classifier fails it too); the
        tests check the binary labels of this learner's probabilities instead."""
        return self.classifier._unit_test_skips() | {"check_predict_proba_one_binary"}

    @property
    def _multiclass(self) -> bool:
        return self.classifier._multiclass

    @property
    def accounting(self) -> dict:
        """``examples_seen``, ``labels_queried``, ``forward_passes``, ``backward_passes``,
        ``weight_writes``, ``query_fraction`` (:class:`~bimu.active.Accounting`)."""
        return self.learner.accounting

    def _ask_for_label(self, x, y_pred) -> bool:  # river's hook; the decision is taken with the samples
        raise NotImplementedError("RiverActiveLearner decides in predict_proba_one")

    def predict_proba_one(self, x: Mapping[str, float], **kwargs: Any) -> tuple[dict[Hashable, float], bool]:
        """``({label: probability}, ask)``: the mean of ``mc_samples`` weight samples' probabilities (in
        float64, summing to 1) and whether to ask for the label."""
        _, ask = self.learner.predict_one(self.classifier._vector(x))
        p = self.learner.last_probs.mean(0)[0].double()
        p = (p / p.sum()).tolist()
        return {c: p[i] for i, c in enumerate(self.classifier.classes)}, ask

    def predict_one(self, x: Mapping[str, float], **kwargs: Any) -> tuple[Hashable, bool]:
        """``(label, ask)``: the most probable label and whether to ask for it."""
        p, ask = self.predict_proba_one(x)
        return max(p, key=p.get), ask

    def learn_one(self, x: Mapping[str, float], y: Hashable, **kwargs: Any) -> None:
        """Learn the labelled example (one backward pass, one weight write). After a ``predict_one`` that
        did not ask, it counts as an update outside the asked ones, as river's learners take any label."""
        if y not in self.classifier._index:
            raise ValueError(f"unknown label {y!r}; classes are {self.classifier.classes}")
        if self.learner._pending is False:  # river may teach what was not asked for (checks, full labels)
            self.learner._pending = None
        self.learner.learn_one(self.classifier._vector(x), self.classifier._index[y])

    def clone(self, new_params: Mapping[str, Any] | None = None, include_attributes: bool = False):
        """A learner with the same parameters that has learned and asked nothing (its classifier is
        :meth:`bimu.methods.RiverClassifier.clone`); ``new_params`` replace some parameters."""
        new_params = dict(new_params or {})
        classifier = new_params.pop("classifier", None)
        if isinstance(classifier, tuple):  # river's (class, parameters) form of a nested estimator
            classifier = self.classifier.clone(classifier[1], include_attributes=include_attributes)
        elif classifier is None:
            classifier = self.classifier.clone(include_attributes=include_attributes)
        params = {k: copy.deepcopy(v) for k, v in self._get_params().items() if k != "classifier"}
        return type(self)(classifier=classifier, **{**params, **new_params})

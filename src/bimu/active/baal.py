"""bimu in `baal <https://baal.readthedocs.io>`_'s pool-based active learning: the variation ratio as a
baal heuristic, and a bimu method's Monte-Carlo predictions in baal's layout.

baal ranks an unlabelled pool from Monte-Carlo predictions shaped ``[batch, classes, iterations]``
(``[B, C, K]``; bimu's own layout is ``[samples, batch, classes]``, ``[K, B, C]``). It has no vote-based
heuristic (baal issue 215 asks for one); :class:`VariationRatio` is that heuristic: the variation ratio
``1 - max_c votes_c / K``, where each of the ``K`` samples votes for its argmax class (the first index
on a tie, as ``np.argmax``), computed by bimu's own :func:`bimu.active.score_values` (``"vr"``: exactly
``dissent / K``), so baal ranks with the very score bimu's streaming learner thresholds. Highest variation
ratio first; ties keep pool order (a stable sort, where baal's own heuristics leave the order of ties to
``np.argsort``). Only the argmax of each sample counts, so logits and probabilities give the same score.

Where baal is installed, :class:`VariationRatio` is a ``baal.active.heuristics.AbstractHeuristic``
(``get_ranks``, ``get_uncertainties``, ``__call__`` returning ranks, ``reduction`` for outputs with more
axes, as ``[B, C, H, W, K]``), so ``baal.active.ActiveLearningLoop`` and baal's wrappers (e.g.
``PowerSampling``) take it; without baal it is a small class with the same methods on numpy arrays.
:func:`mc_predictions` hands a bimu method's ``K`` weight samples to any baal heuristic, and
:class:`BaalModelAdapter` gives a bimu method the ``predict_on_dataset`` / ``train_on_dataset``
interface of baal's ``ModelWrapper``. baal is optional (the ``baal`` extra); this module imports without it.

>>> import numpy as np
>>> votes = np.eye(3)[[[0, 0, 0, 0], [0, 1, 0, 2], [0, 0, 1, 1], [2, 2, 2, 1]]]   # [B=4, K=4, C=3] one-hot votes
>>> preds = votes.transpose(0, 2, 1)                                               # baal's [B, C, K]
>>> vr = VariationRatio()
>>> vr.get_uncertainties(preds).tolist(), vr(preds).tolist()
([0.0, 0.5, 0.5, 0.25], [1, 2, 3, 0])

A bimu method's samples, in baal's layout:

>>> from bimu import create_method
>>> method = create_method("bimu", [4, 8, 3], seed=0)
>>> mc_predictions(method, np.zeros((6, 4), dtype=np.float32), k=10).shape
(6, 3, 10)

With baal (``docs/integrations/baal.md`` has the full loop)::

    from baal.active import ActiveLearningDataset, ActiveLearningLoop

    model = BaalModelAdapter(method)
    loop = ActiveLearningLoop(al_dataset, model.predict_on_dataset, heuristic=VariationRatio(),
                              query_size=10, iterations=20)
    loop.step()   # ranks the pool by variation ratio and labels the top 10
"""

from __future__ import annotations

import types
import warnings
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np
import torch

from bimu.active.scores import score_values
from bimu.methods.base import OnlineMethod

try:  # chosen once, at import: baal's heuristic base class where baal is installed
    from baal.active.heuristics import AbstractHeuristic as _BaalHeuristic
except ImportError:
    _BaalHeuristic = None

_DEPRECATED = "DEPRECATED"  # baal's default of its deprecated ``shuffle_prop``

_REDUCTIONS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "max": lambda x: np.max(x, axis=tuple(range(1, x.ndim))),
    "min": lambda x: np.min(x, axis=tuple(range(1, x.ndim))),
    "mean": lambda x: np.mean(x, axis=tuple(range(1, x.ndim))),
    "sum": lambda x: np.sum(x, axis=tuple(range(1, x.ndim))),
    "none": lambda x: x,
}


class _NumpyHeuristic:
    """The part of baal's ``AbstractHeuristic`` interface :class:`VariationRatio` needs, where baal is
    not installed: scores, their reduction, ranks (same names and semantics as baal's)."""

    def __init__(self, shuffle_prop=_DEPRECATED, reverse: bool = False, reduction="none"):
        if shuffle_prop not in (_DEPRECATED, 0, 0.0):
            raise ValueError("shuffle_prop needs baal (it is deprecated there too)")
        if not (callable(reduction) or reduction in _REDUCTIONS):
            raise ValueError(f"reduction must be callable or one of {sorted(_REDUCTIONS)}, got {reduction!r}")
        self.shuffle_prop = 0.0
        self.reversed = reverse
        self._reduction_name = reduction
        self.reduction = reduction if callable(reduction) else _REDUCTIONS[reduction]

    def compute_score(self, predictions, target_predictions=None):  # pragma: no cover - overridden
        raise NotImplementedError

    def get_uncertainties(self, predictions, target_predictions=None) -> np.ndarray:
        """The reduced scores ``[B]`` of ``predictions`` ``[B, C, ..., K]``."""
        if isinstance(predictions, torch.Tensor):
            predictions = predictions.detach().cpu().numpy()
        return self.reduction(self.compute_score(predictions, target_predictions=target_predictions))

    def get_uncertainties_generator(self, predictions: Iterable, target_predictions=None) -> np.ndarray:
        """The scores of the chunks a generator yields, concatenated."""
        acc = [self.get_uncertainties(p, target_predictions=target_predictions) for p in predictions]
        if not acc:
            raise ValueError("No prediction! Cannot order the values!")
        return np.concatenate(acc)

    def get_ranks(self, predictions, target_predictions=None) -> tuple[np.ndarray, np.ndarray]:
        """``(ranks, scores)``: pool indices, most informative first, and every item's score."""
        if isinstance(predictions, types.GeneratorType):
            scores = self.get_uncertainties_generator(predictions, target_predictions=target_predictions)
        else:
            scores = self.get_uncertainties(predictions, target_predictions=target_predictions)
        return self.reorder_indices(scores), scores

    def __call__(self, predictions, target_predictions=None) -> np.ndarray:
        """The ranks only (as baal's heuristics)."""
        return self.get_ranks(predictions, target_predictions)[0]


def _single(predictions):
    """baal's multi-output convention: a list or tuple holding one array is that array."""
    if isinstance(predictions, (list, tuple)):
        if len(predictions) != 1:
            raise ValueError("VariationRatio takes one array [B, C, ..., K]; for several outputs use "
                             "baal.active.heuristics.CombineHeuristics")
        predictions = predictions[0]
    return predictions


def to_bimu_layout(predictions) -> torch.Tensor:
    """baal's ``[B, C, ..., K]`` predictions as bimu's ``[K, B, ..., C]`` (a tensor, no copy where it can).

    >>> to_bimu_layout(np.zeros((5, 3, 10))).shape
    torch.Size([10, 5, 3])
    """
    predictions = _single(predictions)
    if isinstance(predictions, np.ndarray) and any(s < 0 for s in predictions.strides):
        predictions = predictions.copy()  # torch takes no negative strides (a reversed view)
    t = torch.as_tensor(predictions)
    if t.dim() < 3:
        raise ValueError(f"predictions must be [batch, classes, ..., iterations], got shape {tuple(t.shape)}")
    return t.movedim(-1, 0).movedim(2, -1)  # [K, B, C, ...], then the classes last


def to_baal_layout(samples: torch.Tensor) -> np.ndarray:
    """bimu's ``[K, B, ..., C]`` samples as baal's ``[B, C, ..., K]`` numpy array.

    >>> to_baal_layout(torch.zeros(10, 5, 3)).shape
    (5, 3, 10)
    """
    t = torch.as_tensor(samples)
    if t.dim() < 3:
        raise ValueError(f"samples must be [samples, batch, ..., classes], got shape {tuple(t.shape)}")
    return t.movedim(0, -1).movedim(-2, 1).detach().cpu().numpy()  # [B, ..., C, K], then the classes second


class VariationRatio(_BaalHeuristic or _NumpyHeuristic):
    """The variation ratio ``1 - max_c votes_c / K`` as a baal heuristic (see the module docs).

    Takes baal's ``[B, C, ..., K]`` predictions (probabilities or logits: only each sample's argmax
    counts), scores each item with :func:`bimu.active.score_values` ``("vr", ...)`` in float64, and
    ranks the highest score first (``reverse=True`` in baal's terms); ties keep pool order.
    ``reduction`` aggregates extra axes (as baal's heuristics: ``"none"``, ``"mean"``, ``"max"``, ...).
    ``shuffle_prop`` is baal's deprecated ranking noise (needs baal where not 0).
    """

    def __init__(self, shuffle_prop=_DEPRECATED, reduction="none"):
        super().__init__(shuffle_prop=shuffle_prop, reverse=True, reduction=reduction)

    def compute_score(self, predictions, target_predictions=None) -> np.ndarray:
        """The variation ratio of every item, ``[B, ...]`` float64 (``target_predictions`` is unused)."""
        samples = to_bimu_layout(predictions)  # [K, B, ..., C]
        k, c = samples.shape[0], samples.shape[-1]
        flat = samples.reshape(k, -1, c)  # [K, B * ..., C]: score_values takes one batch axis
        return score_values("vr", flat).reshape(samples.shape[1:-1]).cpu().numpy()

    def reorder_indices(self, scores) -> np.ndarray:
        """Pool indices by decreasing score (increasing if ``reversed`` is False), ties in pool order."""
        if isinstance(scores, Sequence):
            scores = np.concatenate(scores)
        scores = np.asarray(scores)
        if scores.ndim != 1:
            raise ValueError(f"can't order scores with {scores.ndim} dimensions: set a reduction "
                             f"(currently {self._reduction_name!r})")
        ranks = np.argsort(-scores if self.reversed else scores, kind="stable")
        if self.shuffle_prop and _BaalHeuristic is not None:  # baal's deprecated noise, as its heuristics
            from baal.active.heuristics.heuristics import _shuffle_subset

            ranks = _shuffle_subset(ranks, self.shuffle_prop)
        return ranks


def _as_inputs(x) -> torch.Tensor:
    if isinstance(x, torch.Tensor):
        return x if x.is_floating_point() else x.float()
    return torch.as_tensor(np.asarray(x, dtype=np.float32))


def mc_predictions(method: OnlineMethod, x, k: int | None = None, generator: torch.Generator | None = None,
                   batch_size: int | None = None) -> np.ndarray:
    """``k`` weight samples' class probabilities of ``method`` on inputs ``x`` ``[B, features]``, in baal's
    layout ``[B, C, k]`` (float32 numpy), from :meth:`~bimu.methods.base.OnlineMethod.predict_samples`.

    ``k`` defaults to the method's ``default_eval_samples``; a deterministic method gives one sample
    (``[B, C, 1]``, a variation ratio of 0 everywhere). ``generator`` is as in ``predict_samples`` (default:
    the method's evaluation stream, so predicting never changes training); ``batch_size`` splits a
    large pool into calls of that many rows.
    """
    x = _as_inputs(x)
    if batch_size is None or x.shape[0] <= batch_size:
        return to_baal_layout(method.predict_samples(x, k, generator))
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    parts = [to_baal_layout(method.predict_samples(x[i:i + batch_size], k, generator))
             for i in range(0, x.shape[0], batch_size)]
    return np.concatenate(parts)


def _rows(dataset, indices: Sequence[int]) -> tuple[torch.Tensor, torch.Tensor | None]:
    items = [dataset[int(i)] for i in indices]
    if items and isinstance(items[0], (tuple, list)):
        x = torch.stack([_as_inputs(item[0]).reshape(-1) for item in items])
        y = torch.as_tensor(np.asarray([int(item[1]) for item in items]), dtype=torch.int64)
        return x, y
    return torch.stack([_as_inputs(item).reshape(-1) for item in items]), None


class BaalModelAdapter:
    """A bimu method with the dataset interface of baal's ``ModelWrapper``.

    ``predict_on_dataset(dataset, iterations)`` returns ``[N, C, iterations]`` (the ``get_probabilities``
    of ``baal.active.ActiveLearningLoop``) and ``train_on_dataset(dataset)`` makes online updates on the
    labelled items. A dataset is anything with ``len`` and integer indexing whose items are ``x`` or
    ``(x, y, ...)`` (a torch ``Dataset``, baal's ``ActiveLearningDataset`` or its pool). ``batch_size``
    is the rows per prediction call and per update; ``seed`` orders the training passes.
    """

    def __init__(self, method: OnlineMethod, batch_size: int = 64, seed: int = 0):
        if not hasattr(method, "predict_samples"):
            raise TypeError(f"method must be a bimu method (OnlineMethod), got {type(method).__name__}")
        if int(batch_size) < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.method = method
        self.batch_size = int(batch_size)
        self.seed = int(seed)
        self._passes = 0

    def predict_on_batch(self, data, iterations: int = 1) -> np.ndarray:
        """``iterations`` weight samples on one batch ``[B, features]``: ``[B, C, iterations]``."""
        return mc_predictions(self.method, data, iterations)

    def predict_on_dataset(self, dataset, iterations: int, half: bool = False, verbose: bool = False,
                           **kwargs: Any) -> np.ndarray:
        """``iterations`` weight samples on every item of ``dataset``: ``[N, C, iterations]`` (float16
        with ``half``; ``verbose`` and other keywords of baal's signature are accepted and unused)."""
        chunks = [mc_predictions(self.method, _rows(dataset, range(i, min(i + self.batch_size, len(dataset))))[0],
                                 iterations) for i in range(0, len(dataset), self.batch_size)]
        if not chunks:
            return np.zeros((0, int(self.method.sizes[-1]), int(iterations)), dtype=np.float16 if half else np.float32)
        out = np.concatenate(chunks)
        return out.astype(np.float16) if half else out

    def train_on_dataset(self, dataset, epochs: int = 1) -> int:
        """``epochs`` passes of online updates over the labelled ``(x, y)`` items of ``dataset``, in
        mini-batches of ``batch_size`` in a seeded order; returns the number of updates."""
        updates = 0
        for _ in range(int(epochs)):
            order = np.random.default_rng([self.seed, self._passes]).permutation(len(dataset))
            self._passes += 1
            for i in range(0, len(order), self.batch_size):
                x, y = _rows(dataset, order[i:i + self.batch_size])
                if y is None:
                    raise ValueError("train_on_dataset needs labelled items (x, y)")
                self.method.learn(x, y)
                updates += 1
        return updates

    def accuracy_on_dataset(self, dataset, iterations: int | None = None) -> float:
        """Accuracy of :meth:`~bimu.methods.base.OnlineMethod.predict` on the ``(x, y)`` items."""
        if len(dataset) == 0:
            warnings.warn("accuracy of an empty dataset", RuntimeWarning, stacklevel=2)
            return float("nan")
        correct = 0
        for i in range(0, len(dataset), self.batch_size):
            x, y = _rows(dataset, range(i, min(i + self.batch_size, len(dataset))))
            if y is None:
                raise ValueError("accuracy_on_dataset needs labelled items (x, y)")
            correct += int((self.method.predict(x, iterations).cpu() == y).sum())
        return correct / len(dataset)

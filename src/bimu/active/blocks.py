"""One task of an active stream with the vote rules decided in compiled blocks.

For a method with a compiled query sampler (``query_planes``: the fused BiMU and BayesBiNN, see
:mod:`bimu.engine.query`) and a vote rule (``vr`` or the oracle ``vr-true``, with a fixed threshold or
the budget controller), :func:`learn_in_blocks` gives the same predictions, decisions, ledger, learner
state and model as calling ``predict_one`` / ``learn_one`` on each example in turn: the per-example keys
are drawn from the query generator in one call (the same numbers in the same order), a block of
examples is decided in one compiled call that stops after the first queried example, the queried
example is learned (``learn_one``), and the next block starts from the updated model.

>>> import torch
>>> from bimu.engine import create_fused
>>> from bimu.methods.bimu import BiMUMethod
>>> from bimu.active.learner import ActiveLearner, make_acquisition
>>> m = create_fused("bimu", [6, 3], 0, BiMUMethod.resolve_hyperparameters({}, "pmnist-100"), threads=1)
>>> learner = ActiveLearner(m, make_acquisition("vr", threshold=0.2, mc_samples=10))
>>> decides_in_blocks(learner)
True
>>> correct, asked = learn_in_blocks(learner, torch.randn(40, 6), torch.randint(0, 3, (40,)), task=0)
>>> learner.ledger.examples_seen, learner.ledger.labels_queried == asked, m.examples_seen
(40, True, 40)
"""

from __future__ import annotations

import numpy as np
import torch

from bimu.active.learner import QUERY_KEY_RANGE
from bimu.active.threshold import vote_threshold
from bimu.engine.query import MODE_VR, MODE_VR_TRUE
from bimu.methods.base import generator_on

FIRST_BLOCK = 8
"""Examples of the first block after a query; each block without a query doubles the next one."""
MAX_BLOCK = 256
"""Largest block of examples decided in one compiled call."""


def decides_in_blocks(learner) -> bool:
    """Whether :func:`learn_in_blocks` runs ``learner``: the compiled query sampler
    (:class:`~bimu.active.learner.ActiveLearner` ``query_sampler``) of a method with query planes (the
    binary networks) and a vote rule (``vr``, ``vr-true``)."""
    acq = getattr(learner, "acquisition", None)
    return (getattr(learner, "query_sampler", None) == "compiled" and acq is not None
            and acq.strategy in ("vr", "vr-true") and hasattr(getattr(learner, "method", None), "query_planes"))


def learn_in_blocks(learner, x: torch.Tensor, y: torch.Tensor, task: int | None = None,
                    progress=None, outcomes: list | None = None) -> tuple[int, int]:
    """Predict, decide and learn one task ``(x, y)`` in stream order (see the module); returns
    ``(right online predictions, labels asked)``. ``outcomes`` (a list) receives whether each example's
    prediction was right (1) or not (0), in order."""
    method, acq, ledger = learner.method, learner.acquisition, learner.ledger
    K = acq.mc_samples
    n = len(y)
    xn = np.ascontiguousarray(torch.as_tensor(x).detach().cpu().numpy(), dtype=method.dtype)
    yn = np.ascontiguousarray(torch.as_tensor(y).detach().cpu().numpy(), dtype=np.int64)
    learner.query_generator = generator_on(learner.query_generator, method.device)
    keys = torch.randint(0, QUERY_KEY_RANGE, (n,), generator=learner.query_generator).numpy().astype(np.uint64)
    mode = MODE_VR_TRUE if acq.needs_labels else MODE_VR
    fixed = None if acq.controller is not None else vote_threshold(acq.rule.tau, K)
    correct = asked = 0
    i, size = 0, FIRST_BLOCK
    while i < n:
        c = min(size, n - i)
        if fixed is not None:
            need = np.full(c, fixed, dtype=np.int64)
        else:  # the controller reads the counters before each example; no query inside a block but its last
            q, s = ledger.labels_queried, ledger.examples_seen
            need = np.asarray([acq.controller.vote_threshold(q, s + j) for j in range(c)], dtype=np.int64)
        done, pred, dissent = method.query_planes().block(xn[i:i + c], yn[i:i + c], keys[i:i + c], need, mode, K)
        ask = bool(dissent[-1] >= need[done - 1])
        ledger.record_predictions(np.arange(done) == done - 1 if ask else np.zeros(done, dtype=bool), K, task)
        right = pred[:done] == yn[i:i + done]
        correct += int(right.sum())
        if outcomes is not None:
            outcomes.extend(right.astype(int).tolist())
        method.observe_unlabelled(done - int(ask))
        learner.last_score, learner.last_tau = int(dissent[-1]) / K, int(need[done - 1]) / K
        learner._pending = ask
        if ask:
            learner.learn_one(x[i + done - 1:i + done], y[i + done - 1:i + done])
            asked += 1
            size = FIRST_BLOCK
        else:
            size = min(2 * size, MAX_BLOCK)
        i += done
        if progress is not None:
            progress.update(done, correct / i)
    return correct, asked

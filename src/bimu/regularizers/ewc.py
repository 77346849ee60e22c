"""Online EWC (Schwarz et al. 2018, "Progress & Compress"; Kirkpatrick et al. 2017 for EWC).

Penalty, with ``F`` the running diagonal Fisher and ``theta*`` the parameters at the last task end::

    R(theta) = importance / 2 * sum_i F_i (theta_i - theta*_i)^2

At the end of each task the Fisher of that task is folded in with the down-weighting ``gamma``
(Schwarz et al. Eq. for online EWC) and the anchor moves::

    F <- gamma F + F_task ;  theta* <- theta

``F_task`` is the empirical Fisher: the mean over the task's examples of the squared per-example
gradient of the negative log-likelihood at the observed label. The stream is online with no replay
buffer, so the examples cannot be revisited at the task end: the squared gradients are accumulated
*while the task is learned* (each at the parameters current when the example arrived, data term
only) in ``fisher_accumulator`` and averaged at :meth:`OnlineEWC.task_end`. This costs one more
parameter-sized tensor during a task, which the memory accounting includes.

Two options change ``F_task``: ``fisher_norm="sum"`` folds in the sum over the task's examples
instead of their mean (``n`` times larger for a task of ``n`` examples), and
:meth:`OnlineEWC.load_task_sums` replaces the accumulated sum by one computed elsewhere (the sum over
the task's examples at the parameters of the task's end, a second pass over them, as the paper's
code computes it).

>>> import torch
>>> p = torch.nn.Parameter(torch.tensor([1.0, 2.0]))
>>> ewc = OnlineEWC([p], importance=2.0, gamma=0.5)
>>> ewc.accumulate([torch.tensor([1.0, 2.0])]); ewc.accumulate([torch.tensor([3.0, 0.0])])
>>> ewc.task_end([p]); ewc.fisher[0].tolist()          # mean of g^2: [(1+9)/2, (4+0)/2]
[5.0, 2.0]
>>> with torch.no_grad(): _ = p.add_(torch.tensor([1.0, -1.0]))
>>> ewc.penalty([p]).item()                             # 2/2 * (5*1 + 2*1)
7.0
>>> summed = OnlineEWC([p], importance=2.0, gamma=0.5, fisher_norm="sum")
>>> summed.load_task_sums([torch.tensor([10.0, 4.0])], 2); summed.task_end([p]); summed.fisher[0].tolist()
[10.0, 4.0]
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from bimu.optim._checks import check_number
from bimu.regularizers.quadratic import QuadraticPenalty

FISHER_NORMS = ("mean", "sum")
"""How a task's squared gradients become ``F_task``: their mean over the task's examples (Online EWC's
empirical Fisher), or their sum (the penalty then grows with the task's size)."""


class OnlineEWC(QuadraticPenalty):
    """Online elastic weight consolidation as a penalty with accumulate / task-end hooks.

    The importance is ``fisher``, the running sum of the task's squared gradients
    ``fisher_accumulator`` (over ``n_accumulated`` examples).

    Args:
        params: the parameters to protect (their order fixes the order of every list here).
        importance: ``lambda`` of EWC, the penalty scale (>= 0).
        gamma: down-weighting of the old Fisher at each task end, in [0, 1].
        fisher_norm: ``"mean"`` (``F_task`` is the mean of the task's squared gradients) or ``"sum"``
            (their sum; :data:`FISHER_NORMS`).
    """

    importance_key, running_key = "fisher", "fisher_accumulator"
    counter_keys = ("n_accumulated", "tasks_seen")

    def __init__(self, params: Sequence[torch.Tensor], importance: float, gamma: float, fisher_norm: str = "mean"):
        self.importance = check_number("importance", importance, low=0)
        self.gamma = check_number("gamma", gamma, low=0, high=1)
        if fisher_norm not in FISHER_NORMS:
            raise ValueError(f"fisher_norm must be one of {', '.join(FISHER_NORMS)}, got {fisher_norm!r}")
        self.fisher_norm = fisher_norm
        super().__init__(params)

    @property
    def penalty_scale(self) -> float:
        """``importance / 2``: the penalty is ``importance / 2 * sum F (theta - theta*)^2``."""
        return 0.5 * self.importance

    @torch.no_grad()
    def accumulate(self, example_grads: Sequence[torch.Tensor]) -> None:
        """Add one example's data-term gradient (squared here) to the current task's Fisher sum."""
        example_grads = self._check(example_grads, "example_grads")
        for acc, g in zip(self.fisher_accumulator, example_grads):
            acc.add_(g * g)
        self.n_accumulated += 1

    @torch.no_grad()
    def load_task_sums(self, sums: Sequence[torch.Tensor], n_examples: int) -> None:
        """Replace the current task's accumulated squared gradients by ``sums``, a sum over
        ``n_examples`` examples computed elsewhere (the task-end Fisher's second pass)."""
        for acc, s in zip(self.fisher_accumulator, self._check(sums, "sums")):
            acc.copy_(s)
        self.n_accumulated = int(n_examples)

    @torch.no_grad()
    def task_end(self, params: Sequence[torch.Tensor]) -> None:
        """``F <- gamma F + F_task`` (``F_task = 0`` if no example was seen), ``theta* <- theta``."""
        params = self._check(params, "params")
        if self.fisher_norm == "sum":
            scale = 1.0
        else:
            scale = 1.0 / self.n_accumulated if self.n_accumulated else 0.0
        for f, acc, a, p in zip(self.fisher, self.fisher_accumulator, self.anchor, params):
            f.mul_(self.gamma).add_(acc * scale)
            acc.zero_()
            a.copy_(p)
        self.n_accumulated = 0
        self.tasks_seen += 1

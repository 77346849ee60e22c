"""What every bimu optimizer shares: group validation, safe ``load_state_dict``, closures.

:class:`BimuOptimizer` is a ``torch.optim.Optimizer`` whose subclasses declare how to check a
param group (:meth:`BimuOptimizer._check_group`, called for the constructor's groups and for every
:meth:`~torch.optim.Optimizer.add_param_group`) and how to create a new parameter's state
(:meth:`BimuOptimizer._init_state`). :meth:`BimuOptimizer.load_state_dict` copies what it loads, so
an optimizer restored from another's ``state_dict()`` never shares a tensor with it, and fills the
group keys that a state dict written before a key existed lacks from the current groups.

>>> import torch
>>> from bimu.optim import BiMU
>>> p = torch.nn.Parameter(torch.zeros(2))
>>> opt = BiMU([p], memory_window=10.0)
>>> opt.add_param_group({"params": [torch.nn.Parameter(torch.zeros(1))], "lr_max": -1.0})
Traceback (most recent call last):
...
ValueError: lr_max must be > 0, got -1.0
"""

from __future__ import annotations

import copy
from typing import Any

import torch
from torch.optim import Optimizer


def run_closure(closure) -> Any:
    """The closure's loss, computed with gradients enabled (``None`` without a closure)."""
    if closure is None:
        return None
    with torch.enable_grad():
        return closure()


class BimuOptimizer(Optimizer):
    """Base class of bimu's optimizers (see the module docstring)."""

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Add a group (its own hyperparameters override the defaults); they are validated and the
        new parameters' state is created at once."""
        super().add_param_group(param_group)
        group = self.param_groups[-1]
        try:
            self._check_group(group)
        except Exception:
            self.param_groups.pop()
            raise
        for p in group["params"]:
            self._init_state(p, group)

    def _check_group(self, group: dict[str, Any]) -> None:
        """Validate (and normalise in place) a group's hyperparameters; ValueError names the bad one."""

    def _init_state(self, p: torch.Tensor, group: dict[str, Any]) -> None:
        """Create ``self.state[p]`` for a parameter just added with ``group``."""

    def _upgrade_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Rewrite, in place, a (copied) state dict of an older layout before it is loaded."""

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Load a copy of ``state_dict`` (tensors cast to their parameters' device and dtype).

        Group keys missing from ``state_dict`` (written before the key existed) keep this optimizer's
        values.
        """
        state_dict = copy.deepcopy(dict(state_dict))
        self._upgrade_state_dict(state_dict)
        for group, saved in zip(self.param_groups, state_dict.get("param_groups", [])):
            for key, value in group.items():
                saved.setdefault(key, copy.deepcopy(value) if key != "params" else value)
        super().load_state_dict(state_dict)

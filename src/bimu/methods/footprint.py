"""Training-state memory of every registered method (the paper's appendix memory table).

:func:`memory_footprint_table` builds each registered method on the given sizes, lets each method
that needs task boundaries see ``n_tasks`` of them (so state that grows with the number of tasks -
the per-task batch-norm affine parameters of Synaptic Metaplasticity, when its task-identity option
is on - is accumulated), and reports :meth:`~bimu.methods.base.OnlineMethod.memory_bytes` in MB
(10^6 bytes). Everything is float32.

What each method declares (784-100-10, ``P = 79,400`` weights, ``P + 110`` with biases):

- BiMU: ``lambda`` (P). SGD: weights + biases.
- BayesBiNN: ``lambda`` + the previous task's posterior ``lambda_prior`` (2P).
- MESU: ``mu`` and ``sigma`` of weights and biases (2(P + 110)).
- STE: latent weights + Adam's two moments (3P).
- Synaptic Metaplasticity: latent weights + batch-norm affine parameters (220) and running statistics
  (220) + Adam's moments of both + 220 affine parameters stored per task (with ``task_affine``).
- Online EWC: parameters + Fisher + anchor + the running Fisher sum of the current task (4(P + 110));
  the paper counts 3 copies: without a replay buffer the task's Fisher must be accumulated online.
- SI: parameters + Omega + anchor + the running path integral (4(P + 110)); the paper counts 3.

>>> nested_tensor_bytes({"a": [__import__("torch").zeros(3)], "b": 1})
12
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from bimu.paper import MEMORY_MB, Number, cell


def nested_tensor_bytes(obj: Any) -> int:
    """Total bytes of every tensor inside nested dicts / lists / tuples (other leaves count 0)."""
    if isinstance(obj, torch.Tensor):
        return int(obj.numel() * obj.element_size())
    if isinstance(obj, Mapping):
        return sum(nested_tensor_bytes(v) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return sum(nested_tensor_bytes(v) for v in obj)
    return 0


def method_footprint_options(name: str) -> dict[str, Any]:
    """Hyperparameters the table uses for ``name``: the paper's accounting of Synaptic Metaplasticity
    stores the batch-norm affine parameters of every task (``task_affine=True``)."""
    return {"task_affine": True} if name == "synaptic-metaplasticity" else {}


def memory_footprint_table(sizes: Sequence[int] = (784, 100, 10), n_tasks: int = 1000,
                           methods: Sequence[str] | None = None) -> dict[str, float]:
    """Method name -> training-state memory in MB after ``n_tasks`` task boundaries.

    >>> table = memory_footprint_table((784, 100, 10), n_tasks=1000)
    >>> table["bimu"], table["bayesbinn"], table["ste"], table["synaptic-metaplasticity"]
    (0.3176, 0.6352, 0.9528, 1.8363)
    """
    from bimu.methods.registry import available_methods, create_method

    if int(n_tasks) < 0:
        raise ValueError(f"n_tasks must be >= 0, got {n_tasks}")
    table = {}
    for name in methods if methods is not None else available_methods():
        method = create_method(name, sizes, seed=0, **method_footprint_options(name), engine="torch")
        if method.info.needs_task_boundaries:
            for _ in range(int(n_tasks)):
                method.task_end()
        table[name] = round(method.memory_bytes() / 1e6, 4)
    return table


def format_memory_table(table: Mapping[str, float], paper: Mapping[str, Number] = MEMORY_MB) -> str:
    """A markdown table of the regenerated footprint beside the paper's values (:data:`bimu.paper.MEMORY_MB`)."""
    lines = ["| method | regenerated (MB) | paper (MB) |", "|---|---|---|"]
    for name, mb in table.items():
        ref = paper.get(name)
        lines.append(f"| {name} | {mb:.2f} | {'' if ref is None else cell(ref)} |")
    return "\n".join(lines)

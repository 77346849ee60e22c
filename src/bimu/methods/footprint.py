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
- Experience replay (not in the paper): SGD's parameters + the reservoir buffer, allocated in full:
  ``buffer_size`` x (784 float32 inputs + one int64 label) = 1000 x 3,144 bytes by default (3.46 MB in all).

>>> nested_tensor_bytes({"a": [__import__("torch").zeros(3)], "b": 1})
12
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from bimu.paper import MEMORY_MB, Number, cell
from bimu.untrusted import available_memory_bytes  # noqa: F401 - part of this module's interface


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
        method = create_method(name, sizes, seed=0, **method_footprint_options(name))
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


def step_memory_bytes(cls, sizes: Sequence[int], hparams: Mapping[str, Any]) -> int:
    """A lower bound on the memory one training step of method class ``cls`` on ``sizes`` takes, before
    it is built: the float32 weights and biases, once per Monte-Carlo sample a Bayesian method draws
    per step (``n_samples``), else four times (parameters and their update state).

    >>> from bimu.methods.bimu import BiMUMethod
    >>> round(step_memory_bytes(BiMUMethod, [784, 100, 10], {"n_samples": 100000}) / 2**30, 1)
    29.6
    """
    n_params = sum(int(a) * int(b) + int(b) for a, b in zip(sizes[:-1], sizes[1:]))
    copies = int(hparams.get("n_samples", 1)) if cls.info.bayesian else 4
    return 4 * n_params * max(copies, 1)


def check_step_memory(cls, sizes: Sequence[int], hparams: Mapping[str, Any]) -> None:
    """ValueError, before anything is allocated, when one training step of ``cls`` on ``sizes`` needs
    more memory (:func:`step_memory_bytes`) than is available (:func:`available_memory_bytes`)."""
    need, have = step_memory_bytes(cls, sizes, hparams), available_memory_bytes()
    if have is not None and need > have:
        k = f"n_samples={hparams.get('n_samples')} " if cls.info.bayesian else ""
        raise ValueError(f"method {cls.info.name!r} with {k}on sizes {list(sizes)} needs at least {need / 2**30:.1f} "
                         f"GiB per training step, more than the {have / 2**30:.1f} GiB of memory available; "
                         "lower n_samples or the widths")


def eval_memory_bytes(cls, sizes: Sequence[int], n_samples: int, batch: int) -> int:
    """A lower bound on the memory one evaluation batch of method class ``cls`` on ``sizes`` takes: the
    float32 weights and biases and the activations of ``batch`` inputs, once per Monte-Carlo sample
    (``n_samples``; one for a deterministic method).

    >>> from bimu.methods.bimu import BiMUMethod
    >>> round(eval_memory_bytes(BiMUMethod, [784, 100, 10], 100000, 1000) / 2**30, 1)
    70.6
    """
    n = max(int(n_samples), 1) if cls.info.bayesian else 1
    n_params = sum(int(a) * int(b) + int(b) for a, b in zip(sizes[:-1], sizes[1:]))
    return 4 * n * (n_params + int(batch) * sum(int(w) for w in sizes[1:]))


def check_eval_memory(cls, sizes: Sequence[int], n_samples: int, batch: int) -> None:
    """ValueError, before any training, when one evaluation batch (:func:`eval_memory_bytes`) needs more
    memory than is available (:func:`available_memory_bytes`)."""
    need, have = eval_memory_bytes(cls, sizes, n_samples, batch), available_memory_bytes()
    if have is not None and need > have:
        k = f"{int(n_samples)} evaluation samples and " if cls.info.bayesian else ""
        raise ValueError(f"method {cls.info.name!r} with {k}eval_batch_size={int(batch)} on sizes {list(sizes)} needs "
                         f"at least {need / 2**30:.1f} GiB to evaluate one batch, more than the {have / 2**30:.1f} GiB "
                         "of memory available; lower --eval-samples or --eval-batch-size")

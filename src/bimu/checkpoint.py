"""Checkpoint files: what a checkpoint may hold, how it is written and read without running code, and
the finite, consistent state every use of a checkpoint requires.

A checkpoint holds only what ``torch.load(weights_only=True)`` accepts (tensors, numbers, strings,
bytes, torch dtypes and containers of them; numpy values are tagged dicts, :func:`checkpoint_value`).
:func:`load_checkpoint_file` refuses anything else, and a state with non-finite parameters or counters
that its run cannot have (:func:`check_checkpoint_state`), with one line naming the file.
"""

from __future__ import annotations

import io
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np


class CheckpointError(ValueError):
    """A checkpoint file that is refused (it would need more than tensors and plain values to load) or
    that cannot be read; the message is one line naming the file."""


_NDARRAY = "__bimu_ndarray__"
"""Key of the dict that stands for a numpy array or scalar inside a checkpoint."""


def _numpy_allowlist() -> list:
    """The numpy reconstructors that checkpoints holding raw numpy values need: they build arrays,
    dtypes and scalars from plain data and call nothing else."""
    try:
        from numpy._core.multiarray import _reconstruct, scalar
    except ImportError:  # numpy 1.x
        from numpy.core.multiarray import _reconstruct, scalar

    return [_reconstruct, scalar, np.ndarray, np.dtype, *{type(np.dtype(c)) for c in "?bhilqBHILQefdgFDG"}]


def checkpoint_value(v: Any, where: str = "state") -> Any:
    """``v`` with every numpy array and scalar replaced by a ``{"__bimu_ndarray__": uint8 tensor, "dtype",
    "shape"}`` dict, so that it holds only what ``torch.load(weights_only=True)`` accepts: tensors,
    numbers, strings, bytes, None, torch dtypes/sizes/devices, and dicts, lists, tuples and sets of
    those. TypeError naming the entry (``where``) for any other object.

    >>> checkpoint_value({"R": np.eye(2)[0], "n": 3})["R"]["dtype"]
    '<f8'
    """
    import torch

    if isinstance(v, (np.ndarray, np.generic)):
        a = np.asarray(v)
        if a.dtype.hasobject:
            raise TypeError(f"checkpoint entry {where}: a numpy array of Python objects cannot be saved safely")
        raw = torch.frombuffer(bytearray(np.ascontiguousarray(a).tobytes()) or bytearray(1), dtype=torch.uint8)
        return {_NDARRAY: raw[:a.nbytes], "dtype": a.dtype.str, "shape": list(a.shape) if a.ndim or isinstance(
            v, np.ndarray) else None}
    if v is None or isinstance(v, (bool, int, float, complex, str, bytes, torch.Tensor, torch.dtype, torch.device,
                                   torch.Size)):
        return v
    if isinstance(v, Mapping):
        out = {k: checkpoint_value(x, f"{where}[{k!r}]") for k, x in v.items()}
        from collections import OrderedDict

        return OrderedDict(out) if isinstance(v, OrderedDict) else out
    if isinstance(v, (list, tuple, set, frozenset)):
        items = [checkpoint_value(x, f"{where}[{i}]") for i, x in enumerate(v)]
        return items if isinstance(v, list) else tuple(items) if isinstance(v, tuple) else type(v)(items)
    raise TypeError(f"checkpoint entry {where}: a {type(v).__module__}.{type(v).__qualname__} cannot be saved "
                    "safely (tensors, numpy arrays, numbers, strings and containers of them only)")


def _restore(v: Any) -> Any:
    """Inverse of :func:`checkpoint_value`."""
    if isinstance(v, dict):
        if _NDARRAY in v:
            a = np.frombuffer(v[_NDARRAY].numpy().tobytes(), dtype=np.dtype(v["dtype"]))
            return a.reshape(v["shape"]).copy() if v["shape"] is not None else a[0]
        return type(v)((k, _restore(x)) for k, x in v.items())
    if isinstance(v, list):
        return [_restore(x) for x in v]
    if isinstance(v, tuple) and not hasattr(v, "numel"):
        return tuple(_restore(x) for x in v)
    return v


def checkpoint_bytes(state: Mapping[str, Any], tagged: bool = True) -> bytes:
    """The ``torch.save`` bytes of ``state`` as :func:`checkpoint_value` encodes it: what
    :func:`load_checkpoint_file` (or ``torch.load(..., weights_only=True)``) reads back without running
    code from the file. With ``tagged=False`` its numpy values are pickled as numpy, the form that bimu
    versions older than the tagged values resume from; :func:`load_checkpoint_file` reads both."""
    import torch

    buf = io.BytesIO()
    value = checkpoint_value(dict(state)) if tagged else dict(state)
    torch.save(value, buf)
    return buf.getvalue()


def load_checkpoint_file(path: str | os.PathLike) -> dict[str, Any]:
    """The checkpoint in ``path``, read with ``torch.load(weights_only=True)``: tensors, plain values and
    numpy arrays come back, nothing in the file is called. A file that holds anything else (a pickle
    that would run code) is refused with :class:`CheckpointError` before any of it runs, naming the
    file and the objects it asks for; so is an unreadable file."""
    import pickle

    import torch

    path = Path(path)
    try:
        with torch.serialization.safe_globals(_numpy_allowlist()):
            state = torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise
    except (pickle.UnpicklingError, RuntimeError, EOFError, ValueError, TypeError, AttributeError, OSError,
            IndexError, KeyError) as e:
        try:
            with torch.serialization.safe_globals(_numpy_allowlist()):
                unsafe = torch.serialization.get_unsafe_globals_in_checkpoint(path)
        except Exception:  # noqa: BLE001 - a file too damaged to list: the load error says why
            unsafe = []
        if unsafe:
            raise CheckpointError(f"{path}: refused: the file asks for {', '.join(unsafe)}, which a bimu checkpoint "
                                  "never holds (loading it could run code from the file)") from None
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise CheckpointError(f"{path}: cannot read the checkpoint ({first})") from None
    if not isinstance(state, dict):
        raise CheckpointError(f"{path}: not a bimu checkpoint (it holds a {type(state).__name__}, not a dict)")
    return check_checkpoint_state(_restore(state), path)


def _non_finite(v: Any, where: str) -> str | None:
    """The entry of ``v`` (tensors and float arrays, in containers) that holds NaN or infinity, else ``None``."""
    import torch

    if isinstance(v, torch.Tensor):
        if v.is_floating_point() or v.is_complex():
            return None if bool(torch.isfinite(v).all()) else where
        return None
    if isinstance(v, (np.ndarray, np.generic)):
        a = np.asarray(v)
        return None if a.dtype.kind not in "fc" or bool(np.isfinite(a).all()) else where
    if isinstance(v, float):
        return None if math.isfinite(v) else where
    if isinstance(v, Mapping):
        for k, x in v.items():
            bad = _non_finite(x, f"{where}[{k!r}]")
            if bad:
                return bad
    elif isinstance(v, (list, tuple)):
        for i, x in enumerate(v):
            bad = _non_finite(x, f"{where}[{i}]")
            if bad:
                return bad
    return None


def _is_int(v: Any) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def check_checkpoint_state(state: Mapping[str, Any], path: str | os.PathLike,
                           n_tasks: int | None = None) -> dict[str, Any]:
    """``state`` (a loaded checkpoint) when it is finite and consistent; else :class:`CheckpointError`
    naming ``path`` and the entry. Every use of a checkpoint (resume, ``bimu evaluate``, ``bimu export``)
    goes through it (:func:`load_checkpoint_file` calls it):

    - ``method_state`` (and ``learner_state``) are dicts whose float tensors and numbers are all finite:
      a NaN or infinite parameter (a lambda of NaN, say) is refused before it is evaluated, exported or
      trained on;
    - the counters agree: ``n_tasks`` is a positive integer (``n_tasks``, when given, the run's own),
      ``task`` (the last completed task) lies in ``0..n_tasks-1``, ``records`` is a list of objects, one
      per completed task at most, each for a task in ``0..task``.

    >>> check_checkpoint_state({"task": 7, "n_tasks": 4}, "c.pt")
    Traceback (most recent call last):
    ...
    bimu.checkpoint.CheckpointError: c.pt: refused: the checkpoint says task 7 is done, outside its stream of 4 tasks
    """
    where = f"{path}: refused:"
    for key in ("method_state", "learner_state"):
        if key in state and state[key] is not None and not isinstance(state[key], Mapping):
            raise CheckpointError(f"{where} its {key} is a {type(state[key]).__name__}, not a dict")
    if "n_tasks" in state:
        n = state["n_tasks"]
        if not _is_int(n) or n < 1:
            raise CheckpointError(f"{where} its n_tasks is {n!r}, not a positive integer")
        if n_tasks is not None and int(n) != int(n_tasks):
            raise CheckpointError(f"{where} the checkpoint is for a stream of {n} tasks, the run has {n_tasks}")
    if "task" in state:
        t, n = state["task"], state.get("n_tasks", n_tasks)
        if not _is_int(t) or t < 0 or (n is not None and t >= n):
            raise CheckpointError(f"{where} the checkpoint says task {t!r} is done, outside its stream of "
                                  f"{n if n is not None else '?'} tasks")
        records = state.get("records", [])
        if not isinstance(records, list) or len(records) > int(t) + 1 or not all(
                isinstance(r, Mapping) and _is_int(r.get("task")) and 0 <= r["task"] <= t for r in records):
            raise CheckpointError(f"{where} its records do not describe tasks 0..{t} (one object per completed task)")
    for key in ("method_state", "learner_state"):
        bad = _non_finite(state.get(key), key)
        if bad:
            raise CheckpointError(f"{where} {bad} holds NaN or infinite values (a diverged or damaged model)")
    return dict(state)

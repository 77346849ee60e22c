"""Reading what a run directory holds for an export: its checkpoint, and the per-layer lambda of a
binary Bayesian network in either engine's layout."""

from __future__ import annotations

import re
from pathlib import Path

import torch

from bimu.rundir import CHECKPOINT as CHECKPOINT_NAME, load_checkpoint_file


def read_checkpoint(run_dir) -> dict:
    """The checkpoint dict of a run directory (or of a checkpoint file), with ``method_state``.

    Raises FileNotFoundError for a missing directory or checkpoint, ValueError for an unreadable
    file or one that is not a bimu checkpoint.
    """
    path = Path(run_dir)
    if not path.exists():
        raise FileNotFoundError(f"run directory {str(path)!r} does not exist")
    ckpt = path / CHECKPOINT_NAME if path.is_dir() else path
    if not ckpt.is_file():
        seeds = sorted(p.name for p in path.glob("seed-*") if (p / CHECKPOINT_NAME).is_file())
        hint = f"; pick one of its seed directories: {seeds}" if seeds else ""
        raise FileNotFoundError(f"no {CHECKPOINT_NAME} in {str(path)!r}{hint}")
    state = load_checkpoint_file(ckpt)  # CheckpointError (a ValueError) for a refused or unreadable file
    if not isinstance(state, dict) or "method_state" not in state:
        raise ValueError(f"{str(ckpt)!r} is not a bimu checkpoint (no 'method_state')")
    return state


def layer_lambdas(ms: dict, source: str = "state") -> list:
    """The per-layer lambda tensors of an ``OnlineMethod.state_dict()`` (torch ``layers.{i}.lam`` or the
    fused engine's ``lam`` list); ValueError for a method outside the binary Bayesian networks."""
    modules = ms.get("modules") or {}
    model_state = modules.get("model") if isinstance(modules, dict) else None
    if model_state is None and isinstance(modules, dict) and isinstance(modules.get("lam"), (list, tuple)):
        # the fused engine's layout: one lambda tensor per layer
        model_state = {f"layers.{i}.lam": torch.as_tensor(t) for i, t in enumerate(modules["lam"])}
    lam_keys = sorted((k for k in (model_state or {}) if re.fullmatch(r"layers\.\d+\.lam", k)),
                      key=lambda k: int(k.split(".")[1]))
    if not lam_keys or len(lam_keys) != len(model_state):
        raise ValueError(
            f"{source}: method {ms.get('method', '?')!r} does not hold a binary Bayesian MLP (Bernoulli layers "
            "'layers.{i}.lam' only): outside the supported family of the paper's binary Bayesian networks (BiMU, "
            "BayesBiNN)")
    lams = [model_state[k] for k in lam_keys]
    for a, b in zip(lams[:-1], lams[1:]):
        if b.shape[1] != a.shape[0]:
            raise ValueError(f"{source}: layer shapes do not chain: {[tuple(t.shape) for t in lams]}")
    return lams

"""Load a script of the repository (benchmarks/, scripts/) as a module, for the tests that call its functions."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def load(relpath: str) -> ModuleType:
    """The module at ``ROOT / relpath``, executed afresh, e.g. ``load("benchmarks/vector_width.py")``."""
    path = ROOT / relpath
    if not path.is_file():
        raise FileNotFoundError(f"no script {relpath} in the repository")
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module

"""The package's layout is a map: every module sits in one layer, imports only its own layer and lower
ones, takes part in no import cycle, and stays under 500 lines; ``bimu.cli`` names only modules that exist.

Every ``import`` anywhere in a module counts (also inside a function: a lazy import is still a
dependency), and so does ``importlib.import_module(...)`` with the name written in the call, named by a
module-level constant (``import_module(NAME)``) or taken from a module-level tuple or list of names by
a loop (``for m in NAMES: import_module(m)``).
``from bimu.pkg import name`` depends on ``bimu.pkg`` unless ``name`` is a submodule, in which case it
depends on that submodule.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src"

LAYERS: list[tuple[str, ...]] = [
    ("bimu._version", "bimu.atomic", "bimu.lazy", "bimu.process", "bimu.privatedir", "bimu.redact", "bimu.rng",
     "bimu.paper", "bimu.rundir", "bimu.vectors", "bimu.threads", "bimu.untrusted",
     "bimu.checkpoint"),
    ("bimu.nn", "bimu.optim", "bimu.uncertainty", "bimu.metrics"),
    ("bimu.regularizers",),
    ("bimu.methods",),
    ("bimu.engine",),
    ("bimu.data",),
    ("bimu.active",),
    ("bimu.edge",),
    ("bimu.report",),
    ("bimu.experiments",),
    ("bimu.reproduce", "bimu.tune"),
    ("bimu.cli", "bimu.__main__"),
]
"""Lowest first. A subpackage's ``cli`` module (``bimu.X.cli``) belongs to the command-line layer."""

MAX_LINES = 500


def modules(src: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every ``.py`` file under ``src`` (a package is its ``__init__``)."""
    out = {}
    for p in sorted(src.rglob("*.py")):
        parts = list(p.relative_to(src).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = p
    return out


def _constant_names(tree: ast.Module) -> dict[str, list[str]]:
    """Module-level ``NAME = "a"`` / ``NAME = ("a", "b")`` (annotated or not) -> the strings."""
    out = {}
    for node in tree.body:
        target, value = (node.targets[0], node.value) if isinstance(node, ast.Assign) and len(node.targets) == 1 \
            else (node.target, node.value) if isinstance(node, ast.AnnAssign) else (None, None)
        if not isinstance(target, ast.Name):
            continue
        items = value.elts if isinstance(value, (ast.Tuple, ast.List)) else [value]
        if items and all(isinstance(v, ast.Constant) and isinstance(v.value, str) for v in items):
            out[target.id] = [v.value for v in items]
    return out


def _import_module_arg(node: ast.AST) -> ast.expr | None:
    """The first argument of an ``import_module(...)`` / ``importlib.import_module(...)`` call, else None."""
    if isinstance(node, ast.Call) and node.args and \
            getattr(node.func, "attr", getattr(node.func, "id", None)) == "import_module":
        return node.args[0]
    return None


def imports(mods: dict[str, Path], root: str = "bimu") -> dict[str, set[str]]:
    """Module -> the modules of the package it depends on (itself excluded)."""
    edges: dict[str, set[str]] = defaultdict(set)
    for m, p in mods.items():
        pkg = m if p.name == "__init__.py" else m.rpartition(".")[0]
        tree = ast.parse(p.read_text(), str(p))
        constants = _constant_names(tree)
        for node in ast.walk(tree):
            targets = []
            arg = _import_module_arg(node)
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    parts = pkg.split(".")
                    mod = ".".join(parts[: len(parts) - node.level + 1] + ([node.module] if node.module else []))
                else:
                    mod = node.module or ""
                for a in node.names:
                    sub = f"{mod}.{a.name}"
                    targets.append(sub if sub in mods else mod)
            elif isinstance(arg, ast.Constant):
                targets = [arg.value]
            elif isinstance(arg, ast.Name):
                targets = constants.get(arg.id, [])
            elif isinstance(node, ast.For) and isinstance(node.target, ast.Name) and isinstance(node.iter, ast.Name):
                loop_var = node.target.id
                if any(isinstance(a, ast.Name) and a.id == loop_var for a in map(_import_module_arg, ast.walk(node))):
                    targets = constants.get(node.iter.id, [])
            for t in targets:
                while t and t not in mods:
                    t = t.rpartition(".")[0]
                if t and t != m and (t == root or t.startswith(root + ".")):
                    edges[m].add(t)
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def layer(module: str) -> int | None:
    """The layer index of ``module`` (None: in no layer); ``bimu`` itself is the public facade, above every
    layer (``bimu.fit_stream``), which no module of the package imports."""
    if module == "bimu":
        return len(LAYERS)
    if module.rpartition(".")[2] == "cli":
        return len(LAYERS) - 1
    for i, names in enumerate(LAYERS):
        if any(module == n or module.startswith(n + ".") for n in names):
            return i
    return None


def upward(edges: dict[str, set[str]]) -> list[str]:
    """One line per import from a lower layer to a higher one."""
    bad = []
    for a, bs in sorted(edges.items()):
        for b in sorted(bs):
            la, lb = layer(a), layer(b)
            if la is not None and lb is not None and lb > la:
                bad.append(f"{a} (layer {la}) imports {b} (layer {lb})")
    return bad


MODS = modules(SRC)
EDGES = imports(MODS)


def test_every_module_is_in_a_layer():
    assert len(MODS) > 100
    assert [m for m in MODS if layer(m) is None] == []


def test_no_import_cycle():
    assert cycles(EDGES) == []


def test_no_import_from_a_lower_layer_to_a_higher_one():
    assert upward(EDGES) == []


def test_no_module_over_500_lines():
    sizes = {m: len(p.read_text().splitlines()) for m, p in MODS.items()}
    assert {m: n for m, n in sizes.items() if n > MAX_LINES} == {}


def test_cli_names_only_modules_that_exist():
    from bimu import cli

    named = [node.value for node in ast.walk(ast.parse(MODS["bimu.cli"].read_text()))
             if isinstance(node, ast.Constant) and isinstance(node.value, str)
             and node.value.startswith("bimu.") and " " not in node.value]
    assert set(cli.COMMAND_MODULES) <= set(named)
    assert [n for n in named if n not in MODS] == []


def _package(tmp_path: Path, files: dict[str, str]) -> dict[str, Path]:
    for rel, text in files.items():
        path = tmp_path / "src" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return modules(tmp_path / "src")


def test_the_walk_finds_cycles_upward_and_lazy_imports(tmp_path):
    mods = _package(tmp_path, {
        "bimu/__init__.py": "",
        "bimu/atomic.py": "def f():\n    import bimu.cli  # lazy, still counted\n",
        "bimu/nn/__init__.py": "from . import mlp\n",
        "bimu/nn/mlp.py": "from bimu.nn import activations\n",
        "bimu/nn/activations.py": "from .mlp import x\n",
        "bimu/engine/__init__.py": "",
        "bimu/engine/build.py": "import importlib\nM = importlib.import_module('bimu.report')\nN = 'bimu.cli'\n",
        "bimu/report/__init__.py": "from bimu import paper\nimport torch\n",
        "bimu/paper.py": "",
        "bimu/cli.py": "from bimu.engine import build\n",
    })
    edges = imports(mods)
    assert edges["bimu.atomic"] == {"bimu.cli"}
    assert edges["bimu.nn"] == {"bimu.nn.mlp"}
    assert edges["bimu.nn.mlp"] == {"bimu.nn.activations"}
    assert edges["bimu.nn.activations"] == {"bimu.nn.mlp"}
    assert edges["bimu.engine.build"] == {"bimu.report"}
    assert edges["bimu.report"] == {"bimu.paper"}
    assert edges["bimu.cli"] == {"bimu.engine.build"}
    assert cycles(edges) == [["bimu.nn.activations", "bimu.nn.mlp"]]
    assert upward(edges) == ["bimu.atomic (layer 0) imports bimu.cli (layer 11)",
                             "bimu.engine.build (layer 4) imports bimu.report (layer 8)"]


def test_the_walk_follows_module_names_held_in_constants(tmp_path):
    # a registry that imports its plugins by a list of names while they import it back is a cycle
    mods = _package(tmp_path, {
        "bimu/__init__.py": "",
        "bimu/data/__init__.py": "",
        "bimu/data/benchmarks.py": ("import importlib\nPLUGINS: tuple[str, ...] = ('bimu.data.permuted', 'bimu.data.own')\n"
                                    "STREAM = 'bimu.data.stream'\nOTHER = ('bimu.data.unused',)\n"
                                    "def load():\n    for mod in PLUGINS:\n        importlib.import_module(mod)\n"
                                    "    return importlib.import_module(STREAM)\n"
                                    "def register(name, factory):\n    pass\n"),
        "bimu/data/permuted.py": "from bimu.data.benchmarks import register\n",
        "bimu/data/own.py": "def f():\n    from bimu.data.benchmarks import register\n",
        "bimu/data/stream.py": "",
        "bimu/data/unused.py": "",
    })
    edges = imports(mods)
    assert edges["bimu.data.benchmarks"] == {"bimu.data.permuted", "bimu.data.own", "bimu.data.stream"}
    assert cycles(edges) == [["bimu.data.benchmarks", "bimu.data.own", "bimu.data.permuted"]]


def test_the_benchmark_modules_import_the_registry_not_the_lookup():
    from bimu.data.benchmarks import BENCHMARK_MODULES

    assert set(BENCHMARK_MODULES) <= EDGES["bimu.data.benchmarks"]
    assert all("bimu.data.registry" in EDGES[m] and "bimu.data.benchmarks" not in EDGES[m] for m in BENCHMARK_MODULES)
    assert EDGES["bimu.data.registry"] == set()


@pytest.mark.parametrize("module, expected", [
    ("bimu", 12), ("bimu.rng", 0), ("bimu.nn.mlp", 1), ("bimu.engine.fused", 4), ("bimu.active.cli", 11),
    ("bimu.reproduce.gaps", 10), ("bimu.tune", 10), ("bimu.__main__", 11), ("bimu.elsewhere", None),
])
def test_layer_of_a_module(module, expected):
    assert layer(module) == expected


ROOT = SRC.parent


def test_every_results_folder_is_cited_and_holds_no_raw_logs():
    import subprocess

    tracked = subprocess.run(["git", "ls-files", "results"], cwd=ROOT, capture_output=True, text=True,
                             check=True).stdout.split()
    docs = "\n".join(p.read_text() for p in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))])
    folders = sorted({f.split("/")[1] for f in tracked if f.count("/") >= 2})
    assert folders and [f for f in folders if f"results/{f}" not in docs] == []
    assert [f for f in tracked if f.endswith(".log")] == []

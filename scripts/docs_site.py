"""The documentation site's generated pages (an MkDocs hook, named in ``mkdocs.yml``), and the runner of
its tutorials.

The hook adds, at build time and without writing into ``docs/``:

- ``methods/index.md`` and one ``methods/NAME.md`` per registered method, from the method's
  declarations (:class:`bimu.methods.MethodInfo`, its ``hyperparameters`` and ``presets``), so a method
  added to the registry gets its page and its place in the navigation;
- ``api/NAME.md``, one page per public module of :data:`API_MODULES`, rendered by mkdocstrings: each
  name of a package's ``__all__`` at the module that defines it, and a module without ``__all__``
  whole (its public functions and classes);
- the figures that ``results.md`` shows from ``results/`` (outside ``docs/``), at ``assets/results/``.

:func:`run_tutorial` executes a page's ``python`` code blocks in order in one namespace (what
``tests/test_docs_site.py`` does for every page under ``docs/tutorials/`` and ``docs/integrations/``);
a block fenced as ```` ```python skip ```` is shown and not run. ``python scripts/docs_site.py [PAGE.md ...]``
runs the pages named, or every page of :data:`TUTORIALS`.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import logging
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
log = logging.getLogger("mkdocs.hooks.bimu")

API_MODULES = {
    # page slug: (title, module, what the page is about)
    "bimu": ("bimu", "bimu", "The two entry points: any method by name, any stream."),
    "nn": ("bimu.nn", "bimu.nn", "Bernoulli binary layers, activations, the paper's networks, MC prediction."),
    "optim": ("bimu.optim", "bimu.optim", "The update rules, one per file, each with its functional kernel."),
    "methods": ("bimu.methods", "bimu.methods", "The method interface, typed hyperparameters, the registry."),
    "uncertainty": ("bimu.uncertainty", "bimu.uncertainty", "Uncertainty scores over [samples, batch, classes]."),
    "metrics": ("bimu.metrics", "bimu.metrics", "Accuracy matrices, BWT, MMRR, ROC-AUC."),
    "regularizers": ("bimu.regularizers", "bimu.regularizers", "Online EWC and Synaptic Intelligence penalties."),
    "active": ("bimu.active", "bimu.active", "Acquisition scores, threshold rule, budget controller, the learner."),
    "active-river": ("bimu.active.river", "bimu.active.river", "bimu's active learning as a river active learner."),
    "active-baal": ("bimu.active.baal", "bimu.active.baal", "The variation ratio as a baal heuristic."),
    "data": ("bimu.data", "bimu.data", "Benchmarks, their registry, data files."),
    "engine": ("bimu.engine", "bimu.engine", "The fused compiled engine."),
    "edge": ("bimu.edge", "bimu.edge", "Bit-packed inference, cost model, export."),
    "experiments": ("bimu.experiments", "bimu.experiments", "Run configuration and evaluation schedules."),
    "report": ("bimu.report", "bimu.report", "Tables and plots from run directories."),
    "tune": ("bimu.tune", "bimu.tune", "Hyperparameter search with Optuna."),
    "rundir": ("bimu.rundir", "bimu.rundir", "Run directories and checkpoints."),
    "atomic": ("bimu.atomic", "bimu.atomic", "Atomic file writes."),
}
"""The API reference: one page per public module."""

TOP_LEVEL = ("bimu.engine.build.create_method", "bimu.experiments.fit.fit_stream",
             "bimu.experiments.fit.StreamResult", "bimu.experiments.fit.as_benchmark")
"""What the ``bimu`` page documents: the lazily imported ``bimu.create_method`` and ``bimu.fit_stream``."""

WRITTEN_ELSEWHERE = ("on-device.md",)
"""Pages in the navigation that another change adds: left out of the navigation while they are missing."""


# ----------------------------------------------------------------------------------- public names
def _defines(module, name: str) -> bool:
    """Whether ``name`` is assigned, defined or annotated at the top level of ``module``'s source."""
    try:
        tree = ast.parse(inspect.getsource(module))
    except (OSError, TypeError):
        return False
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
            return True
        targets = node.targets if isinstance(node, ast.Assign) else (
            [node.target] if isinstance(node, ast.AnnAssign) else [])
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            return True
    return False


def defining_path(package: str, name: str) -> str:
    """The dotted path of the module that defines ``package.name``, plus the name (where griffe and
    mkdocstrings find its source and docstring).

    >>> defining_path("bimu.active", "ActiveLearner"), defining_path("bimu.active", "SCORES")
    ('bimu.active.learner.ActiveLearner', 'bimu.active.scores.SCORES')
    """
    obj = getattr(importlib.import_module(package), name)
    home = getattr(obj, "__module__", None)
    if (inspect.isclass(obj) or inspect.isfunction(obj)) and home and home.startswith("bimu"):
        return f"{home}.{obj.__qualname__}"
    candidates = sorted(m for m in sys.modules if m == package or m.startswith(package + "."))
    for modname in candidates:
        module = sys.modules[modname]
        if getattr(module, name, None) is obj and _defines(module, name):
            return f"{modname}.{name}"
    raise LookupError(f"cannot find where {package}.{name} is defined")


def public_names(module_name: str) -> list[str]:
    """The public names of a module: its ``__all__``, or else the functions and classes it defines
    whose names do not start with an underscore."""
    module = importlib.import_module(module_name)
    if hasattr(module, "__all__"):
        return [n for n in module.__all__ if n != "__version__"]
    return [n for n, v in vars(module).items() if not n.startswith("_")
            and (inspect.isfunction(v) or inspect.isclass(v)) and v.__module__ == module_name]


def api_page(slug: str) -> str:
    """The markdown of one API page (mkdocstrings directives)."""
    title, module_name, about = API_MODULES[slug]
    lines = [f"# {title}", "", about, ""]
    if slug == "bimu":
        lines += [f"::: {path}\n    options:\n      heading_level: 2\n" for path in TOP_LEVEL]
        return "\n".join(lines)
    module = importlib.import_module(module_name)
    if not hasattr(module, "__all__"):
        lines.append(f"::: {module_name}\n    options:\n      show_root_heading: false\n      heading_level: 2\n")
        return "\n".join(lines)
    lines.append(f"::: {module_name}\n    options:\n      members: false\n      show_root_heading: false\n")
    for name in public_names(module_name):
        lines.append(f"::: {defining_path(module_name, name)}\n    options:\n      heading_level: 2\n")
    return "\n".join(lines)


# ----------------------------------------------------------------------------------- method pages
def _cell(value) -> str:
    text = repr(value) if not isinstance(value, str) else f'"{value}"'
    return "`" + text.replace("|", "\\|") + "`"


def method_page(name: str) -> str:
    """The page of one registered method: what it is, its hyperparameters and its presets."""
    from bimu.engine import supports
    from bimu.methods import get_method

    cls = get_method(name)
    info = cls.info
    doc = inspect.cleandoc(cls.__doc__ or "")
    fused = supports(name, [784, 100, 10], {})
    lines = [
        f"# {info.paper_name} (`{name}`)", "", doc, "",
        f"- network: `{info.network}`; binary weights: {'yes' if info.binary_weights else 'no'}; "
        f"Bayesian (weight samples): {'yes' if info.bayesian else 'no'}",
        f"- task boundaries: {'needed (`task_end()` is called between tasks)' if info.needs_task_boundaries else 'not needed'}",
        f"- uncertainty scores: {', '.join(f'`{s}`' for s in info.uncertainty_scores)}",
        f"- fused engine: {'yes' if fused else 'no (the PyTorch path)'}",
        f"- class: [`{cls.__module__}.{cls.__qualname__}`](../api/methods.md#{cls.__module__}.{cls.__qualname__})",
        "", "```python", "from bimu import create_method",
        f'm = create_method("{name}", [784, 100, 10], seed=0' + (f', preset="{next(iter(cls.presets))}"'
                                                                if cls.presets else "") + ")",
        "```", "", "## Hyperparameters", "",
        "Set them by keyword (`create_method(..., name=value)`, `fit_stream(..., name=value)`) or with "
        f"`bimu run ... --method {name} --set name=value`. Values are converted to the type and checked; "
        "an unknown name or a bad value is an error naming it.", "",
        "| name | type | default | allowed | meaning |", "|---|---|---|---|---|",
    ]
    for h in cls.hyperparameters.values():
        allowed = (", ".join(_cell(c) for c in h.choices) if h.choices is not None else
                   (f"{h.requirement}" if h.requirement else "any"))
        doc = h.doc.replace("|", "\\|")
        lines.append(f"| `{h.name}` | {h.type.__name__} | {_cell(h.default)} | {allowed} | {doc} |")
    lines += ["", "## Presets", ""]
    if not cls.presets:
        lines.append("This method has no presets.")
    else:
        lines += ["A preset is the paper's hyperparameter configuration for one benchmark (its appendix tables); "
                  "`preset=KEY` applies it over the defaults, and keyword overrides apply over the preset. "
                  "Keys a preset leaves out keep their defaults.", ""]
        keys = [k for k in cls.hyperparameters if any(k in p for p in cls.presets.values())]
        lines += ["| preset | " + " | ".join(f"`{k}`" for k in keys) + " |", "|---|" + "---|" * len(keys)]
        for preset, values in cls.presets.items():
            lines.append(f"| `{preset}` | " + " | ".join(_cell(values[k]) if k in values else "" for k in keys) + " |")
    return "\n".join(lines) + "\n"


def methods_index() -> str:
    """The table of every registered method, linking its page."""
    from bimu.methods import available_methods, get_method

    lines = ["# Methods", "",
             "Every method is an online learner with one interface (`bimu.methods.OnlineMethod`), built by name "
             "with `bimu.create_method(name, sizes, seed=..., preset=..., **hyperparameters)`. Each page lists "
             "the method's hyperparameters and the paper's presets; the pages are generated from the "
             "methods' declarations, so they are always those the code checks against.", "",
             "| method | name | network | Bayesian | task boundaries | presets |", "|---|---|---|---|---|---|"]
    for name in available_methods():
        cls = get_method(name)
        i = cls.info
        lines.append(f"| [{i.paper_name}]({name}.md) | `{name}` | `{i.network}` | {'yes' if i.bayesian else 'no'} | "
                     f"{'needed' if i.needs_task_boundaries else 'no'} | {len(cls.presets)} |")
    lines += ["", "To add your own, see [adding a method](../adding-a-method.md)."]
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------------- mkdocs hooks
def _nav_drop_missing(nav, docs_dir: Path):
    out = []
    for entry in nav:
        if isinstance(entry, dict):
            (title, value), = entry.items()
            if isinstance(value, list):
                out.append({title: _nav_drop_missing(value, docs_dir)})
                continue
            if value in WRITTEN_ELSEWHERE and not (docs_dir / value).is_file():
                log.info("%s is not written yet: left out of the navigation", value)
                continue
        out.append(entry)
    return out


class _NotAReference(logging.Filter):
    """autorefs reads text such as ``[--tasks last-5] [--option k=v]`` or ``[1.0, -1.0]`` in a docstring
    as a reference-style link; a target that is no dotted Python name was never meant as one: such a
    message is lowered to INFO, so strict builds fail on broken cross-references only."""

    _NAME = re.compile(r"^[A-Za-z_][\w.]*$")

    def filter(self, record):
        msg = record.getMessage()
        m = re.search(r"Could not find cross-reference target '(.*)'$", msg)
        if m and not self._NAME.match(m.group(1)):
            record.levelno, record.levelname = logging.INFO, "INFO"
        return True


def on_config(config):
    """Fill the navigation's Methods and API sections from the registry and :data:`API_MODULES`."""
    for name in [n for n in logging.root.manager.loggerDict if n.startswith("mkdocs.plugins.mkdocs_autorefs")]:
        autorefs = logging.getLogger(name)
        if not any(isinstance(f, _NotAReference) for f in autorefs.filters):
            autorefs.addFilter(_NotAReference())
    from bimu.methods import available_methods, get_method

    nav = _nav_drop_missing(config["nav"], Path(config["docs_dir"]))
    for entry in nav:
        if isinstance(entry, dict) and "Methods" in entry:
            entry["Methods"] = ["methods/index.md"] + [
                {get_method(n).info.paper_name: f"methods/{n}.md"} for n in available_methods()]
        if isinstance(entry, dict) and "API reference" in entry:
            entry["API reference"] = [{title: f"api/{slug}.md"} for slug, (title, _, _) in API_MODULES.items()]
    config["nav"] = nav
    return config


def on_files(files, config):
    """Add the generated pages and the figures of ``results.md``."""
    from mkdocs.structure.files import File

    from bimu.methods import available_methods

    pages = {"methods/index.md": methods_index()}
    pages.update({f"methods/{n}.md": method_page(n) for n in available_methods()})
    pages.update({f"api/{slug}.md": api_page(slug) for slug in API_MODULES})
    for uri, text in pages.items():
        files.append(File.generated(config, uri, content=text))
    for png in sorted((ROOT / "results").rglob("*.png")):
        rel = png.relative_to(ROOT / "results").as_posix()
        files.append(File.generated(config, f"assets/results/{rel}", abs_src_path=str(png)))
    return files


_RESULTS_LINK = re.compile(r"\]\(\.\./results/")


def on_page_markdown(markdown, page, config, files):
    """Point the links of pages in ``docs/`` to ``../results/...`` at the copies under ``assets/results/``."""
    depth = page.file.src_uri.count("/")
    return _RESULTS_LINK.sub("](" + "../" * depth + "assets/results/", markdown)


# ----------------------------------------------------------------------------------- tutorials
_BLOCK = re.compile(r"^```python([^\n]*)\n(.*?)^```", re.S | re.M)


def code_blocks(markdown: str) -> list[str]:
    """The ``python`` code blocks of a page that are run (not fenced ``python skip``), in order.

    >>> code_blocks("a\\n```python\\nx = 1\\n```\\n```python skip\\ny\\n```\\n```python\\nprint(x)\\n```\\n")
    ['x = 1\\n', 'print(x)\\n']
    """
    return [code for opts, code in _BLOCK.findall(markdown) if "skip" not in opts.split()]


def run_tutorial(path: str | Path, namespace: dict | None = None) -> dict:
    """Execute the page's code blocks in order in one namespace (returned); an error names the block."""
    path = Path(path)
    namespace = {"__name__": "__tutorial__"} if namespace is None else namespace
    for i, code in enumerate(code_blocks(path.read_text(encoding="utf-8")), 1):
        try:
            exec(compile(code, f"{path.name}[block {i}]", "exec"), namespace)
        except Exception as e:
            raise RuntimeError(f"{path}: code block {i} failed: {type(e).__name__}: {e}") from e
    return namespace


TUTORIALS = ("getting-started.md", "concepts.md", "tutorials/*.md", "integrations/*.md", "adding-a-method.md")
"""The pages whose code runs as a test (globs under ``docs/``)."""


def tutorial_pages() -> list[Path]:
    """The pages of :data:`TUTORIALS`, in that order."""
    return [p for pattern in TUTORIALS for p in sorted((ROOT / "docs").glob(pattern))]


if __name__ == "__main__":  # one thread, as CI runs the pages (torch's thread pool slows small steps down)
    import torch

    torch.set_num_threads(1)
    for arg in sys.argv[1:] or tutorial_pages():
        run_tutorial(arg)
        print(f"{arg}: ok")

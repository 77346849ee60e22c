"""The documentation site: ``mkdocs build --strict`` passes offline, the API reference covers every
public name, each method has its generated page, and the code of every tutorial runs."""

from __future__ import annotations

import ast
import html
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from repo_scripts import load

ROOT = Path(__file__).resolve().parents[1]
site = load("scripts/docs_site.py")
HAVE_MKDOCS = all(importlib.util.find_spec(m) for m in ("mkdocs", "material", "mkdocstrings_handlers"))
needs_mkdocs = pytest.mark.skipif(not HAVE_MKDOCS, reason='the docs extra is not installed (pip install -e ".[docs]")')


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(ROOT / "mkdocs.yml"),
                           "-d", str(out)], capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-8000:]
    return out


def ids(page: Path) -> set[str]:
    return set(re.findall(r'id="([^"]+)"', page.read_text(encoding="utf-8")))


@needs_mkdocs
def test_the_site_builds_strictly_and_needs_no_network(built):
    pages = list(built.rglob("*.html"))
    assert len(pages) > 40
    for page in pages:  # no web fonts, scripts or styles from elsewhere
        text = page.read_text(encoding="utf-8")
        assert not re.search(r'<(?:link|script)[^>]+(?:href|src)="(?:https?:)?//', text), page
    for name in ("getting-started", "concepts", "tutorials/quickstart", "integrations/pytorch", "changelog",
                 "adding-a-method", "results", "reliability", "distributed", "performance"):
        assert (built / f"{name}.html").is_file(), name
    results = (built / "results.html").read_text(encoding="utf-8")  # its figures, copied from results/
    figures = re.findall(r'<img[^>]+src="([^"]+\.png)"', results)
    assert figures and all((built / f).is_file() for f in figures)


@needs_mkdocs
def test_the_api_reference_covers_every_public_name(built):
    for slug, (_, module, _) in site.API_MODULES.items():
        found = ids(built / "api" / f"{slug}.html")
        names = [p.rsplit(".", 1)[1] for p in site.TOP_LEVEL] if slug == "bimu" else site.public_names(module)
        assert names, slug
        missing = [n for n in names if not any(i == f"{module}.{n}" or i.endswith(f".{n}") for i in found)]
        assert missing == [], f"api/{slug}: {missing}"


def test_every_package_with_public_names_has_an_api_page():
    listed = {module for _, module, _ in site.API_MODULES.values()}
    packages = set()
    for init in (ROOT / "src" / "bimu").rglob("__init__.py"):
        tree = ast.parse(init.read_text(encoding="utf-8"))
        if any(isinstance(n, ast.Assign) and any(getattr(t, "id", "") == "__all__" for t in n.targets) for n in tree.body):
            packages.add(".".join(init.parent.relative_to(ROOT / "src").parts))
    assert packages - listed == set()


def test_defining_paths_find_classes_functions_and_constants():
    assert site.defining_path("bimu.active", "ActiveLearner") == "bimu.active.learner.ActiveLearner"
    assert site.defining_path("bimu.active", "SCORES") == "bimu.active.scores.SCORES"
    assert site.defining_path("bimu.methods", "BiMUMethod") == "bimu.methods.bimu.BiMUMethod"
    with pytest.raises(AttributeError):
        site.defining_path("bimu.active", "nothing_of_that_name")


@needs_mkdocs
def test_each_method_has_a_page_with_its_hyperparameters_and_presets(built):
    from bimu.methods import available_methods, get_method

    index = (built / "methods" / "index.html").read_text(encoding="utf-8")
    for name in available_methods():
        cls = get_method(name)
        assert f'href="{name}.html"' in index
        text = html.unescape((built / "methods" / f"{name}.html").read_text(encoding="utf-8"))
        for h in cls.hyperparameters.values():
            assert f"<code>{h.name}</code>" in text and h.doc in text, (name, h.name)
        for preset, values in cls.presets.items():
            row = text.split(f"<td><code>{preset}</code></td>", 1)[1].split("</tr>", 1)[0]
            assert [c for c in re.findall(r"<code>([^<]*)</code>", row)] == [
                repr(values[k]) if not isinstance(values[k], str) else f'"{values[k]}"'
                for k in cls.hyperparameters if any(k in p for p in cls.presets.values()) and k in values], (name, preset)


def test_method_page_markdown_follows_the_declarations():
    page = site.method_page("bimu")
    assert "| `memory_window` | float | `1000.0` | > 0 | N: forgetting horizon in updates |" in page
    from bimu.nn.mlp import ACTIVATIONS

    row = next(line for line in page.splitlines() if line.startswith("| `activation` |"))
    assert row.startswith('| `activation` | str | `"rbg"` | ') and all(f'`"{a}"`' in row for a in ACTIVATIONS)
    assert "| `pmnist-100` |" in page and "fused engine: yes" in page


def test_code_blocks_are_the_python_fences_not_marked_skip():
    md = "text\n```python\na = 1\n```\n```python skip\nraise SystemExit\n```\n```bash\nls\n```\n```python\nb = a + 1\n```\n"
    assert site.code_blocks(md) == ["a = 1\n", "b = a + 1\n"]


def test_a_failing_block_is_named(tmp_path):
    page = tmp_path / "p.md"
    page.write_text("```python\nx = 1\n```\n\n```python\nassert x == 2, 'x is 1'\n```\n")
    with pytest.raises(RuntimeError, match=r"p.md: code block 2 failed: AssertionError: x is 1"):
        site.run_tutorial(page)


def test_every_tutorial_runs():
    """In one fresh process (a page may register a method), with one thread, as a reader would run them."""
    pages = site.tutorial_pages()
    assert {p.relative_to(ROOT / "docs").as_posix() for p in pages} >= {
        "getting-started.md", "concepts.md", "tutorials/quickstart.md", "tutorials/own-stream.md",
        "tutorials/active-learning.md", "tutorials/export.md", "integrations/pytorch.md", "adding-a-method.md"}
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "docs_site.py")], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=900)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-8000:]
    assert proc.stdout.count(": ok") == len(pages)


def test_the_readme_links_the_site_and_keeps_its_two_set_up_commands():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    setup = readme.split("## Set up", 1)[1].split("\n## ", 1)[0]
    commands = re.findall(r"```bash\n(.*?)\n```", setup, re.S)
    assert len(commands) == 2 and commands[0].startswith("pip install torch==2.13.0 && pip install -e")
    assert commands[1] == "python -m pytest -n auto"
    links = re.findall(r"\]\((docs/[^)#]+)", readme)
    for page in ("docs/getting-started.md", "docs/concepts.md", "docs/tutorials/quickstart.md",
                 "docs/adding-a-method.md", "docs/changelog.md"):
        assert page in links, page
    assert [link for link in links if not (ROOT / link).exists()] == []

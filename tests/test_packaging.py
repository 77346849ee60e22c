"""Packaging facts a user relies on: one version, a licence, a citation, type information."""

import importlib.metadata
import re
import tomllib
from pathlib import Path

import bimu

ROOT = Path(__file__).resolve().parent.parent


def test_version_has_one_source():
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in meta["project"] and "version" in meta["project"]["dynamic"]
    assert meta["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "bimu._version.__version__"}
    assert importlib.metadata.version("bimu") == bimu.__version__
    assert not re.search(r"^version:", (ROOT / "CITATION.cff").read_text(), re.M)


def test_licence_matches_metadata():
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert meta["project"]["license"] == {"text": "MIT"}
    assert (ROOT / "LICENSE").read_text().startswith("MIT License")
    assert "License :: OSI Approved :: MIT License" in meta["project"]["classifiers"]


def test_citation_names_the_paper():
    cff = (ROOT / "CITATION.cff").read_text()
    assert cff.startswith("cff-version: 1.2.0")
    assert re.search(r'title: "Active Continual Learning with Metaplastic Binary Bayesian Neural Networks"', cff)
    assert [m for m in re.findall(r"family-names: (\w+)", cff)] == ["Cottart", "Ballet", "Bonnet", "Querlioz"]


def test_typed_marker_is_shipped():
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert (Path(bimu.__file__).parent / "py.typed").is_file()
    assert "py.typed" in meta["tool"]["setuptools"]["package-data"]["bimu"]


def test_readme_and_ci_install_every_extra():
    extras = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"])
    assert {"tracking", "river"} <= extras
    readme = (ROOT / "README.md").read_text()
    setup = readme.split("## Set up", 1)[1].split("\n## ", 1)[0]
    commands = re.findall(r"```bash\n(.*?)```", setup, re.S)
    assert len(commands) == 2  # one installs and runs the demo, one runs the tests
    for text in (commands[0], (ROOT / ".ci" / "run").read_text()):
        installed = re.search(r'pip install (?:-q )?-e "\.\[([a-z,]+)\]"', text)
        assert installed and set(installed.group(1).split(",")) == extras, text
    # CI runs the README's test command, whose -n needs pytest-xdist from the test extra
    ci_lines = [line for line in (ROOT / ".ci" / "run").read_text().splitlines() if line and not line.startswith("#")]
    assert ci_lines[-1] == commands[1].strip() == "python -m pytest -n auto"
    test_extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["test"]
    assert any(req.startswith("pytest-xdist") for req in test_extra)

"""Every public object of the runner's modules has a docstring."""

import importlib
import inspect

import pytest

MODULES = ["bimu.data", "bimu.data.idx", "bimu.data.paths", "bimu.data.fetch", "bimu.data.mnist",
           "bimu.data.permuted", "bimu.data.benchmarks", "bimu.metrics", "bimu.experiments",
           "bimu.experiments.config", "bimu.experiments.schedule", "bimu.experiments.runner",
           "bimu.experiments.stream", "bimu.experiments.progress",
           "bimu.rundir", "bimu.experiments.demo", "bimu.report", "bimu.report.tables",
           "bimu.report.plots", "bimu.cli", "bimu.paper", "bimu.reproduce", "bimu.reproduce.spec",
           "bimu.reproduce.table", "bimu.reproduce.runtable", "bimu.reproduce.pmnist", "bimu.reproduce.features",
           "bimu.reproduce.figures", "bimu.reproduce.active_learning", "bimu.reproduce.entries",
           "bimu.reproduce.plan", "bimu.reproduce.cli", "bimu.reproduce.results_page", "bimu.reproduce.gaps"]


@pytest.mark.parametrize("name", MODULES)
def test_public_objects_have_docstrings(name):
    mod = importlib.import_module(name)
    assert mod.__doc__, name
    missing = []
    for attr, obj in vars(mod).items():
        if attr.startswith("_") or getattr(obj, "__module__", None) != name:
            continue
        if inspect.isfunction(obj) or inspect.isclass(obj):
            if not inspect.getdoc(obj):
                missing.append(attr)
            if inspect.isclass(obj):
                for m, f in vars(obj).items():
                    if not m.startswith("_") and inspect.isfunction(f) and not inspect.getdoc(f):
                        missing.append(f"{attr}.{m}")
    assert not missing, f"{name}: no docstring for {missing}"

"""Every public object of the baseline modules has a docstring."""

import importlib
import inspect

import pytest

MODULES = [
    "bimu.nn.gaussian", "bimu.nn.sign_linear", "bimu.nn.real_mlp",
    "bimu.optim.bayesbinn", "bimu.optim.mesu", "bimu.optim.metaplastic_adam", "bimu.optim._checks",
    "bimu.regularizers", "bimu.regularizers.quadratic", "bimu.regularizers.ewc", "bimu.regularizers.si",
    "bimu.methods.bayesbinn", "bimu.methods.synaptic_metaplasticity", "bimu.methods.ste", "bimu.methods.mesu",
    "bimu.methods.ewc_online", "bimu.methods.si", "bimu.methods.sgd", "bimu.methods.replay",
    "bimu.methods.footprint",
]


def _public_members(module):
    for name, obj in vars(module).items():
        if name.startswith("_") or getattr(obj, "__module__", module.__name__) != module.__name__:
            continue
        if inspect.isclass(obj) or inspect.isfunction(obj):
            yield name, obj
            if inspect.isclass(obj):
                for attr, member in vars(obj).items():
                    if attr.startswith("_"):
                        continue
                    if inspect.isfunction(member) or isinstance(member, property):
                        yield f"{name}.{attr}", member


@pytest.mark.parametrize("module_name", MODULES)
def test_public_objects_have_docstrings(module_name):
    module = importlib.import_module(module_name)
    assert (module.__doc__ or "").strip(), module_name
    missing = [name for name, obj in _public_members(module) if not (obj.__doc__ or "").strip()]
    assert not missing, f"{module_name}: no docstring for {missing}"

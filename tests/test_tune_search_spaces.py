"""Per-method search spaces: bounds, validation against the method, the class hook, unknown keys."""

import math

import pytest

from bimu.tune import spaces as ss
from bimu.methods import available_methods, get_method
from bimu.methods.base import MethodInfo, hyperparameter_table, positive
from bimu.methods.bimu import BiMUMethod


def _points(space):
    for point in ("low", "mid", "high"):
        rec = ss.SpaceRecorder(point)
        yield rec, space(rec)


@pytest.mark.parametrize("name", sorted(ss.SEARCH_SPACES))
def test_every_space_is_well_formed(name):
    for rec, values in _points(ss.SEARCH_SPACES[name]):
        assert values and set(values) == set(rec.params)
        for key, value in values.items():
            d = rec.distributions[key]
            assert d["kind"] in ("float", "int", "categorical")
            if d["kind"] != "categorical":
                assert math.isfinite(value) and d["low"] <= value <= d["high"], (name, key, value)
                assert d["low"] < d["high"]


@pytest.mark.parametrize("preset", [None, *sorted(BiMUMethod.presets)])
def test_bimu_space_is_valid_for_the_method(preset):
    dists = ss.check_search_space("bimu", preset=preset)
    assert set(dists) == {"lr", "lr_max", "likelihood_multiplier", "kl_multiplier", "memory_window"}
    for rec, _ in _points(ss.get_search_space("bimu")):
        hp = ss.suggest_hparams("bimu", rec)
        full = BiMUMethod.resolve_hyperparameters(hp, preset=preset)
        for key, value in hp.items():
            assert full[key] == value
            d = rec.distributions[key]
            assert d["low"] <= value <= d["high"]


@pytest.mark.parametrize("name", [n for n in ss.SEARCH_SPACES if n in available_methods()])
def test_spaces_cover_the_paper_presets(name):
    """Every tuned value of every paper preset of a registered method lies in its space."""
    dists = ss.check_search_space(name)
    cls = get_method(name)
    for key_preset, preset in cls.presets.items():
        for key, value in preset.items():
            d = dists.get(key)
            if d is None or d["kind"] == "categorical" or (d["log"] and value == 0):
                continue  # not tuned, or "none" (0) on a log scale
            assert d["low"] <= value <= d["high"], (key_preset, key, value)


@pytest.mark.parametrize("name", [n for n in ss.SEARCH_SPACES if n in available_methods()])
def test_registered_methods_accept_their_space(name):
    """Integration check: each registered method declares the keys its space suggests."""
    ss.check_search_space(name)


class _Hooked(BiMUMethod):
    """A BiMU variant that carries its own search space."""

    info = MethodInfo("bimu-hooked", "BiMU (hooked)", "binary-bayesian-mlp", False, (), True, True)

    @classmethod
    def search_space(cls, trial):
        """Only the learning rate."""
        return {"lr": trial.suggest_float("lr", 1.0, 2.0)}


class _Bogus(BiMUMethod):
    """A BiMU variant whose space names a hyperparameter it does not declare."""

    info = MethodInfo("bimu-bogus", "BiMU (bogus)", "binary-bayesian-mlp", False, (), True, True)

    @classmethod
    def search_space(cls, trial):
        """A declared key and an unknown one."""
        return {"lr": trial.suggest_float("lr", 1.0, 2.0), "bogus": trial.suggest_float("bogus", 0.0, 1.0)}


def test_class_hook_wins_over_the_table():
    assert ss.get_search_space(_Hooked).__func__ is _Hooked.search_space.__func__
    assert ss.suggest_hparams(_Hooked, ss.SpaceRecorder("high")) == {"lr": 2.0}
    assert ss.get_search_space("bimu") is ss.SEARCH_SPACES["bimu"]


def test_unknown_key_is_a_clear_error_or_skipped_when_asked():
    with pytest.raises(ValueError, match=r"\['bogus'\].*does not declare"):
        ss.check_search_space(_Bogus)
    with pytest.warns(UserWarning, match="skipping"):
        hp = ss.suggest_hparams(_Bogus, ss.SpaceRecorder(), strict=False)
    assert hp == {"lr": 1.5}


def test_values_are_validated_by_the_method():
    class _Negative(BiMUMethod):
        """Suggests a non-positive learning rate."""

        info = MethodInfo("bimu-neg", "x", "binary-bayesian-mlp", False, (), True, True)

        @classmethod
        def search_space(cls, trial):
            """lr in [-1, 0]."""
            return {"lr": trial.suggest_float("lr", -1.0, 0.0)}

    with pytest.raises(ValueError, match="'lr' must be > 0"):
        ss.check_search_space(_Negative)


def test_aliases_map_onto_the_declared_names():
    class _Ewc(BiMUMethod):
        """Pretends to be Online EWC with other names for its two coefficients."""

        info = MethodInfo("ewc-online", "EWC", "mlp", True, (), False, False)
        hyperparameters = hyperparameter_table(positive("lr", float, 0.01, "lr"),
                                               positive("ewc_lambda", float, 1.0, "importance"),
                                               positive("gamma", float, 0.5, "downweighting"))

    hp = ss.suggest_hparams(_Ewc, ss.SpaceRecorder("low"))
    assert set(hp) == {"lr", "ewc_lambda", "gamma"}


def test_unknown_method_and_method_without_space():
    with pytest.raises(ValueError, match="unknown method"):
        ss.get_search_space("adam")

    class _NoSpace(BiMUMethod):
        """Registered nowhere and without a space."""

        info = MethodInfo("no-space", "x", "mlp", False, (), True, True)

    with pytest.raises(ValueError, match="declares no search space"):
        ss.get_search_space(_NoSpace)
    with pytest.raises(TypeError):
        ss.register_search_space("x", 3)


def test_recorder_rejects_bad_bounds():
    rec = ss.SpaceRecorder()
    with pytest.raises(ValueError, match="bad bounds"):
        rec.suggest_float("a", 2.0, 1.0)
    with pytest.raises(ValueError, match="log scale"):
        rec.suggest_float("a", 0.0, 1.0, log=True)
    with pytest.raises(ValueError, match="point"):
        ss.SpaceRecorder("max")
    assert get_method("bimu") is BiMUMethod

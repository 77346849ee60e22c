import pytest

from bimu.experiments.config import RunConfig, parse_override
from bimu.experiments.schedule import EvalSchedule


@pytest.mark.parametrize("d, msg", [
    ({"tasks": -1}, "'tasks' must be >= 1"),
    ({"tasks": 2.5}, "'tasks' has a bad value 2.5"),
    ({"engine": "gpu"}, "'engine' must be one of"),
    ({"seeds": [0, 0]}, "'seeds' must be a non-empty list of distinct seeds"),
    ({"hidden": [100, 0]}, "'hidden' must be widths >= 1"),
    ({"budget": 1.5}, r"'budget' must be in \(0, 1\]"),
    ({"ood_scores": ["entropy?"]}, "'ood_scores' must be names from"),
    ({"eval_final": "some"}, "'eval_final' must be one of"),
    ({"ood": "maybe"}, "'ood' has a bad value 'maybe'"),
    ({"threshold": float("nan")}, "'threshold' has a bad value nan"),
    ({"seed": 1}, "unknown config key 'seed'; did you mean 'seeds'"),
])
def test_bad_configs_name_the_key(d, msg):
    with pytest.raises(ValueError, match=msg):
        RunConfig.from_dict(d)


def test_registry_checks_name_the_problem():
    with pytest.raises(ValueError, match="config 'method': unknown method 'adam'"):
        RunConfig(method="adam").validate()
    with pytest.raises(ValueError, match="config 'benchmark': unknown benchmark 'cifar'"):
        RunConfig(benchmark="cifar").validate()
    with pytest.raises(ValueError, match="unknown hyperparameter 'memory'"):
        RunConfig(overrides={"memory": "3"}).validate()
    with pytest.raises(ValueError, match="hyperparameter 'memory_window' must be > 0"):
        RunConfig(overrides={"memory_window": "-3"}).validate()
    with pytest.raises(ValueError, match="has no preset 'pmnist-7'"):
        RunConfig(preset="pmnist-7").validate()
    with pytest.raises(ValueError, match="need an active strategy"):
        RunConfig(threshold=0.3).validate()


def test_presets_by_width_and_overrides():
    key, hp, note = RunConfig(hidden=(2000,)).resolve_hparams()
    assert key == "pmnist-2000" and hp["memory_window"] == 900 and hp["lr"] == 60.0 and note == ""
    key, hp, note = RunConfig(hidden=(50,)).resolve_hparams()
    assert key == "pmnist-100" and hp["lr"] == 4.9 and "no paper preset" in note
    key, hp, _ = RunConfig(overrides={"lr": "2.5", "n_samples": "3"}).resolve_hparams()
    assert key == "pmnist-100" and hp["lr"] == 2.5 and hp["n_samples"] == 3 and hp["lr_max"] == 0.0023
    key, hp, _ = RunConfig(preset="none").resolve_hparams()
    assert key is None and hp["memory_window"] == 1000.0
    assert RunConfig().hidden_widths() == (100,)


def test_roundtrip_and_semantic_keys():
    c = RunConfig.from_dict({"tasks": 3, "seeds": [1, 2], "hidden": [10, 10], "out": "x"})
    assert RunConfig.from_dict(c.to_dict()) == c
    assert "seeds" not in c.semantic_dict() and "out" not in c.semantic_dict() and c.semantic_dict()["tasks"] == 3
    assert c.replace(threads=2).semantic_dict() == c.semantic_dict()
    with pytest.raises(ValueError, match="unknown config key"):
        c.replace(nope=1)
    # a run's default schedule: EvalSchedule's, with the full matrix for streams of up to 100 tasks
    assert c.schedule == EvalSchedule(all_max=100)


def test_parse_override():
    assert parse_override("kl_multiplier = 2") == ("kl_multiplier", "2")
    with pytest.raises(ValueError, match="key=value"):
        parse_override("kl_multiplier")


def test_schedule_modes():
    s = EvalSchedule(sample_every=2, sample_size=2, last_m=2, last_every=3, final="all")
    after3 = s.tasks_after(3, 10)
    assert 3 in after3 and len(after3) <= 3 and after3 == s.tasks_after(3, 10)
    assert s.tasks_after(2, 10) == [1, 2]
    assert s.tasks_after(9, 10) == list(range(10))
    assert EvalSchedule().tasks_after(199, 200) == [195, 196, 197, 198, 199]  # auto: long stream -> last 5
    assert EvalSchedule().tasks_after(4, 5) == [0, 1, 2, 3, 4]               # auto: short stream -> all
    with pytest.raises(ValueError, match="'final' must be one of"):
        EvalSchedule(final="x")

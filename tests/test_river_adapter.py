"""bimu methods through river's classifier protocol (:class:`bimu.methods.RiverClassifier`); river's own
evaluation and active-learning code where river is installed."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from bimu.methods import RiverClassifier, create_method

SRC = str(Path(__file__).resolve().parents[1] / "src")


def model(**kw):
    return RiverClassifier(create_method("sgd", [3, 2], seed=0), **kw)


def blobs(n, seed=0):
    """A learnable stream: three classes, Gaussian blobs around (2, 0), (-1, 2), (-1, -2), as dicts."""
    rng = np.random.default_rng(seed)
    centres = np.array([[2.0, 0.0], [-1.0, 2.0], [-1.0, -2.0]])
    y = rng.integers(0, 3, n)
    x = centres[y] + 0.5 * rng.normal(size=(n, 2))
    return [({"u": float(a), "v": float(b)}, int(c)) for (a, b), c in zip(x, y)]


def test_one_example_updates_the_method_like_learn():
    m, ref = model(), create_method("sgd", [3, 2], seed=0)
    m.learn_one({"c": 3.0, "a": 1.0, "b": 2.0}, 1)
    ref.learn(torch.tensor([[1.0, 2.0, 3.0]]), torch.tensor([1]))  # features in sorted key order
    assert m.feature_order == ["a", "b", "c"] and m.features is None and m.method.updates_applied == 1
    x = torch.tensor([[0.5, -1.0, 2.0]])
    p = m.predict_proba_one({"a": 0.5, "b": -1.0, "c": 2.0})
    assert list(p) == [0, 1] and torch.allclose(torch.tensor([p[0], p[1]]), ref.predict_proba(x)[0])
    assert m.predict_one({"a": 0.5, "b": -1.0, "c": 2.0}) == max(p, key=p.get)


def test_bad_labels_features_and_classes_are_named():
    with pytest.raises(ValueError, match=r"classes must be 2 distinct labels"):
        model(classes=["a", "a"])
    with pytest.raises(ValueError, match=r"features names 2 inputs, the network takes 3"):
        model(features=["x", "y"])
    m = model(classes=["cat", "dog"], features=["x", "y", "z"])
    with pytest.raises(ValueError, match=r"unknown label 'cow'; classes are \['cat', 'dog'\]"):
        m.learn_one({"x": 1, "y": 2, "z": 3}, "cow")
    with pytest.raises(ValueError, match=r"expected \['x', 'y', 'z'\]"):
        m.predict_one({"x": 1, "y": 2, "w": 3})


def test_clone_has_the_parameters_and_none_of_the_learning():
    m = RiverClassifier(create_method("bimu", [2, 8, 3], seed=3, preset="pmnist-100", engine="torch"), n_samples=4)
    stream = blobs(60)
    for x, y in stream:
        m.learn_one(x, y)
    c = m.clone()
    assert c.method is not m.method and c.method.updates_applied == 0 and c.feature_order is None
    assert (c.classes, c.features, c.n_samples) == ([0, 1, 2], None, 4)
    assert c.clone({"n_samples": 7}).n_samples == 7
    assert m.clone(include_attributes=True).feature_order == ["u", "v"]
    for x, y in stream:  # same seed, same stream: the clone learns exactly what the original learned
        c.learn_one(x, y)
    probe = {"u": 0.3, "v": -0.2}
    assert c.predict_proba_one(probe) == m.predict_proba_one(probe)
    assert m.method.updates_applied == 60  # cloning left the original alone


def test_a_river_classifier_for_rivers_metrics_and_clone():
    river = pytest.importorskip("river", reason="river is not installed here")
    m = model(classes=["a", "b"])
    assert isinstance(m, river.base.Classifier)
    assert set(m._get_params()) == {"method", "classes", "features", "n_samples"}
    assert isinstance(m.clone(), RiverClassifier)


def test_progressive_validation_with_river_learns_above_chance():
    pytest.importorskip("river", reason="river is not installed here")
    from river import evaluate, metrics

    m = RiverClassifier(create_method("bimu", [2, 8, 3], seed=0, preset="pmnist-100", engine="torch"))
    result = evaluate.progressive_val_score(blobs(300), m, metrics.Accuracy())
    assert result.get() > 0.6  # chance is about 1/3 (0.75 here, early mistakes included)
    assert m.method.examples_seen == 300


def test_river_active_sampler_asks_for_fewer_labels_than_the_stream():
    pytest.importorskip("river", reason="river is not installed here")
    from river import active, evaluate, metrics

    base = RiverClassifier(create_method("bimu", [2, 8, 3], seed=0, preset="pmnist-100", engine="torch"))
    sampler = active.EntropySampler(base, discount_factor=2, seed=0)
    stream = blobs(400)
    result = evaluate.progressive_val_score(stream, sampler, metrics.Accuracy())
    asked = base.method.examples_seen  # the sampler calls learn_one only for the labels it asks for
    assert 0 < asked < len(stream)
    assert result.get() > 0.6  # 234 labels and 0.815 here


def test_module_doctest_runs_with_and_without_river():
    code = ("import sys, doctest\n"
            "if sys.argv[1] == 'without': sys.modules['river'] = None\n"
            "import bimu.methods.river_adapter as m\n"
            "r = doctest.testmod(m)\n"
            "print(r.failed, r.attempted, [b.__module__.split('.')[0] for b in m.RiverClassifier.__mro__[1:]])\n")
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    out = subprocess.run([sys.executable, "-c", code, "without"], capture_output=True, text=True, env=env, timeout=300)
    failed, attempted, bases = out.stdout.split(" ", 2)
    assert (failed, bases.strip()) == ("0", "['builtins']") and int(attempted) >= 8, out.stdout + out.stderr
    try:
        import river  # noqa: F401
    except ImportError:
        return
    out = subprocess.run([sys.executable, "-c", code, "with"], capture_output=True, text=True, env=env, timeout=300)
    assert out.stdout.startswith("0 ") and "'river'" in out.stdout, out.stdout + out.stderr


# ----------------------------------------------------------------------------- river.checks conformance
@pytest.fixture
def one_thread():
    """river's checks take one example at a time: torch's thread pool only slows such small steps down."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_rivers_check_estimator_passes(one_thread):
    pytest.importorskip("river", reason="river is not installed here")
    pytest.importorskip("sklearn", reason="river.checks needs scikit-learn (in the river extra)")
    from river import checks

    params = list(RiverClassifier._unit_test_params())
    assert params and all(isinstance(RiverClassifier(**p), RiverClassifier) for p in params)
    for p in params:
        checks.check_estimator(RiverClassifier(**p))
    checks.check_estimator(RiverClassifier(create_method("sgd", [9, 2], seed=0), classes=[False, True]))


def test_probabilities_sum_to_one_in_float64_on_phishing(one_thread):
    pytest.importorskip("river", reason="river is not installed here")
    import math

    from river import datasets

    m = RiverClassifier(create_method("bimu", [9, 2], seed=0, preset="pmnist-100", output_norm=False),
                        classes=[False, True])
    for x, y in datasets.Phishing().take(200):
        m.learn_one(x, y)
        p = m.predict_proba_one(x)
        assert set(p) == {False, True} and all(type(v) is float and 0.0 <= v <= 1.0 for v in p.values())
        assert math.isclose(sum(p.values()), 1.0)


def test_features_other_than_the_first_examples_are_refused_as_fixed_width_models_do():
    m = model()
    m.learn_one({"a": 1.0, "b": 2.0, "c": 3.0}, 0)
    for x in ({"a": 1.0, "b": 2.0, "c": 3.0, "d": 4.0}, {"a": 1.0, "b": 2.0}, {"a": 1.0, "b": 2.0, "z": 3.0}):
        with pytest.raises(ValueError, match=r"expected \['a', 'b', 'c'\]"):
            m.learn_one(x, 0)
        with pytest.raises(ValueError, match=r"expected \['a', 'b', 'c'\]"):
            m.predict_proba_one(x)
    assert m._unit_test_skips() == {"check_emerging_features", "check_disappearing_features",
                                    "check_radically_disappearing_features"}
    assert m.method.updates_applied == 1


def test_a_clone_pickles_the_same_while_the_original_learns():
    import pickle

    m = RiverClassifier(create_method("bimu", [2, 8, 3], seed=3, preset="pmnist-100"))
    c = m.clone()
    before = pickle.dumps(c)
    assert pickle.dumps(c) == before  # the method's random generators pickle as their state bytes
    for x, y in blobs(30):
        m.learn_one(x, y)
    assert pickle.dumps(c) == before and c.method.updates_applied == 0
    restored = pickle.loads(before)
    probe = {"u": 0.3, "v": -0.2}
    assert restored.predict_proba_one(probe) == c.predict_proba_one(probe)

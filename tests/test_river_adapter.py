"""bimu methods through river's classifier protocol (:class:`bimu.methods.RiverClassifier`)."""

import pytest
import torch

from bimu.methods import RiverClassifier, create_method


def model(**kw):
    return RiverClassifier(create_method("sgd", [3, 2], seed=0), **kw)


def test_one_example_updates_the_method_like_learn():
    m, ref = model(), create_method("sgd", [3, 2], seed=0)
    m.learn_one({"c": 3.0, "a": 1.0, "b": 2.0}, 1)
    ref.learn(torch.tensor([[1.0, 2.0, 3.0]]), torch.tensor([1]))  # features in sorted key order
    assert m.features == ["a", "b", "c"] and m.method.updates_applied == 1
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


def test_progressive_validation_with_river():
    river = pytest.importorskip("river", reason="river is not installed here")
    from river import datasets, evaluate, metrics  # noqa: F401

    stream = [({"a": float(i % 5), "b": float(-(i % 5))}, int(i % 5 > 2)) for i in range(300)]
    m = RiverClassifier(create_method("bimu", [2, 8, 2], seed=0, preset="pmnist-100"))
    result = evaluate.progressive_val_score(stream, m, metrics.Accuracy())
    assert result.get() > 0.7

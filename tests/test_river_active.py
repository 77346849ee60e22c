"""bimu's active learning inside river: :class:`bimu.active.river.RiverActiveLearner` is a
``river.active.ActiveLearningClassifier`` that passes river's checks and runs in river's evaluation."""

import math

import pytest
import torch

river = pytest.importorskip("river", reason="river is not installed here")

from river import active, datasets, evaluate, metrics  # noqa: E402

from bimu.active.river import RiverActiveLearner  # noqa: E402
from bimu.methods import RiverClassifier, create_method  # noqa: E402
from bimu.uncertainty import variation_ratio  # noqa: E402


@pytest.fixture(autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def phishing_model(**kw):
    base = RiverClassifier(create_method("bimu", [9, 32, 2], seed=0, preset="pmnist-100", output_norm=False,
                                         lr_max=0.02), classes=[False, True])
    return RiverActiveLearner(base, **kw)


def test_it_is_a_river_active_learner_that_passes_rivers_checks():
    pytest.importorskip("sklearn", reason="river.checks needs scikit-learn (in the river extra)")
    from river import checks

    params = list(RiverActiveLearner._unit_test_params())
    assert [(p.get("threshold"), p.get("budget")) for p in params] == [(0.2, None), (None, 0.3)]
    m = RiverActiveLearner(**params[0])
    assert isinstance(m, active.base.ActiveLearningClassifier) and isinstance(m, river.base.Wrapper)
    checks.check_estimator(m)


def test_progressive_validation_with_the_vr_threshold_asks_where_the_samples_disagree():
    model = phishing_model(threshold=0.1, mc_samples=10)
    result = evaluate.progressive_val_score(datasets.Phishing(), model, metrics.Accuracy())
    acc = model.accounting
    n = datasets.Phishing().n_samples
    assert acc["examples_seen"] == n and 0 < acc["labels_queried"] < n // 2
    assert acc["backward_passes"] == acc["weight_writes"] == acc["labels_queried"]
    assert acc["forward_passes"] == 10 * n
    assert result.get() > 0.65  # Phishing: 56% of one class; 0.74 here with 10% of the labels
    # each decision is VR of the K votes >= 0.1
    x, _ = next(iter(datasets.Phishing()))
    proba, ask = model.predict_proba_one(x)
    assert ask == bool(float(variation_ratio(model.learner.last_probs)[0]) >= 0.1 - 1e-9)
    assert set(proba) == {False, True} and math.isclose(sum(proba.values()), 1.0)
    label, ask2 = model.predict_one(x)
    assert label in (False, True) and isinstance(ask2, bool)


def test_the_budget_controller_keeps_the_fraction_of_labels_near_the_budget_and_beats_random():
    model = phishing_model(budget=0.2, budget_exponent=0.5)
    result = evaluate.progressive_val_score(datasets.Phishing(), model, metrics.Accuracy())
    fraction = model.accounting["query_fraction"]
    assert abs(fraction - 0.2) < 0.05  # 0.178 here
    rand = phishing_model(strategy="random", threshold=fraction)
    baseline = evaluate.progressive_val_score(datasets.Phishing(), rand, metrics.Accuracy())
    assert abs(rand.accounting["query_fraction"] - fraction) < 0.03
    assert result.get() > baseline.get() and result.get() > 0.78  # 0.823 against 0.774 here


def test_clone_is_fresh_and_takes_new_parameters():
    model = phishing_model(threshold=0.2)
    for x, y in datasets.Phishing().take(20):
        model.learn_one(x, y)
    c = model.clone({"threshold": 0.5})
    assert c.threshold == 0.5 and c.classifier.method.updates_applied == 0 and c.accounting["examples_seen"] == 0
    assert model.classifier.method.updates_applied == 20
    with pytest.raises(ValueError, match="needs the label"):
        phishing_model(strategy="vr-true", threshold=0.2)
    with pytest.raises(TypeError, match="RiverClassifier"):
        RiverActiveLearner(river.linear_model.LogisticRegression())
    with pytest.raises(ValueError, match="unknown label 'x'"):
        model.learn_one(x, "x")

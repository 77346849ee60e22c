"""bimu beside river's own models on river's bundled data sets, in river's progressive validation
(each example predicted, then learned): ``python scripts/river_compare.py`` prints the table of
docs/integrations/river.md (one thread, seed 0; deterministic).

Rows: river's ``LogisticRegression`` (one-vs-rest for more than two classes) after a
``StandardScaler``, river's ``HoeffdingTreeClassifier``, BiMU on every label (``RiverClassifier``), and
BiMU asking for labels (``RiverActiveLearner``: the VR budget controller at 20%, and random querying at
the fraction the controller used).
"""

from __future__ import annotations

import time

import torch
from river import datasets, evaluate, linear_model, metrics, multiclass, preprocessing, tree

from bimu.active.river import RiverActiveLearner
from bimu.methods import RiverClassifier, create_method

DATASETS = {"Phishing": datasets.Phishing, "ImageSegments": datasets.ImageSegments}


def bimu_classifier(data) -> RiverClassifier:
    x, _ = next(iter(data()))
    classes = sorted({y for _, y in data()}, key=str)
    method = create_method("bimu", [len(x), 32, len(classes)], seed=0, preset="pmnist-100",
                           output_norm=len(classes) > 2, lr_max=0.02)
    return RiverClassifier(method, classes=classes)


def rows(name: str):
    data = DATASETS[name]
    n_classes = len({y for _, y in data()})
    logistic = linear_model.LogisticRegression() if n_classes == 2 else multiclass.OneVsRestClassifier(
        linear_model.LogisticRegression())
    models = [("river LogisticRegression (StandardScaler)", preprocessing.StandardScaler() | logistic, None),
              ("river HoeffdingTreeClassifier", tree.HoeffdingTreeClassifier(), None),
              ("bimu BiMU, every label", bimu_classifier(data), None)]
    controlled = RiverActiveLearner(bimu_classifier(data), budget=0.2)
    models.append(("bimu BiMU, VR budget controller (20%)", controlled, controlled))
    for label, model, learner in models + [(None, None, None)]:
        if label is None:  # random querying at the fraction the controller reached
            fraction = controlled.accounting["query_fraction"]
            learner = model = RiverActiveLearner(bimu_classifier(data), strategy="random", threshold=fraction)
            label = "bimu BiMU, random querying (same fraction)"
        start = time.perf_counter()
        acc = evaluate.progressive_val_score(data(), model, metrics.Accuracy()).get()
        seconds = time.perf_counter() - start
        labels = "100%" if learner is None else f"{learner.accounting['query_fraction']:.1%}"
        yield label, acc, labels, seconds


def main() -> None:
    torch.set_num_threads(1)
    print("| data set | model | accuracy | labels used | seconds |")
    print("|---|---|---|---|---|")
    for name in DATASETS:
        for label, acc, labels, seconds in rows(name):
            print(f"| {name} | {label} | {acc:.2%} | {labels} | {seconds:.1f} |")


if __name__ == "__main__":
    main()

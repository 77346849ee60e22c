"""bimu's variation ratio beside baal's BALD, Entropy and random acquisition, in baal's own pool-based
loop: ``python scripts/baal_compare.py`` prints the table of docs/integrations/baal.md (one thread;
deterministic for a given machine). Needs baal and scikit-learn.

Data: scikit-learn's digits (1,797 8x8 images, 10 classes, standardised): 1,200 form the pool, 597 the
test set. Each run labels 20 random pool items, then does ``ROUNDS`` acquisition steps of
``QUERY`` items with ``baal.active.ActiveLearningLoop``; before each step (and after the last) a fresh
BiMU network [64, 64, 10] (the paper's Permuted-MNIST preset, ``lr_max=0.02``, seed of the run) learns
the labelled set from scratch with the same number of online updates (``UPDATES`` mini-batches of 10)
and is scored on the test set. The heuristics see the same ``K = 20`` weight samples of the pool
(:class:`bimu.active.baal.BaalModelAdapter`); random acquisition is baal's ``Random``.
"""

from __future__ import annotations

import argparse
import logging
import time

import numpy as np
import structlog
import torch
from baal.active import ActiveLearningDataset, ActiveLearningLoop
from baal.active.heuristics import BALD, Entropy, Random
from sklearn.datasets import load_digits
from torch.utils.data import TensorDataset

from bimu import create_method
from bimu.active.baal import BaalModelAdapter, VariationRatio

POOL, START, QUERY, ROUNDS, UPDATES, K = 1200, 20, 20, 10, 200, 20
HEURISTICS = {"VR (bimu)": VariationRatio, "BALD (baal)": BALD, "Entropy (baal)": Entropy, "Random (baal)": Random}


def digits():
    """Standardised digits, split by a fixed permutation into the pool and the test set."""
    x, y = load_digits(return_X_y=True)
    x = x.astype(np.float32)
    x = (x - x.mean(0)) / (x.std(0) + 1e-6)
    perm = np.random.default_rng(1234).permutation(len(x))
    t = lambda idx: TensorDataset(torch.from_numpy(x[idx]), torch.from_numpy(y[idx]).long())  # noqa: E731
    return t(perm[:POOL]), t(perm[POOL:])


def fresh_model(labelled, seed: int) -> BaalModelAdapter:
    """A new BiMU network trained from scratch on the labelled items with ``UPDATES`` mini-batches of 10."""
    model = BaalModelAdapter(create_method("bimu", [64, 64, 10], seed=seed, preset="pmnist-100", lr_max=0.02),
                             batch_size=10, seed=seed)
    epochs = -(-UPDATES * 10 // len(labelled))
    model.train_on_dataset(labelled, epochs=epochs)
    return model


def run(name: str, seed: int, pool, test) -> list[float]:
    """Test accuracy after 0, 1, ..., ROUNDS acquisition steps."""
    np.random.seed(seed)  # baal's Random acquisition draws from numpy's global generator
    dataset = ActiveLearningDataset(pool, random_state=seed)
    dataset.label_randomly(START)
    heuristic = HEURISTICS[name]()
    accuracies = []
    for step in range(ROUNDS + 1):
        model = fresh_model(dataset, seed)
        accuracies.append(model.accuracy_on_dataset(test, iterations=K))
        if step < ROUNDS:
            loop = ActiveLearningLoop(dataset, model.predict_on_dataset, heuristic=heuristic, query_size=QUERY,
                                      iterations=K)
            assert loop.step()
    assert dataset.n_labelled == START + ROUNDS * QUERY
    return accuracies


def main() -> None:
    """Print the table: mean (std) test accuracy over the seeds at a few label counts."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=10)
    args = parser.parse_args()
    torch.set_num_threads(1)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))  # baal's step logs
    pool, test = digits()
    shown = [0, 2, 5, ROUNDS]
    counts = " | ".join(f"{START + r * QUERY} labels" for r in shown)
    print(f"| acquisition | {counts} | mean over rounds | seconds |")
    print("|---|" + "---|" * (len(shown) + 2))
    for name in HEURISTICS:
        start = time.perf_counter()
        acc = np.array([run(name, seed, pool, test) for seed in range(args.seeds)])  # [seeds, rounds + 1]
        seconds = time.perf_counter() - start
        cells = [f"{acc[:, r].mean():.1%} ({acc[:, r].std():.1%})" for r in shown]
        area = acc.mean(1)
        print(f"| {name} | " + " | ".join(cells) + f" | {area.mean():.1%} ({area.std():.1%}) | {seconds:.0f} |")


if __name__ == "__main__":
    main()

"""What the Synaptic Metaplasticity network's hidden units do early in a Permuted-MNIST stream, under
bimu's batch norm and under the norm of the paper's runs: the numbers the synmeta gap notes quote.

    python scripts/synmeta_units.py [--examples 5000] [--test 1000] [--seed 0]

For each hidden activation (sign, rbg) and each norm (``online``: bimu's running statistics;
``equinox``: the paper's runs' norm, ``--set bn_statistics=equinox``) it trains the pmnist-100 preset
(784-100-10, the torch engine) on the first ``--examples`` examples of task 1 of run ``--seed``, one at
a time, then feeds the first ``--test`` test images of task 1 through the first layer and its norm
(prediction mode) and prints, over those images' hidden pre-activations ``z``:

- ``inside``: the share with ``|z| <= 1``, the sign's straight-through window (where a hidden weight
  gets a gradient);
- ``gate_on``: the share with ``|z| > 1``, where the Reverse Binary Gate outputs 1;
- ``constant``: how many of the 100 units give the same activation output on every test image;
- the accuracy on those test images (hard samples as in evaluation).

A few CPU-seconds per setting; needs the MNIST files (``BIMU_DATA_DIR``).
"""

import argparse

import torch

from bimu.data.permuted import PermutedMNIST
from bimu.methods.registry import create_method
from bimu.nn.activations import hidden_activation


def unit_statistics(z: torch.Tensor, activation: str) -> dict:
    """``inside``, ``gate_on`` (fractions) and ``constant`` (a count) of pre-activations ``z`` ``[images, units]``."""
    out = hidden_activation(z, activation, 1.0)
    return {"inside": float((z.abs() <= 1).float().mean()),
            "gate_on": float((z.abs() > 1).float().mean()),
            "constant": int((out == out[:1]).all(0).sum())}


def diagnose(data: PermutedMNIST, activation: str, statistics: str, examples: int, test: int, seed: int) -> dict:
    """Train on ``examples`` examples of task 1, return :func:`unit_statistics` and ``accuracy``."""
    method = create_method("synaptic-metaplasticity", [784, 100, 10], seed=seed, preset="pmnist-100",
                           activation=activation, bn_statistics=statistics)
    x, y = data.train_task(0, seed)
    for i in range(examples):
        method.learn(x[i:i + 1], y[i:i + 1])
    xt, yt = data.test_task(0)
    xt, yt = xt[:test], yt[:test]
    model = method.model
    with torch.no_grad():
        z = model.norms[0](model.layers[0](xt))
        accuracy = float((method.predict(xt) == yt).float().mean())
    return {**unit_statistics(z, activation), "accuracy": accuracy}


def main(argv=None) -> None:
    """Print one line per (activation, norm)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--examples", type=int, default=5000)
    ap.add_argument("--test", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    data = PermutedMNIST(n_tasks=1, seed=args.seed)
    print(f"seed {args.seed}, {args.examples} training examples of task 1, {args.test} test images")
    for activation in ("sign", "rbg"):
        for statistics in ("online", "equinox"):
            r = diagnose(data, activation, statistics, args.examples, args.test, args.seed)
            print(f"{activation:4s} {statistics:7s} inside |z|<=1 {100 * r['inside']:7.3f}%  "
                  f"gate on |z|>1 {100 * r['gate_on']:7.3f}%  constant units {r['constant']:3d}/100  "
                  f"accuracy {100 * r['accuracy']:.2f}%")


if __name__ == "__main__":
    main()

"""How many of MNIST's images carry each digit: the score of a network that answers one class.

    python scripts/mnist_label_shares.py [--split test|train]

A network whose predictions do not depend on the labels scores the sum over classes of (the share of
its predictions in the class) x (the share of the class among the labels); answering one digit for
every input, it scores that digit's share. Permuted MNIST moves pixels, not labels, so every task has
the same shares. Prints one line per digit (count and share of the split, default the 10,000 test
images) and the range of the shares. The data are read from ``$BIMU_DATA_DIR`` (or bimu's cache).
"""

import sys

import numpy as np


def shares(split: str = "test") -> tuple[np.ndarray, int]:
    """``(count per digit 0-9, number of images)`` of MNIST's ``split``."""
    from bimu.data.mnist import load_dataset

    _, labels = load_dataset("mnist", split)
    return np.bincount(labels, minlength=10), int(labels.size)


def main(argv: list[str]) -> int:
    split = "test"
    if argv[:1] == ["--split"] and len(argv) == 2 and argv[1] in ("test", "train"):
        split = argv[1]
    elif argv:
        sys.exit(__doc__)
    counts, n = shares(split)
    for digit, c in enumerate(counts):
        print(f"digit {digit}: {c} of {n} ({100 * c / n:.2f}%)")
    lo, hi = int(np.argmin(counts)), int(np.argmax(counts))
    print(f"shares {100 * counts[lo] / n:.2f}% (digit {lo}) to {100 * counts[hi] / n:.2f}% (digit {hi})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

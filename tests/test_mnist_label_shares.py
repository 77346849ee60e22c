"""scripts/mnist_label_shares.py: each digit's count and share of an MNIST split."""

import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import mnist_label_shares  # noqa: E402 - scripts/ is not a package


def test_counts_shares_and_range_by_hand(monkeypatch, capsys):
    import bimu.data.mnist as mnist

    labels = np.array([1] * 5 + [0] * 2 + [7] * 3, dtype=np.uint8)  # digits 2-6, 8, 9 absent
    calls = []
    monkeypatch.setattr(mnist, "load_dataset", lambda name, split: calls.append((name, split)) or (None, labels))
    assert mnist_label_shares.main(["--split", "train"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert calls == [("mnist", "train")]
    assert out[0] == "digit 0: 2 of 10 (20.00%)" and out[1] == "digit 1: 5 of 10 (50.00%)"
    assert out[7] == "digit 7: 3 of 10 (30.00%)" and out[2] == "digit 2: 0 of 10 (0.00%)"
    assert out[-1] == "shares 0.00% (digit 2) to 50.00% (digit 1)"


def test_unknown_arguments_print_the_usage():
    with pytest.raises(SystemExit, match="mnist_label_shares.py"):
        mnist_label_shares.main(["--split", "validation"])

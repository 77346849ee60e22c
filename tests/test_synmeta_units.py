"""scripts/synmeta_units.py: the hidden-unit counts of the Synaptic Metaplasticity diagnostic, by hand."""

import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import synmeta_units  # noqa: E402 - scripts/ is not a package


def test_unit_statistics_by_hand():
    # 4 images x 3 units: unit 0 always |z| > 1, unit 1 always inside, unit 2 mixed
    z = torch.tensor([[2.0, 0.5, 3.0], [-5.0, -0.2, 0.1], [1.5, 1.0, -2.0], [9.0, 0.0, 0.9]])
    rbg = synmeta_units.unit_statistics(z, "rbg")
    assert rbg["inside"] == pytest.approx(6 / 12) and rbg["gate_on"] == pytest.approx(6 / 12)
    assert rbg["constant"] == 2  # units 0 (gate on everywhere) and 1 (off everywhere)
    sign = synmeta_units.unit_statistics(z, "sign")
    assert sign["constant"] == 0  # unit 0 changes sign, unit 1 too (-0.2), unit 2 too

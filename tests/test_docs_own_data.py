"""docs/own-data.md runs: every example of the tutorial is a doctest."""

import doctest
from pathlib import Path

DOC = Path(__file__).resolve().parents[1] / "docs" / "own-data.md"


def test_own_data_tutorial_runs():
    result = doctest.testfile(str(DOC), module_relative=False, optionflags=doctest.ELLIPSIS, verbose=False)
    assert result.attempted >= 10 and result.failed == 0, result

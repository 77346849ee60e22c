"""scripts/vr_collapse.py: the vote counting behind the query-collapse analysis, on hand-made cases."""

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import vr_collapse  # noqa: E402 - scripts/ is not a package


def test_vote_levels_and_dissent_needed():
    assert vr_collapse.vote_levels(5) == [0.0, 0.2, 0.4, 0.6, 0.8]
    # K = 5: the smallest nonzero VR is 0.2, so 0.3 and 0.4 both need 2 dissenting votes
    assert [vr_collapse.dissent_needed(t, 5) for t in (0.0, 0.1, 0.2, 0.3, 0.4, 0.5)] == [0, 1, 1, 2, 2, 3]
    # K = 10: 0.3 needs 3 votes, 0.4 needs 4; float rounding of 0.3 * 10 does not ask for 4
    assert [vr_collapse.dissent_needed(t, 10) for t in (0.3, 0.4, 0.9)] == [3, 4, 9]


def test_summarise_splits_at_the_last_label():
    # 8 examples, K = 5: queried at examples 1 and 3, then six examples with dissent 0, 1, 0, 2, 0, 0
    dissent = [3, 1, 2, 0, 1, 0, 2, 0]
    asked = [True, False, True, False, False, False, False, False]
    s = vr_collapse.summarise(dissent, asked, 5, [0.3, 0.5])
    assert s["labels"] == 2 and s["label_at"] == [1, 3] and s["after"] == 5
    assert s["all"]["n"] == 8 and s["all"]["levels"][0] == pytest.approx(3 / 8)
    assert s["all"]["at_or_above"] == {0.3: pytest.approx(3 / 8), 0.5: pytest.approx(1 / 8)}
    after = s["after_last"]
    assert after["n"] == 5 and after["levels"] == {0: 0.6, 1: 0.2, 2: 0.2, 3: 0.0, 4: 0.0}
    assert after["at_or_above"] == {0.3: pytest.approx(0.2), 0.5: 0.0}


def test_summarise_without_labels_and_bad_input():
    s = vr_collapse.summarise([0, 0, 1], [False] * 3, 10, [0.1])
    assert s["labels"] == 0 and s["after"] == 3 and s["after_last"]["at_or_above"][0.1] == pytest.approx(1 / 3)
    with pytest.raises(ValueError, match="in \\[0, 5\\)"):
        vr_collapse.summarise([5], [True], 5, [0.3])
    with pytest.raises(ValueError, match="differ in length"):
        vr_collapse.summarise([0, 1], [True], 5, [0.3])


@pytest.mark.parametrize("tasks", [0, 13])
def test_objects_seq_refuses_a_task_count_outside_its_stream(tasks):
    from bimu.data.feature_benchmarks import objects_seq

    with pytest.raises(ValueError, match=r"tasks must be in \[1, 12\]"):
        objects_seq(tasks=tasks)

"""scripts/ewc_fisher_study.py --summarize: tasks numbered from 1, as on the results page."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import ewc_fisher_study  # noqa: E402 - scripts/ is not a package


def test_summary_numbers_tasks_from_one_and_averages_by_hand():
    rows = [{"task": t, "acc": a, "auc_std": u, "auc_std_ref": u, "auc_raw": 1.0, "auc_raw_ref": 1.0,
             "fisher_ratio": 2.0} for t, (a, u) in enumerate([(0.9, 0.8), (0.5, 0.6), (0.7, 0.4)])]
    lines = ewc_fisher_study.summarize(rows)
    assert lines[:3] == ["3 tasks", "  just-trained acc, task 1: 90.00", "  just-trained acc, tasks 2-3: 60.00"]
    assert lines[3] == "  auc_std: mean over tasks 0.600 sd 0.163 (range 0.400-0.800), last task 0.400"
    assert ewc_fisher_study.summarize(rows[:2])[2] == "  just-trained acc, task 2: 50.00"

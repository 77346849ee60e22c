"""``bimu report --check PAGE``: a results page recomputed from its run files, and the real page.

The small page is built the way docs/results.md is: real quick runs (``bimu reproduce memory-window
--scale quick``), their table rewritten from the run files (``--from-runs``), the page from the
manifest (``bimu report --results-page``). The check passes on it, then fails on each kind of
difference: a hand-edited number, a row whose runs are gone, a hand-edited gap or note line.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from bimu.cli import main

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def small_page(tmp_path_factory):
    root = tmp_path_factory.mktemp("repo")
    out = root / "results" / "small"
    assert main(["reproduce", "memory-window", "--scale", "quick", "--seeds", "1", "--jobs", "1", "--out", str(out),
                 "--rows", "bimu-N100", "bimu-N700"]) == 0
    for ckpt in out.rglob("checkpoint*"):  # the committed form: run files without checkpoints
        ckpt.unlink()
    return root


def _build(root: Path, monkeypatch) -> Path:
    """Rewrite the table from the runs (relative --out, as on the real page) and the page from it."""
    monkeypatch.chdir(root)
    assert main(["reproduce", "memory-window", "--scale", "quick", "--out", "results/small", "--from-runs"]) == 0
    (root / "docs").mkdir(exist_ok=True)
    assert main(["report", "--results-page", "docs/results.md", "results/small"]) == 0
    return root / "docs" / "results.md"


def _copy(small_page, tmp_path) -> Path:
    root = tmp_path / "repo"
    shutil.copytree(small_page, root)
    return root


def test_check_passes_on_a_page_built_from_its_runs(small_page, tmp_path, monkeypatch, capsys):
    root = _copy(small_page, tmp_path)
    page = _build(root, monkeypatch)
    text = page.read_text()
    assert "| 100 |" in text and "| 700 |" in text and "command: `bimu reproduce memory-window --scale quick " \
        "--out results/small --from-runs`" in text
    assert "not shown, no complete runs under results/small/runs/quick: BayesBiNN; " in text
    capsys.readouterr()
    monkeypatch.chdir(tmp_path)  # another working directory: --out is found from the page's folder up
    assert main(["report", "--check", str(page)]) == 0
    assert capsys.readouterr().out == f"{page}: every number agrees with the run files\n"


def test_check_fails_on_a_hand_edited_number(small_page, tmp_path, monkeypatch, capsys):
    root = _copy(small_page, tmp_path)
    page = _build(root, monkeypatch)
    row = next(line for line in page.read_text().splitlines() if line.startswith("| 700 |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    edited = row.replace(f"| {cells[1]} |", "| 99.99 |", 1)
    page.write_text(page.read_text().replace(row, edited))
    capsys.readouterr()
    assert main(["report", "--check", str(page)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"{page}: 1 difference from the run files:"
    assert out[1] == ("  memory-window: Memory window ablation (100-task Permuted MNIST, 100 hidden units) [quick], "
                      f"row 700, Mean acc. last 5 tasks (%): page 99.99, recomputed {cells[1]}")
    assert out[2:] == ["regenerate with:",
                       "  bimu reproduce memory-window --scale quick --out results/small --from-runs",
                       "  bimu report --results-page docs/results.md results/small"]


def test_check_fails_on_a_row_with_no_run_files(small_page, tmp_path, monkeypatch, capsys):
    root = _copy(small_page, tmp_path)
    page = _build(root, monkeypatch)
    row = next(line for line in page.read_text().splitlines() if line.startswith("| 700 |"))
    shutil.rmtree(root / "results" / "small" / "runs" / "quick" / "memory-window" / "bimu-N700")
    capsys.readouterr()
    assert main(["report", "--check", str(page)]) == 1
    out = capsys.readouterr().out
    where = "memory-window: Memory window ablation (100-task Permuted MNIST, 100 hidden units) [quick]"
    cells = " | ".join(c.strip() for c in row.strip().strip("|").split("|")[1:])
    assert f"  {where}, row 700: no complete runs behind it (page: {cells})\n" in out
    assert f"  {where}: page line not recomputed: - seeds: 0 (1 seed; the paper averages 5 runs)\n" not in out
    assert (f"  {where}: recomputed line missing from the page: - not shown, no complete runs under "
            "results/small/runs/quick: 700; BayesBiNN; BayesBiNN, paper's prior sign; BayesBiNN, exact ratio; "
            "Replay, M = 1 000\n") in out


def test_check_fails_on_a_row_with_runs_left_off_the_page(small_page, tmp_path, monkeypatch, capsys):
    root = _copy(small_page, tmp_path)
    page = _build(root, monkeypatch)
    row = next(line for line in page.read_text().splitlines() if line.startswith("| 100 |"))
    page.write_text(page.read_text().replace(row + "\n", ""))
    capsys.readouterr()
    assert main(["report", "--check", str(page)]) == 1
    assert "row 100: missing from the page (recomputed: " in capsys.readouterr().out


def test_check_fails_on_an_edited_note_and_a_section_it_cannot_recompute(small_page, tmp_path, monkeypatch, capsys):
    root = _copy(small_page, tmp_path)
    page = _build(root, monkeypatch)
    text = page.read_text().replace("mean ± std over seeds (sample std)", "mean ± std over seeds (population std)")
    text += ("\n## compute-cost: Compute cost\n\n"
             "- command: `bimu reproduce compute-cost --scale full --out results/small`\n\n| Task | x |\n|---|---|\n"
             "| Task 1 | 9.09 |\n")
    page.write_text(text)
    capsys.readouterr()
    assert main(["report", "--check", str(page)]) == 1
    out = capsys.readouterr().out
    assert "page line not recomputed: - runs under results/small/runs/quick/memory-window; mean ± std over seeds " \
           "(population std)" in out
    assert ("  compute-cost: Compute cost: not a bimu reproduce command: bimu reproduce compute-cost --scale full "
            "--out results/small") in out


def test_check_refuses_a_file_that_is_not_a_results_page(tmp_path, capsys):
    page = tmp_path / "notes.md"
    page.write_text("# Notes\n")
    assert main(["report", "--check", str(page)]) == 2
    assert capsys.readouterr().err.strip().endswith(
        f"{page} is not a results page (no 'Generated from real run directories by `...`')")
    assert main(["report", "--check", str(tmp_path / "none.md")]) == 2


def test_from_runs_trains_nothing(tmp_path, capsys):
    assert main(["reproduce", "memory-window", "--scale", "quick", "--out", str(tmp_path), "--from-runs"]) == 0
    assert not (tmp_path / "runs").exists()
    manifest = json.loads((tmp_path / "memory-window.json").read_text())
    assert manifest["table"]["rows"] == [] and manifest["seeds"] == []
    assert main(["reproduce", "query-dynamics", "--scale", "quick", "--out", str(tmp_path), "--from-runs"]) == 0
    assert not (tmp_path / "runs").exists()  # an active-learning entry reads its runs too, training nothing
    assert json.loads((tmp_path / "query-dynamics.json").read_text())["seeds"] == []


def test_the_published_results_page_agrees_with_the_committed_runs(capsys):
    """CI: every number of docs/results.md is what the run files under results/ give."""
    assert main(["report", "--check", str(REPO / "docs" / "results.md")]) == 0, capsys.readouterr().out


def test_no_gap_explanation_is_written_twice_on_the_published_page():
    from bimu.reproduce.gaps import EXPLANATIONS, passage, passage_ids

    text = (REPO / "docs" / "results.md").read_text()
    paragraphs = {t for _, t in EXPLANATIONS.values()}
    paragraphs |= {passage(p) for t in paragraphs for p in passage_ids(t)}
    counts = {t[:60]: text.count(t) for t in paragraphs}
    assert all(n <= 1 for n in counts.values()), {k: n for k, n in counts.items() if n > 1}
    assert any(n == 1 for n in counts.values())  # the page does explain its gaps


def test_the_gap_notes_name_run_folders_that_exist():
    from bimu.reproduce.check import gap_note_paths, missing_gap_runs

    assert ("ste-table1.md", "results/probes/ste-one-task") in gap_note_paths()
    assert missing_gap_runs(REPO / "docs" / "results.md") == []


def test_check_fails_on_a_gap_note_naming_a_missing_run_folder(small_page, tmp_path, monkeypatch, capsys):
    from bimu.reproduce import check

    root = _copy(small_page, tmp_path)
    page = _build(root, monkeypatch)
    notes = tmp_path / "gaps"
    notes.mkdir()
    (notes / "probe-gone.md").write_text("explains:\n- memory-window bimu-N700 acc\n\nTried (bimu run pmnist --out "
                                         "results/probes/no-such-probe, its runs committed there).\n")
    (notes / "probe-kept.md").write_text("explains:\n- memory-window bimu-N100 acc\n\nIts runs are in "
                                         "results/small/runs/quick/memory-window.\n")  # under the page's root
    monkeypatch.setattr(check, "gap_notes_dir", lambda: notes)
    capsys.readouterr()
    assert main(["report", "--check", str(page)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[:2] == [f"{page}: 1 difference from the run files:",
                       "  gap note probe-gone.md names results/probes/no-such-probe, a run folder that does not exist"]

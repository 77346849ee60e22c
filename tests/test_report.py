import numpy as np

from bimu.rundir import RunDir
from bimu.report import markdown_table, plot_accuracy_per_task
from bimu.paper import TABLE1
from bimu.report.tables import find_seed_dirs, fmt_pm, group_runs, load_run

NAN = np.nan


def make_seed(root, seed, R, ood):
    d = RunDir(root / "pmnist-bimu" / f"seed-{seed}")
    d.write_json("config.json", {"benchmark": "pmnist", "method": "bimu", "active": None,
                                 "resolved": {"sizes": [784, 100, 10]}})
    d.write_matrix(R)
    d.write_metrics([{"task": t} for t in range(len(R))])
    d.write_json("summary.json", {"complete": True, "seed": seed, "last_k": 2,
                                  "last_k_acc": float(np.mean(R[-1, -2:])), "ood_auc": ood,
                                  "mmrr": 1.0 / (np.nanmax(R) - R[-1, -1] + 1e-5), "bwt": float(R[-1, 0] - R[0, 0]),
                                  "first_task_acc": float(R[0, 0]), "steps_per_s": 300.0})


def test_table_mean_std_and_paper_column(tmp_path):
    make_seed(tmp_path, 0, np.array([[0.90, NAN], [0.80, 0.94]]), {"epistemic": 0.9, "aleatoric": 0.8,
                                                                   "variation_ratio": 0.85})
    make_seed(tmp_path, 1, np.array([[0.92, NAN], [0.84, 0.90]]), {"epistemic": 0.8, "aleatoric": 0.8,
                                                                   "variation_ratio": 0.75})
    dirs = find_seed_dirs([tmp_path])
    assert [d.name for d in dirs] == ["seed-0", "seed-1"]
    groups = group_runs([load_run(d) for d in dirs])
    table = markdown_table(groups)
    row = table.splitlines()[2]
    # last-2 accuracy per seed: 0.87, 0.87 -> 87.00 ± 0.00; epistemic AUC 0.85 ± 0.071
    assert "| pmnist | bimu | 100 | 0,1 | 87.00 ± 0.00 (last 2) | 0.850 ± 0.071 | 0.800 ± 0.000 |" in row
    assert "90.30 ± 0.38" in row and "139.47" in row and "94.67" in row
    assert "91.00 ± 1.41" in row  # first-task accuracy
    # seed-averaged MMRR: mean matrix [[0.91, -], [0.82, 0.92]] -> 1 / (0.92 - 0.92 + 1e-5)
    assert "| 1e5 (cap) |" in row and "100000.00" not in row  # as the reproduction tables print it
    plot_accuracy_per_task(groups, tmp_path / "p.png")
    assert (tmp_path / "p.png").stat().st_size > 1000


def test_fmt_and_paper_numbers():
    assert fmt_pm([0.5], scale=100) == "50.00"
    assert fmt_pm([None, float("nan")]) == "-"
    assert TABLE1["mesu"]["mmrr"] == (261.10, None) and TABLE1["synaptic-metaplasticity"]["auc"] is None


def test_incomplete_run_is_listed_with_its_progress(tmp_path):
    d = RunDir(tmp_path / "pmnist-bimu" / "seed-4")
    d.write_json("config.json", {"benchmark": "pmnist", "method": "bimu", "tasks": 3, "active": None,
                                 "resolved": {"sizes": [784, 100, 10]}})
    d.write_matrix(np.array([[0.935, NAN, NAN], [NAN] * 3, [NAN] * 3]))
    d.write_metrics([{"task": 0, "acc": 0.935}])
    table = markdown_table(group_runs([load_run(p) for p in find_seed_dirs([tmp_path])]))
    assert "| - (incomplete: 4) |" in table
    assert "seed 4: incomplete, 1/3 tasks done; accuracy right after training (%): 93.50" in table


def test_single_task_stream_has_no_mmrr(tmp_path):
    # one task: a_max = a_T, so MMRR would be 1/eps = 100000 by construction; the table shows '-'
    make_seed(tmp_path, 0, np.array([[0.52]]), None)
    make_seed(tmp_path, 1, np.array([[0.50]]), None)
    row = markdown_table(group_runs([load_run(d) for d in find_seed_dirs([tmp_path])])).splitlines()[2]
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[8] == "-" and cells[9] == "-"  # MMRR, MMRR (seed-avg)
    assert "100000" not in row and cells[11] == "51.00 ± 1.41"  # first-task accuracy still there


def test_a_long_incomplete_run_is_summarised_not_listed(tmp_path):
    rd = RunDir(tmp_path / "pmnist-bimu" / "seed-0")
    rd.write_json("config.json", {"benchmark": "pmnist", "method": "bimu", "tasks": 1000, "active": None,
                                  "resolved": {"sizes": [784, 100, 10]}})
    rd.write_metrics([{"task": t, "acc": 0.93 + (0.01 if t == 7 else 0.0)} for t in range(500)])
    table = markdown_table(group_runs([load_run(p) for p in find_seed_dirs([tmp_path])]))
    line = [x for x in table.splitlines() if "seed 0: incomplete" in x][0]
    assert "500/1000 tasks done" in line
    assert "93.00, 94.00, 93.00" not in line and "(500 tasks: mean 93.00, range 93.00-94.00)" in line
    assert line.count(",") < 12

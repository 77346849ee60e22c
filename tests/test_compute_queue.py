"""scripts/compute_queue.py: the full-scale queues name each run once and print what they would run."""

import fcntl
import os
import subprocess
import sys
from pathlib import Path

from repo_scripts import load

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "compute_queue.py"


def _queue_module():
    return load("scripts/compute_queue.py")


def _runs(q, items) -> set[tuple[str, str | None, int]]:
    """(reproduction, row (None: every row), seed) of each run the items ask for."""
    runs = set()
    for name, rows, seeds, *first in items:
        if name == "probe":
            continue
        start = first[0] if first else 0
        runs |= {(name, row, s) for row in q.row_names(rows) or [None] for s in range(start, start + seeds)}
    return runs


def test_no_run_is_in_two_queues():
    q = _queue_module()
    assert set(q.QUEUES) == {"pmnist", "active", "mesu", "pmnist-b", "after-pmnist", "pmnist-al"}
    runs = {name: _runs(q, items) for name, items in q.QUEUES.items()}
    every = [r for v in runs.values() for r in v]
    assert len(every) == len(set(every))
    # Table 1 at 1000 tasks: every method, with the seeds, MESU's first seed on a core of its own
    table1: dict[str, list[int]] = {}
    for name, row, seed in sorted(every, key=str):
        if name == "pmnist-1000":
            table1.setdefault(row, []).append(seed)
    assert table1 == {"sgd": [0, 1, 2], "ewc-online": [0, 1, 2], "si": [0, 1, 2], "ste": [0, 1], "bimu": [0, 1],
                      "bayesbinn": [0, 1], "synaptic-metaplasticity": [0, 1], "mesu": [0, 1]}
    assert runs["mesu"] == {("pmnist-1000", "mesu", 0)} and ("pmnist-1000", "mesu", 1) in runs["after-pmnist"]
    # every Table 1 row but MESU's is trained by the frozen code of the pmnist queues
    frozen = runs["pmnist"] | runs["pmnist-b"]
    assert {(n, row, s) for n, row, s in every if n == "pmnist-1000" and row != "mesu"} <= frozen


def test_the_real_data_venue_queue_runs_every_row_of_its_entries_with_three_seeds():
    from bimu.reproduce import active_learning as al
    from bimu.reproduce import al_methods
    from bimu.reproduce.spec import Options

    q = _queue_module()
    runs = _runs(q, q.PMNIST_AL)
    full = Options(scale="full")
    rows = al_methods.rows_for(full, "pmnist")
    comparison = [r.slug for r in rows if al_methods.in_comparison(r)]
    # the rows that decide a claim first, cheapest first: K = 2 and 3 (claim 6; K = 10 and the baseline are
    # pmnist-al's runs, shared), the controller (claim 4), the other methods' rules (claim 3); then the rest
    # of the comparison, K = 5, every row of each entry (K = 25 last)
    assert [item[0] for item in q.PMNIST_AL] == ["pmnist-vr-samples", "pmnist-budget-controller", "pmnist-al",
                                                 "pmnist-al", "pmnist-vr-samples", "pmnist-al", "pmnist-vr-samples"]
    k_of = {r.slug: r.params["mc_samples"] for r in al.rows_vr_samples(full, "pmnist")}
    assert {k_of[s] for s in q.row_names(q.PMNIST_AL[0][1])} == {2, 3, 10}
    assert q.row_names(q.PMNIST_AL[2][1]) == [
        r.slug for r in rows if r.params["method"] != "bimu" and al_methods.in_comparison(r)
        and r.params["strategy"] not in ("all", "random")]
    assert len(q.row_names(q.PMNIST_AL[2][1])) == 24
    assert q.row_names(q.PMNIST_AL[3][1]) == comparison
    assert {k_of[s] for s in q.row_names(q.PMNIST_AL[4][1])} == {2, 3, 5, 10}
    assert all(item[2] == 3 for item in q.PMNIST_AL)
    assert {("pmnist-al", s, seed) for s in comparison for seed in range(3)} <= runs
    assert {(n, None, seed) for n in ("pmnist-budget-controller", "pmnist-vr-samples", "pmnist-al")
            for seed in range(3)} <= runs
    assert len(al.rows_budget(full, "pmnist")) == 19 and len(al.rows_vr_samples(full, "pmnist")) == 41


def test_dry_run_prints_each_command_and_an_unknown_queue_is_one_line(tmp_path):
    out = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path), "--dry-run"], capture_output=True,
                         text=True, check=True, cwd=ROOT).stdout.splitlines()
    assert len(out) == len(_queue_module().PMNIST)
    assert out[0].endswith(f"-m bimu reproduce pmnist-1000 --scale full --seeds 3 --rows sgd --jobs 1 "
                           f"--threads 1 --out {tmp_path}")
    assert not (tmp_path / "runs").exists()
    bad = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path), "--queue", "gpu"], capture_output=True,
                         text=True, cwd=ROOT)
    assert bad.returncode != 0
    assert bad.stderr.strip() == ("--queue: unknown queue 'gpu'; choose from pmnist, active, mesu, pmnist-b, "
                                  "after-pmnist, pmnist-al")
    tail = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path), "--queue", "after-pmnist", "--dry-run"],
                          capture_output=True, text=True, check=True, cwd=ROOT).stdout.splitlines()
    assert len(tail) == 1 and tail[0].endswith(f"-m bimu reproduce pmnist-1000 --scale full --seeds 1 --first-seed 1 "
                                               f"--rows mesu --jobs 1 --threads 1 --out {tmp_path}")


def test_a_probe_is_a_bimu_run_kept_with_the_runs_and_mirrors_table_1s_configuration(tmp_path):
    q = _queue_module()
    probes = [item for items in q.QUEUES.values() for item in items if item[0] == "probe"]
    assert probes and len({p[1] for p in probes}) == len(probes)
    name, args = probes[0][1], probes[0][2]
    cmd = q.command(str(tmp_path), "probe", name, args)
    assert cmd[1:4] == ["-m", "bimu", "run"] and cmd[-2:] == ["--out", str(tmp_path / "runs" / "probes" / name)]
    # the options Table 1's rows were trained with (a committed run's config.json)
    import json
    cfg = json.loads((ROOT / "results/reproduce-full/runs/full/pmnist-1000/sgd/pmnist-sgd/seed-0/config.json").read_text())
    from bimu.cli import build_parser
    parsed = build_parser().parse_args(["run", *args])
    for key in ("tasks", "hidden", "eval_last_every", "eval_final"):
        assert getattr(parsed, key) == cfg[key], key


def test_a_second_queue_in_the_same_folder_is_refused_before_any_run(tmp_path):
    fd = os.open(tmp_path / ".queue.lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)  # a queue, or an item it started, still working in this folder
    try:
        bad = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path)], capture_output=True, text=True, cwd=ROOT)
    finally:
        os.close(fd)
    assert bad.returncode != 0 and bad.stdout == ""
    assert bad.stderr.strip() == (f"{tmp_path}: another queue, or a run it started, is still working here (it "
                                  f"holds {tmp_path / '.queue.lock'}); stop it first")
    assert sorted(p.name for p in tmp_path.iterdir()) == [".queue.lock"]


def test_queues_script_prints_its_usage_and_its_frozen_code_is_a_commit_here():
    script = ROOT / "scripts" / "queues.sh"
    r = subprocess.run(["bash", str(script), "no-such-command"], capture_output=True, text=True)
    assert r.returncode == 2 and "bash scripts/queues.sh start" in r.stdout
    frozen = next(line.split("=", 1)[1] for line in script.read_text().splitlines()
                  if line.startswith("PMNIST_CODE="))
    shallow = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--is-shallow-repository"],
                             capture_output=True, text=True).stdout.strip()
    if shallow == "true":
        return  # a shallow clone may lack the commit Table 1 trains with
    kind = subprocess.run(["git", "-C", str(ROOT), "cat-file", "-t", frozen], capture_output=True, text=True)
    assert kind.stdout.strip() == "commit", f"PMNIST_CODE={frozen} is not a commit of this repository"


def test_queues_status_names_each_failed_run_with_the_last_line_of_its_error(tmp_path):
    """A queue goes on after a run that failed; ``status`` lists that run with its error's last line."""
    run = tmp_path / "repro" / "runs" / "full" / "pmnist-1000" / "bayesbinn" / "pmnist-bayesbinn" / "seed-0"
    run.mkdir(parents=True)
    (run / "error.txt").write_text("Traceback (most recent call last):\n  File \"x.py\", line 1\n"
                                   "TypeError: float() argument must be a string or a real number, not 'dict'\n\n")
    (tmp_path / "mesu" / "runs" / "full" / "pmnist-1000" / "mesu" / "pmnist-mesu" / "seed-0").mkdir(parents=True)
    r = subprocess.run(["bash", str(ROOT / "scripts" / "queues.sh"), "status"], capture_output=True, text=True,
                       env={**os.environ, "QUEUE_ROOT": str(tmp_path)})
    assert r.returncode == 0
    assert [line for line in r.stdout.splitlines() if line.startswith("FAILED")] == [
        f"FAILED {run}: TypeError: float() argument must be a string or a real number, not 'dict'"]

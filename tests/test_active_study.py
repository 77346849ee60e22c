"""The study driver: job keys, resumable runs, repeated streams, summaries and figures (toy data)."""

import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from bimu.data.feature_benchmarks import ArrayBenchmark
from bimu.data.views import RepeatedStream

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
import active_study as study  # noqa: E402 - scripts/ is not a package

HP = dict(lr=10.0, lr_max=0.05, likelihood_multiplier=10.0, kl_multiplier=0.5, memory_window=1000,
          n_samples=4, n_eval_samples=4)


def toy_benchmark(n_tasks=2, n=60, d=16, c=3):
    rng = np.random.default_rng(0)
    centers = rng.normal(0, 1.5, size=(c, d))
    train, test = [], []
    for t in range(n_tasks):
        y = rng.integers(0, c, n)
        train.append(((centers[y] + rng.normal(0, 1, size=(n, d))).astype(np.float32), y))
        yt = np.repeat(np.arange(c), 10)
        test.append(((centers[yt] + rng.normal(0, 1, size=(len(yt), d))).astype(np.float32), yt))
    return ArrayBenchmark("toy", train, test, rare_classes={2})


def test_repeated_stream_and_resumable_queue(tmp_path, monkeypatch):
    b = toy_benchmark()
    r = RepeatedStream(b, 3)
    X, y = r.train_task(0, seed=1)
    X0, y0 = b.train_task(0, 1)
    assert len(y) == 3 * len(y0) and r.n_tasks == b.n_tasks and r.rare_classes == b.rare_classes
    assert torch.equal(torch.sort(y[: len(y0)]).values, torch.sort(y0).values)
    assert not torch.equal(X[: len(y0)], X[len(y0) : 2 * len(y0)])  # copies in their own orders
    assert torch.equal(r.train_task(0, seed=1)[0], X) and r.name == "toyx3"  # seeded: same order again
    assert torch.equal(r.test_task(0)[1], b.test_task(0)[1])
    for bad in (0, 1.5, True, "2"):
        with pytest.raises(ValueError, match="stream_repeats must be an integer >= 1"):
            RepeatedStream(b, bad)
    monkeypatch.setattr(study, "_bench", lambda job: b if job.get("repeat", 1) == 1 else RepeatedStream(b, 2))
    jobs = [dict(bench="toy", nf=16, seed=0, strategy="all", hp=HP, preset=None),
            dict(bench="toy", nf=16, seed=0, strategy="random", threshold=0.5, hp=HP, preset=None),
            dict(bench="toy", nf=16, seed=0, strategy="vr", threshold=0.2, K=4, hp=HP, preset=None, repeat=2)]
    study.run_jobs(jobs, tmp_path, log=lambda s: None)
    study.run_jobs(jobs, tmp_path, log=lambda s: None)  # finished jobs are skipped
    rows = study.load_rows(tmp_path)
    assert len(rows) == 3 and len({r["key"] for r in rows}) == 3
    assert rows[2]["examples_seen"] == 240 and rows[2]["key"].endswith("|repeat=2")
    summary = study.report(tmp_path)
    assert set(summary) == {"toy nf=16 test None " + ",".join(f"{k}={HP[k]}" for k in sorted(HP)),
                            "toy nf=16 test None " + ",".join(f"{k}={HP[k]}" for k in sorted(HP)) + " repeat=2"}
    md = (tmp_path / "summary.md").read_text()
    assert "100% baseline" in md and "matched accuracy" in md
    assert (tmp_path / "curves-toy.png").stat().st_size > 0 and (tmp_path / "curves-toy-x2.png").stat().st_size > 0
    json.loads((tmp_path / "summary.json").read_text())


def test_plans_are_well_formed():
    for name in ("objects-main", "objects-1024", "objects-k25-1024", "objects-budget", "objects-tune",
                 "objects-repeat6", "objects-std", "animals", 'objects-tuned:{"lr": 3}', "animals-std",
                 "animals-extra", "animals-tune", "animals-tuned:{}", "animals-8192-std", "animals-repeat4",
                 "animals-scores-repeat4"):
        jobs = study.plan(name)
        assert jobs and len({study.job_key(j) for j in jobs}) == len(jobs)


def test_animals_plans_select_what_they_name():
    tune = study.plan("animals-tune")
    assert {j["split"] for j in tune} == {"validation"} and all(j["standardize"] for j in tune)
    assert len(tune) == 2 * 3 * len(study.ANIMALS_TUNE_TRIALS)  # 2 seeds x (100%, VR 0.5, VR 0.6) x trials
    rep = study.plan("animals-repeat4", seeds=(0,))
    assert {j["repeat"] for j in rep} == {4} and "|repeat=4" in study.job_key(rep[0])
    assert {j["nf"] for j in study.plan("animals-8192-std")} == {8192}
    scores = study.plan("animals-scores-repeat4", seeds=(0,))
    assert {(j["strategy"], j["threshold"]) for j in scores} == {
        (k, t) for k, taus in study.ANIMALS_SCORE_THRESHOLDS.items() for t in taus}
    with pytest.raises(ValueError, match="unknown plan"):
        study.plan("animals-nope")


def test_one_writer_per_folder_and_rows_unique_by_key(tmp_path, monkeypatch, capsys):
    import fcntl

    row = {"key": "k", "accuracy": 0.5}
    (tmp_path / "runs.jsonl").write_text(json.dumps(row) + "\n" + json.dumps(dict(row, accuracy=0.6)) + "\n")
    assert study.load_rows(tmp_path) == [dict(row, accuracy=0.6)]  # a job written twice counts once
    with open(tmp_path / ".study.lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)  # another runner holds the folder
        with pytest.raises(RuntimeError, match="another study run is writing"):
            study.run_jobs([], tmp_path)
        assert study.main(["run", "--plan", "animals", "--out", str(tmp_path)]) == 2
        assert "another study run is writing" in capsys.readouterr().err
    assert study.main(["run", "--plan", "nope", "--out", str(tmp_path)]) == 2
    assert "unknown plan 'nope'" in capsys.readouterr().err
    study.run_jobs([], tmp_path)  # released: runs (nothing to do)


def test_runs_file_torn_last_row_is_rerun_and_a_corrupt_middle_line_is_named(tmp_path):
    path = tmp_path / "runs.jsonl"
    path.write_text('{"key": "a", "accuracy": 0.5}\n{"key": "b", "accur')  # a crash tore row b
    assert [r["key"] for r in study.load_rows(tmp_path)] == ["a"]  # b is not done: it runs again
    study.append_row(path, {"key": "c", "accuracy": 0.7})
    assert path.read_text() == '{"key": "a", "accuracy": 0.5}\n{"key": "c", "accuracy": 0.7}\n'
    study.append_row(path, {"key": "b", "accuracy": 0.6})  # appended, never rewritten
    assert [r["key"] for r in study.load_rows(tmp_path)] == ["a", "c", "b"]
    path.write_text('{"key": "a"}\nnot json\n{"key": "c"}\n')
    with pytest.raises(ValueError, match=r"runs.jsonl: line 2 is not a JSON run record"):
        study.load_rows(tmp_path)


def test_summary_is_mean_and_sample_std_with_each_seed_once():
    job = {"strategy": "random", "threshold": 0.2, "bench": "objects-ti", "nf": 1024, "split": "test",
           "preset": "p", "hp": {}}

    def row(seed, acc):
        return {"job": job, "seed": seed, "accuracy": acc, "rare_accuracy": acc, "frequent_accuracy": acc,
                "query_fraction": 0.2, "first_quarter_share": 0.25, "last_quarter_share": 0.25,
                "labels_queried": 10}

    # seed 0 recorded twice (a job run twice): counted once; sample std of 0.30, 0.40 = 0.0707 (ddof=1)
    [setting] = study.summarize([row(0, 0.30), row(0, 0.30), row(1, 0.40)]).values()
    [p] = setting["points"]
    assert p["n_seeds"] == 2 and p["seeds"] == [0, 1]
    assert p["accuracy"] == pytest.approx(0.35) and p["accuracy_std"] == pytest.approx(0.0707107, abs=1e-6)
    [p] = next(iter(study.summarize([row(3, 0.5)]).values()))["points"]
    assert p["accuracy_std"] == 0.0  # one seed

"""The reproductions beyond the 100-hidden-unit Permuted-MNIST tables: quick-scale smoke runs of each
entry (tables, figures, manifest, paper column equal to the paper's .tex), runs reused, --jobs side by
side with a failing and a crashing job, the results page, benchmark options and the figures' helpers."""

import csv
import json
import math
import os
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from bimu.cli import REPRODUCTIONS, main
from bimu import paper
from bimu.experiments.config import RunConfig
from bimu.experiments.parallel import Job, check_jobs, run_jobs
from bimu.reproduce import active_learning, entries, features, figures, pmnist, spec
from bimu.rundir import RunDir, seed_dir

PAPER_TEX = Path(os.environ.get("BIMU_PAPER_TEX", Path(__file__).resolve().parents[1] / ".." / ".." / "shared"
                                / "paper" / "bimu-paper.tex"))
if not PAPER_TEX.is_file():
    PAPER_TEX = Path("/work/shared/paper/bimu-paper.tex")

DATA = os.environ.get("BIMU_DATA_DIR")
needs_mnist = pytest.mark.skipif(not DATA, reason="BIMU_DATA_DIR is not set (needs MNIST and Fashion-MNIST)")
needs_tiny = pytest.mark.skipif(not DATA or not (Path(DATA) / "tiny-imagenet").is_dir(),
                                reason="needs the Tiny-ImageNet folders of BIMU_DATA_DIR (feature stand-ins)")
needs_tex = pytest.mark.skipif(not PAPER_TEX.is_file(), reason="the paper's .tex is not available")

NEW_RUN_ENTRIES = {  # name -> (needs, expected label rows at quick scale, figure suffixes)
    "pmnist-2000-neurons": ("mnist", [["BiMU"], ["SGD"]], ["accuracy-per-task"]),
    "bwt": ("both", None, ["accuracy-per-task"]),
    "openloris": ("tiny", [["BiMU", "1 024"], ["SGD", "1 024"]], ["accuracy-per-task"]),
    "standardisation": ("tiny", [["BiMU"], ["SGD"]], []),
    "animals-al": ("tiny", None, ["accuracy-vs-queried"]),
    "openloris-al": ("tiny", None, ["accuracy-vs-queried"]),
    "vr-samples": ("tiny", None, []),
    "budget-controller": ("tiny", None, []),
    "query-dynamics": ("tiny", None, []),
    "animals-vr-samples": ("tiny", [["Baseline", "-"], *[[str(k), "0.50" if k == 2 else f"{1 / k:.2f}"]
                                                         for k in (2, 3, 5, 10, 25)]], []),
    "animals-budget-controller": ("tiny", [["Random querying", "Full stream"], ["Budgeted VR", "B=3.0%, gamma=0.50"],
                                           ["Budgeted VR", "B=3.0%, gamma=0.10"]], []),
    "learning-rate-map": ("none", None, []),
}


def _skip_unless(needs):
    if needs in ("mnist", "both") and not DATA:
        pytest.skip("BIMU_DATA_DIR is not set")
    if needs in ("tiny", "both") and (not DATA or not (Path(DATA) / "tiny-imagenet").is_dir()):
        pytest.skip("no Tiny-ImageNet folders in BIMU_DATA_DIR")


FUSED = {"pmnist-2000-neurons", "bwt", "memory-window"}  # BiMU with 2000 hidden units is slow on torch
OPENLORIS_ENTRIES = {"openloris", "standardisation", "bwt", "openloris-al", "vr-samples", "budget-controller",
                     "query-dynamics"}
"""Entries on the OpenLORIS stand-in: smoke-tested here on objects-ti (a few seconds to load; the default
objects-seq is tested on a generated fixture in test_reproduce_active_methods.py)."""


def _quick(name, out, *extra):
    engine = "auto" if name in FUSED else "torch"
    bench = ["--benchmark", "objects-ti"] if name in OPENLORIS_ENTRIES and "--benchmark" not in extra else []
    return main(["reproduce", name, "--scale", "quick", "--engine", engine, "--seeds", "1", "--out", str(out),
                 "--jobs", "1", *bench, *extra])


def _read(out, name):
    md, cs, tex = (out / f"{name}.{ext}" for ext in ("md", "csv", "tex"))
    assert md.is_file() and cs.is_file() and tex.is_file()
    rows = list(csv.reader(cs.open()))
    return md.read_text(), rows[0], rows[1:], tex.read_text()


def _norm(text: str) -> str:
    for a in ("\\textbf{", "\\mathbf{", "$", "{", "}", " ", "\\,"):
        text = text.replace(a, "")
    return text.replace("\\pm", "±")


def _in_paper(cell: str, tex_norm: str) -> bool:
    """A paper cell is in the .tex: a 'a ± b' cell as such, otherwise each of its numbers."""
    if cell in ("-", ""):
        return True
    if "±" in cell and " at " not in cell and "(" not in cell:
        return _norm(cell) in tex_norm
    return all(num in tex_norm for num in re.findall(r"-?\d+\.\d+", cell))


@pytest.fixture(scope="module")
def quick_out(tmp_path_factory):
    """One quick-scale output folder shared by the tests of this module (each name runs once)."""
    return tmp_path_factory.mktemp("repro-quick")


def test_every_new_name_is_registered():
    for name in NEW_RUN_ENTRIES:
        assert name in entries.ENTRIES and REPRODUCTIONS[name] == "reproduce"
    assert entries.ENTRIES["memory-window"].figures is figures.probability_histograms_figure


@pytest.mark.parametrize("name", list(NEW_RUN_ENTRIES))
def test_quick_entry(name, quick_out):
    needs, labels, figs = NEW_RUN_ENTRIES[name]
    _skip_unless(needs)
    assert _quick(name, quick_out) == 0
    md, header, rows, tex = _read(quick_out, name)
    assert rows and all(len(r) == len(header) for r in rows)
    if labels is not None:
        assert [r[:len(labels[0])] for r in rows] == labels
    if name != "learning-rate-map":
        assert any(h.startswith("Paper") for h in header) and "Paper" in tex
        assert "[quick]" in md and "not comparable" in md
    # our numeric cells are finite numbers; every row has at least one
    paper_cols = {i for i, h in enumerate(header) if h.startswith("Paper")}
    for r in rows:
        if r[-1].endswith("(diverged)"):  # e.g. MESU's Animals preset on animals-ti's raw features: no numbers
            continue
        ours = [c for i, c in enumerate(r) if i not in paper_cols and re.fullmatch(r"-?\d+(\.\d+)?( ± \d+\.\d+)?", c)]
        assert ours, r
        assert all(math.isfinite(float(c.split(" ± ")[0])) for c in ours)
    for suffix in figs:
        png = quick_out / f"{name}-{suffix}.png"
        assert png.is_file() and png.stat().st_size > 1000
    manifest = json.loads((quick_out / f"{name}.json").read_text())
    assert manifest["name"] == name and manifest["scale"] == "quick" and manifest["seeds"] == [0]
    assert manifest["command"].startswith(f"bimu reproduce {name} --scale quick --seeds 1")
    assert manifest["table"]["header"] == header
    if needs == "tiny":
        assert "stand-in" in md.lower() and any(d["status"].startswith("stand-in") for d in manifest["data"])


@needs_tex
@pytest.mark.parametrize("table", ["PMNIST_2000", "BWT_PMNIST", "BWT_OPENLORIS", "OPENLORIS", "STANDARDISED",
                                   "TABLE1", "MEMORY_WINDOW", "ACTIVATION"])
def test_paper_numbers_match_the_tex(table):
    tex = _norm(PAPER_TEX.read_text())
    cells = [c for v in getattr(paper, table).values() for c in paper.cells(v).values()]
    assert cells and all(_in_paper(c, tex) for c in cells), [c for c in cells if not _in_paper(c, tex)]


@needs_tex
def test_active_paper_numbers_match_the_tex():
    tex = _norm(PAPER_TEX.read_text())
    cells = [c for t in (paper.BUDGET, paper.QUERY_DYNAMICS, paper.QUERY_DYNAMICS_ACCURACY) for v in t.values()
             for c in paper.cells(v).values()]
    cells += [c for rows in paper.VR_SAMPLES.values() for _, row in rows for c in paper.cells(row).values()]
    cells += list(active_learning.paper_points(paper.ANIMALS_AL_BASELINE, paper.ANIMALS_VR_POINTS).values())
    cells += list(active_learning.paper_points(paper.OPENLORIS_AL_BASELINE, paper.OPENLORIS_VR_POINTS).values())
    assert all(_in_paper(c, tex) for c in cells), [c for c in cells if not _in_paper(c, tex)]
    assert len(paper.BUDGET) == 18 and len(paper.QUERY_DYNAMICS) == len(paper.QUERY_DYNAMICS_ACCURACY) == 13
    # every vote threshold of the paper's K ablation maps to its merged row
    assert active_learning.paper_vr_samples(5, 3) == ("80.86 ± 1.90", "1.47 ± 0.16")
    assert active_learning.paper_vr_samples(25, 2) == ("-", "-")


@needs_tiny
def test_paper_cells_in_quick_tables(quick_out):
    for name in ("openloris", "vr-samples", "budget-controller", "query-dynamics"):
        if not (quick_out / f"{name}.csv").is_file():
            assert _quick(name, quick_out) == 0
    _, header, rows, _ = _read(quick_out, "openloris")
    assert rows[0][3] == "73.61 ± 1.53" and rows[1][3] == "62.31 ± 1.80" and rows[1][7] == "-"
    _, header, rows, _ = _read(quick_out, "vr-samples")
    assert [r[0] for r in rows] == ["Baseline", "2", "3", "5", "10", "25"]
    assert rows[4][3] == "90.91 ± 0.98" and rows[0][3] == "87.76 ± 0.19"
    _, header, rows, _ = _read(quick_out, "budget-controller")
    assert rows[1][1] == "B=3.0%, gamma=0.50" and rows[1][3] == "3.96 ± 0.03" and rows[1][5] == "90.79 ± 0.61"
    _, header, rows, _ = _read(quick_out, "query-dynamics")
    assert [r[0] for r in rows] == ["Task 1", "Task 2", "Average"]
    assert header[1:3] == ["Acc@0 (%)", "Paper"] and header[11] == "Updates 0-24 (%)"
    assert rows[-1][2] == "13.12 ± 5.29" and rows[-1][10] == "89.48 ± 4.10" and rows[-1][12] == "45.85 ± 9.70"
    shares = [float(r[i]) for r in rows[:-1] for i in (11, 13, 15)]
    assert all(0 <= v <= 100 for v in shares) and abs(sum(shares[:3]) - 100) < 0.02
    accuracies = [float(r[i]) for r in rows[:-1] for i in (1, 3, 5, 7, 9)]
    assert all(0 <= v <= 100 for v in accuracies)


@needs_tiny
def test_active_runs_are_reused_and_deterministic(tmp_path, quick_out):
    assert _quick("query-dynamics", tmp_path) == 0
    res = sorted((tmp_path / "runs").rglob("result.json"))
    assert len(res) == 1
    before = res[0].stat().st_mtime_ns

    def no_data(setup, opts):
        raise AssertionError("every run is complete: no data set is loaded")

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(active_learning, "load_benchmark", no_data)
        assert _quick("query-dynamics", tmp_path) == 0
    assert res[0].stat().st_mtime_ns == before  # reused, not rerun
    other = next((quick_out / "runs" / "quick" / "query-dynamics").rglob("result.json"), None)
    if other is not None:  # same seed, same configuration: the same result
        assert json.loads(other.read_text()) == json.loads(res[0].read_text())
    # a directory holding another configuration is refused, with a clear message
    cfg = res[0].with_name("config.json")
    d = json.loads(cfg.read_text())
    d["mc_samples"] = 3
    cfg.write_text(json.dumps(d))
    res[0].unlink()
    assert _quick("query-dynamics", tmp_path) == 1


@needs_tiny
def test_a_run_table_whose_runs_are_complete_loads_no_data(tmp_path, monkeypatch, capsys):
    from bimu.experiments import runner

    assert _quick("standardisation", tmp_path, "--rows", "bimu") == 0
    first = capsys.readouterr().out

    def no_data(config, seed):
        raise AssertionError("the data were loaded")

    monkeypatch.setattr(runner, "make_benchmark", no_data)
    assert _quick("standardisation", tmp_path, "--rows", "bimu") == 0
    assert capsys.readouterr().out == first  # the same table, read back from the runs
    monkeypatch.undo()
    assert _quick("standardisation", tmp_path, "--rows", "bimu", "--seeds", "2") == 0  # seed 1 to run: loads
    assert sorted(p.parent.name for p in (tmp_path / "runs").rglob("summary.json")) == ["seed-0", "seed-1"]


@needs_tiny
def test_query_dynamics_on_a_repeated_stream(tmp_path, capsys):
    assert _quick("query-dynamics", tmp_path, "--stream-repeats", "2") == 0
    res = next((tmp_path / "runs").rglob("result.json"))
    assert json.loads(res.with_name("config.json").read_text())["benchmark_options"]["stream_repeats"] == 2
    # quick scale: 2 tasks of 60 examples, each streamed twice
    assert json.loads(res.read_text())["examples_seen"] == 2 * 2 * 60
    assert "[stream x2]" in (tmp_path / "query-dynamics.md").read_text()
    assert "--stream-repeats 2" in json.loads((tmp_path / "query-dynamics.json").read_text())["command"]
    capsys.readouterr()
    assert _quick("memory-window", tmp_path, "--stream-repeats", "2") == 2
    assert "--stream-repeats applies to the active-learning entries" in capsys.readouterr().err
    assert _quick("query-dynamics", tmp_path, "--stream-repeats", "0") == 2
    assert "--stream-repeats must be an integer >= 1, got 0" in capsys.readouterr().err


@needs_tiny
def test_rows_option_runs_only_the_named_rows(tmp_path, capsys):
    assert _quick("animals-al", tmp_path, "--rows", "bimu-all", "bimu-vr-0.1") == 0
    ran = sorted(p.parent.parent.name for p in (tmp_path / "runs").rglob("result.json"))
    assert ran == ["bimu-all", "bimu-vr-0.1"]
    md = (tmp_path / "animals-al.md").read_text()
    assert "--rows bimu-all bimu-vr-0.1: the rows" in md and "were not run by this command" in md
    assert "--rows bimu-all bimu-vr-0.1" in json.loads((tmp_path / "animals-al.json").read_text())["command"]
    capsys.readouterr()
    assert _quick("animals-al", tmp_path, "--rows", "nope") == 2
    assert "--rows: animals-al has no row 'nope'; its rows: bimu-all, bimu-vr-" in capsys.readouterr().err


def test_active_learning_rows_run_on_the_engine_asked_for(tmp_path, monkeypatch):
    """--engine reaches each active-learning run (animals-al --engine torch trains with torch) and is
    recorded in its config.json; --engine auto records none, so earlier auto runs are reused."""
    import bimu.experiments.sweep as sweep

    asked = []

    def spy(benchmark, seed, **kw):
        asked.append(kw["engine"])
        return {"seed": seed, "engine": kw["engine"], "accuracy": 0.5, "rare_accuracy": 0.4,
                "frequent_accuracy": 0.6, "query_fraction": 1.0}

    monkeypatch.setattr(sweep, "run_stream", spy)
    monkeypatch.setattr(active_learning, "load_benchmark", lambda setup, opts: None)
    for engine in ("torch", "fused", "auto"):
        out = tmp_path / engine
        assert main(["reproduce", "animals-al", "--scale", "quick", "--engine", engine, "--seeds", "1", "--out",
                     str(out), "--jobs", "1", "--rows", "bimu-all"]) == 0
        cfg = json.loads(next(out.rglob("config.json")).read_text())
        assert cfg.get("engine") == (None if engine == "auto" else engine)
    assert asked == ["torch", "fused", "auto"]


@needs_tiny
def test_animals_al_on_the_torch_engine(tmp_path):
    assert _quick("animals-al", tmp_path, "--rows", "bimu-all") == 0  # _quick asks for --engine torch
    res = next((tmp_path / "runs").rglob("result.json"))
    assert json.loads(res.read_text())["engine"] == "torch"
    assert json.loads(res.with_name("config.json").read_text())["engine"] == "torch"


def test_rows_option_on_a_run_table(tmp_path, capsys):
    assert _quick("pmnist-1000", tmp_path, "--rows", "bimux") == 2
    assert "--rows: pmnist-1000 has no row 'bimux'; its rows: bimu, sgd" in capsys.readouterr().err
    assert not (tmp_path / "runs").exists()  # refused before any run


def test_feature_entries_reject_a_wrong_benchmark(tmp_path, capsys):
    assert _quick("animals-al", tmp_path, "--benchmark", "objects-ti") == 2
    assert "animals-ti or animals" in capsys.readouterr().err


def test_full_scale_rows_follow_the_paper():
    opts = spec.Options(seeds=(0, 1, 2, 3, 4))
    t = pmnist.rows_pmnist_2000(opts)
    assert [r.config.method for r in t] == list(paper.METHOD_ORDER)
    assert all(r.config.hidden == (2000,) and r.config.tasks == 1000 and r.config.train_limit is None for r in t)
    assert t[0].config.resolve_hparams()[0] == "pmnist-2000"
    o = features.rows_openloris(opts)
    assert len(o) == 24 and [r.config.benchmark_options["n_features"] for r in o[:3]] == [1024, 8192, None]
    assert o[1].config.preset == "openloris-8192" and o[1].config.tasks is None
    b = features.rows_bwt(opts)
    assert [r.config.eval_final for r in b[:4]] == ["all"] * 4 and len(b) == 12
    # the OpenLORIS rows are Table 2's all-features runs (the paper's two tables share their mean accuracies)
    assert [r.same_runs_as for r in b[4:]] == [("openloris", f"{m}-full") for m in paper.METHOD_ORDER]
    s = features.rows_standardisation(opts)
    assert all(r.config.benchmark_options == {"n_features": 8192, "standardize": True} for r in s)
    assert all(r.config.preset == "openloris-8192-std" for r in s)
    v = active_learning.rows_vr_samples(opts)
    assert len(v) == 1 + sum(k - 1 for k in active_learning.VR_SAMPLES)
    assert len(active_learning.rows_budget(opts)) == 19
    assert features.feature_benchmark(spec.Options(benchmark="openloris")) == "openloris"
    assert features.feature_benchmark(opts) == "objects-seq" and s[0].config.benchmark == "objects-seq"


# ------------------------------------------------------------------------------------ parallel jobs
def _ok(path):
    Path(path).write_text("done")
    return 0


def _boom():
    raise RuntimeError("injected")


def _crash():
    os._exit(7)


def test_run_jobs_isolates_failures_and_crashes(tmp_path):
    jobs = [Job("a", _ok, (tmp_path / "ok-1",)), Job("b", _boom), Job("c", _crash), Job("d", _ok, (tmp_path / "ok-2",))]
    logs = []
    codes = run_jobs(jobs, n=2, log=logs.append)
    assert codes == {"a": 0, "b": 1, "c": 1, "d": 0}
    assert (tmp_path / "ok-1").is_file() and (tmp_path / "ok-2").is_file()
    assert any("c FAILED (exit code 7)" in s for s in logs)
    assert run_jobs([Job("x", _boom)], n=1, log=logs.append) == {"x": 1}
    with pytest.raises(ValueError, match="--jobs"):
        check_jobs(0)
    with pytest.raises(ValueError, match="unique"):
        run_jobs([Job("a", _boom), Job("a", _boom)])


def _fake_entry(name, seeds):
    cfg = RunConfig.from_dict(dict(benchmark="fake-test", tasks=2, seeds=list(seeds), ood=True, ood_every=0))
    return spec.Entry(name, "fake", ("Row",), ("acc", "bwt"),
                    lambda opts: [spec.Row(["r"], "r", cfg.replace(seeds=list(opts.seeds)), {"acc": "1.00"})])


@pytest.mark.parametrize("jobs", [1, 2])
def test_reproduce_jobs_keep_the_good_runs(tmp_path, monkeypatch, jobs):
    import test_runner_fakes  # noqa: F401 - registers the fake-test benchmark (seed 13 fails)

    monkeypatch.setitem(entries.ENTRIES, "fake-jobs", _fake_entry("fake-jobs", (0, 13, 1)))
    opts = spec.Options(seeds=(0, 13, 1), scale="quick", out=str(tmp_path), engine="torch", jobs=jobs)
    table, paths, code = entries.reproduce("fake-jobs", opts, log=lambda s: None)
    assert code == 1
    base = tmp_path / "runs" / "quick" / "fake-jobs" / "r"
    for s in (0, 1):
        assert RunDir(seed_dir(base, "fake-test", "bimu", s)).exists("summary.json")
    bad = RunDir(seed_dir(base, "fake-test", "bimu", 13))
    assert "injected failure" in bad.file("error.txt").read_text() and not bad.exists("summary.json")
    assert table.rows[0][-1] == "0,1"  # the seeds that completed
    assert json.loads(paths["manifest"].read_text())["exit_code"] == 1


def test_parallel_and_serial_give_the_same_numbers(tmp_path, monkeypatch):
    import test_runner_fakes  # noqa: F401

    monkeypatch.setitem(entries.ENTRIES, "fake-par", _fake_entry("fake-par", (0, 1)))
    tables = []
    for jobs in (1, 2):
        opts = spec.Options(seeds=(0, 1), scale="quick", out=str(tmp_path / f"j{jobs}"), engine="torch", jobs=jobs)
        tables.append(entries.reproduce("fake-par", opts, log=lambda s: None)[0].rows)
    assert tables[0] == tables[1] and tables[0][0][1] not in ("-", "n/a")


# ------------------------------------------------------------------------------------ results page
def test_results_page_from_manifests(tmp_path, quick_out):
    if not (quick_out / "learning-rate-map.json").is_file():
        assert _quick("learning-rate-map", quick_out) == 0
    page = tmp_path / "docs" / "results.md"
    assert main(["report", "--results-page", str(page), str(quick_out)]) == 0
    text = page.read_text()
    assert "`bimu reproduce learning-rate-map --scale quick --seeds 1" in text
    assert "- scale: quick (smoke test" in text and "- seeds: 0 (1 seed)" in text
    assert "learning-rate-map.png)" in text and "| lambda | dL/dlambda | eta |" in text
    assert "Studies kept outside these tables: `docs/active-learning.md`" in text
    root = Path(__file__).resolve().parents[1]
    pointers = text.split("Studies kept outside these tables:")[1].split("\n")[0]
    for study_path in re.findall(r"`([\w./-]+\.md)`", pointers):
        assert (root / study_path).is_file(), study_path  # every pointer names a file of the repository
    if (quick_out / "openloris.json").is_file():
        assert "objects-ti (stand-in for openloris)" in text and "Stand-in data" in text
    assert main(["report", "--results-page", str(page), str(tmp_path / "missing")]) == 2
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["report", "--results-page", str(page), str(empty)]) == 2


# ------------------------------------------------------------------------------------ data and figures
def test_benchmark_options_roundtrip_and_errors(tmp_path):
    c = RunConfig.from_dict({"benchmark": "fake-test"})
    assert "benchmark_options" not in c.to_dict()  # old run directories keep resuming
    c2 = c.replace(benchmark_options={"n_features": 8})
    assert c2.to_dict()["benchmark_options"] == {"n_features": 8}
    with pytest.raises(ValueError, match="benchmark_options"):
        RunConfig.from_dict({"benchmark_options": [1]})
    import test_runner_fakes  # noqa: F401
    from bimu.experiments.runner import make_benchmark

    with pytest.raises(ValueError, match="takes no option 'n_features'"):
        make_benchmark(c2, 0)
    std = make_benchmark(c.replace(benchmark_options={"standardize": True}), 0)
    x = torch.cat([std.train_task(t, 0)[0] for t in range(std.n_tasks)])
    assert torch.allclose(x.mean(0), torch.zeros(x.shape[1]), atol=1e-4)
    assert torch.allclose(x.std(0, unbiased=False), torch.ones(x.shape[1]), atol=1e-3)
    assert std.ood_set().shape[1] == x.shape[1] and std.name.endswith("[standardized]")


def test_limited_view_spreads_the_test_set():
    from bimu.data.views import LimitedBenchmark

    class B:
        name, n_features, n_classes, n_tasks, is_standin = "b", 1, 3, 5, True

        def train_task(self, t, seed):
            return torch.zeros(9, 1), torch.arange(9) % 3

        def test_task(self, t):
            return torch.zeros(9, 1), torch.arange(9) // 3  # sorted by class

        def ood_set(self):
            return torch.zeros(9, 1)

    v = LimitedBenchmark(B(), n_tasks=2, train_limit=4, test_limit=3)
    assert v.n_tasks == 2 and len(v.train_task(0, 0)[1]) == 4
    assert v.test_task(0)[1].tolist() == [0, 1, 2] and len(v.ood_set()) == 3
    with pytest.raises(ValueError):
        LimitedBenchmark(B(), train_limit=0)


def test_lambdas_of_torch_and_fused_states():
    from bimu.methods import create_method
    from bimu.report.plots import lambdas_of

    m = create_method("bimu", [4, 3, 2], 0)
    lam = lambdas_of(m.state_dict())
    assert lam.shape == (4 * 3 + 3 * 2,)
    np.testing.assert_allclose(np.sort(lam), np.sort(np.concatenate(
        [p.detach().numpy().ravel() for p in m.model.parameters()])))
    from bimu.engine import create_fused

    f = create_fused("bimu", [4, 3, 2], 0, {})
    assert lambdas_of(f.state_dict()).shape == (18,)
    with pytest.raises(ValueError, match="no lambda"):
        lambdas_of(create_method("sgd", [4, 2], 0).state_dict())


def test_figures(tmp_path):
    from bimu.optim.bimu import bimu_learning_rate
    from bimu.report.plots import (learning_rate_grid, plot_accuracy_vs_queried, plot_learning_rate_map,
                                   plot_probability_histograms)

    lam, g, eta = learning_rate_grid(lr_max=0.5, likelihood_multiplier=2.0, kl_multiplier=3.0, n=7)
    ref = bimu_learning_rate(torch.tensor(lam[2]), torch.tensor(g[5]), 0.5, 2.0, 3.0)
    assert eta.shape == (7, 7) and abs(eta[5, 2] - float(ref)) < 1e-12 and eta.max() <= 0.5
    plot_learning_rate_map(tmp_path / "lr.png")
    plot_probability_histograms({"N = 100": np.zeros(10), "BayesBiNN": np.ones(10) * 5}, tmp_path / "h.png")
    plot_accuracy_vs_queried({"VR": [{"query_fraction": 0.1, "accuracy": 0.5, "rare_accuracy": 0.2,
                                      "frequent_accuracy": 0.7}]}, tmp_path / "q.png",
                             baseline={"accuracy": 0.6, "rare_accuracy": 0.3, "frequent_accuracy": 0.8})
    for path in (tmp_path / "lr.png", tmp_path / "h.png", tmp_path / "q.png"):
        assert path.is_file() and path.stat().st_size > 1000
    assert not list(tmp_path.glob(".*tmp*"))  # written atomically, no temporary left


@needs_mnist
def test_memory_window_gets_the_probability_histograms(tmp_path):
    assert main(["reproduce", "memory-window", "--scale", "quick", "--seeds", "1", "--out", str(tmp_path),
                 "--jobs", "2"]) == 0
    png = tmp_path / "memory-window-probabilities.png"
    assert png.is_file() and png.stat().st_size > 1000

"""A new user's first hours: callbacks and sinks in fit_stream, the thread default, labels the stream never
trains, method names as the paper writes them, bimu list / status / demo / tune --help, MMRR at its cap,
StreamResult in pandas and notebooks, the README's example, and torch.compile on the training forward."""

import argparse
import re
from pathlib import Path

import numpy as np
import pytest
import torch

import bimu
import test_runner_fakes  # noqa: F401 - registers the fake-test benchmark
from bimu import cli
from bimu.experiments.config import RunConfig

ROOT = Path(__file__).resolve().parents[1]


def tiny_stream(n_train=(20, 16, 12), n_test=10, seed=0):
    """Three 2-class tasks of 6 features (the label is the sign of a task's own feature)."""
    rng = np.random.default_rng(seed)

    def task(t, n):
        x = rng.normal(size=(n, 6)).astype(np.float32)
        return x, (x[:, t] > 0).astype(np.int64)

    return [task(t, n) for t, n in enumerate(n_train)], [task(t, n_test) for t in range(len(n_train))]


class Recorder:
    def __init__(self):
        self.steps, self.ends, self.threads = [], [], set()

    def on_step(self, info):
        self.steps.append((info.task, info.step, info.global_step, info.asked))
        self.threads.add(torch.get_num_threads())

    def on_task_end(self, info):
        self.ends.append((info.task, info.n_tasks, info.record["acc"], info.accuracy.copy()))


# ------------------------------------------------------------------ 1. callbacks and log_to in fit_stream
@pytest.mark.parametrize("engine", ["fused", "torch"])
@pytest.mark.parametrize("active", [None, "vr"])
def test_callbacks_leave_the_results_unchanged_and_are_called_once_per_step_and_task(engine, active):
    train, test = tiny_stream()
    kw = dict(method="bimu", hidden=[8], engine=engine, active=active, threshold=0.2 if active else None)
    plain = bimu.fit_stream(train, test, **kw)
    rec = Recorder()
    watched = bimu.fit_stream(train, test, callbacks=[rec], **kw)
    assert watched.engine == engine
    np.testing.assert_array_equal(watched.accuracy, plain.accuracy)
    assert watched.summary.get("active") == plain.summary.get("active")
    # every example is a step (batch size 1), numbered from 1 within its task and over the stream
    expected = [(t, i + 1) for t, (_, y) in enumerate(train) for i in range(len(y))]
    assert [(t, s) for t, s, _, _ in rec.steps] == expected
    assert [g for _, _, g, _ in rec.steps] == list(range(1, len(expected) + 1))
    asked = [a for *_, a in rec.steps]
    if active:
        assert sum(asked) == watched.summary["active"]["labels_queried"]
    else:
        assert set(asked) == {None}
    assert [(t, n) for t, n, _, _ in rec.ends] == [(0, 3), (1, 3), (2, 3)]
    assert [a for _, _, a, _ in rec.ends] == [watched.accuracy[t, t] for t in range(3)]
    np.testing.assert_array_equal(rec.ends[-1][3], watched.accuracy)


def test_a_step_is_one_update_of_batch_size_examples_and_task_end_alone_needs_no_on_step():
    train, test = tiny_stream()

    class EndsOnly:
        def __init__(self):
            self.tasks = []

        def on_task_end(self, info):
            self.tasks.append(info.task)

    rec, ends = Recorder(), EndsOnly()
    bimu.fit_stream(train, test, method="sgd", hidden=[8], engine="torch", batch_size=8, callbacks=[rec, ends])
    assert [s for t, s, _, _ in rec.steps if t == 0] == [1, 2, 3]  # 20 examples, 8 a step
    assert len(rec.steps) == 3 + 2 + 2 and ends.tasks == [0, 1, 2]


def test_run_stream_takes_callbacks_too():
    from bimu.experiments.stream import run_stream
    from test_runner_fakes import FakeBenchmark

    rec = Recorder()
    method = bimu.create_method("sgd", [6, 3], seed=0, engine="torch")
    res = run_stream(FakeBenchmark(n_tasks=2), method, seed=0, progress=False, callbacks=[rec])
    assert len(rec.steps) == 2 * 24 and [e[0] for e in rec.ends] == [0, 1]
    assert rec.ends[1][2] == res["R"][1, 1]


def test_a_callback_without_the_methods_is_refused_before_training():
    train, test = tiny_stream()
    with pytest.raises(TypeError, match="on_step"):
        bimu.fit_stream(train, test, method="sgd", hidden=[8], engine="torch", callbacks=[print])


def test_fit_stream_log_to_csv_writes_log_dir_metrics(tmp_path):
    import csv

    train, test = tiny_stream()
    res = bimu.fit_stream(train, test, method="sgd", hidden=[8], engine="torch", log_to="csv", log_dir=tmp_path)
    with open(tmp_path / "metrics.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [float(r["acc"]) for r in rows] == [res.accuracy[t, t] for t in range(3)]
    with pytest.raises(ValueError, match="log_to csv writes its files into a folder: pass log_dir"):
        bimu.fit_stream(train, test, method="sgd", hidden=[8], engine="torch", log_to=["csv"])
    with pytest.raises(ValueError, match="log_to"):
        bimu.fit_stream(train, test, method="sgd", hidden=[8], engine="torch", log_to=["wandb"])


# ------------------------------------------------------------------ 2. the thread default
@pytest.mark.parametrize("engine", ["torch", "fused"])
@pytest.mark.parametrize("threads,outside", [(1, 2), (2, 1)])
def test_fit_stream_runs_on_the_threads_asked_and_restores_torchs_count(engine, threads, outside):
    train, test = tiny_stream()
    before = torch.get_num_threads()
    torch.set_num_threads(outside)
    try:
        rec = Recorder()
        bimu.fit_stream(train, test, method="sgd", hidden=[8], engine=engine, threads=threads, callbacks=[rec])
        assert rec.threads == {threads}
        assert torch.get_num_threads() == outside

        class Boom:
            def on_step(self, info):
                raise RuntimeError("stop")

        with pytest.raises(RuntimeError, match="stop"):
            bimu.fit_stream(train, test, method="sgd", hidden=[8], engine=engine, threads=threads, callbacks=[Boom()])
        assert torch.get_num_threads() == outside
    finally:
        torch.set_num_threads(before)


# ------------------------------------------------------------------ 4. test labels the stream never trains
def test_test_labels_outside_the_training_classes_are_refused_naming_the_file_and_labels(tmp_path):
    from bimu.data.own import load_npz

    train, test = tiny_stream()
    x, y = np.concatenate([t[0] for t in train]), np.concatenate([t[1] for t in train])
    xt, yt = np.concatenate([t[0] for t in test]), np.concatenate([t[1] for t in test])
    path = tmp_path / "shifted.npz"
    np.savez(path, x_train=x, y_train=y, x_test=xt, y_test=yt + 1)  # y_test shifted by one
    with pytest.raises(ValueError) as e:
        load_npz(path)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(f"{path}: y_test: label(s) 2 never occur in y_train (its labels: 0, 1)")
    with pytest.raises(ValueError, match=r"^y_test: label\(s\) 2 never occur in y_train"):
        bimu.fit_stream((x, y), (xt, yt + 1), method="sgd", hidden=[8], engine="torch")


# ------------------------------------------------------------------ 5. the command line and the package
def test_method_names_in_any_case_or_as_the_paper_writes_them(tmp_path, capsys):
    assert [RunConfig.from_dict({"method": m}).method for m in ("BiMU", "MESU", "Online EWC", "Syn. Meta.", "sgd")] \
        == ["bimu", "mesu", "ewc-online", "synaptic-metaplasticity", "sgd"]
    with pytest.raises(ValueError, match=r"unknown method 'Adam'; available: \[.*'bimu'.*\] \(in any letter case, "
                                         r"or as the paper names them: .*BiMU"):
        RunConfig.from_dict({"method": "Adam"}).validate()
    assert cli.main(["run", "fake-test", "--method", "BiMU", "--tasks", "1", "--engine", "torch", "--no-progress",
                     "--out", str(tmp_path)]) == 0
    assert (tmp_path / "fake-test-bimu" / "seed-0" / "summary.json").is_file()


def test_dir_of_the_package_lists_its_lazy_names():
    assert {"fit_stream", "create_method", "__version__"} <= set(dir(bimu))


def test_status_of_a_file_is_a_one_line_error(tmp_path, capsys):
    f = tmp_path / "summary.json"
    f.write_text("{}")
    assert cli.main(["status", str(f)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and f"{f} is a file" in err


def test_bimu_list_has_a_section_each(capsys):
    assert cli.main(["list"]) == 0
    out = capsys.readouterr().out
    heads = [line.split(" (")[0] for line in out.splitlines() if line and not line.startswith(" ")]
    assert heads == ["methods", "presets", "benchmarks", "reproductions"]
    for name in ("  bimu ", "  pmnist ", "  pmnist-1000 ", "  compute-cost "):
        assert name in out
    assert re.search(r"^  bimu +BiMU$", out, re.M) and re.search(r"^  mesu +.*pmnist-100", out, re.M)


def test_tune_help_says_each_default_once_in_plain_text():
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    text = sub.choices["tune"].format_help()
    flat = " ".join(text.split())
    assert "``" not in text and ":mod:" not in text
    assert "(default: None)" not in flat and "(default: False)" not in flat
    assert not re.search(r"\(default[^()]*\) \(default: ", flat)
    assert "(default: 200)" in flat  # a default the help did not say is still added


def test_mmrr_at_its_cap_is_printed_as_the_reproduction_tables_print_it(tmp_path):
    from bimu.metrics import MMRR_CAP_TEXT, MMRR_EPS
    from bimu.report.tables import group_runs, load_run, markdown_table
    from bimu.reproduce.runtable import MMRR_CAP
    from bimu.rundir import RunDir, seed_dir

    assert MMRR_CAP_TEXT == MMRR_CAP
    for seed in (0, 1):
        rd = RunDir(seed_dir(tmp_path, "fake-test", "bimu", seed))
        rd.write_json("config.json", {"benchmark": "fake-test", "method": "bimu", "tasks": 2, "hidden": []})
        rd.write_metrics([{"task": t, "acc": 1.0, "steps": 1, "train_seconds": 1.0, "eval_seconds": 0.0,
                           "steps_per_s": 1.0} for t in range(2)])
        rd.write_matrix(np.array([[1.0, np.nan], [1.0, 1.0]]))
        rd.write_json("summary.json", {"complete": True, "n_tasks": 2, "last_k": 2, "last_k_acc": 1.0,
                                       "mmrr": 1 / MMRR_EPS, "bwt": 0.0, "first_task_acc": 1.0,
                                       "steps_per_s": 1.0, "ood_auc": None})
    table = markdown_table(group_runs([load_run(rd) for rd in sorted(tmp_path.glob("*/seed-*"))]), paper=False)
    row = table.splitlines()[2]
    assert "100000.00" not in row and row.count("1e5 (cap)") == 2  # per-seed and seed-averaged MMRR


def test_the_demo_writes_into_the_user_cache_and_says_where(tmp_path, monkeypatch, capsys):
    import bimu.experiments.demo as demo

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)

    def stop(*args, **kwargs):
        raise RuntimeError("no data here")

    monkeypatch.setattr(demo, "ensure_data", stop)
    assert cli.main(["demo"]) == 2
    out = capsys.readouterr().out
    where = demo.default_out()
    assert where == tmp_path / "cache" / "bimu" / "demo" and f"into {where}" in out.splitlines()[0]
    assert cli.main(["demo", "--out", "here"]) == 2
    assert f"into {tmp_path / 'here'}" in capsys.readouterr().out
    assert not (tmp_path / "bimu-demo").exists()


# ------------------------------------------------------------------ 6. StreamResult in pandas and notebooks
def test_stream_result_shows_as_html_with_tasks_from_1():
    train, test = tiny_stream()
    res = bimu.fit_stream(train, test, method="sgd", hidden=[8], engine="torch")
    page = res._repr_html_()
    assert page.count("<tr>") == 4 and "<th>task 3</th>" in page and "after task" in page
    assert f"{100 * res.accuracy[2, 0]:.2f}" in page and "final mean accuracy" in page


def test_stream_result_to_frame():
    pd = pytest.importorskip("pandas")
    train, test = tiny_stream()
    res = bimu.fit_stream(train, test, method="sgd", hidden=[8], engine="torch")
    frame = res.to_frame()
    assert frame.shape == (3, 3) and frame.loc[2, 0] == res.accuracy[2, 0] and pd.isna(frame.loc[0, 1])
    tasks = res.to_frame("tasks")
    assert list(tasks.index) == [0, 1, 2] and list(tasks["task_number"]) == [1, 2, 3]
    assert res.to_frame("summary")["final_mean_acc"][0] == res.summary["final_mean_acc"]
    with pytest.raises(ValueError, match="to_frame"):
        res.to_frame("nope")


# ------------------------------------------------------------------ 7. the README's ten lines
def test_the_readmes_ten_line_example_runs_and_zeroes_the_gradients():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    code = re.search(r"## The library in ten lines\s+```python\n(.*?)```", readme, re.S).group(1)
    assert code.index("opt.zero_grad()") < code.index("loss.backward()")
    torch.manual_seed(0)
    exec(compile(code, "README.md", "exec"), {"print": lambda *a: None})


# ------------------------------------------------------------------ 8. torch.compile on the training forward
@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("kind,fullgraph", [("bernoulli", False), ("bernoulli", True), ("gaussian", True)])
def test_the_training_forward_compiles(backend, kind, fullgraph, monkeypatch):
    """Under torch.compile, as in eager mode. One graph (fullgraph) while no optimizer keeps relaxed samples
    (BayesBiNN does: its forward then records them, a graph break), as here."""
    import bimu.nn.bernoulli
    from bimu.nn import BinaryBayesianMLP
    from bimu.nn.gaussian import GaussianMLP

    if fullgraph:  # an earlier test of this process may have run a BayesBiNN optimizer
        monkeypatch.setattr(bimu.nn.bernoulli, "_ANY_KEPT", False)
    torch._dynamo.reset()
    net = BinaryBayesianMLP([8, 6, 3]) if kind == "bernoulli" else GaussianMLP([8, 6, 3])
    net.train()
    x, y = torch.randn(2, 8), torch.tensor([1, 2])

    def loss_fn(x, y):
        logits = net(x, n_samples=3)  # [samples, batch, classes]; the hidden layer's samples come from x's shape
        return -torch.log_softmax(logits, -1)[:, torch.arange(2), y].mean()

    def loss_and_grads(f):
        net.zero_grad()
        torch.manual_seed(1)
        loss = f(x, y)
        loss.backward()
        return loss.detach(), [p.grad.clone() for p in net.parameters() if p.grad is not None]

    eager_loss, eager_grads = loss_and_grads(loss_fn)
    loss, grads = loss_and_grads(torch.compile(loss_fn, backend=backend, fullgraph=fullgraph))
    assert torch.isfinite(loss) and len(grads) == len(eager_grads) > 0
    if backend == "eager":  # the same random draws in the same order: the same numbers
        torch.testing.assert_close(loss, eager_loss)
        for g, e in zip(grads, eager_grads):
            torch.testing.assert_close(g, e)

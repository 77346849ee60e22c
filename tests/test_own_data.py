"""Your own data: ``bimu run FILE.npz`` (validation, learning, resume refusal) and :func:`bimu.fit_stream`."""

import json
import shlex
from pathlib import Path

import numpy as np
import pytest
import torch

from bimu import cli
from bimu.data.own import load_npz, own_benchmark
from bimu.experiments.fit import as_benchmark, fit_stream


PATTERNS = np.random.default_rng(99).choice([-1.0, 1.0], size=(2, 4, 32))
"""Class means: per task, four random +-1 patterns on that task's 32 features (0-31 or 32-63)."""


def blobs(rng, task, n):
    """Four classes as Gaussian blobs (unit variance) around :data:`PATTERNS` of ``task``, 64 features."""
    y = rng.integers(0, 4, n)
    x = rng.normal(0, 1, (n, 64)).astype(np.float32)
    x[:, 32 * task:32 * task + 32] += PATTERNS[task][y]
    return x, y


def blob_arrays(seed=0, n=600, m=200):
    rng = np.random.default_rng(seed)
    tr, te = [blobs(rng, t, n) for t in (0, 1)], [blobs(rng, t, m) for t in (0, 1)]
    return dict(x_train=np.concatenate([x for x, _ in tr]), y_train=np.concatenate([y for _, y in tr]),
                task_train=np.repeat([0, 1], n), x_test=np.concatenate([x for x, _ in te]),
                y_test=np.concatenate([y for _, y in te]), task_test=np.repeat([0, 1], m),
                x_ood=(5 * rng.normal(size=(100, 64))).astype(np.float32))


def write(path, **arrays):
    np.savez(path, **arrays)
    return str(path)


# ----------------------------------------------------------------------------- the file and its checks
def test_file_order_is_the_stream_and_tasks_split_by_index(tmp_path):
    x = np.arange(12, dtype=np.float32).reshape(6, 2)
    y = np.array([0, 1, 1, 0, 1, 0])
    f = write(tmp_path / "d.npz", x_train=x, y_train=y, task_train=np.array([1, 0, 1, 0, 1, 0]), x_test=x,
              y_test=y, task_test=np.array([0, 0, 0, 1, 1, 1]))
    b = load_npz(f)
    assert (b.n_tasks, b.n_features, b.n_classes) == (2, 2, 2)
    for seed in (0, 5):  # the same order whatever the seed
        xs, ys = b.train_task(1, seed)
        assert xs[:, 0].tolist() == [0.0, 4.0, 8.0] and ys.tolist() == [0, 1, 1]
    assert b.test_task(1)[1].tolist() == [0, 1, 0]
    assert b.ood_set() is None
    assert len(b.source["sha256"]) == 64 and b.source["path"].endswith("d.npz")


def _good():
    x = np.zeros((4, 3), np.float32)
    return dict(x_train=x, y_train=np.array([0, 1, 0, 1]), x_test=x, y_test=np.array([0, 1, 1, 0]))


BAD = [
    ("missing y_test", lambda a: a.pop("y_test"), "y_test: missing"),
    ("unknown array", lambda a: a.update(x_tarin=a["x_train"]), "x_tarin: unknown array"),
    ("1-D x", lambda a: a.update(x_train=np.zeros(4, np.float32)), "x_train: must be a non-empty 2-D array"),
    ("string x", lambda a: a.update(x_test=np.full((4, 3), "a")), "x_test: must hold numbers"),
    ("NaN", lambda a: a["x_train"].__setitem__((2, 1), np.nan), "x_train: holds 1 NaN/inf values (first in row 2)"),
    ("inf in ood", lambda a: a.update(x_ood=np.full((2, 3), np.inf, np.float32)), "x_ood: holds 6 NaN/inf"),
    ("float labels", lambda a: a.update(y_train=np.array([0.0, 1, 0, 1])), "y_train: must hold integer class labels"),
    ("label count", lambda a: a.update(y_test=np.array([0, 1])), "y_test: must be a 1-D array of 4 class labels"),
    ("negative label", lambda a: a.update(y_train=np.array([0, 1, -2, 1])),
     "y_train: labels must be in 0..C-1 (C = 2 classes), found -2 at row 2"),
    ("label beyond n_classes", lambda a: a.update(n_classes=np.array(2), y_test=np.array([0, 1, 2, 0])),
     "y_test: labels must be in 0..C-1 (C = 2 classes), found 2 at row 2"),
    ("one class", lambda a: a.update(y_train=np.zeros(4, np.int64), y_test=np.zeros(4, np.int64)),
     "y_train: needs at least 2 classes"),
    ("features differ", lambda a: a.update(x_test=np.zeros((4, 5), np.float32)),
     "x_test: has 5 features per row, x_train has 3"),
    ("empty task", lambda a: a.update(task_train=np.array([0, 0, 2, 2]), task_test=np.array([0, 1, 2, 2])),
     "task_train: task 1 has no rows"),
    ("task_test missing", lambda a: a.update(task_train=np.array([0, 0, 1, 1])),
     "task_test: is needed with task_train"),
    ("negative task", lambda a: a.update(task_train=np.array([0, 0, -1, 1]), task_test=np.array([0, 1, 0, 1])),
     "task_train: task indices must be >= 0"),
]


@pytest.mark.parametrize("case, change, message", BAD, ids=[c[0] for c in BAD])
def test_malformed_files_get_one_line_errors_naming_the_array(tmp_path, capsys, case, change, message):
    arrays = _good()
    change(arrays)
    f = write(tmp_path / "bad.npz", **arrays)
    with pytest.raises(ValueError) as e:
        load_npz(f)
    assert str(e.value) == f"{f}: {message}" or str(e.value).startswith(f"{f}: {message}")
    assert "\n" not in str(e.value)
    assert cli.main(["run", f, "--out", str(tmp_path / "runs"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err
    assert not (tmp_path / "runs").exists()  # refused before any run directory was made


def test_object_arrays_are_refused_without_unpickling(tmp_path):
    arrays = _good()
    arrays["y_train"] = np.array([0, 1, 0, None], dtype=object)
    f = write(tmp_path / "obj.npz", **arrays)
    with pytest.raises(ValueError, match=r"y_train: holds Python objects \(dtype object\)"):
        load_npz(f)


def test_not_an_npz_file(tmp_path):
    f = tmp_path / "fake.npz"
    f.write_text("not a zip")
    with pytest.raises(ValueError, match="fake.npz: not a readable .npz file"):
        load_npz(f)
    with pytest.raises(ValueError, match="nope.npz: no such file"):
        load_npz(tmp_path / "nope.npz")


# ----------------------------------------------------------------------------- bimu run FILE.npz
def readme_commands():
    """The ``bimu run`` lines of the README's "BiMU on your data" section (comments dropped)."""
    text = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    section = text.split("## BiMU on your data", 1)[1].split("\n## ", 1)[0]
    return [shlex.split(line.split("#", 1)[0]) for line in section.splitlines() if line.startswith("bimu run ")]


def test_readme_commands_learn_a_two_task_npz_and_a_changed_file_is_refused(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "blobs.npz", **blob_arrays())
    commands = readme_commands()
    assert [c[:3] for c in commands] == [["bimu", "run", "blobs.npz"]] * 2 and "--active" in commands[1]
    for command in commands:
        assert cli.main([*command[1:], "--no-progress"]) == 0, command
    rd = tmp_path / "runs" / "npz-bimu" / "seed-0"
    final = json.loads((rd / "metrics.jsonl").read_text().splitlines()[-1])["evaluated"]
    assert final["0"] > 0.9 and final["1"] > 0.9, final  # both tasks after the second
    summary = json.loads((rd / "summary.json").read_text())
    assert summary["complete"] and summary["n_tasks"] == 2 and summary["ood_auc"] is not None
    assert summary["engine"] == "fused"
    config = json.loads((rd / "config.json").read_text())
    assert config["benchmark"] == "npz" and config["benchmark_options"]["path"] == str(tmp_path / "blobs.npz")
    assert config["resolved"]["data_file"]["sha256"] == load_npz(tmp_path / "blobs.npz").source["sha256"]
    assert config["resolved"]["sizes"] == [64, 32, 4]
    active = json.loads((tmp_path / "runs-active" / "npz-bimu" / "seed-0" / "summary.json").read_text())["active"]
    assert 0 < active["labels_queried"] < active["examples_seen"] == 1200
    capsys.readouterr()
    # the same file again: the complete run is reused; a changed file is refused by its SHA-256
    assert cli.main([*commands[0][1:], "--no-progress"]) == 0
    write(tmp_path / "blobs.npz", **blob_arrays(seed=1))
    assert cli.main([*commands[0][1:], "--no-progress"]) == 2  # refused before training, naming why
    err = capsys.readouterr().err
    assert "the file changed" in err and config["resolved"]["data_file"]["sha256"] in err


# ----------------------------------------------------------------------------- fit_stream
def test_fit_stream_takes_arrays_lists_datasets_and_loaders_alike():
    a = blob_arrays(n=60, m=20)
    tasks = [(a["x_train"][a["task_train"] == t], a["y_train"][a["task_train"] == t]) for t in (0, 1)]
    tests = [(a["x_test"][a["task_test"] == t], a["y_test"][a["task_test"] == t]) for t in (0, 1)]
    ref = as_benchmark((a["x_train"], a["y_train"]), (a["x_test"], a["y_test"]), task_train=a["task_train"],
                       task_test=a["task_test"])
    ds = [torch.utils.data.TensorDataset(torch.from_numpy(x), torch.from_numpy(y)) for x, y in tasks]
    forms = [
        [(torch.from_numpy(x), torch.from_numpy(y)) for x, y in tasks],  # tensors per task
        ds,  # Datasets of examples
        [torch.utils.data.DataLoader(d, batch_size=7) for d in ds],  # DataLoaders of batches
        [iter(zip(x, y)) for x, y in tasks],  # iterables of examples
    ]
    for form in forms:
        b = as_benchmark(form, tests)
        assert b.n_tasks == 2
        for t in (0, 1):
            for got, want in zip(b.train_task(t, 0), ref.train_task(t, 0)):
                assert torch.equal(got, want)


def test_fit_stream_flattens_images_and_rejects_mismatched_tasks():
    x = np.zeros((6, 1, 2, 2), np.float32)
    y = np.array([0, 1, 0, 1, 0, 1])
    assert as_benchmark((x, y), (x, y)).n_features == 4
    with pytest.raises(ValueError, match="train has 2 tasks and test 1"):
        as_benchmark([(x, y), (x, y)], [(x, y)])
    with pytest.raises(ValueError, match=r"train\[0\]: item 0 is not an \(x, y\) pair"):
        as_benchmark([[1, 2, 3]], [(x, y)])


def test_fit_stream_labelled_and_active_on_two_tasks():
    a = blob_arrays(n=300, m=100)
    kw = dict(task_train=a["task_train"], task_test=a["task_test"], hidden=[32], engine="torch")
    res = fit_stream((a["x_train"], a["y_train"]), (a["x_test"], a["y_test"]), "bimu", x_ood=a["x_ood"], **kw)
    assert res.accuracy.shape == (2, 2) and not np.isnan(res.accuracy[1]).any()  # row t: after task t
    assert res.accuracy[1, 1] > 0.9 and res.accuracy[1].min() > 0.6 and res.summary["ood_auc"] is not None and res.engine == "torch"
    sgd = [fit_stream((a["x_train"], a["y_train"]), (a["x_test"], a["y_test"]), "sgd", lr=0.05, **kw) for _ in "ab"]
    np.testing.assert_array_equal(sgd[0].accuracy, sgd[1].accuracy)  # same seed, same result
    act = fit_stream((a["x_train"], a["y_train"]), (a["x_test"], a["y_test"]), "bimu", active="vr",
                     threshold=0.2, **kw)
    counts = act.summary["active"]
    assert 0 < counts["labels_queried"] < 600 and counts["examples_seen"] == 600
    assert act.learner is not None and act.method.updates_applied == counts["labels_queried"]


def test_own_benchmark_accepts_tensors():
    x = torch.zeros(4, 2)
    y = torch.tensor([0, 1, 0, 1])
    assert own_benchmark(x, y, x, y).n_classes == 2


def test_bimu_create_method_takes_the_fused_engine_by_default():
    import bimu
    from bimu.engine import FusedBiMU
    from bimu.methods import BiMUMethod

    fused = bimu.create_method("bimu", [784, 64, 10], seed=0)
    assert type(fused) is FusedBiMU and fused.sizes == [784, 64, 10]
    assert fused.predict_proba(torch.zeros(2, 784)).shape == (2, 10)
    assert type(bimu.create_method("bimu", [784, 64, 10], seed=0, engine="torch")) is BiMUMethod
    assert type(bimu.create_method("bimu", [4, 3], seed=0, device="cpu", engine="torch")) is BiMUMethod
    assert type(bimu.create_method("bimu", [4, 3], seed=0, engine="fused", preset="pmnist-100")) is FusedBiMU
    # the engine's limit of 64 samples per step: auto falls back to PyTorch, fused says why not
    assert type(bimu.create_method("bimu", [4, 3], seed=0, n_samples=100)) is BiMUMethod
    with pytest.raises(ValueError, match=r"engine 'fused' does not support method 'bimu' .*at most 64 samples"):
        bimu.create_method("bimu", [4, 3], seed=0, n_samples=100, engine="fused")
    with pytest.raises(ValueError, match="engine 'fused' runs on the CPU only"):
        bimu.create_method("bimu", [4, 3], device="meta", engine="fused")


def test_the_methods_factory_builds_the_pytorch_method_only():
    from bimu.methods import BiMUMethod, create_method

    assert type(create_method("bimu", [784, 64, 10], seed=0)) is BiMUMethod
    assert type(create_method("bimu", [4, 3], seed=0, engine="torch")) is BiMUMethod
    for engine in ("auto", "fused"):
        with pytest.raises(ValueError) as e:
            create_method("bimu", [4, 3], seed=0, engine=engine)
        assert str(e.value) == ("bimu.methods.create_method builds the PyTorch method only (engine 'torch'), "
                                f"got engine '{engine}'; use bimu.create_method for the fused engine")


def test_a_config_naming_a_file_is_the_npz_benchmark_with_its_absolute_path(tmp_path, monkeypatch):
    from bimu.experiments.config import RunConfig

    monkeypatch.chdir(tmp_path)
    c = RunConfig.from_dict({"benchmark": "blobs.npz"})
    assert c.benchmark == "npz" and c.benchmark_options == {"path": str(tmp_path / "blobs.npz")}
    assert RunConfig.from_dict(c.to_dict()) == c  # what config.json holds reads back the same
    with pytest.raises(ValueError, match="give the file once"):
        RunConfig.from_dict({"benchmark": "a.npz", "benchmark_options": {"path": "b.npz"}})

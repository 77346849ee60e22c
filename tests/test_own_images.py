"""Your own images: ``bimu run FOLDER`` (layout checks, learning through the backbone, resume refusal)."""

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from bimu import cli
from bimu.data.own_images import folder_fingerprint, image_folder_benchmark, scan_image_folder

COLOURS = {"red": (200, 30, 30), "green": (30, 200, 30), "blue": (30, 30, 200)}
"""Three classes told apart by colour (tiny images: extraction is the slow part)."""


def png(path: Path, colour, k: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(k)
    im = np.clip(np.array(colour) + rng.integers(-20, 21, (16, 16, 3)), 0, 255).astype(np.uint8)
    Image.fromarray(im).save(path)


def make_folder(root: Path, tasks=("t0", "t1"), n_train=3, n_test=2, ood=True) -> Path:
    """``root/train/<task>/<class>/*.png`` and test likewise (no task level when ``tasks`` is None)."""
    k = 0
    for split, n in (("train", n_train), ("test", n_test)):
        for task in tasks or [None]:
            for c, colour in COLOURS.items():
                for i in range(n):
                    k += 1
                    png(root / split / (task or "") / c / f"{i}.png", colour, k)
    if ood:
        for i in range(2):
            png(root / "ood" / f"{i}.png", (128, 128, 128), 100 + i)
    return root


OPTIONS = ["--option", "resolution=32"]


def run(folder, out, *extra):
    return cli.main(["run", str(folder), "--method", "bimu", "--out", str(out), "--no-progress", *OPTIONS,
                     *extra])


def test_scan_orders_tasks_and_classes_and_single_task_layout(tmp_path):
    scan = scan_image_folder(make_folder(tmp_path / "two"))
    assert scan["tasks"] == ["t0", "t1"] and scan["classes"] == ["blue", "green", "red"]
    assert [len(t) for t in scan["train"]] == [9, 9] and [len(t) for t in scan["test"]] == [6, 6]
    assert [c for _, c in scan["train"][1]] == [0, 0, 0, 1, 1, 1, 2, 2, 2] and len(scan["ood"]) == 2
    one = scan_image_folder(make_folder(tmp_path / "one", tasks=None, ood=False))
    assert one["tasks"] == [""] and len(one["train"]) == 1 and one["ood"] == []


def test_run_folder_learns_two_tasks_deterministically_and_refuses_a_changed_folder(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("BIMU_CACHE_DIR", str(tmp_path / "cache"))
    folder = make_folder(tmp_path / "imgs")
    for out in ("a", "b"):
        assert run(folder, tmp_path / out, "--tasks", "2") == 0
    rd = tmp_path / "a" / "image-folder-bimu" / "seed-0"
    summary = json.loads((rd / "summary.json").read_text())
    assert summary["complete"] and summary["n_tasks"] == 2 and summary["ood_auc"] is not None
    lines = [json.loads(line) for line in (rd / "metrics.jsonl").read_text().splitlines()]
    assert [sorted(line["evaluated"]) for line in lines] == [["0"], ["0", "1"]]  # the accuracy matrix's rows
    assert all(0 <= a <= 1 for line in lines for a in line["evaluated"].values())
    other = (tmp_path / "b" / "image-folder-bimu" / "seed-0" / "metrics.jsonl").read_text()
    assert [json.loads(line).get("evaluated") for line in other.splitlines()] == [line.get("evaluated") for line in lines]
    config = json.loads((rd / "config.json").read_text())
    assert config["benchmark"] == "image-folder" and config["benchmark_options"]["path"] == str(folder.resolve())
    assert config["resolved"]["data_file"]["sha256"] == folder_fingerprint(folder)
    assert config["resolved"]["sizes"] == [1280, 3]  # EfficientNet-Lite0 at 32 px: 1280 x 1 x 1, 3 classes
    capsys.readouterr()
    png(folder / "train" / "t0" / "red" / "0.png", (0, 0, 0), 7)  # one image changed
    assert run(folder, tmp_path / "a", "--tasks", "2") == 2
    err = capsys.readouterr().err
    assert "the folder changed" in err and config["resolved"]["data_file"]["sha256"] in err


def error_of(folder):
    with pytest.raises(ValueError) as e:
        scan_image_folder(folder)
    assert "\n" not in str(e.value)
    return str(e.value)


def test_each_layout_problem_is_one_line_naming_it(tmp_path):
    f = make_folder(tmp_path / "a", ood=False)
    (f / "test").rename(tmp_path / "gone")
    assert error_of(f) == f"{f}: no test/ folder (an image folder holds train/ and test/)"

    f = tmp_path / "b"
    (f / "train").mkdir(parents=True), (f / "test").mkdir()
    assert error_of(f) == f"{f / 'train'}: no images (put them in train/<class>/ or train/<task>/<class>/)"

    f = make_folder(tmp_path / "c", ood=False)
    bad = f / "test" / "t1" / "blue" / "1.png"
    bad.write_bytes(b"not an image at all")
    assert error_of(f).startswith(f"{bad}: not a readable image (")

    f = make_folder(tmp_path / "d", ood=False)
    (f / "test" / "t0" / "green").rename(f / "test" / "t0" / "lime")
    assert error_of(f) == (f"{f / 'train' / 't0'}: classes differ between train/ and test/ of this task "
                           "(green, lime in only one)")

    f = make_folder(tmp_path / "e", ood=False)
    for c in COLOURS:
        for p in (f / "train" / "t1" / c).iterdir():
            p.unlink()
    assert error_of(f) == f"{f / 'train' / 't1' / 'blue'}: no images (.jpg, .jpeg, .png, ...) in this class folder"

    f = make_folder(tmp_path / "f", ood=False)
    png(f / "train" / "yellow" / "0.png", (200, 200, 30), 1)  # a class folder beside the task folders
    assert error_of(f) == (f"{f / 'train'}: mixed layouts (t0/ holds class folders, yellow/ does not); use "
                           "train/<class>/ for one task or train/<task>/<class>/")

    f = make_folder(tmp_path / "g", ood=False)
    (f / "test" / "t1").rename(tmp_path / "t1")
    assert error_of(f) == f"{f}: task 't1' has no test/t1/ folder (train/ and test/ hold the same tasks)"


def test_a_bad_folder_is_refused_before_any_extraction(tmp_path, capsys):
    f = make_folder(tmp_path / "x", ood=False)
    bad = f / "train" / "t0" / "red" / "2.png"
    bad.write_bytes(b"\x89PNG broken")
    assert run(f, tmp_path / "out") == 2
    err = capsys.readouterr().err
    assert str(bad) in err and "not a readable image" in err
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").rglob("*.npy"))

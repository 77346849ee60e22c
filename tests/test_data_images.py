"""Image-stream loaders on generated fixtures in the on-disk layouts (fake backbone, no network)."""

from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from bimu.data import feature_benchmarks as fb
from bimu.data.animals import find_root as find_animals_root
from bimu.data.features import Backbone, load_image
from bimu.data.imbalance import split_accuracy
from bimu.data.nuisance import FACTORS, TASK_FACTORS, TaskNuisance, apply_nuisance, nuisance_rng
from bimu.data.tinyimagenet import ANIMALS_TI_CLASSES, animals_ti_counts, animals_ti_rare_threshold


class FakeBackbone(Backbone):
    """Tiny deterministic 'backbone': 4x4 resize, flattened RGB (48 features)."""

    name = "fake"
    resolution = 4
    n_features = 48

    def __init__(self):
        self.calls = 0

    def features(self, images):
        self.calls += 1
        return self.preprocess(images).flatten(1).numpy()


def write_image(path: Path, label: int, index: int, size=8):
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(label * 1000 + index)
    img = np.clip(rng.normal(40 + 20 * label, 25, size=(size, size, 3)), 0, 255).astype(np.uint8)
    Image.fromarray(img).save(path)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("data")
    counts = animals_ti_counts(20)
    for c, (paper, folder) in enumerate(ANIMALS_TI_CLASSES.items()):
        for i in range(counts[paper] + 1):
            write_image(root / "tiny-imagenet/animals/train" / folder / f"{folder}_{i}.JPEG", c, i)
        for i in range(3):
            write_image(root / "tiny-imagenet/animals/val" / folder / f"val_{i}.JPEG", c, 100 + i)
    for c, folder in enumerate(["cup", "pan", "teddy", "wok"]):
        for i in range(24):
            write_image(root / "tiny-imagenet/objects/train" / folder / f"{i}.JPEG", c, i)
        for i in range(4):
            write_image(root / "tiny-imagenet/objects/val" / folder / f"v{i}.JPEG", c, 50 + i)
    # OpenLORIS-Object layout: <split>/<factor>/segment<N>/<class>/<instance...>/*.jpg
    for split in ("train", "test"):
        for factor in FACTORS:
            for seg in range(1, 10):
                for c, cls in enumerate(["bottle_01", "cup_01", "toy_01"]):
                    for i in range(2):
                        write_image(root / "openloris" / split / factor / f"segment{seg}" / cls / "seq" / f"{i}.jpg",
                                    c, seg * 10 + i)
    # Kaggle Animals layout: <split>/<Class>/*.jpg with a Label/ folder to ignore
    for split, n in (("train", 4), ("test", 3)):
        for c, cls in enumerate(["Butterfly", "Lizard"]):
            for i in range(n + c * 2):
                write_image(root / "animals" / split / cls / f"{i}.jpg", c, i)
            (root / "animals" / split / cls / "Label").mkdir(exist_ok=True)
            (root / "animals" / split / cls / "Label" / "0.txt").write_text("box")
    return root


def test_animals_ti_counts_scale_like_the_paper():
    counts = animals_ti_counts()
    assert counts["butterfly"] == 500 and counts["lizard"] == round(1412 * 500 / 1997)
    assert animals_ti_rare_threshold() == 50
    assert {k for k, v in counts.items() if v < 50} == {"zebra", "crocodile", "leopard", "sheep", "raccoon",
                                                        "raven", "panda", "lynx", "bull", "scorpion"}


def test_animals_ti_standin_on_fixture(data_dir, tmp_path):
    b = fb.animals_ti(data_dir, n_features=None, backbone=FakeBackbone(), cache_dir=tmp_path, max_per_class=20)
    assert b.is_standin and b.n_tasks == 1 and b.n_classes == 20 and b.n_features == 48
    counts = b.train_counts()
    assert counts.tolist() == list(animals_ti_counts(20).values())
    assert b.rare_classes == {c for c, n in enumerate(counts) if n < animals_ti_rare_threshold(20)}
    Xt, yt = b.test_task(0)
    assert np.bincount(yt.numpy()).tolist() == [3] * 20  # balanced test set
    X0, y0 = b.train_task(0, seed=0)
    X1, y1 = b.train_task(0, seed=1)
    assert not torch.equal(y0, y1) and sorted(y0.tolist()) == sorted(y1.tolist())
    assert torch.equal(b.train_task(0, seed=0)[1], y0)
    assert "stand-in" in repr(b)


def test_objects_ti_tasks_imbalance_ood_and_one_feature_subset(data_dir, tmp_path):
    bb = FakeBackbone()
    b = fb.objects_ti(data_dir, n_features=20, backbone=bb, cache_dir=tmp_path, test_per_task=2, ood_per_task=2)
    assert b.n_tasks == 12 and b.n_classes == 3 and b.class_names == ["cup", "pan", "wok"]
    assert b.rare_classes == {1}
    counts = b.train_counts()
    assert counts[0] == 24 and counts[2] == 24 and 0 < counts[1] <= 24 * 0.5 + 12
    ood = b.ood_set()
    assert ood.shape == (24, 20)
    # one subset for ID and OOD: rebuild with all features and check the columns
    full = fb.objects_ti(data_dir, n_features=None, backbone=bb, cache_dir=tmp_path, test_per_task=2,
                         ood_per_task=2)
    idx = fb.feature_subset(48, 20, 0)
    assert torch.equal(b.ood_set(), full.ood_set()[:, idx])
    assert torch.equal(b.test_task(5)[0], full.test_task(5)[0][:, idx])
    assert torch.equal(b.train_task(3, 0)[0], full.train_task(3, 0)[0][:, idx])
    calls = bb.calls
    fb.objects_ti(data_dir, n_features=20, backbone=bb, cache_dir=tmp_path, test_per_task=2, ood_per_task=2)
    assert bb.calls == calls  # second build: every chunk from the cache
    # tasks differ by nuisance: the same class's test images change between tasks
    assert not torch.equal(full.test_task(0)[0], full.test_task(11)[0])
    val = fb.objects_ti(data_dir, n_features=20, backbone=bb, cache_dir=tmp_path, test_per_task=2,
                        ood_per_task=2, split="validation")
    assert val.name == "objects-ti[validation]" and len(val.train_task(0, 0)[1]) < len(b.train_task(0, 0)[1])


def test_openloris_loader_on_fixture(data_dir, tmp_path):
    b = fb.openloris(data_dir, n_features=None, backbone=FakeBackbone(), cache_dir=tmp_path)
    assert not b.is_standin and b.n_tasks == 12 and b.class_names == ["bottle", "cup"]
    X, y = b.train_task(0, seed=0)
    assert len(y) == 3 * 2 * 2  # 3 segments per level x 2 classes x 2 images
    assert b.ood_set().shape[0] == 2 * 12 * 3 * 2  # 'toy' of both splits, 12 tasks, 3 segments, 2 images


def test_kaggle_animals_loader_on_fixture(data_dir, tmp_path):
    b = fb.animals(data_dir, backbone=FakeBackbone(), cache_dir=tmp_path, test_per_class=3, rare_threshold=5,
                   classes=["butterfly", "lizard"])
    assert b.class_names == ["butterfly", "lizard"] and b.train_counts().tolist() == [4, 6]  # Label/ ignored
    assert b.rare_classes == {0}
    assert np.bincount(b.test_task(0)[1].numpy()).tolist() == [3, 3]


def test_kaggle_animals_missing_class_is_a_clear_error(data_dir, tmp_path):
    with pytest.raises(FileNotFoundError, match="class folder 'fish' missing"):
        fb.animals(data_dir, backbone=FakeBackbone(), cache_dir=tmp_path, test_per_class=3)


def test_missing_folders_and_corrupt_images(tmp_path, monkeypatch):
    with pytest.raises(FileNotFoundError, match="Tiny-ImageNet subset folder not found"):
        fb.animals_ti(tmp_path, backbone=FakeBackbone(), cache_dir=tmp_path)
    with pytest.raises(FileNotFoundError, match="OpenLORIS-Object not found"):
        fb.openloris(tmp_path, backbone=FakeBackbone(), cache_dir=tmp_path)
    with pytest.raises(FileNotFoundError, match=r"Kaggle Animals not found under .*train/<Class>/ and test/<Class>/"):
        fb.animals(tmp_path, backbone=FakeBackbone(), cache_dir=tmp_path)
    monkeypatch.delenv("BIMU_DATA_DIR", raising=False)
    with pytest.raises(ValueError, match="no data directory: pass data_dir or set BIMU_DATA_DIR"):
        find_animals_root(None)
    with pytest.raises(ValueError, match="unknown benchmark"):
        fb.get_feature_benchmark("cifar")
    bad = tmp_path / "bad.jpg"
    bad.write_bytes(b"not an image")
    with pytest.raises(ValueError, match="cannot decode image"):
        load_image(bad)


def test_nuisances_are_deterministic_and_distinct():
    img = np.random.default_rng(0).integers(0, 256, (16, 16, 3), dtype=np.uint8)
    assert len(TASK_FACTORS) == 12
    for factor in FACTORS:
        outs = [apply_nuisance(img, factor, lv, nuisance_rng(0, 0, 0, 1)) for lv in (1, 2, 3)]
        again = apply_nuisance(img, factor, 2, nuisance_rng(0, 0, 0, 1))
        assert np.array_equal(outs[1], again)
        assert all(o.shape == img.shape and o.dtype == np.uint8 for o in outs)
        assert not np.array_equal(outs[0], img)
    # stronger occlusion covers more pixels
    occl = [np.mean(np.any(apply_nuisance(img, "occlusion", lv, nuisance_rng(0, 0, 0, 2)) != img, axis=2))
            for lv in (1, 2, 3)]
    assert occl[0] < occl[2]
    with pytest.raises(ValueError, match="unknown nuisance"):
        apply_nuisance(img, "fog", 1, nuisance_rng(0, 0, 0, 0))
    t = TaskNuisance(4, 1)
    assert t.factor == "occlusion" and t.level == 2 and "occlusion/2" in t.key


def test_split_accuracy_rare_and_frequent():
    out = split_accuracy([0, 1, 1, 2], [0, 1, 2, 2], rare={2})
    assert out == {"accuracy": 0.75, "rare_accuracy": 0.5, "frequent_accuracy": 1.0}

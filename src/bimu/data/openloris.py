"""OpenLORIS-Object on disk: the sequential-factors protocol (4 factors x 3 levels = 12 tasks).

Assumed layout (the public release as reorganised by its benchmark scripts; see
lifelong-robotic-vision/OpenLORIS-Object ``benchmark1.py``)::

    <root>/{train,validation,test}/<factor>/segment<1..9>/<class>/.../*.jpg

with ``factor`` in ``illumination, occlusion, pixel, clutter``. Each factor has 9 segments; we assume
they come in three difficulty levels of three segments each (segments 1-3 = level 1, 4-6 = level 2,
7-9 = level 3), which gives the paper's 12 tasks in the order illumination 1-3, occlusion 1-3,
pixel 1-3, clutter 1-3. Any depth of sub-folders (instances, sequences) below ``<class>`` is read;
the class is the first folder under the segment, with a trailing ``_<digits>`` instance suffix
removed (``bottle_01`` -> ``bottle``). The ``toy`` class is held out as the OOD set (all splits and
tasks of ``toy``), leaving the in-distribution classes. ``<root>`` is ``data_dir`` itself or
``data_dir/openloris`` / ``data_dir/OpenLORIS-Object``.

>>> level_of_segment(1), level_of_segment(6), level_of_segment(9)
(1, 2, 3)
>>> class_of_folder("bottle_01"), class_of_folder("cup")
('bottle', 'cup')
"""

from __future__ import annotations

import re
from pathlib import Path

from bimu.data.features import IMAGE_SUFFIXES
from bimu.data.paths import locate_dataset_root

FACTORS = ("illumination", "occlusion", "pixel", "clutter")
"""The four nuisance factors, in the protocol's task order."""

OOD_CLASS = "toy"
"""Class held out as out-of-distribution, as in the paper."""


def level_of_segment(segment: int, segments_per_level: int = 3) -> int:
    """Difficulty level (1-3) of segment number ``segment`` (1-9)."""
    if not 1 <= int(segment) <= 3 * segments_per_level:
        raise ValueError(f"segment must be in [1, {3 * segments_per_level}], got {segment}")
    return (int(segment) - 1) // segments_per_level + 1


def class_of_folder(name: str) -> str:
    """Category of a class/instance folder name: a trailing ``_<digits>`` is dropped."""
    return re.sub(r"_\d+$", "", name)


def find_root(data_dir) -> Path:
    """The OpenLORIS-Object root under ``data_dir`` (or ``$BIMU_DATA_DIR``); clear error if absent."""
    return locate_dataset_root(
        data_dir, "OpenLORIS-Object", ("openloris", "OpenLORIS-Object"),
        lambda c: (c / "train").is_dir() and any((c / "train" / f).is_dir() for f in FACTORS),
        "train/<factor>/segment<N>/<class>/ folders")


def _images_under(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES)


def openloris_plan(data_dir=None, test_split: str = "test", segments_per_level: int = 3) -> dict:
    """Files of the 12 tasks: ``{"classes", "train": [[(path, label)] per task], "test": [...],
    "ood": [(path, -1)]}``; ``test_split`` is ``test`` or ``validation``."""
    root = find_root(data_dir)
    if test_split not in ("test", "validation"):
        raise ValueError(f"test_split must be 'test' or 'validation', got {test_split!r}")
    found: dict[tuple[str, str, int], list[tuple[Path, str]]] = {}
    names: set[str] = set()
    for split in ("train", test_split):
        for factor in FACTORS:
            fdir = root / split / factor
            if not fdir.is_dir():
                raise FileNotFoundError(f"missing OpenLORIS folder {fdir}")
            for seg in sorted(fdir.iterdir()):
                m = re.fullmatch(r"segment(\d+)", seg.name)
                if not (seg.is_dir() and m):
                    continue
                level = level_of_segment(int(m.group(1)), segments_per_level)
                for cdir in sorted(p for p in seg.iterdir() if p.is_dir()):
                    cname = class_of_folder(cdir.name)
                    names.add(cname)
                    found.setdefault((split, factor, level), []).extend((p, cname) for p in _images_under(cdir))
    classes = sorted(n for n in names if n != OOD_CLASS)
    if not classes:
        raise FileNotFoundError(f"no class folders with images under {root}")
    index = {c: i for i, c in enumerate(classes)}
    plan = {"classes": classes, "train": [], "test": [], "ood": []}
    for factor in FACTORS:
        for level in (1, 2, 3):
            for split, key in (("train", "train"), (test_split, "test")):
                items = found.get((split, factor, level), [])
                if not items:
                    raise FileNotFoundError(f"no {split} images for {factor} level {level} under {root}")
                plan[key].append([(p, index[c]) for p, c in items if c != OOD_CLASS])
                plan["ood"].extend((p, -1) for p, c in items if c == OOD_CLASS)
    return plan

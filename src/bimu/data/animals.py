"""The Kaggle "Animals Detection Images Dataset" folder, restricted to the paper's 20 classes.

Assumed layout (the Kaggle download)::

    <root>/train/<Class>/*.jpg      (a ``Label/`` sub-folder of box annotations is ignored)
    <root>/test/<Class>/*.jpg

with class folders named like ``Butterfly`` (matched case-insensitively). ``<root>`` is ``data_dir``
itself or ``data_dir/animals``. Training uses every image of the 20 classes; the balanced test set
draws ``test_per_class`` (50) images per class uniformly from ``test/<Class>/`` (seeded).

>>> len(PAPER_CLASSES), PAPER_CLASSES[0], PAPER_CLASSES[-1]
(20, 'butterfly', 'scorpion')
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from bimu.data.features import list_images
from bimu.data.paths import locate_dataset_root
from bimu.data.tinyimagenet import ANIMALS_PAPER_COUNTS

PAPER_CLASSES = list(ANIMALS_PAPER_COUNTS)
"""The paper's 20 classes (appendix table), most to least frequent."""


def find_root(data_dir) -> Path:
    """The Animals root under ``data_dir`` (or ``$BIMU_DATA_DIR``); clear error if absent."""
    return locate_dataset_root(data_dir, "Kaggle Animals", ("animals", "Animals"),
                               lambda c: (c / "train").is_dir() and (c / "test").is_dir(),
                               "train/<Class>/ and test/<Class>/")


def _class_dirs(split_dir: Path) -> dict[str, Path]:
    return {p.name.lower(): p for p in split_dir.iterdir() if p.is_dir()}


def animals_plan(data_dir=None, test_per_class: int = 50, seed: int = 0, classes=None) -> dict:
    """``{"classes", "train": [[Path] per class], "test": [[Path] per class]}`` for the 20 classes."""
    root = find_root(data_dir)
    classes = list(PAPER_CLASSES if classes is None else classes)
    train_dirs, test_dirs = _class_dirs(root / "train"), _class_dirs(root / "test")
    plan = {"classes": classes, "train": [], "test": []}
    for c, name in enumerate(classes):
        if name.lower() not in train_dirs or name.lower() not in test_dirs:
            raise FileNotFoundError(f"class folder {name!r} missing under {root}/train or {root}/test")
        train = list_images(train_dirs[name.lower()])
        test = list_images(test_dirs[name.lower()])
        if not train:
            raise ValueError(f"no training images for class {name!r} in {train_dirs[name.lower()]}")
        if len(test) < test_per_class:
            raise ValueError(f"class {name!r} has {len(test)} test images, need {test_per_class}")
        rng = np.random.default_rng(np.random.SeedSequence([int(seed), 0xA7, c]))
        pick = np.sort(rng.permutation(len(test))[:test_per_class])
        plan["train"].append(train)
        plan["test"].append([test[i] for i in pick])
    return plan

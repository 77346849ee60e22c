"""MNIST and Fashion-MNIST: pinned checksums, file lookup in the data directory, cached loading.

A dataset lives in ``<data_dir>/<name>/`` as the four canonical IDX files, either gzipped
(``train-images-idx3-ubyte.gz``) or raw (``train-images-idx3-ubyte``); both forms have pinned SHA-256
values and are verified (once per file per process) before use.

>>> sorted(DATASETS)
['fashion-mnist', 'mnist']
>>> DATASETS["mnist"].files["train-images-idx3-ubyte"].gz_sha256[:8]
'49c93155'
"""

from __future__ import annotations

import dataclasses
import functools
import os
from pathlib import Path

import numpy as np

from bimu.data.idx import read_idx
from bimu.data.paths import describe_resolution, resolve_data_dir

SPLIT_FILES = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}


@dataclasses.dataclass(frozen=True)
class FileSpec:
    """Pinned hashes of one IDX file: of its canonical gzip and of its uncompressed bytes."""

    gz_sha256: str
    raw_sha256: str


@dataclasses.dataclass(frozen=True)
class DatasetSpec:
    """A dataset's folder name, its files and where they can be obtained."""

    name: str
    files: dict[str, FileSpec]
    n_train: int = 60000
    n_test: int = 10000


DATASETS: dict[str, DatasetSpec] = {
    # SHA-256 of the canonical gzips (../shared/data/README.md) and of the uncompressed files
    # (whose MD5s are the canonical ones: 6bbc9ace..., a25bea73..., 2646ac64..., 27ae3e4e...).
    "mnist": DatasetSpec("mnist", {
        "train-images-idx3-ubyte": FileSpec(
            "49c9315577275b9dc9391765e726dd69d0b765971a320622ffea1fd9f945cdef",
            "ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db"),
        "train-labels-idx1-ubyte": FileSpec(
            "b391c66ee6cb2b00661c6008c3f67df7df1611b4d9b04163cebd40616c4fc06f",
            "65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5"),
        "t10k-images-idx3-ubyte": FileSpec(
            "0a4e203a3c2d252e035fe0bb60231db1012d749d7df04756cd73fe94d102b772",
            "0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7"),
        "t10k-labels-idx1-ubyte": FileSpec(
            "242cfb1e3c4bf9fd46323a07a12038c9da3c64aeb2b82204c994eb71cbfbb9a7",
            "ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2"),
    }),
    # Computed from the Debian package dataset-fashion-mnist 0.0~git20200523.55506a9-1 (uncompressed
    # MD5s f4a8712d..., 9018921c..., 8181f547..., 15d48437..., the canonical ones).
    "fashion-mnist": DatasetSpec("fashion-mnist", {
        "train-images-idx3-ubyte": FileSpec(
            "b0564c3eedabfbf835052cff8503ea422014ce006caf5b757f851416ee8300c7",
            "c59f468a2f672dc815687fe0f83887768d799fd8a3f3276145d20f83aa44d888"),
        "train-labels-idx1-ubyte": FileSpec(
            "0ae29f65d86684f32d1b9c85147786c547b9c6aebcaf235f0400a0cce308b056",
            "bad3541b69d912435c50bb6ba87bec294ff4f6a2e1246121d8633921760443d9"),
        "t10k-images-idx3-ubyte": FileSpec(
            "cc1d090a38ace84dfa1aa66e3ada7c336ef481a96936906477e6dd344da56eaa",
            "5b4141f0afbad91edebe8549f8fcffe087ea10ca49f1dbef5c9a5cd8815ce37b"),
        "t10k-labels-idx1-ubyte": FileSpec(
            "8d3605d196f4be44669e46906da9733c8131fef761fdbfec72c424d5222f1a05",
            "0402a96d92fd2663957122ceb108a494c5af83dab82d92729df917d7dec38c34"),
    }),
}


class DataNotFoundError(FileNotFoundError):
    """A dataset's files are missing from the resolved data directory."""


def _spec(name: str) -> DatasetSpec:
    try:
        return DATASETS[name]
    except KeyError:
        raise ValueError(f"unknown dataset {name!r}; known: {sorted(DATASETS)}") from None


def locate_file(name: str, stem: str, data_dir: str | os.PathLike | None = None) -> tuple[Path, str]:
    """``(path, expected_sha256)`` of file ``stem`` of dataset ``name`` (gzip preferred, else raw)."""
    spec = _spec(name)
    if stem not in spec.files:
        raise ValueError(f"dataset {name!r} has no file {stem!r}")
    folder = resolve_data_dir(data_dir) / spec.name
    gz, raw = folder / f"{stem}.gz", folder / stem
    if gz.is_file():
        return gz, spec.files[stem].gz_sha256
    if raw.is_file():
        return raw, spec.files[stem].raw_sha256
    raise DataNotFoundError(
        f"{name}: missing {gz.name} (or {raw.name}) in {folder}; data directory is "
        f"{describe_resolution(data_dir)}. Run `bimu data fetch {name}` to download and verify it.")


def missing_files(name: str, data_dir: str | os.PathLike | None = None) -> list[str]:
    """Stems of dataset ``name`` that are absent from the data directory."""
    out = []
    for stem in _spec(name).files:
        try:
            locate_file(name, stem, data_dir)
        except DataNotFoundError:
            out.append(stem)
    return out


def verify_dataset(name: str, data_dir: str | os.PathLike | None = None) -> list[Path]:
    """Check that every file of ``name`` is present and has its pinned hash; returns the paths."""
    from bimu.data.idx import verify_sha256

    paths = []
    for stem in _spec(name).files:
        path, sha = locate_file(name, stem, data_dir)
        verify_sha256(path, sha)
        paths.append(path)
    return paths


@functools.lru_cache(maxsize=8)
def _load(name: str, split: str, folder: str) -> tuple[np.ndarray, np.ndarray]:
    img_stem, lab_stem = SPLIT_FILES[split]
    ip, isha = locate_file(name, img_stem, folder)
    lp, lsha = locate_file(name, lab_stem, folder)
    images, labels = read_idx(ip, isha), read_idx(lp, lsha)
    if images.ndim != 3 or labels.ndim != 1 or images.shape[0] != labels.shape[0]:
        raise ValueError(f"{name} {split}: inconsistent shapes {images.shape} / {labels.shape}")
    if labels.size and int(labels.max()) > 9:
        raise ValueError(f"{name} {split}: labels out of range [0, 9]")
    images.setflags(write=False)
    labels.setflags(write=False)
    return images, labels


def load_dataset(name: str, split: str, data_dir: str | os.PathLike | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(images uint8 [n, 28, 28], labels uint8 [n])`` of ``split`` ("train" or "test"), verified.

    Arrays are cached per process and read-only.
    """
    if split not in SPLIT_FILES:
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    _spec(name)
    for stem in SPLIT_FILES[split]:
        locate_file(name, stem, data_dir)  # a missing file is reported with where the folder came from
    return _load(name, split, str(resolve_data_dir(data_dir)))

"""The data of the active-learning entries (:mod:`bimu.reproduce.active_learning`): each venue's
benchmark, its options and the method preset key (:class:`ALSetup`), by the name its entries use
(:data:`SETUPS`).

- ``animals``: ``animals-ti`` (the stand-in) or ``animals``, one task;
- ``openloris``: imbalanced ``objects-seq`` (the stand-in), ``objects-ti`` or ``openloris``, 12 tasks;
- ``pmnist``: ``pmnist-imbalanced``, 10 tasks of real MNIST under the paper's imbalance rule, the
  paper's 784-100-10 Permuted-MNIST network (docs/active-learning.md gives its construction).

>>> s = pmnist_setup(Options(scale="full")); (s.benchmark, s.options, s.preset, s.hidden)
('pmnist-imbalanced', {'n_tasks': 10}, 'pmnist-100', (100,))
>>> animals_setup(Options(scale="full")).hidden
()
"""

from __future__ import annotations

import dataclasses

from bimu import paper
from bimu.reproduce.spec import Options


@dataclasses.dataclass(frozen=True)
class ALSetup:
    """The data of an entry: benchmark name, its factory options, the method preset key and the hidden
    widths of the network (none: a linear head, as on the feature benchmarks)."""

    benchmark: str
    options: dict
    preset: str
    hidden: tuple[int, ...] = ()


def animals_setup(opts: Options) -> ALSetup:
    """``animals-ti`` (stand-in) or ``animals``: one task, all features (1,024 at quick scale)."""
    bench = opts.benchmark or "animals-ti"
    if bench not in ("animals-ti", "animals"):
        raise ValueError(f"--benchmark for the Animals entries must be animals-ti or animals, got {bench!r}")
    return ALSetup(bench, _with_repeats({"n_features": 1024 if opts.scale == "quick" else None}, opts), "animals")


OPENLORIS_BENCHMARKS = ("objects-seq", "objects-ti", "openloris")
"""What ``--benchmark`` may name in the OpenLORIS active-learning entries (the first is the default)."""


def objects_setup(opts: Options) -> ALSetup:
    """Imbalanced ``objects-seq`` (the default stand-in), ``objects-ti`` (the older stand-in) or
    ``openloris`` (the real data), 8,192 features (quick 1,024)."""
    from bimu.reproduce.features import feature_benchmark

    bench = feature_benchmark(opts)
    if bench not in OPENLORIS_BENCHMARKS:
        raise ValueError(f"--benchmark for the OpenLORIS active-learning entries must be one of "
                         f"{', '.join(OPENLORIS_BENCHMARKS)}, got {bench!r}")
    options = {"n_features": 1024 if opts.scale == "quick" else 8192}
    if bench == "openloris":
        options["imbalanced"] = True
    return ALSetup(bench, _with_repeats(options, opts), "openloris-8192-imbalanced")


PMNIST_TASKS = 10
"""Tasks of the imbalanced Permuted-MNIST venue."""


def pmnist_setup(opts: Options) -> ALSetup:
    """``pmnist-imbalanced``: :data:`PMNIST_TASKS` tasks of imbalanced Permuted MNIST, the 784-100-10
    network with the ``pmnist-100`` presets (quick scale: the first 60 training and 100 test examples
    of each task, read as such)."""
    bench = opts.benchmark or "pmnist-imbalanced"
    if bench != "pmnist-imbalanced":
        raise ValueError(f"--benchmark for the Permuted-MNIST active-learning entries must be pmnist-imbalanced, "
                         f"got {bench!r}")
    options = {"n_tasks": PMNIST_TASKS}
    if opts.scale == "quick":
        options.update(train_limit=60, test_limit=100)
    return ALSetup(bench, _with_repeats(options, opts), "pmnist-100", (100,))


SETUPS = {"animals": animals_setup, "openloris": objects_setup, "pmnist": pmnist_setup}
"""An entry's data (``animals``, ``openloris`` or ``pmnist``) -> its setup function."""

AL_BASELINES = {"animals": paper.ANIMALS_AL_BASELINE, "openloris": paper.OPENLORIS_AL_BASELINE}
"""The paper's 100%-update baseline of each data (none on Permuted MNIST: the paper runs no active
learning there)."""

DATA_NAMES = {"openloris": "imbalanced OpenLORIS-Object", "animals": "imbalanced Animals",
              "pmnist": "imbalanced Permuted MNIST"}
"""Table-title names of the entries' data."""


def _with_repeats(options: dict, opts: Options) -> dict:
    """``options`` plus ``stream_repeats`` when the stream is repeated (so run directories record it)."""
    r = opts.stream_repeats
    if isinstance(r, bool) or not isinstance(r, int) or r < 1:
        raise ValueError(f"--stream-repeats must be an integer >= 1, got {r!r}")
    return options if r == 1 else {**options, "stream_repeats": r}

"""Edge inference: bit-packed MC inference, compute-cost accounting, export to npz / C.

- :mod:`bimu.edge.packed` - :class:`PackedNetwork`: uint32 thresholds, bit-sliced sampling,
  popcount forward, votes and uncertainty scores;
- :mod:`bimu.edge.cost` - :func:`compute_cost_table` (the paper's compute-cost appendix, measured);
- :mod:`bimu.edge.export` - :func:`export_model` / :func:`export_run` (npz, C header + reference C);
- :mod:`bimu.edge.clearner` - the C learner (``c/bimu_learn.c``) built on the host and driven via ctypes;
- :mod:`bimu.edge.learner_export` - the ``c-learner`` export (a device that keeps learning) and the
  device state read back into a run directory (``bimu import-device``);
- :mod:`bimu.edge.csign` - the C STE / Synaptic Metaplasticity steps (``c/bimu_sign_learn.c``) via ctypes;
- :mod:`bimu.edge.emulate` - the C learners cross-built for Cortex-M4 / M7 and run under QEMU:
  instruction counts and the device's hash against the host's;
- :mod:`bimu.edge.formats` - the export formats and the files each writes;
- :mod:`bimu.edge.cli` - the ``export``, ``import-device`` and ``compute-cost`` subcommands.
"""

from bimu.lazy import lazy_exports

_SUBMODULES = ("bimu.edge.cost", "bimu.edge.export", "bimu.edge.packed")

__all__ = [
    "PackedNetwork",
    "PackedPrediction",
    "compute_cost_table",
    "expected_cost_al",
    "expected_cost_full",
    "export_model",
    "export_run",
    "lambda_to_thresholds",
    "load_npz",
    "load_run",
    "pack",
]


__getattr__, __dir__ = lazy_exports(__name__, _SUBMODULES, __all__)

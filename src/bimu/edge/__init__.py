"""Edge inference: bit-packed MC inference, compute-cost accounting, export to npz / C.

- :mod:`bimu.edge.packed` - :class:`PackedNetwork`: uint32 thresholds, bit-sliced sampling,
  popcount forward, votes and uncertainty scores;
- :mod:`bimu.edge.cost` - :func:`compute_cost_table` (the paper's compute-cost appendix, measured);
- :mod:`bimu.edge.export` - :func:`export_model` / :func:`export_run` (npz, C header + reference C);
- :mod:`bimu.edge.formats` - the export formats and the files each writes;
- :mod:`bimu.edge.cli` - the ``export`` and ``compute-cost`` subcommands.
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

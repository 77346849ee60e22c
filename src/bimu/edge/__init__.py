"""Edge inference: bit-packed MC inference, compute-cost accounting, export to npz / C.

- :mod:`bimu.edge.packed` - :class:`PackedNetwork`: uint32 thresholds, bit-sliced sampling,
  popcount forward, votes and uncertainty scores;
- :mod:`bimu.edge.cost` - :func:`compute_cost_table` (the paper's compute-cost appendix, measured);
- :mod:`bimu.edge.export` - :func:`export_model` / :func:`export_run` (npz, C header + reference C);
- :mod:`bimu.edge.cli` - the ``export`` and ``compute-cost`` subcommands.
"""

from bimu.edge.cost import compute_cost_table, expected_cost_al, expected_cost_full
from bimu.edge.export import export_model, export_run, load_npz, load_run
from bimu.edge.packed import PackedNetwork, PackedPrediction, lambda_to_thresholds, pack

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

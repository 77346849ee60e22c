"""bimu: active continual learning with metaplastic binary Bayesian neural networks.

The package is laid out as a map of the paper (Cottart, Ballet, Bonnet and Querlioz, ICML 2026),
lowest layer first (a module imports only its own layer and lower ones; ``tests/test_layout.py``):

- :mod:`bimu.atomic`, :mod:`bimu.process`, :mod:`bimu.rng`, :mod:`bimu.paper`, :mod:`bimu.rundir`,
  :mod:`bimu.vectors`, :mod:`bimu.threads` - atomic writes, process identities (lock owners), the
  counter-based random numbers, the paper's quoted numbers and method names, run directories, the
  compiled kernels' vector width, how their threads wait;
- :mod:`bimu.nn` - Bernoulli binary layers, activations, the paper's networks, MC prediction;
- :mod:`bimu.optim` - update rules (BiMU and the baselines), one per file;
- :mod:`bimu.uncertainty`, :mod:`bimu.metrics` - entropies, mutual information, variation ratio;
  accuracy matrices, MMRR, BWT, AUC;
- :mod:`bimu.regularizers` - Online EWC and Synaptic Intelligence penalties;
- :mod:`bimu.methods` - the registry mapping method names to networks and update rules;
- :mod:`bimu.engine` - the fused compiled online loop and ``build_method`` (fused engine or PyTorch);
- :mod:`bimu.data` - benchmarks and their registry;
- :mod:`bimu.active` - acquisition scores, thresholding, budget controller, streaming learner;
- :mod:`bimu.edge` - bit-packed inference and export;
- :mod:`bimu.report` - tables and plots from run directories;
- :mod:`bimu.experiments` - the online stream loop, the runner and sweeps;
- :mod:`bimu.reproduce`, :mod:`bimu.tune` - the paper's tables and figures; hyperparameter search;
- :mod:`bimu.cli` (and each subpackage's ``cli`` module) - the ``bimu`` command.
- :func:`bimu.create_method` - any method by name, on the fused engine when it supports it;
- :func:`bimu.fit_stream` - any method on your own stream (docs/own-data.md).
"""

import warnings

from bimu._version import __version__
from bimu.threads import passive_openmp
from bimu.vectors import prefer_wide_vectors

passive_openmp()  # before torch loads its OpenMP runtime: waiting threads sleep (bimu.threads)

try:  # before anything compiles: 512-bit vectors where the processor has them (bimu.vectors)
    prefer_wide_vectors()
except ValueError as e:
    warnings.warn(f"{e}; using numba's default", stacklevel=2)

__all__ = ["__version__", "create_method", "fit_stream"]


def __getattr__(name):
    # bimu.create_method and bimu.fit_stream import torch and the engine only when first used
    if name == "create_method":
        from bimu.engine.build import create_method

        return create_method
    if name == "fit_stream":
        from bimu.experiments.fit import fit_stream

        return fit_stream
    raise AttributeError(f"module 'bimu' has no attribute {name!r}")


def __dir__():
    # the lazy names too, so that dir(bimu) and tab completion show them
    return sorted({*globals(), *__all__})

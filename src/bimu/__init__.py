"""bimu: active continual learning with metaplastic binary Bayesian neural networks.

The package is laid out as a map of the paper (Cottart, Ballet, Bonnet and Querlioz, ICML 2026):

- :mod:`bimu.nn` - Bernoulli binary layers, activations, the paper's networks, MC prediction;
- :mod:`bimu.optim` - update rules (BiMU and the baselines), one per file;
- :mod:`bimu.uncertainty` - entropies, mutual information, variation ratio;
- :mod:`bimu.methods` - the registry mapping method names to networks and update rules;
- :mod:`bimu.active` - acquisition scores, thresholding, budget controller, streaming learner;
- :mod:`bimu.data`, :mod:`bimu.metrics`, :mod:`bimu.experiments`, :mod:`bimu.report`;
- :mod:`bimu.engine` - the fused compiled online loop;
- :mod:`bimu.edge` - bit-packed inference and export;
- :func:`bimu.fit_stream` - any method on your own stream (docs/own-data.md).
"""

__version__ = "0.1.0"

__all__ = ["__version__", "fit_stream"]


def __getattr__(name):
    # bimu.fit_stream (your own stream from Python) imports torch and the engine only when first used
    if name == "fit_stream":
        from bimu.experiments.fit import fit_stream

        return fit_stream
    raise AttributeError(f"module 'bimu' has no attribute {name!r}")

"""Experiments: typed configs, the online runner, run directories and hyperparameter search."""

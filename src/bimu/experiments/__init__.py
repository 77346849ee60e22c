"""Experiments: typed configs, the evaluation schedule, the online runner, run directories, the demo
and hyperparameter search."""

from bimu.experiments.config import RunConfig
from bimu.experiments.schedule import EvalSchedule

__all__ = ["EvalSchedule", "RunConfig"]

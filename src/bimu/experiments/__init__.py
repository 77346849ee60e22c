"""Experiments: typed configs, evaluation schedule, the online runner, run directories, the demo."""

from bimu.experiments.config import RunConfig
from bimu.experiments.schedule import EvalSchedule

__all__ = ["EvalSchedule", "RunConfig"]

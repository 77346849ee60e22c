"""Experiments: typed configs, the evaluation schedule, the online stream loop and the runner, the
active-learning threshold sweep, run directories and the demo."""

from bimu.experiments.config import RunConfig
from bimu.experiments.schedule import EvalSchedule

__all__ = ["EvalSchedule", "RunConfig"]

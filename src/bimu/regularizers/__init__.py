"""Quadratic continual-learning penalties with task-end hooks: Online EWC and Synaptic Intelligence.

Both hold, per parameter, an importance ``I`` and an anchor ``theta*`` (the parameters at the last
task boundary) and add a penalty ``k * sum I (theta - theta*)^2`` to the data loss. They differ in how
``I`` is built during a task (what each keeps while the task runs) and folded in at its end; the
shared part (state, penalty, gradient, checkpointing) is :class:`~bimu.regularizers.quadratic.QuadraticPenalty`.
"""

from bimu.regularizers.ewc import OnlineEWC
from bimu.regularizers.si import SynapticIntelligence

__all__ = ["OnlineEWC", "SynapticIntelligence"]

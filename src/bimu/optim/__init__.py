"""Update rules, one per module, each a ``torch.optim.Optimizer`` with its functional kernel."""

from bimu.optim.bimu import BiMU, bimu_learning_rate, bimu_update_

__all__ = ["BiMU", "bimu_learning_rate", "bimu_update_"]

"""Update rules, one per module, each a ``torch.optim.Optimizer`` with its functional kernel."""

from bimu.optim.bayesbinn import BayesBiNN, bayesbinn_mu_gradient, bayesbinn_update_
from bimu.optim.bimu import BiMU, bimu_learning_rate, bimu_update_
from bimu.optim.mesu import MESU, mesu_update_
from bimu.optim.metaplastic_adam import MetaplasticAdam, metaplastic_adam_update_, metaplastic_factor

__all__ = [
    "MESU",
    "BayesBiNN",
    "BiMU",
    "MetaplasticAdam",
    "bayesbinn_mu_gradient",
    "bayesbinn_update_",
    "bimu_learning_rate",
    "bimu_update_",
    "mesu_update_",
    "metaplastic_adam_update_",
    "metaplastic_factor",
]

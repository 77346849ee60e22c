"""Registered continual-learning methods (one module each) behind one registry."""

from bimu.methods.base import Hyperparameter, MethodInfo, OnlineMethod
from bimu.methods.bayesbinn import BayesBiNNMethod
from bimu.methods.bimu import BiMUMethod
from bimu.methods.ewc_online import OnlineEWCMethod
from bimu.methods.mesu import MESUMethod
from bimu.methods.registry import available_methods, create_method, get_method, register
from bimu.methods.replay import ExperienceReplayMethod
from bimu.methods.river_adapter import RiverClassifier
from bimu.methods.sgd import SGDMethod
from bimu.methods.si import SynapticIntelligenceMethod
from bimu.methods.ste import STEMethod
from bimu.methods.synaptic_metaplasticity import SynapticMetaplasticityMethod

# The order of the paper's tables, then experience replay (not a method of the paper).
for _cls in (BiMUMethod, BayesBiNNMethod, SynapticMetaplasticityMethod, STEMethod, MESUMethod,
             OnlineEWCMethod, SynapticIntelligenceMethod, SGDMethod, ExperienceReplayMethod):
    register(_cls)
del _cls

__all__ = [
    "BayesBiNNMethod",
    "BiMUMethod",
    "ExperienceReplayMethod",
    "MESUMethod",
    "OnlineEWCMethod",
    "SGDMethod",
    "STEMethod",
    "SynapticIntelligenceMethod",
    "SynapticMetaplasticityMethod",
    "Hyperparameter",
    "MethodInfo",
    "OnlineMethod",
    "RiverClassifier",
    "available_methods",
    "create_method",
    "get_method",
    "register",
]

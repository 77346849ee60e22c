"""Registered continual-learning methods (one module each) behind one registry."""

from bimu.methods.base import Hyperparameter, MethodInfo, OnlineMethod
from bimu.methods.bimu import BiMUMethod
from bimu.methods.registry import available_methods, create_method, get_method, register

register(BiMUMethod)

__all__ = [
    "BiMUMethod",
    "Hyperparameter",
    "MethodInfo",
    "OnlineMethod",
    "available_methods",
    "create_method",
    "get_method",
    "register",
]

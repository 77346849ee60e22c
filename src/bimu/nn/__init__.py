"""Layers and networks of the paper: Bernoulli binary layers, RBG/sign activations, the MLP."""

from bimu.nn.activations import ReverseBinaryGate, SignActivation, rbg, sign_ste
from bimu.nn.bernoulli import SAMPLING_MODES, BernoulliLinear, relaxed_noise
from bimu.nn.mlp import BinaryBayesianMLP
from bimu.nn.predict import predict, predict_samples

__all__ = [
    "SAMPLING_MODES",
    "BernoulliLinear",
    "BinaryBayesianMLP",
    "ReverseBinaryGate",
    "SignActivation",
    "predict",
    "predict_samples",
    "rbg",
    "relaxed_noise",
    "sign_ste",
]

"""Layers and networks of the paper: Bernoulli binary layers, RBG/sign activations, the MLP."""

from bimu.nn.activations import ReverseBinaryGate, SignActivation, rbg, sign_ste
from bimu.nn.bernoulli import SAMPLING_MODES, BernoulliLinear, relaxed_noise
from bimu.nn.gaussian import GaussianLinear, GaussianMLP, gaussian_partner, pair_gaussian
from bimu.nn.mlp import BinaryBayesianMLP
from bimu.nn.predict import predict, predict_samples
from bimu.nn.real_mlp import RealMLP
from bimu.nn.sign_linear import OnlineBatchNorm, SignLinear, SignMLP, sign_identity

__all__ = [
    "SAMPLING_MODES",
    "BernoulliLinear",
    "BinaryBayesianMLP",
    "GaussianLinear",
    "GaussianMLP",
    "OnlineBatchNorm",
    "RealMLP",
    "ReverseBinaryGate",
    "SignActivation",
    "SignLinear",
    "SignMLP",
    "gaussian_partner",
    "pair_gaussian",
    "predict",
    "predict_samples",
    "rbg",
    "relaxed_noise",
    "sign_identity",
    "sign_ste",
]

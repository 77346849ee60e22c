"""Acceptance: fed the same uniforms, the engine and the torch path agree after 200 MNIST steps."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import numpy as np
import pytest
import torch

from bimu.engine import create_fused
from bimu.methods.bimu import BiMUMethod, mc_nll
from bimu.nn.mlp import BinaryBayesianMLP
from bimu.optim.bimu import BiMU

DATA = Path(os.environ.get("BIMU_DATA_DIR", "/work/shared/data")) / "mnist"


def _mnist(n):
    if not (DATA / "train-images-idx3-ubyte.gz").exists():
        pytest.skip(f"MNIST not found under {DATA} (set BIMU_DATA_DIR)")
    with gzip.open(DATA / "train-images-idx3-ubyte.gz") as f:
        x = np.frombuffer(f.read(16 + 784 * n), np.uint8, offset=16).reshape(n, 784).astype(np.float32) / 255
    with gzip.open(DATA / "train-labels-idx1-ubyte.gz") as f:
        y = np.frombuffer(f.read(8 + n), np.uint8, offset=8).astype(np.int64)
    return (x - x.mean()) / x.std(), y


def test_200_mnist_steps_match_torch():
    X, Y = _mnist(200)
    hp = BiMUMethod.resolve_hyperparameters({}, preset="pmnist-100")
    m = create_fused("bimu", [784, 100, 10], 3, hp)
    net = BinaryBayesianMLP([784, 100, 10])
    with torch.no_grad():
        for a, p in zip(m.layer_lambdas(), net.parameters()):
            p.copy_(torch.from_numpy(a))
    opt = BiMU(net.parameters(), lr=hp["lr"], lr_max=hp["lr_max"], likelihood_multiplier=hp["likelihood_multiplier"],
               kl_multiplier=hp["kl_multiplier"], memory_window=hp["memory_window"], prior=hp["prior"])
    for s in range(200):
        us = [torch.from_numpy(u).float() for u in m.train_uniforms(s)]
        opt.zero_grad()
        mc_nll(net(torch.from_numpy(X[s:s + 1]), n_samples=5, uniforms=us), torch.from_numpy(Y[s:s + 1])).backward()
        opt.step()
    m.learn_many(X, Y)
    for a, p in zip(m.layer_lambdas(), net.parameters()):
        p = p.detach().numpy()
        assert np.abs(a - p).max() / np.abs(p).max() < 1e-4
    # same hard predictions and scores with the same evaluation uniforms
    us = [torch.from_numpy(u).float() for u in m.eval_uniforms(5)]
    probs_ref = torch.softmax(net(torch.from_numpy(X), n_samples=5, mode="hard", uniforms=us), -1)
    scores = m.mc_scores(torch.from_numpy(X), n_samples=5)
    assert torch.allclose(scores["probs"], probs_ref, atol=1e-4)
    assert torch.equal(scores["predictions"], torch.log_softmax(probs_ref.log(), -1).mean(0).argmax(-1))

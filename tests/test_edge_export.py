"""Export (npz, C header + reference C) and reading run directories."""

import os
import shutil
import subprocess

import numpy as np
import pytest
import torch

from bimu.edge.export import export_model, export_run, load_npz, load_run
from bimu.edge.packed import pack
from bimu.methods import create_method
from bimu.nn import BinaryBayesianMLP

CC = shutil.which("cc") or shutil.which("gcc")


def make_run(tmp_path, sizes=(40, 24, 5), **overrides):
    m = create_method("bimu", list(sizes), seed=3, preset="pmnist-100", **overrides)
    g = torch.Generator().manual_seed(0)
    for _ in range(3):
        m.learn(torch.randn(1, sizes[0], generator=g), torch.randint(0, sizes[-1], (1,), generator=g))
    run = tmp_path / "pmnist-bimu" / "seed-3"
    run.mkdir(parents=True)
    torch.save({"method_state": m.state_dict(), "task": 0}, run / "checkpoint.pt")
    return m, run


def test_run_directory_round_trips_through_npz(tmp_path):
    m, run = make_run(tmp_path, activation="sign", output_norm=False)
    model, meta = load_run(run)
    assert meta["method"] == "bimu" and model.activation == "sign" and not model.output_norm
    assert torch.equal(model.layers[0].lam, m.model.layers[0].lam)
    (path,) = export_run(run, tmp_path / "out", "npz", input_max=3.0)
    loaded = load_npz(path)
    direct = pack(m, input_max=3.0)
    assert loaded.sizes == direct.sizes and loaded.activation == "sign" and loaded.input_exponent == direct.input_exponent
    for a, b in zip(loaded.thresholds, direct.thresholds):
        assert np.array_equal(a, b)
    x = np.random.default_rng(0).standard_normal((9, 40))
    assert np.array_equal(loaded.predict(x, 6, seed=4).votes, direct.predict(x, 6, seed=4).votes)
    with np.load(path) as z:
        assert str(z["activation"]) == "sign" and float(z["input_scale"]) == direct.input_scale


@pytest.mark.skipif(CC is None, reason="no C compiler (cc/gcc) on PATH")
@pytest.mark.parametrize("sizes,act", [([70, 33, 5], "rbg"), ([130, 65, 7, 4], "sign"), ([300, 19], "rbg")])
def test_reference_c_compiles_and_matches_python_votes(tmp_path, sizes, act):
    torch.manual_seed(1)
    net = BinaryBayesianMLP(sizes, activation=act, gate_width=1.0)
    with torch.no_grad():
        for layer in net.layers:
            layer.lam.uniform_(-2, 2)
    out = tmp_path / "c"
    names = sorted(p.name for p in export_model(net, out, "c-header", input_max=3.0))
    assert names == ["bimu_infer.c", "bimu_model.h"]
    subprocess.run([CC, "-O2", "-std=c99", "-Wall", "-Werror", "-DBIMU_MAIN", "bimu_infer.c", "-o", "bimu_infer",
                    "-lm"], cwd=out, check=True, capture_output=True)
    x = np.random.default_rng(2).standard_normal((8, sizes[0])) * 1.5
    x[0, :3] = [0.5 * 2**-5, 1.5 * 2**-5, 1e6]  # rounding ties and clipping
    text = "\n".join(" ".join(repr(float(v)) for v in row) for row in x) + "\n"
    packed = pack(net, input_max=3.0)
    seed = 2**63 + 12345
    for per_example in (0, 1):
        res = subprocess.run([str(out / "bimu_infer"), str(seed), "7", "5", str(per_example)], input=text,
                             capture_output=True, text=True, check=True)
        c_votes = np.array([[int(v) for v in line.split()] for line in res.stdout.split("\n") if line])
        py = packed.predict(x, 7, seed=seed, sample_offset=5, per_example=bool(per_example)).votes.T
        assert np.array_equal(c_votes, py)
        assert len(set(c_votes.ravel().tolist())) > 1


def test_clear_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_run(tmp_path / "nope")
    (tmp_path / "empty" / "seed-0").mkdir(parents=True)
    (tmp_path / "empty" / "seed-0" / "checkpoint.pt").write_bytes(b"")
    with pytest.raises(FileNotFoundError, match="seed-0"):
        load_run(tmp_path / "empty")
    with pytest.raises(ValueError, match="cannot read"):
        load_run(tmp_path / "empty" / "seed-0")
    torch.save({"task": 1}, tmp_path / "x.pt")
    with pytest.raises(ValueError, match="method_state"):
        load_run(tmp_path / "x.pt")
    torch.save({"method_state": {"method": "sgd", "modules": {"model": {"0.weight": torch.zeros(2, 3)}}}},
               tmp_path / "y.pt")
    with pytest.raises(ValueError, match="supported family"):
        load_run(tmp_path / "y.pt")
    _, run = make_run(tmp_path)
    with pytest.raises(ValueError, match="format"):
        export_run(run, tmp_path / "o", "onnx")
    with pytest.raises(ValueError, match="format"):
        export_model(BinaryBayesianMLP([4, 2]), tmp_path / "o", "h5")


def test_runner_checkpoints_of_both_engines_load(tmp_path):
    """A checkpoint as the runner writes it (numpy accuracy matrix beside the method state), from the
    torch path and from the fused engine, gives back the same lambdas."""
    import numpy as np

    from bimu.edge.export import load_run
    from bimu.engine import create_fused
    from bimu.methods import BiMUMethod, create_method

    hp = BiMUMethod.resolve_hyperparameters({}, preset="pmnist-100")
    torch_method = create_method("bimu", [12, 8, 3], seed=5, preset="pmnist-100")
    fused_method = create_fused("bimu", [12, 8, 3], 5, hp)
    for name, method in (("torch", torch_method), ("fused", fused_method)):
        run = tmp_path / name
        run.mkdir()
        torch.save({"method_state": method.state_dict(), "R": np.full((2, 2), np.nan), "task": 0},
                   run / "checkpoint.pt")
        model, meta = load_run(run)
        assert meta["method"] == "bimu"
        assert [tuple(layer.lam.shape) for layer in model.layers] == [(8, 12), (3, 8)]
    a = load_run(tmp_path / "torch")[0]
    b = load_run(tmp_path / "fused")[0]
    for la, lb in zip(a.layers, b.layers):
        assert torch.allclose(la.lam, lb.lam)  # same seed -> same initial lambdas on both engines

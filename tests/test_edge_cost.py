"""Compute-cost accounting (the paper's appendix formulas) and the edge CLI."""

import argparse
import json

import pytest
import torch

from bimu.edge import cli
from bimu.edge.cost import (
    PAPER_STM32,
    compute_cost_table,
    expected_cost_al,
    expected_cost_full,
    query_rate_from_run,
)
from bimu.methods import create_method


def test_formulas_reproduce_the_paper_table():
    p = PAPER_STM32
    assert expected_cost_al(p["inference_ms"], p["train_ms"], 2, 0.033) == pytest.approx(p["al_ms"], abs=0.05)
    assert expected_cost_full(p["inference_ms"], p["train_ms"], 2) == pytest.approx(p["full_ms"], abs=0.05)
    assert p["full_ms"] / p["al_ms"] == pytest.approx(p["full_over_al"], abs=0.05)
    ref = p["reference_layer"]
    assert ref["train_us"] / ref["inference_us"] == pytest.approx(p["train_over_inference"], abs=0.1)  # paper: "approximately 19.4x"
    assert expected_cost_al(1.0, 10.0, k=3, query_rate=0.0) == 3.0
    with pytest.raises(ValueError, match="K"):
        expected_cost_al(1.0, 1.0, k=0)
    with pytest.raises(ValueError, match="query rate"):
        expected_cost_al(1.0, 1.0, k=2, query_rate=1.5)


def test_cost_table_is_consistent_and_formats_beside_the_paper():
    t = compute_cost_table(sizes=[32, 4], preset=None, k=3, query_rate=0.1, n_examples=2, repeats=1,
                           inference_samples=2)
    assert set(t.inference) == {"packed", "float"} and "torch" in t.train
    assert all(v > 0 for v in list(t.inference.values()) + list(t.train.values()))
    e = t.expected("packed", "torch")
    assert e["al"] == pytest.approx(3 * (t.inference["packed"] + 0.1 * t.train["torch"]))
    assert e["full"] == pytest.approx(3 * (t.inference["packed"] + t.train["torch"]))
    text = t.format()
    assert "C_AL" in text and "559.4" in text and "19.4x" in text and "K=3" in text
    d = t.as_dict()
    json.dumps(d)
    assert d["expected"]["float+torch"]["full_over_al"] > 1


def test_query_rate_from_run_and_extra_training_backend(tmp_path):
    m = create_method("bimu", [8, 2], seed=0)
    m.learn(torch.randn(1, 8), torch.tensor([1]))
    m.observe_unlabelled(3)
    torch.save({"method_state": m.state_dict()}, tmp_path / "checkpoint.pt")
    assert query_rate_from_run(tmp_path) == 0.25
    calls = []

    class Dummy:
        def learn(self, x, y):
            calls.append(x.shape)

    t = compute_cost_table(sizes=[8, 2], preset=None, run_dir=tmp_path, n_examples=2, repeats=1,
                           inference_samples=1, train_steps={"dummy": lambda sizes, hp, seed: Dummy()})
    assert t.query_rate == 0.25 and "measured" in t.query_rate_source
    assert "dummy" in t.train and calls and calls[0] == (1, 8)


def test_cli_export_and_compute_cost(tmp_path, capsys):
    m = create_method("bimu", [20, 3], seed=0)
    run = tmp_path / "run"
    run.mkdir()
    torch.save({"method_state": m.state_dict()}, run / "checkpoint.pt")
    parser = argparse.ArgumentParser(prog="bimu")
    cli.add_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["export", str(run), "--format", "npz", "--out", str(tmp_path / "e")])
    assert args.func(args) == 0
    assert (tmp_path / "e" / "bimu_model.npz").is_file()
    assert cli.main(["export", str(tmp_path / "missing")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert cli.main(["export", str(run), "--input-bits", "1"]) == 2
    with pytest.raises(SystemExit):
        cli.main(["export", str(run), "--format", "onnx"])
    js = tmp_path / "cost.json"
    assert cli.main(["compute-cost", "--sizes", "16", "3", "--preset", "none", "--examples", "1", "--repeats", "1",
                     "--emulated", "no", "--json", str(js)]) == 0
    assert "paper STM32" in capsys.readouterr().out
    assert json.loads(js.read_text())["sizes"] == [16, 3]
    assert cli.main(["compute-cost", "--sizes", "16", "3", "--preset", "none", "--query-rate", "2"]) == 2

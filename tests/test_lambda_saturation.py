"""scripts/lambda_saturation.py: the saturation of lambda, layer by layer, from a checkpoint or its .npz."""

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
import lambda_saturation  # noqa: E402 - scripts/ is not a package


def test_stats_by_hand_and_an_npz_saved_from_a_checkpoint_gives_the_same_lambdas(tmp_path, capsys):
    import torch
    from bimu.rundir import checkpoint_bytes

    lam0 = np.array([[0.5, -4.0], [6.0, -200.0]], dtype=np.float32)  # |lambda|: 0.5, 4, 6, 200
    lam1 = np.array([[1.0, -2.0, 10.0]], dtype=np.float32)
    ckpt = tmp_path / "checkpoint.pt"
    ckpt.write_bytes(checkpoint_bytes({"method_state": {"modules": {"lam": [torch.from_numpy(lam0),
                                                                            torch.from_numpy(lam1)]}}}))
    saved = tmp_path / "lambda.npz"
    assert lambda_saturation.main([str(ckpt), "--save", str(saved)]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "layer 0 (2, 2): median |lambda| 5.0, largest 200, |lambda| > 3: 75.00%, |lambda| > 5: 50.00%",
        "layer 1 (1, 3): median |lambda| 2.0, largest 10, |lambda| > 3: 33.33%, |lambda| > 5: 33.33%"]
    for a, b in zip(lambda_saturation.lambdas(str(saved)), (lam0, lam1)):
        np.testing.assert_array_equal(a, b)

"""How saturated a BayesBiNN or BiMU network's natural parameters lambda are, layer by layer.

    python scripts/lambda_saturation.py CHECKPOINT_OR_NPZ [--save FILE.npz]

CHECKPOINT_OR_NPZ is a run's ``checkpoint.pt`` (read with ``bimu.rundir.load_checkpoint_file``) or an
``.npz`` of the lambdas that ``--save`` wrote from one (``layer0``, ``layer1``, ...; a finished run keeps
no checkpoint, so the lambdas of its last one can be kept this way). For each layer it prints the
median and largest |lambda| and the share of weights with |lambda| > 3 and > 5: a weight is +1 with
probability sigmoid(2 lambda), so |lambda| > 5 flips its sign in under 0.01% of the samples.
"""

import sys

import numpy as np


def lambdas(path: str) -> list[np.ndarray]:
    """The lambda matrices of the checkpoint or ``.npz`` at ``path``, first layer first."""
    if path.endswith(".npz"):
        with np.load(path, allow_pickle=False) as z:
            return [z[f"layer{i}"] for i in range(len(z.files))]
    from bimu.rundir import load_checkpoint_file

    return [np.asarray(t, dtype=np.float32) for t in load_checkpoint_file(path)["method_state"]["modules"]["lam"]]


def main(argv: list[str]) -> int:
    args = [a for a in argv if a != "--save"]
    save = argv[argv.index("--save") + 1] if "--save" in argv and argv.index("--save") + 1 < len(argv) else None
    if save:
        args.remove(save)
    if len(args) != 1:
        sys.exit(__doc__)
    layers = lambdas(args[0])
    for i, lam in enumerate(layers):
        a = np.abs(lam).ravel()
        print(f"layer {i} {lam.shape}: median |lambda| {np.median(a):.1f}, largest {a.max():.3g}, "
              f"|lambda| > 3: {100 * (a > 3).mean():.2f}%, |lambda| > 5: {100 * (a > 5).mean():.2f}%")
    if save:
        np.savez_compressed(save, **{f"layer{i}": lam for i, lam in enumerate(layers)})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

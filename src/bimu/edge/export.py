"""Export a trained binary Bayesian network for a device: ``npz`` or a C header + reference C file.

Both formats hold the uint32 thresholds of ``P(w = +1)`` (see :mod:`bimu.edge.packed`), the layer
sizes, the activation, the RBG gate width, whether the logits are layer-normalised, and the input
quantisation (bits and power-of-two scale). ``c-header`` writes ``bimu_model.h`` (bit-sliced
thresholds, 32 bits per weight, plus constants) and ``bimu_infer.c``, a dependency-free C99
implementation of the same sampler and forward pass: with the same seed it gives the same votes
as :meth:`PackedNetwork.predict`.

>>> import tempfile, torch
>>> from bimu.nn import BinaryBayesianMLP
>>> d = tempfile.mkdtemp()
>>> [p.name for p in export_model(BinaryBayesianMLP([12, 3]), d, "npz")]
['bimu_model.npz']
>>> load_npz(f"{d}/bimu_model.npz").sizes
[12, 3]
"""

from __future__ import annotations

import importlib.resources
from pathlib import Path

import numpy as np
import torch

from bimu.atomic import atomic_path, atomic_write_text
from bimu.edge.formats import FORMAT_FILES, FORMATS
from bimu.edge.packed import PackedNetwork, pack
from bimu.nn.mlp import LAYER_NORM_EPS, BinaryBayesianMLP
from bimu.edge.runs import layer_lambdas, read_checkpoint  # noqa: F401 - part of this module's interface

FORMAT_VERSION = 1
RNG_NAME = "splitmix64-bitsliced-v1"
"""Name of the sampler (stream key, counter layout, MSB-first bit slicing); stored in every export."""


def load_run(run_dir) -> tuple[BinaryBayesianMLP, dict]:
    """The network stored in a run directory's ``checkpoint.pt`` (or that file), and its metadata.

    Errors as :func:`read_checkpoint`, and ValueError for a checkpoint that does not hold a network
    of the supported family (``layers.{i}.lam`` Bernoulli layers).
    """
    state = read_checkpoint(run_dir)
    return model_from_method_state(state["method_state"], source=str(run_dir))


def model_from_method_state(ms: dict, source: str = "state") -> tuple[BinaryBayesianMLP, dict]:
    """Rebuild the :class:`BinaryBayesianMLP` of an ``OnlineMethod.state_dict()``."""
    method = ms.get("method", "?")
    lams = layer_lambdas(ms, source)
    sizes = [int(lams[0].shape[1])] + [int(t.shape[0]) for t in lams]
    if "sizes" in ms and [int(s) for s in ms["sizes"]] != sizes:
        raise ValueError(f"{source}: sizes {list(ms['sizes'])} do not match the layers {sizes}")
    hp = dict(ms.get("hparams") or {})
    model = BinaryBayesianMLP(sizes, activation=hp.get("activation", "rbg"),
                              output_norm=bool(hp.get("output_norm", True)),
                              gate_width=float(hp.get("gate_width", 1.0)))
    model.load_state_dict({f"layers.{i}.lam": torch.as_tensor(t).to(torch.float32) for i, t in enumerate(lams)})
    meta = {"method": method, "examples_seen": ms.get("examples_seen"), "seed": ms.get("seed")}
    return model, meta


# ---------------------------------------------------------------------------- writing
def save_npz(packed: PackedNetwork, path, meta: dict | None = None) -> Path:
    """Write ``packed`` (thresholds + everything inference needs) to an ``.npz`` file."""
    path = Path(path)
    arrays = {
        "format_version": np.int64(FORMAT_VERSION),
        "rng": np.str_(RNG_NAME),
        "sizes": np.asarray(packed.sizes, dtype=np.int64),
        "activation": np.str_(packed.activation),
        "output_norm": np.bool_(packed.output_norm),
        "gate_width": np.float64(packed.gate_width),
        "layer_norm_eps": np.float64(LAYER_NORM_EPS),
        "input_bits": np.int64(packed.input_bits),
        "input_exponent": np.int64(packed.input_exponent),
        "input_scale": np.float64(packed.input_scale),
        "method": np.str_((meta or {}).get("method") or ""),
    }
    for i, t in enumerate(packed.thresholds):
        arrays[f"thresholds_{i}"] = t

    with atomic_path(path) as tmp, open(tmp, "wb") as f:
        np.savez(f, **arrays)
    return path


def load_npz(path) -> PackedNetwork:
    """Read a :class:`PackedNetwork` written by :func:`save_npz`."""
    with np.load(path, allow_pickle=False) as z:
        if int(z["format_version"]) != FORMAT_VERSION or str(z["rng"]) != RNG_NAME:
            raise ValueError(f"{path}: unsupported export format {int(z['format_version'])} / {str(z['rng'])}")
        sizes = [int(s) for s in z["sizes"]]
        return PackedNetwork(sizes, [z[f"thresholds_{i}"] for i in range(len(sizes) - 1)],
                             activation=str(z["activation"]), output_norm=bool(z["output_norm"]),
                             gate_width=float(z["gate_width"]), input_bits=int(z["input_bits"]),
                             input_exponent=int(z["input_exponent"]))


def c_template() -> str:
    """The reference C inference source (``bimu/edge/c/bimu_infer.c``)."""
    return (importlib.resources.files("bimu.edge") / "c" / "bimu_infer.c").read_text()


def _c_array(name: str, ctype: str, values, per_line: int, fmt) -> str:
    vals = [fmt(v) for v in values]
    lines = [", ".join(vals[i:i + per_line]) for i in range(0, len(vals), per_line)]
    return f"static const {ctype} {name}[{len(vals)}] = {{\n    " + ",\n    ".join(lines) + "\n};\n"


def c_header(packed: PackedNetwork, meta: dict | None = None) -> str:
    """The text of ``bimu_model.h``: sizes, constants and bit-sliced thresholds of ``packed``."""
    sizes = packed.sizes
    n_layers = len(sizes) - 1
    words = [(n + 63) // 64 for n in sizes[:-1]]
    out = [
        "/* bimu_model.h - generated by bimu.edge.export; do not edit. */",
        f"/* method: {(meta or {}).get('method') or '?'}; sampler: {RNG_NAME}; thresholds t = "
        "ceil(sigmoid(2 lambda) 2^32 - 1/2), stored bit-sliced: planes[o][w][j] = bit 31-j of the "
        "64 weights of word w of row o */",
        "#ifndef BIMU_MODEL_H", "#define BIMU_MODEL_H", "#include <stdint.h>", "",
        f"#define BIMU_N_LAYERS {n_layers}",
        f"#define BIMU_IN {sizes[0]}",
        f"#define BIMU_OUT {sizes[-1]}",
        f"#define BIMU_IN_WORDS {words[0]}",
        f"#define BIMU_INPUT_BITS {packed.input_bits}",
        f"#define BIMU_INPUT_EXPONENT ({packed.input_exponent})",
        f"#define BIMU_ACT_SIGN {int(packed.activation == 'sign')}",
        f"#define BIMU_OUTPUT_NORM {int(packed.output_norm)}",
        f"#define BIMU_MAX_LAYER_WORDS {max(w * o for w, o in zip(words, sizes[1:]))}",
        f"#define BIMU_MAX_WIDTH {max(sizes[1:])}",
        f"#define BIMU_MAX_ACT_WORDS {max((s + 63) // 64 for s in sizes[1:])}",
        "",
        _c_array("bimu_sizes", "int", sizes, 16, str),
        _c_array("bimu_valid_last", "uint64_t", packed._valid, 4, lambda v: f"0x{int(v):016X}ULL"),
        f"static const double bimu_gate_a2 = {float(packed._a2).hex()};",
        _c_array("bimu_c_eps", "double", packed._c_eps, 4, lambda v: float(v).hex()),
    ]
    for i, pl in enumerate(packed.planes):
        out.append(_c_array(f"bimu_planes_{i}", "uint64_t", pl.ravel(), 4, lambda v: f"0x{int(v):016X}ULL"))
    out.append("static const uint64_t *const bimu_planes[BIMU_N_LAYERS] = {"
               + ", ".join(f"bimu_planes_{i}" for i in range(n_layers)) + "};")
    out += ["", "#endif /* BIMU_MODEL_H */", ""]
    return "\n".join(out)


def export_packed(packed: PackedNetwork, out_dir, format: str = "npz", meta: dict | None = None) -> list[Path]:
    """Write ``packed`` to ``out_dir`` in ``format`` (``npz`` or ``c-header``); returns the written paths."""
    if format == "c-learner":
        raise ValueError("format 'c-learner' exports a run's learner state: use export_run (bimu export RUN)")
    if format not in FORMATS:
        raise ValueError(f"unknown export format {format!r}; expected one of {FORMATS}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if format == "npz":
        return [save_npz(packed, out / FORMAT_FILES["npz"][0], meta)]
    paths = []
    for name, text in zip(FORMAT_FILES["c-header"], (c_header(packed, meta), c_template())):
        p = out / name
        atomic_write_text(p, text)
        paths.append(p)
    return paths


def export_model(model, out_dir, format: str = "npz", input_bits: int = 8, input_max: float | None = None,
                 input_exponent: int | None = None, calibration=None, meta: dict | None = None) -> list[Path]:
    """Export a :class:`BinaryBayesianMLP` or a method holding one (``.model``) as ``npz`` or ``c-header``;
    see :func:`pack` (the ``c-learner`` format exports a run: :func:`export_run`)."""
    if format == "c-learner":
        raise ValueError("format 'c-learner' exports a run's learner state: use export_run (bimu export RUN)")
    if format not in FORMATS:
        raise ValueError(f"unknown export format {format!r}; expected one of {FORMATS}")
    if meta is None and hasattr(model, "info"):
        meta = {"method": model.info.name}
    packed = pack(model, input_bits=input_bits, input_max=input_max, input_exponent=input_exponent,
                  calibration=calibration)
    return export_packed(packed, out_dir, format, meta)


def export_run(run_dir, out_dir, format: str = "npz", **kwargs) -> list[Path]:
    """Export the network of a run directory (``checkpoint.pt``, see docs/contracts.md); ``kwargs`` are
    :func:`export_model`'s, or for ``c-learner`` :func:`bimu.edge.learner_export.export_c_learner`'s."""
    if format not in FORMATS:
        raise ValueError(f"unknown export format {format!r}; expected one of {FORMATS}")
    if format == "c-learner":  # the learner's state (bimu.edge.learner_export), not a packed network
        from bimu.edge.learner_export import export_c_learner

        return export_c_learner(run_dir, out_dir, **kwargs)
    model, meta = load_run(run_dir)
    return export_model(model, out_dir, format, meta=meta, **kwargs)

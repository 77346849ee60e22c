"""A trained run as the state of the C learner on a device (``bimu export RUN --format c-learner``), and
a device's state read back into a run directory (``bimu import-device``) that ``bimu evaluate`` scores.

Export: :func:`export_c_learner` writes into one folder everything a firmware compiles:

- ``bimu_config.h`` - the network (sizes, K relaxed samples per step, largest query K, activation,
  update rule; :func:`bimu.edge.clearner.config_header`) and ``BIMU_EXPORT_ID``, which ties every state
  the device writes to this export;
- ``bimu_export.h`` - the run's lambda as a ``float`` array (``bimu_export_lambda``; the prior of
  BayesBiNN beside it), its hyperparameters, random keys, counters, the query rule, and
  ``bimu_export_init(&L)``, which fills a ``bimu_learner`` with all of it;
- copies of the learner (``bimu_learn.h``, ``bimu_learn.c``) and of the state writer (``bimu_state.h``,
  ``bimu_state.c``; the format is documented there).

The device goes on from where the run stopped: the same training key and step counter as the fused
engine's, so a float64 build of an export of a fused run continues the engine's own random stream. Its
query decisions draw their keys from ``derive_key(seed, 3)`` (:data:`DEVICE_QUERY_STREAM`) unless the
firmware passes its own.

Read-back (:mod:`bimu.edge.device_state`): :func:`~bimu.edge.device_state.read_device_state` checks a state file strictly (regular file, exact size for the
run's network, magic, version, every header field, checksum, finite values) before it returns it, and
:func:`~bimu.edge.device_state.import_device` writes a seed directory: the run's ``config.json``, a checkpoint whose lambda (and
counters) are the device's, in the layout of the run's own checkpoint, and ``device.json`` (where the
state came from, its counters and lambda hash).

>>> DEVICE_STATE_MAGIC, STATE_HEADER_BYTES
(b'BIMUSTAT', 152)
"""

from __future__ import annotations

import hashlib
import importlib.resources
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from bimu.atomic import atomic_write_text

LEARNER_METHODS = ("bimu", "bayesbinn")
"""Methods whose checkpoints the C learner continues (the paper's binary Bayesian networks)."""
C_LEARNER_SOURCES = ("bimu_learn.h", "bimu_learn.c", "bimu_state.h", "bimu_state.c")
"""Files copied from ``bimu/edge/c`` into a ``c-learner`` export."""
DEVICE_QUERY_STREAM = 3
"""Stream id of the device's own query keys: ``query_key = derive_key(seed, 3)``."""
DEFAULT_QUERY_SAMPLES = 2
"""K of the device's query decisions unless ``--query-samples`` says otherwise (the paper's on-device K)."""
DEFAULT_QUERY_THRESHOLD = 0.5
"""Variation-ratio threshold of the device's query decisions (with K = 2: ask when the two samples disagree)."""
DEVICE_STATE_MAGIC = b"BIMUSTAT"
STATE_HEADER_BYTES = 152
STATE_MAX_LAYERS = 8
@dataclass
class LearnerSpec:
    """What a device needs of a run: method, network, hyperparameters, lambda, keys and counters."""

    method: str
    sizes: list[int]
    hparams: dict[str, Any]
    seed: int
    lam: np.ndarray
    """All lambdas, layer after layer (``[out][in]`` each): the fused engine's layout."""
    prior: np.ndarray | None
    train_step: int
    examples_seen: int
    updates_applied: int
    query_samples: int = DEFAULT_QUERY_SAMPLES
    query_threshold: float = DEFAULT_QUERY_THRESHOLD
    source: str = ""
    layout: str = "fused"
    extra: dict = field(default_factory=dict)

    @property
    def n_params(self) -> int:
        """The number of parameters P."""
        return int(self.lam.size)

    @property
    def query_need(self) -> int:
        """Votes of dissent that ask for a label (:func:`bimu.active.threshold.vote_threshold`)."""
        from bimu.active.threshold import vote_threshold

        return int(vote_threshold(self.query_threshold, self.query_samples))

    @property
    def export_id(self) -> int:
        """64 bits of SHA-256 over the method, sizes, seed, step counter and float32 lambda: the id every
        state of a device started from this export carries."""
        h = hashlib.sha256(json.dumps([self.method, self.sizes, self.seed, self.train_step]).encode())
        h.update(np.ascontiguousarray(self.lam, dtype="<f4").tobytes())
        return int.from_bytes(h.digest()[:8], "little")


def _torch_prior(ms: dict, n_layers: int) -> list | None:
    opt = (ms.get("modules") or {}).get("optimizer") or {}
    state = opt.get("state") or {}
    try:
        return [state[i]["prior"] for i in range(n_layers)]
    except (KeyError, TypeError):
        return None


def learner_spec(run_dir, query_samples: int = DEFAULT_QUERY_SAMPLES,
                 query_threshold: float = DEFAULT_QUERY_THRESHOLD) -> LearnerSpec:
    """The :class:`LearnerSpec` of a run directory's checkpoint (or of a checkpoint file). ValueError (one
    line) for a method the C learner does not run, a temperature other than 1, an activation other than
    the RBG or sign, more than :data:`STATE_MAX_LAYERS` layers, non-finite lambda, or a bad query rule."""
    from bimu.edge.runs import layer_lambdas, read_checkpoint

    state = read_checkpoint(run_dir)
    ms = state["method_state"]
    src = str(run_dir)
    method = ms.get("method", "?")
    if method not in LEARNER_METHODS:
        raise ValueError(f"{src}: method {method!r}: the C learner runs {' and '.join(LEARNER_METHODS)} only")
    lams = layer_lambdas(ms, src)
    sizes = [int(lams[0].shape[1])] + [int(t.shape[0]) for t in lams]
    if len(sizes) - 1 > STATE_MAX_LAYERS:
        raise ValueError(f"{src}: {len(sizes) - 1} layers; the C learner's state holds at most {STATE_MAX_LAYERS}")
    hp = dict(ms.get("hparams") or {})
    if float(hp.get("temperature", 1.0)) != 1.0:
        raise ValueError(f"{src}: temperature {hp['temperature']}: the C learner runs at temperature 1")
    if hp.get("activation", "rbg") not in ("rbg", "sign"):
        raise ValueError(f"{src}: activation {hp.get('activation')!r}: the C learner runs 'rbg' and 'sign'")
    lam = np.concatenate([np.asarray(t, dtype=np.float64).reshape(-1) for t in lams])
    bad = int((~np.isfinite(lam)).sum())
    if bad:
        raise ValueError(f"{src}: {bad} of {lam.size} lambda values are not finite (NaN or infinite); refused")
    modules = ms.get("modules") or {}
    layout = "fused" if isinstance(modules.get("lam"), (list, tuple)) else "torch"
    prior = None
    if method == "bayesbinn":
        if layout == "fused":
            prior = np.asarray(modules["prior"], dtype=np.float64).reshape(-1)
        else:
            parts = _torch_prior(ms, len(lams))
            if parts is None:
                raise ValueError(f"{src}: a BayesBiNN checkpoint without its prior lambda (optimizer state)")
            prior = np.concatenate([np.asarray(p, dtype=np.float64).reshape(-1) for p in parts])
        if prior.shape != lam.shape or not np.isfinite(prior).all():
            raise ValueError(f"{src}: BayesBiNN's prior lambda must hold {lam.size} finite values")
    k = int(query_samples)
    if not 1 <= k <= 64:
        raise ValueError(f"--query-samples must be between 1 and 64, got {query_samples}")
    tau = float(query_threshold)
    if not (math.isfinite(tau) and 0.0 <= tau <= 1.0):
        raise ValueError(f"--query-threshold is a variation ratio in [0, 1], got {query_threshold}")
    updates = int(ms.get("updates_applied") or 0)
    step = int(modules["train_step"]) if layout == "fused" and "train_step" in modules else updates
    return LearnerSpec(method, sizes, hp, int(ms.get("seed") or 0), lam, prior, step,
                       int(ms.get("examples_seen") or 0), updates, k, tau, src, layout)


# ---------------------------------------------------------------------------- writing an export
def _hex(v: float) -> str:
    """A C99 hexadecimal floating constant with the value of ``v`` exactly."""
    if v == 0.0:
        return "-0x0p+0" if math.copysign(1.0, v) < 0 else "0x0p+0"
    s = float(v).hex()  # '0x1.8000000000000p-3'
    mant, exp = s.split("p")
    mant = mant.rstrip("0").rstrip(".")
    return f"{mant}p{exp}"


def _real_array(name: str, values: np.ndarray) -> str:
    vals = [_hex(float(v)) for v in np.asarray(values, dtype=np.float32).astype(np.float64)]
    rows = [", ".join(vals[i:i + 8]) for i in range(0, len(vals), 8)]
    return f"static const bimu_real {name}[BIMU_N_PARAMS] = {{\n    " + ",\n    ".join(rows) + "\n};\n"


def learner_config(spec: LearnerSpec) -> str:
    """``bimu_config.h`` of an export: :func:`bimu.edge.clearner.config_header` plus ``BIMU_EXPORT_ID``."""
    from bimu.edge.clearner import config_header

    hp = spec.hparams
    text = config_header(spec.sizes, int(hp.get("n_samples", 1)), spec.query_samples, hp.get("activation", "rbg"),
                         bool(hp.get("output_norm", True)), spec.method == "bayesbinn")
    body, end = text.rsplit("#endif", 1)
    return (body + f"#define BIMU_EXPORT_ID 0x{spec.export_id:016X}ULL  /* ties the device's states to this export */\n"
            + "#endif" + end)


def _hparams_call(spec: LearnerSpec) -> str:
    hp = spec.hparams
    if spec.method == "bimu":
        args = [hp["lr"], hp["lr_max"], hp["likelihood_multiplier"], hp["kl_multiplier"], hp["memory_window"],
                hp.get("prior", 0.0), hp.get("gate_width", 1.0)]
        names = "lr, lr_max, likelihood_multiplier, kl_multiplier, memory_window, prior, gate_width"
        return (f"    /* {names} = {', '.join(repr(float(a)) for a in args)} */\n"
                f"    bimu_hparams_bimu(&hp, {', '.join(_hex(float(a)) for a in args)});\n")
    from bimu.optim.bayesbinn import prior_sign

    pull = prior_sign(hp["prior_direction"]) * float(hp["lr"]) * float(hp["prior_strength"])
    args = [hp["lr"], hp["ratio_eps"], pull, hp.get("gate_width", 1.0)]
    return (f"    /* lr, ratio_eps, prior pull (sign lr prior_strength), gate_width = "
            f"{', '.join(repr(float(a)) for a in args)} */\n"
            f"    bimu_hparams_bayesbinn(&hp, {', '.join(_hex(float(a)) for a in args)});\n")


def export_header(spec: LearnerSpec) -> str:
    """The text of ``bimu_export.h``: lambda (float), hyperparameters, keys, counters and the query rule
    of ``spec``, with ``bimu_export_init``."""
    from bimu.rng import EVAL_STREAM, TRAIN_STREAM, derive_key

    keys = {"TRAIN_KEY": int(derive_key(spec.seed, TRAIN_STREAM)), "EVAL_KEY": int(derive_key(spec.seed, EVAL_STREAM)),
            "QUERY_KEY": int(derive_key(spec.seed, DEVICE_QUERY_STREAM))}
    out = [
        "/* bimu_export.h - generated by `bimu export --format c-learner`; do not edit.",
        f" * run: {spec.source}; method {spec.method}, sizes {spec.sizes}, seed {spec.seed}, lambda as float32.",
        f" * The device goes on after {spec.examples_seen} examples and {spec.updates_applied} updates (training step "
        f"{spec.train_step}); query decisions: K = {spec.query_samples} hard samples, ask iff the variation ratio "
        f">= {spec.query_threshold:g} (dissent >= {spec.query_need}). */",
        "#ifndef BIMU_EXPORT_H", "#define BIMU_EXPORT_H", "", '#include "bimu_learn.h"', "",
        f"#define BIMU_EXPORT_SEED {spec.seed}ULL",
        *(f"#define BIMU_EXPORT_{k} 0x{v:016X}ULL" for k, v in keys.items()),
        f"#define BIMU_EXPORT_TRAIN_STEP {spec.train_step}ULL",
        f"#define BIMU_EXPORT_EXAMPLES_SEEN {spec.examples_seen}ULL",
        f"#define BIMU_EXPORT_UPDATES_APPLIED {spec.updates_applied}ULL",
        f"#define BIMU_EXPORT_QUERY_SAMPLES {spec.query_samples}",
        f"#define BIMU_EXPORT_QUERY_NEED {spec.query_need}",
        "",
        _real_array("bimu_export_lambda", spec.lam),
    ]
    if spec.prior is not None:
        out.append(_real_array("bimu_export_prior", spec.prior))
    init = [
        "/* Fills L with the exported state (lambda, hyperparameters, keys, counters, query rule). */",
        "static inline void bimu_export_init(bimu_learner *L) {",
        "    bimu_hparams hp;",
        _hparams_call(spec).rstrip("\n"),
        "    bimu_init(L, bimu_export_lambda, &hp, BIMU_EXPORT_TRAIN_KEY, BIMU_EXPORT_EVAL_KEY, BIMU_EXPORT_QUERY_KEY,",
        "              BIMU_EXPORT_TRAIN_STEP);",
        "    bimu_set_query(L, BIMU_EXPORT_QUERY_SAMPLES, BIMU_EXPORT_QUERY_NEED);",
        "    bimu_set_counters(L, BIMU_EXPORT_EXAMPLES_SEEN, BIMU_EXPORT_UPDATES_APPLIED, 0);",
    ]
    if spec.prior is not None:
        init += ["    {", "        bimu_real *prior = bimu_prior(L);", "        long i;",
                 "        for (i = 0; i < BIMU_N_PARAMS; i++) prior[i] = bimu_export_prior[i];", "    }"]
    out += init + ["}", "", "#endif /* BIMU_EXPORT_H */", ""]
    return "\n".join(out)


def export_c_learner(run_dir, out_dir, query_samples: int = DEFAULT_QUERY_SAMPLES,
                     query_threshold: float = DEFAULT_QUERY_THRESHOLD) -> list[Path]:
    """Write the ``c-learner`` export of a run directory into ``out_dir`` (see the module); returns the
    written paths, ``bimu_config.h`` and ``bimu_export.h`` first."""
    spec = learner_spec(run_dir, query_samples, query_threshold)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    texts = {"bimu_config.h": learner_config(spec), "bimu_export.h": export_header(spec)}
    for name in C_LEARNER_SOURCES:
        texts[name] = (importlib.resources.files("bimu.edge") / "c" / name).read_text()
    paths = []
    for name, text in texts.items():
        atomic_write_text(out / name, text)
        paths.append(out / name)
    return paths


# ---------------------------------------------------------------------------- the state's size
def _c_int_expression(text: str, macros: dict[str, int]) -> int:
    """The value of an integer C expression of ``bimu_learn.h`` (macros, integers, ``+ - * /`` with C's
    truncating division, parentheses), read without ``eval``."""
    import ast
    import re

    expr = re.sub(r"\b[A-Z_][A-Z0-9_]*\b", lambda m: str(macros[m.group(0)]), text.strip())
    ops = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
           ast.Div: lambda a, b: int(a / b)}

    def value(node) -> int:
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in ops:
            return ops[type(node.op)](value(node.left), value(node.right))
        raise ValueError(f"bimu_learn.h: cannot read the expression {text!r}")

    return value(ast.parse(expr, mode="eval").body)


def state_struct_bytes(sizes: Sequence[int], n_samples: int, query_samples: int, real_bytes: int = 4,
                       bayesbinn: bool = False, store_planes: bool | None = None,
                       keep_samples: bool | None = None) -> int:
    """``sizeof(bimu_learner)`` for a network, the SRAM a device gives its learner: the fields of the
    struct as ``bimu_learn.h`` declares them (read from the header, its ``#if`` options honoured), laid
    out with the alignment of a 32- or 64-bit core (8 for 64-bit integers and doubles).
    ``store_planes`` / ``keep_samples``: as :func:`bimu.edge.clearner.config_header` (``None``: its
    default for this network).

    >>> state_struct_bytes([512, 16], 1, 2) > 4 * 512 * 16
    True
    >>> state_struct_bytes([512, 16], 1, 2, store_planes=False, keep_samples=False) < state_struct_bytes([512, 16], 1, 2)
    True
    """
    import ctypes
    import re

    from bimu.edge.clearner import LARGE_FIRST_LAYER

    sizes = [int(s) for s in sizes]
    P = sum(a * b for a, b in zip(sizes[:-1], sizes[1:]))
    small = sizes[0] * sizes[1] <= LARGE_FIRST_LAYER
    macros = {"BIMU_N_PARAMS": P, "BIMU_K": int(n_samples), "BIMU_QUERY_K": int(query_samples),
              "BIMU_HIDDEN_UNITS": sum(sizes[1:]), "BIMU_MAX_OUT": max(sizes[1:]), "BIMU_MAX_IN": max(sizes[:-1]),
              "BIMU_N_LAYERS": len(sizes) - 1, "BIMU_UPPER_PARAMS": P - sizes[0] * sizes[1],
              "BIMU_BAYESBINN": int(bool(bayesbinn)),
              "BIMU_STORE_PLANES": int(small if store_planes is None else bool(store_planes)),
              "BIMU_KEEP_SAMPLES": int(small if keep_samples is None else bool(keep_samples))}
    header = (importlib.resources.files("bimu.edge") / "c" / "bimu_learn.h").read_text()
    for name, value in re.findall(r"#define (BIMU_PLANE_WORDS) (\(.+\))", header):
        macros[name] = _c_int_expression(value, macros)
    real = ctypes.c_double if int(real_bytes) == 8 else ctypes.c_float
    types = {"bimu_real": real, "double": ctypes.c_double, "uint64_t": ctypes.c_uint64, "int32_t": ctypes.c_int32,
             "uint32_t": ctypes.c_uint32, "bimu_hparams": real * 8}
    end = header.index("} bimu_learner;")
    body = header[header.rindex("typedef struct {", 0, end) + len("typedef struct {"):end]
    fields, keep = [], [True]
    for line in body.splitlines():
        code = re.sub(r"/\*.*?\*/", "", line).strip()
        if code.startswith("#if "):
            keep.append(keep[-1] and bool(_c_int_expression(code[4:], macros)))
        elif code.startswith("#endif"):
            keep.pop()
        elif code and keep[-1]:
            m = re.fullmatch(r"(\w+) (\w+)(?:\[(.+)\])?;", code)
            if m is None:
                raise ValueError(f"bimu_learn.h: cannot read the struct field {code!r}")
            t, name, dim = m.groups()
            n = 1 if dim is None else _c_int_expression(dim, macros)
            fields.append((name, types[t] * n))
    return ctypes.sizeof(type("bimu_learner", (ctypes.Structure,), {"_fields_": fields}))

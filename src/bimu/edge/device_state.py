"""A device's learner state as a file: the format the C learner writes (``c/bimu_state.c``), read back
strictly and within bounds (:func:`read_device_state`), and turned into a run directory that ``bimu
evaluate`` scores (:func:`import_device`, ``bimu import-device``)."""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bimu.edge.learner_export import DEVICE_STATE_MAGIC, STATE_HEADER_BYTES, STATE_MAX_LAYERS, learner_spec

_FLAG_BAYESBINN, _FLAG_GATE, _FLAG_OUT_NORM = 1, 2, 4
STATE_VERSION = 1
_COUNTER_NAMES = ("train_key", "eval_key", "query_key", "train_step", "examples_seen", "updates_applied",
                  "labels_queried")
_FNV_OFFSET, _FNV_PRIME = 0xCBF29CE484222325, 0x100000001B3



class DeviceStateError(ValueError):
    """A device state file that is refused (wrong size, magic, version, network, checksum, values); the
    message is one line naming the file."""


# ---------------------------------------------------------------------------- the run's learner state


def state_dump_bytes(n_params: int, real_bytes: int = 4, bayesbinn: bool = False) -> int:
    """Bytes of a state file (``bimu_state_dump_bytes``)."""
    return STATE_HEADER_BYTES + int(n_params) * (2 if bayesbinn else 1) * int(real_bytes) + 8


# ---------------------------------------------------------------------------- reading a device's state
@dataclass
class DeviceState:
    """A state file read back from a device (:func:`read_device_state`)."""

    sizes: list[int]
    real_bytes: int
    bayesbinn: bool
    activation: str
    output_norm: bool
    n_samples: int
    query_samples: int
    query_need: int
    counters: dict[str, int]
    export_id: int
    lam: np.ndarray
    """float32 or float64 as the device stored it, the engine's layout."""
    prior: np.ndarray | None

    def lambda_hash(self) -> int:
        """FNV-1a 64 of lambda's bytes, as ``bimu_lambda_hash`` prints it on the device."""
        return fnv1a64(np.ascontiguousarray(self.lam).tobytes())


def fnv1a64(data: bytes) -> int:
    """FNV-1a, 64 bits.

    >>> hex(fnv1a64(b"a"))
    '0xaf63dc4c8601ec8c'
    """
    h = _FNV_OFFSET
    for b in data:  # one state: at most a few MB, bounded before it is read
        h = ((h ^ b) * _FNV_PRIME) & 0xFFFFFFFFFFFFFFFF
    return h


def read_device_state(path, sizes: Sequence[int] | None = None, max_params: int | None = None) -> DeviceState:
    """Read and check a state file written by ``bimu_state_write``. With ``sizes`` (the run's network)
    the file must be exactly that network's size before a byte of it is read; else it is bounded by
    ``max_params`` (default 2**26). DeviceStateError (one line naming the file) for anything else."""
    import os

    from bimu.untrusted import UntrustedFileError, open_regular

    where = str(path)
    if sizes is not None:
        sizes = [int(s) for s in sizes]
        p_run = sum(a * b for a, b in zip(sizes[:-1], sizes[1:]))
        allowed = {state_dump_bytes(p_run, rb, bb) for rb in (4, 8) for bb in (False, True)}
    else:
        cap = state_dump_bytes(int(max_params or 2**26), 8, True)
    try:
        f = open_regular(path)
    except UntrustedFileError as e:
        raise DeviceStateError(str(e)) from None
    with f:
        size = os.fstat(f.fileno()).st_size
        if sizes is not None and size not in allowed:
            raise DeviceStateError(f"{where}: {size} bytes; a state of the network {sizes} has "
                                   f"{' or '.join(str(n) for n in sorted(allowed))} bytes (truncated, or another network)")
        if sizes is None and not STATE_HEADER_BYTES + 8 <= size <= cap:
            raise DeviceStateError(f"{where}: {size} bytes is not the size of a device state (at most {cap})")
        data = f.read(size + 1)
    if len(data) != size:
        raise DeviceStateError(f"{where}: the file changed while it was read")
    return parse_device_state(data, where, sizes)


def parse_device_state(data: bytes, where: str = "state", sizes: Sequence[int] | None = None) -> DeviceState:
    """:func:`read_device_state` on bytes already read (bounded by the caller)."""
    def refuse(msg: str):
        raise DeviceStateError(f"{where}: {msg}")

    if len(data) < STATE_HEADER_BYTES + 8:
        refuse(f"{len(data)} bytes, shorter than a state's header ({STATE_HEADER_BYTES} + 8); truncated")
    if data[:8] != DEVICE_STATE_MAGIC:
        refuse(f"not a bimu device state (magic {data[:8]!r}, expected {DEVICE_STATE_MAGIC!r})")
    version, header, rb, flags, n_layers = struct.unpack_from("<5I", data, 8)
    if version != STATE_VERSION:
        refuse(f"state format version {version}; this bimu reads version {STATE_VERSION}")
    if header != STATE_HEADER_BYTES:
        refuse(f"header of {header} bytes; format {STATE_VERSION} has {STATE_HEADER_BYTES}")
    if rb not in (4, 8):
        refuse(f"{rb} bytes per real; a state holds float32 (4) or float64 (8)")
    if flags & ~7:
        refuse(f"unknown flags 0x{flags:x}")
    if not 1 <= n_layers <= STATE_MAX_LAYERS:
        refuse(f"{n_layers} layers; a state holds 1 to {STATE_MAX_LAYERS}")
    all_sizes = struct.unpack_from(f"<{STATE_MAX_LAYERS + 1}I", data, 28)
    net = [int(s) for s in all_sizes[:n_layers + 1]]
    if min(net) < 1 or any(all_sizes[n_layers + 1:]):
        refuse(f"bad layer sizes {list(all_sizes)}")
    n_params, K, qk, need = struct.unpack_from("<4I", data, 64)
    if n_params != sum(a * b for a, b in zip(net[:-1], net[1:])):
        refuse(f"{n_params} parameters do not match the sizes {net}")
    if sizes is not None and net != list(sizes):
        refuse(f"a state of the network {net}, not the run's {list(sizes)}")
    counters = dict(zip(_COUNTER_NAMES, struct.unpack_from("<7Q", data, 80)))
    (export_id,) = struct.unpack_from("<Q", data, 136)
    n_reals, reserved = struct.unpack_from("<2I", data, 144)
    bayesbinn = bool(flags & _FLAG_BAYESBINN)
    if n_reals != n_params * (2 if bayesbinn else 1) or reserved:
        refuse(f"{n_reals} reals declared, {n_params * (2 if bayesbinn else 1)} expected")
    if K < 1 or not 1 <= qk <= 64 or need > qk:
        refuse(f"bad sample counts (K = {K}, query K = {qk}, dissent needed {need})")
    want = state_dump_bytes(n_params, rb, bayesbinn)
    if len(data) != want:
        refuse(f"{len(data)} bytes, a state of this header has {want} (truncated or padded)")
    (stored,) = struct.unpack_from("<Q", data, len(data) - 8)
    if fnv1a64(data[:-8]) != stored:
        refuse("checksum mismatch: the state is corrupt")
    if counters["labels_queried"] > counters["examples_seen"] or counters["updates_applied"] > counters["train_step"]:
        refuse(f"inconsistent counters {counters}")
    dtype = np.dtype("<f4" if rb == 4 else "<f8")
    reals = np.frombuffer(data, dtype=dtype, count=n_reals, offset=STATE_HEADER_BYTES)
    if not np.isfinite(reals).all():
        refuse(f"{int((~np.isfinite(reals)).sum())} non-finite values in lambda; refused")
    native = dtype.newbyteorder("=")
    lam = reals[:n_params].astype(native)
    prior = reals[n_params:].astype(native) if bayesbinn else None
    return DeviceState(net, rb, bayesbinn, "rbg" if flags & _FLAG_GATE else "sign", bool(flags & _FLAG_OUT_NORM),
                       int(K), int(qk), int(need), counters, int(export_id), lam, prior)


# ---------------------------------------------------------------------------- into a run directory
def import_device(run_dir, state_path, out_dir, force: bool = False) -> Path:
    """Write seed directory ``out_dir``: ``run_dir``'s configuration with the device's state (read from
    ``state_path``) as its checkpoint, so that ``bimu evaluate out_dir`` scores what the device learned.
    ValueError (one line) when the state is not of this run's export, or ``out_dir`` holds files and
    ``force`` is false."""
    import shutil

    import torch

    from bimu.edge.runs import read_checkpoint
    from bimu.rundir import CHECKPOINT, CONFIG, RunDir, checkpoint_bytes
    from bimu.atomic import atomic_write_bytes

    run = Path(run_dir)
    if not (run / CONFIG).is_file():
        raise ValueError(f"{run} is not a seed directory (no {CONFIG}); pass the run the device was exported from")
    spec = learner_spec(run)
    dev = read_device_state(state_path, spec.sizes)
    if dev.export_id != spec.export_id:
        raise ValueError(f"{state_path}: the device's state is of export 0x{dev.export_id:016X}, this run exports as "
                         f"0x{spec.export_id:016X} (another run, or the run changed since the export)")
    if dev.bayesbinn != (spec.method == "bayesbinn"):
        raise ValueError(f"{state_path}: a {'BayesBiNN' if dev.bayesbinn else 'BiMU'} state, the run is {spec.method}")
    out = Path(out_dir)
    if out.resolve() == run.resolve():
        raise ValueError(f"--out {out} is the run itself; pick a new folder for the device's state")
    if out.exists() and any(out.iterdir()) and not force:
        raise ValueError(f"{out} exists and is not empty; pass --force to overwrite it")
    out.mkdir(parents=True, exist_ok=True)
    state = read_checkpoint(run)
    ms = dict(state["method_state"])
    modules = dict(ms["modules"])
    offsets = np.cumsum([0] + [a * b for a, b in zip(spec.sizes[:-1], spec.sizes[1:])])
    layers = [torch.from_numpy(dev.lam[offsets[i]:offsets[i + 1]].reshape(spec.sizes[i + 1], spec.sizes[i]).copy())
              for i in range(len(spec.sizes) - 1)]
    if spec.layout == "fused":
        modules["lam"] = layers
        modules["train_step"] = int(dev.counters["train_step"])
        if dev.prior is not None:
            modules["prior"] = torch.from_numpy(dev.prior.copy())
    else:
        model = dict(modules["model"])
        for i, t in enumerate(layers):
            model[f"layers.{i}.lam"] = t
        modules["model"] = model
        if dev.prior is not None:
            opt = dict(modules["optimizer"])
            st = dict(opt["state"])
            for i in range(len(layers)):
                st[i] = {**st[i], "prior": torch.from_numpy(
                    dev.prior[offsets[i]:offsets[i + 1]].reshape(spec.sizes[i + 1], spec.sizes[i]).copy())}
            opt["state"] = st
            modules["optimizer"] = opt
    ms["modules"] = modules
    ms["examples_seen"] = int(dev.counters["examples_seen"])
    ms["updates_applied"] = int(dev.counters["updates_applied"])
    new = dict(state)
    new["method_state"] = ms
    new.pop("learner", None)  # an active run's learner state is the host's, not the device's
    shutil.copyfile(run / CONFIG, out / CONFIG)
    atomic_write_bytes(out / CHECKPOINT, checkpoint_bytes(new))
    info = {"source_run": str(run), "state_file": str(state_path), "export_id": f"0x{dev.export_id:016X}",
            "precision": "float64" if dev.real_bytes == 8 else "float32", "counters": dev.counters,
            "query_samples": dev.query_samples, "query_need": dev.query_need,
            "lambda_hash": f"0x{dev.lambda_hash():016X}"}
    RunDir(out).write_json("device.json", info)
    return out

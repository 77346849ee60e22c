"""The C99 sign-network baselines (``bimu/edge/c/bimu_sign_learn.c``: STE and Synaptic Metaplasticity)
built for this machine and driven through ctypes.

:func:`build_sign_library` compiles ``bimu_sign_learn.c`` with the system ``cc`` and the learner's
pinned flags (:data:`bimu.edge.clearner.CFLAGS`) into the learners' cache folder, float32 or float64;
:class:`CSignLearner` holds one ``bimu_sign_learner`` with its state in a numpy buffer.
:meth:`CSignLearner.from_method` copies a fused method's latent weights, norms and Adam state
(:class:`bimu.engine.fused_sign.FusedSTE`, ``FusedSynapticMetaplasticity``), so the C steps can be
compared with the engine's::

    m = bimu.create_method("ste", [512, 16], seed=0, dtype="float64")       # the fused engine
    c = CSignLearner.from_method(m)
    c.learn(x, y); m.learn_many(x[None], np.array([y]))                    # the same step

The float64 build follows ``bimu.engine.sign.sign_train`` at batch size 1 to rounding; the float32
build uses the engine's float32 ``exp`` polynomial everywhere (the engine calls the C library's
``expf`` for the softmax), so it agrees to float32 rounding and is bit-identical across targets.
"""

from __future__ import annotations

import ctypes
import hashlib
import importlib.resources
import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from bimu.edge.clearner import CFLAGS, CompilerNotFound, cache_dir

SIGN_SOURCES = ("bimu_sign_learn.h", "bimu_sign_learn.c")
"""The baselines' files in ``bimu/edge/c``."""
SIGN_KINDS = ("ste", "synaptic-metaplasticity")
"""The methods the C file implements (registered names)."""


class _Hparams(ctypes.Structure):
    _fields_ = [(n, ctypes.c_double) for n in ("lr", "metaplasticity", "weight_decay", "beta1", "beta2", "eps",
                                               "bn_momentum", "bn_eps", "gate")] + \
               [(n, ctypes.c_int) for n in ("decoupled", "clip", "norm")]


def c_source(name: str) -> str:
    """The text of one file of ``bimu/edge/c``."""
    return (importlib.resources.files("bimu.edge") / "c" / name).read_text()


def build_sign_library(double: bool = True, extra_flags: Sequence[str] = ()) -> Path:
    """The shared library of ``bimu_sign_learn.c`` (float64 with ``double``, else float32), compiled
    once with ``cc`` and :data:`bimu.edge.clearner.CFLAGS` and cached under a name hashed from the
    sources and flags. A missing ``cc`` raises :class:`bimu.edge.clearner.CompilerNotFound`."""
    cc = shutil.which("cc")
    if cc is None:
        raise CompilerNotFound("the C baselines need a C compiler: `cc` was not found on PATH")
    flags = list(CFLAGS) + (["-DBIMU_SIGN_DOUBLE"] if double else []) + list(extra_flags)
    texts = [c_source(n) for n in SIGN_SOURCES]
    digest = hashlib.sha256("\0".join(texts + [" ".join(flags)]).encode()).hexdigest()[:16]
    folder = cache_dir()
    lib = folder / f"bimu_sign_learn_{digest}.so"
    if lib.exists():
        return lib
    with tempfile.TemporaryDirectory(dir=folder) as tmp:
        for name, text in zip(SIGN_SOURCES, texts):
            Path(tmp, name).write_text(text)
        out = Path(tmp, lib.name)
        proc = subprocess.run([cc, *flags, "-I", tmp, "-o", str(out), str(Path(tmp, "bimu_sign_learn.c")), "-lm"],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"cc failed to build the C baselines:\n{proc.stderr.strip()}")
        os.replace(out, lib)
    return lib


_MAX_LAYERS = 8


class _Learner(ctypes.Structure):
    _fields_ = [("n_layers", ctypes.c_int), ("sizes", ctypes.c_int32 * (_MAX_LAYERS + 1)),
                ("woff", ctypes.c_int32 * (_MAX_LAYERS + 1)), ("boff", ctypes.c_int32 * (_MAX_LAYERS + 1)),
                ("hp", _Hparams), ("adam_step", ctypes.c_uint64)] + \
               [(n, ctypes.c_void_p) for n in ("wh", "mw", "vw", "np_", "mn", "vn", "gn", "rm", "rv", "z", "a", "h",
                                               "dy", "inv")]


def sign_hparams(kind: str, hparams: dict) -> dict:
    """The C hyperparameters (``bimu_sign_hparams`` fields) of a method's hyperparameters, with the
    fused engine's Adam constants and norm epsilon."""
    from bimu.engine.fused_sign import ADAM_BETAS, ADAM_EPS, BN_EPS

    base = dict(beta1=ADAM_BETAS[0], beta2=ADAM_BETAS[1], eps=ADAM_EPS, bn_eps=BN_EPS, metaplasticity=0.0,
                bn_momentum=0.0, gate=0.0)
    if kind == "ste":
        return {**base, "lr": hparams["lr"], "weight_decay": hparams["weight_decay"], "decoupled": 1,
                "clip": int(bool(hparams["clip_latent"])), "norm": 0}
    if kind == "synaptic-metaplasticity":
        if hparams.get("bn_statistics", "online") != "online":
            raise ValueError("the C baseline implements the norms' 'online' statistics only")
        if hparams.get("task_affine"):
            raise ValueError("the C baseline keeps no per-task affine bank (task_affine=False)")
        gate = float(hparams["gate_width"]) if hparams.get("activation", "sign") == "rbg" else 0.0
        return {**base, "lr": hparams["lr"], "metaplasticity": hparams["metaplasticity"],
                "weight_decay": hparams["weight_decay"], "bn_momentum": hparams["bn_momentum"], "gate": gate,
                "decoupled": 0, "clip": 0, "norm": 1}
    raise ValueError(f"kind must be one of {SIGN_KINDS}, got {kind!r}")


class CSignLearner:
    """One ``bimu_sign_learner`` (STE or Synaptic Metaplasticity) of the compiled C baselines.

    ``kind`` (:data:`SIGN_KINDS`), ``sizes`` and the method's ``hparams`` fix the learner; ``wh0``
    the initial latent weights (engine layout, ``P`` values); ``double`` picks the float64 build.
    """

    def __init__(self, kind: str, sizes: Sequence[int], hparams: dict, wh0=None, double: bool = True):
        self.kind = kind
        self.sizes = [int(s) for s in sizes]
        if not 2 <= len(self.sizes) <= _MAX_LAYERS + 1 or min(self.sizes) < 1:
            raise ValueError(f"sizes must hold 2 to {_MAX_LAYERS + 1} positive widths, got {sizes}")
        self.dtype = np.dtype(np.float64 if double else np.float32)
        self._real = ctypes.c_double if double else ctypes.c_float
        self._lib = ctypes.CDLL(str(build_sign_library(double)))
        rp, vp = ctypes.POINTER(self._real), ctypes.c_void_p
        for name, res, args in (("bimu_sign_init", ctypes.c_int, [vp, ctypes.c_int, vp, vp, rp, rp]),
                                ("bimu_sign_learn", None, [vp, rp, ctypes.c_int]),
                                ("bimu_sign_logits", None, [vp, rp, rp]),
                                ("bimu_sign_buffer_reals", ctypes.c_long, [ctypes.c_int, vp]),
                                ("bimu_sign_weights_hash", ctypes.c_uint64, [vp])):
            fn = getattr(self._lib, name)
            fn.restype, fn.argtypes = res, args
        self.n_params = sum(a * b for a, b in zip(self.sizes[:-1], self.sizes[1:]))
        self.n_units = sum(self.sizes[1:])
        sz = (ctypes.c_int32 * len(self.sizes))(*self.sizes)
        n = int(self._lib.bimu_sign_buffer_reals(len(self.sizes) - 1, sz))
        self._buf = np.zeros(n, dtype=self.dtype)
        self._hp = _Hparams(**sign_hparams(kind, hparams))
        self._state = _Learner()
        w0 = None if wh0 is None else np.ascontiguousarray(np.asarray(wh0, dtype=self.dtype).reshape(-1))
        if w0 is not None and w0.shape[0] != self.n_params:
            raise ValueError(f"wh0 holds {w0.shape[0]} values, the network has {self.n_params}")
        rc = self._lib.bimu_sign_init(ctypes.byref(self._state), len(self.sizes) - 1, sz, ctypes.byref(self._hp),
                                      self._ptr(self._buf), None if w0 is None else self._ptr(w0))
        if rc != 0:
            raise ValueError(f"the C baseline does not support the network {self.sizes}")

    @classmethod
    def from_method(cls, method, double: bool | None = None) -> "CSignLearner":
        """A learner holding a fused sign method's latent weights, Adam moments and step, norms and
        running statistics (float64 build for a float64 method unless ``double`` says otherwise)."""
        from bimu.engine.fused_sign import FusedSTE

        if not isinstance(method, FusedSTE):
            raise TypeError(f"{type(method).__name__} is not a fused sign method (FusedSTE, "
                            "FusedSynapticMetaplasticity)")
        double = method.dtype == np.float64 if double is None else bool(double)
        c = cls(method.info.name, method.sizes, method.hparams, method.Wh, double)
        c.mW[:], c.vW[:] = method.mW, method.vW
        if method._norm:
            c.NP[:], c.mN[:], c.vN[:] = method.NP, method.mN, method.vN
            c.RM[:], c.RV[:] = method.RM, method.RV
        c.adam_step = method.adam_step
        return c

    def _ptr(self, a: np.ndarray):
        return a.ctypes.data_as(ctypes.POINTER(self._real))

    def _slice(self, start: int, n: int) -> np.ndarray:
        return self._buf[start:start + n]

    @property
    def Wh(self) -> np.ndarray:
        """The latent weights (a view of the state, engine layout)."""
        return self._slice(0, self.n_params)

    @property
    def mW(self) -> np.ndarray:
        """Adam's first moments of the latent weights (a view of the state)."""
        return self._slice(self.n_params, self.n_params)

    @property
    def vW(self) -> np.ndarray:
        """Adam's second moments of the latent weights (a view of the state)."""
        return self._slice(2 * self.n_params, self.n_params)

    @property
    def NP(self) -> np.ndarray:
        """The norms' parameters (each layer's gamma, then beta), as ``FusedSynapticMetaplasticity.NP``."""
        return self._slice(3 * self.n_params, 2 * self.n_units)

    @property
    def mN(self) -> np.ndarray:
        """Adam's first moments of the norms' parameters (a view of the state)."""
        return self._slice(3 * self.n_params + 2 * self.n_units, 2 * self.n_units)

    @property
    def vN(self) -> np.ndarray:
        """Adam's second moments of the norms' parameters (a view of the state)."""
        return self._slice(3 * self.n_params + 4 * self.n_units, 2 * self.n_units)

    @property
    def RM(self) -> np.ndarray:
        """The batch norms' running means, one per unit (a view of the state)."""
        return self._slice(3 * self.n_params + 8 * self.n_units, self.n_units)

    @property
    def RV(self) -> np.ndarray:
        """The batch norms' running variances, one per unit (a view of the state)."""
        return self._slice(3 * self.n_params + 9 * self.n_units, self.n_units)

    @property
    def adam_step(self) -> int:
        """Adam steps taken so far (the bias correction's counter)."""
        return int(self._state.adam_step)

    @adam_step.setter
    def adam_step(self, value: int) -> None:
        self._state.adam_step = int(value)

    def _x(self, x) -> np.ndarray:
        x = np.ascontiguousarray(np.asarray(x, dtype=self.dtype).reshape(-1))
        if x.shape[0] != self.sizes[0]:
            raise ValueError(f"an example has {self.sizes[0]} features, got {x.shape[0]}")
        return x

    def learn(self, x, y: int) -> None:
        """One online step on the labelled example (``bimu_sign_learn``)."""
        y = int(y)
        if not 0 <= y < self.sizes[-1]:
            raise ValueError(f"label {y} is outside [0, {self.sizes[-1]})")
        xs = self._x(x)
        self._lib.bimu_sign_learn(ctypes.byref(self._state), self._ptr(xs), y)

    def logits(self, x) -> np.ndarray:
        """Logits ``[C]`` of one example (``bimu_sign_logits``; nothing is updated)."""
        out = np.empty(self.sizes[-1], dtype=self.dtype)
        xs = self._x(x)
        self._lib.bimu_sign_logits(ctypes.byref(self._state), self._ptr(xs), self._ptr(out))
        return out

    def weights_hash(self) -> int:
        """FNV-1a (64 bits) of the latent weights' bytes (``bimu_sign_weights_hash``)."""
        return int(self._lib.bimu_sign_weights_hash(ctypes.byref(self._state)))

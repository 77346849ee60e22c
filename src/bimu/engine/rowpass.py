"""The first layer's fused row pass with the number of samples ``K`` fixed at compile time (numba).

For each weight row of the first layer a training step needs, in as few passes over the row as
possible:

1. the gradient of column ``i``: ``g = sum_k (c_k x_i) (1 - w_k^2)`` over the K current samples;
2. the update (BiMU or BayesBiNN) of ``lambda_i`` and ``b_i = exp(-2 |lambda_i|)`` (one exp);
3. the K relaxed samples of the next step (T = 1 identity, uniforms of
   :func:`bimu.rng.relaxed_uniforms`), written over the current ones;
4. the next step's K pre-activations ``z_k = sum_i w_k,i xnext_i``.

Steps 1-2 run in one column loop, step 3 in a second one, step 4 after it. With ``K`` a compile-time
constant the loops over samples unroll inside the column loops, which then vectorise as a whole (8
float32 lanes on AVX2): each weight sample is loaded once and stored once per step, no gradient vector
is written and the 32-bit hash runs on 32-bit lanes. The K pre-activations are then summed by
:func:`bimu.engine.dots.dot_rows` over the row's fresh samples (still in L1), each in
:func:`~bimu.engine.dots.dot8`'s stated order, up to eight samples per pass over the input: no
loop here lets the vectoriser reorder a sum (FMA contraction only), so training has the same bits
on every machine, whatever its vector width (``benchmarks/step_anatomy.py`` times this form against
accumulators of the sampling loop vectorised with ``reassoc``).

A constant ``K`` needs one compiled kernel per ``K``: :func:`generated_module` writes a small module
for that ``K`` (the templates below and :func:`bimu.engine.fastpath._train_steps_b1_template` with
``K`` set, plus an unrolled sampling function) into
:func:`kernel_dir` once and imports it, so numba caches its compiled code on disk like any other
module (``cache=True``; closures over compiled functions would be recompiled in every process). The
arithmetic of the update and of the samples is that of :func:`bimu.engine.fastpath.row_step` (same
formulas, same uniforms); the gradient is summed in another order, so results agree with it to
rounding. Every caller runs the same compiled functions for a given ``K``, so results do
not depend on threads or on how steps are grouped into calls.
"""

from __future__ import annotations

import atexit
import hashlib
import importlib.util
import inspect
import os
import shutil
import sys
import tempfile
import textwrap
import warnings
from pathlib import Path

import numpy as np

from bimu.engine.binary_ops import bayesbinn_lambda_step, bimu_coefficients, bimu_lambda_step
from bimu.engine.cache import engine_digest
from bimu.engine.dots import ROWS_PER_DOT
from bimu.engine.fastpath import _train_steps_b1_template
from bimu.engine.hparams import KIND_BIMU, BinaryHP
from bimu.engine.scalar import fexp
from bimu.privatedir import UnsafeFolderError, private_dir
from bimu.rng import as_like, row_key

MAX_SAMPLES = 64
"""Largest K the per-K kernels are generated for: the largest ``n_samples`` of BiMU and BayesBiNN in
the engine."""


# ----------------------------------------------------------------------------- templates
# Plain Python, never called here: generated_module() compiles them with K (and ``sample_row``) set.
K = 1
"""Placeholder of the templates (the generated modules set their own)."""


def sample_row(W, lr_, b_, e0, kstride, D, rlo, rhi, xn_, Z0, o, n_out):  # pragma: no cover - template
    """Template placeholder of the generated, unrolled sampling function (see :func:`_sample_row_source`)."""
    raise NotImplementedError("generated per K by bimu.engine.rowpass.generated_module")


def _row_pass_template(lam, prior, W, BT, DZ, n_out, r0, r1, D, kstride, x, xn, Z0, hp, key, step, update, c,
                       kind):
    """Rows ``r0 .. r1-1`` of the first layer (``lam[o*D:(o+1)*D]``, samples at ``W[k*kstride + o*D + i]``,
    output gradients ``DZ[k*n_out + o]``): gradient and update (skipped when ``update`` is False, a
    step whose gradient is identically zero), then the next step's samples and pre-activations with
    ``xn`` into ``Z0[k*n_out + o]``. ``BT`` holds ``exp(-2|lambda|)`` on entry and on exit; ``c`` is
    scratch of ``K`` values; ``kind`` 0 BiMU, 1 BayesBiNN (``prior`` used by BayesBiNN)."""
    one = as_like(1.0, lam[0])
    zero = as_like(0.0, lam[0])
    m2 = as_like(-2.0, lam[0])
    gbl, two_bl, bkl, ilm, kln, pr0 = bimu_coefficients(hp)  # BiMU's (kind 0)
    lr = hp[BinaryHP.LR]  # BayesBiNN's (kind 1)
    cpr = hp[BinaryHP.PRIOR_PULL]
    geps = as_like(hp[BinaryHP.RATIO_EPS], one)
    P = lam.shape[0]
    x_ = x[:D]
    xn_ = xn[:D]
    for o in range(r0, r1):
        e0 = o * D
        for k in range(K):
            c[k] = DZ[k * n_out + o]
        lr_ = lam[e0:e0 + D]
        b_ = BT[e0:e0 + D]
        p_ = prior[e0:e0 + D]
        if update and kind == KIND_BIMU:
            for i in range(D):
                xi = x_[i]
                lo = lr_[i]
                b = b_[i]
                g = zero
                for k in range(K):
                    w = W[np.uint64(k * kstride + e0) + np.uint64(i)]
                    g += (c[k] * xi) * (one - w * w)
                lo = bimu_lambda_step(lo, g, b, gbl, two_bl, bkl, ilm, kln, pr0)
                lr_[i] = lo
                b_[i] = fexp(m2 * abs(lo))
        elif update:
            for i in range(D):
                xi = x_[i]
                lo = lr_[i]
                b = b_[i]
                g = zero
                for k in range(K):
                    w = W[np.uint64(k * kstride + e0) + np.uint64(i)]
                    g += (c[k] * xi) * ((one - w * w) + geps)
                lo = bayesbinn_lambda_step(lo, g, b, lr, cpr, p_[i], geps)
                lr_[i] = lo
                b_[i] = fexp(m2 * abs(lo))
        rlo, rhi = row_key(key, step, P, e0)
        sample_row(W, lr_, b_, e0, kstride, D, rlo, rhi, xn_, Z0, o, n_out)


def _resample_template(lam, W, BT, n_out, r0, r1, D, kstride, xn, Z0, key, step):
    """The K relaxed samples of training step ``step`` for rows ``r0 .. r1-1`` and their
    pre-activations with ``xn`` into ``Z0``, exactly as the row pass computes them (a call that starts
    a chunk of steps reproduces what the previous call's last step drew and summed)."""
    P = lam.shape[0]
    xn_ = xn[:D]
    for o in range(r0, r1):
        e0 = o * D
        rlo, rhi = row_key(key, step, P, e0)
        sample_row(W, lam[e0:e0 + D], BT[e0:e0 + D], e0, kstride, D, rlo, rhi, xn_, Z0, o, n_out)


# ----------------------------------------------------------------------------- generation
_HEADER = '''\
"""Generated by bimu.engine.rowpass for K = {K} samples: do not edit (rewritten when bimu changes)."""
import numpy as np
from numba import get_thread_id, njit, prange

from bimu.engine.binary_ops import (bayesbinn_lambda_step, bimu_coefficients, bimu_lambda_step, binary_config,
                                    hidden_backward, loss_backward, norm_act_rows, preact_row)
from bimu.engine.dots import dot_rows
from bimu.engine.fastpath import ROWS_PER_TASK, _rows, row_step
from bimu.engine.hparams import KIND_BIMU, BinaryHP
from bimu.engine.scalar import KERNEL_OPTS as _OPTS, fexp
# short names of the sampling lines below (benchmarks/step_anatomy.py rewrites them)
from bimu.rng import add32 as _add32, as_like, hash32 as _h32, mul32 as _mul32, row_key, uniform32 as _u32

K = {K}


@njit(fastmath={{"contract"}}, **_OPTS)
def sample_row(W, lr_, b_, e0, kstride, D, rlo, rhi, xn_, Z0, o, n_out):
    """The K relaxed samples of one row, then its K next pre-activations summed by ``dot_rows`` (the
    samples are still in L1), each in ``dot8``'s order: the same bits on every machine."""
    one = as_like(1.0, lr_[0])
    for i in range(D):
        lo = lr_[i]
        b = b_[i]
        pp = b if lo >= 0 else one
        qq = (one - b) if lo >= 0 else (b - one)
        ob = one + b
        base = _mul32(np.uint32(i), np.uint32({K}))
        e = np.uint64(e0) + np.uint64(i)
{body}
{store}
'''

_DOTS = '''

@njit(fastmath={{"contract"}}, **_OPTS)
def first_layer_dots(W, n_out, D, kstride, xn, Z0):
    """The K next pre-activations of every first-layer row with ``xn`` into ``Z0``, from the samples
    already in ``W``, summed exactly as ``sample_row`` sums them."""
    xn_ = xn[:D]
    for o in range(n_out):
        e0 = o * D
{dots}
'''

_COMPILED = (  # (template, name in the generated module, decorator)
    (_row_pass_template, "first_layer", '@njit(fastmath={"contract"}, **_OPTS)'),
    (_resample_template, "first_layer_resample", "@njit(fastmath=False, **_OPTS)"),
    (_train_steps_b1_template, "train_steps_b1", '@njit(parallel=True, fastmath={"contract"}, **_OPTS)'),
)


def _dot_lines(K: int, pad: str) -> list[str]:
    """The lines that sum one row's K next pre-activations with ``dot_rows`` (one pass over the input per
    group of at most eight samples) and store them in ``Z0``, indented by ``pad``."""
    sums = []
    for g in range(0, K, ROWS_PER_DOT):
        ks = range(g, min(g + ROWS_PER_DOT, K))
        offsets = "".join(f"e0 + {k} * kstride, " for k in ks)
        sums.append(f"{pad}{''.join(f'z{k}, ' for k in ks)}= dot_rows(W, ({offsets}), xn_, D)")
    return sums + [f"{pad}Z0[{k} * n_out + o] = z{k}" for k in range(K)]


def _sample_row_source(K: int) -> str:
    """Header of the generated module for ``K`` samples, with its unrolled sampling function."""
    body = "\n".join(
        f"        u = _u32(_h32(rlo, rhi, _add32(base, np.uint32({k}))), one)\n"
        f"        w = (u * ob - pp) / (pp + u * qq)\n"
        f"        W[e + np.uint64({k} * kstride)] = w" for k in range(K))
    return _HEADER.format(K=K, body=body, store="\n".join(_dot_lines(K, "    ")))


def _dots_source(K: int) -> str:
    """The generated ``first_layer_dots`` for ``K`` samples: ``sample_row``'s sums, on every row."""
    return _DOTS.format(dots="\n".join(_dot_lines(K, "        ")))


def generated_source(K: int) -> str:
    """The full source of the module generated for ``K`` samples."""
    parts = [_sample_row_source(K), _dots_source(K)]
    for template, name, decorator in _COMPILED:
        src = textwrap.dedent(inspect.getsource(template))
        src = src.replace(f"def {template.__name__}(", f"def {name}(", 1)
        parts.append(f"\n\n{decorator}\n{src}")
    return "".join(parts)


def kernel_dir() -> Path:
    """Where generated kernel modules live: ``$BIMU_KERNEL_DIR``, else ``$XDG_CACHE_HOME/bimu/kernels``
    (``~/.cache/bimu/kernels``); numba caches their compiled code beside them."""
    env = os.environ.get("BIMU_KERNEL_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "bimu" / "kernels"


def generated_name(K: int, src: str | None = None) -> str:
    """Module name of the generated kernels for ``K`` samples: ``bimu_rowpass_k{K}_`` and 12 hex digits of
    the hash of its source (``src``, :func:`generated_source` when not given) and of
    :func:`bimu.engine.cache.engine_digest`. numba's disk cache checks only the file that defines a
    function, and the generated module calls and inlines the engine's compiled functions: named after
    the digest too, a module of a changed engine, an upgrade or another checkout sharing
    :func:`kernel_dir` is compiled afresh and never reuses code compiled against other callees."""
    src = generated_source(int(K)) if src is None else src
    return f"bimu_rowpass_k{int(K)}_{hashlib.sha256((src + engine_digest()).encode()).hexdigest()[:12]}"


_MODULES: dict = {}


def _write_kernel(folder: Path, name: str, src: str) -> Path:
    """``folder/<name>.py`` holding ``src``, written atomically unless it already does (keeping its numba cache)."""
    path = folder / f"{name}.py"
    if not path.exists() or path.read_text() != src:
        fd, tmp = tempfile.mkstemp(dir=folder, suffix=".tmp")
        with os.fdopen(fd, "w") as fh:
            fh.write(src)
        os.replace(tmp, path)
    return path


def generated_module(K: int):
    """The imported module of per-K kernels (``first_layer``, ``first_layer_resample``,
    ``first_layer_dots``, ``train_steps_b1``, ``sample_row``), written once (atomically; an unchanged
    file keeps its numba cache) under :func:`kernel_dir`, or ``$TMPDIR/bimu-kernels-<uid>`` when that is
    not writable, or a fresh temporary folder; a cache folder that another user owns or may write to is never used
    (:func:`bimu.privatedir.private_dir`: a planted module or numba cache index would run as you)."""
    K = int(K)
    if K < 1 or K > MAX_SAMPLES:
        raise ValueError(f"the fused row pass supports 1 <= K <= {MAX_SAMPLES} samples, got K={K}")
    module = _MODULES.get(K)
    if module is not None:
        return module
    src = generated_source(K)
    name = generated_name(K, src)
    path = None
    for folder in (kernel_dir(), Path(tempfile.gettempdir()) / f"bimu-kernels-{os.getuid()}"):
        try:
            path = _write_kernel(private_dir(folder), name, src)
            break
        except UnsafeFolderError as exc:
            warnings.warn(f"{exc}; bimu does not use it", stacklevel=2)
        except OSError:
            continue
    if path is None:  # no usable cache folder: a fresh private one, removed at exit (compiled afresh)
        folder = tempfile.mkdtemp(prefix="bimu-kernels-")
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        path = _write_kernel(Path(folder), name, src)
    module = sys.modules.get(name)
    if module is None:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    _MODULES[K] = module
    return module


def row_pass_kernel(K: int):
    """The compiled row pass for ``K`` samples: ``kernel(lam, prior, W, BT, DZ, n_out, r0, r1, D,
    kstride, x, xn, Z0, hp, key, step, update, c, kind)`` (see :func:`_row_pass_template`)."""
    return generated_module(K).first_layer


def train_steps_b1_kernel(K: int):
    """The compiled ``train_steps_b1`` for ``K`` samples (see
    :func:`bimu.engine.fastpath._train_steps_b1_template`), whose first layer runs the per-K row pass."""
    return generated_module(K).train_steps_b1

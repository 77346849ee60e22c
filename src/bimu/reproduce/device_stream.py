"""The on-device active stream: a whole benchmark stream through the C learner (host build), beside the
Python learner on the same configuration, and the compact-lambda simulation.

:func:`python_stream` runs the fused engine's BiMU with an :class:`~bimu.active.learner.ActiveLearner`
(variation ratio, K hard samples, a fixed threshold) over every task, exactly as
:func:`bimu.experiments.sweep.run_stream` does; :func:`c_stream` runs the same stream through
:class:`bimu.edge.clearner.CLearner` (``bimu_observe`` per example with the Python learner's per-example
query keys, ``bimu_learn`` when it asks), starting from the same initial lambda, keys and counters. After
every task both evaluate their lambda on every task's test set with the same evaluation generator as
``run_stream``'s final evaluation (the C learner's lambda is loaded into a fused method for that), so the
rows of the accuracy matrix differ only through lambda, and the last row's mean is ``run_stream``'s
accuracy. The float64 build follows the float64 engine to rounding and queries the same examples; the
float32 build rounds differently from the engine's float32 kernels (fused multiply-adds), so its stream
drifts apart: its queries are compared, not required equal.

``quantise`` (:data:`COMPACT_FORMATS`) simulates a device that stores lambda compactly: after every update
lambda is rounded to float16, or to int16 fixed point with :data:`INT16_FRACTION_BITS` fraction bits
(round to nearest, saturating), and the engine goes on from the rounded values.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence

import numpy as np
import torch

COMPACT_FORMATS = ("float16", "int16")
"""Compact storage formats of lambda that :func:`python_stream` simulates."""
INT16_FRACTION_BITS = 10
"""int16 fixed point: lambda = n / 2**10 for an integer n in [-32768, 32767] (|lambda| < 32, steps of 2**-10)."""
_FINAL_EVAL_SEED = 0xE7A1
"""``run_stream``'s final evaluation generator: ``torch.Generator().manual_seed(seed * 31 + 0xE7A1)``."""


def quantiser(fmt: str | None):
    """The rounding function of a compact format (None: identity) on a float numpy array, in place."""
    if fmt is None:
        return None
    if fmt == "float16":
        def q(a: np.ndarray) -> None:
            a[:] = a.astype(np.float16).astype(a.dtype)
    elif fmt == "int16":
        scale = float(2 ** INT16_FRACTION_BITS)

        def q(a: np.ndarray) -> None:
            a[:] = (np.clip(np.rint(a * scale), -32768, 32767) / scale).astype(a.dtype)
    else:
        raise ValueError(f"compact format must be one of {COMPACT_FORMATS}, got {fmt!r}")
    return q


def _method(sizes, seed: int, preset: str, dtype: str, method: str = "bimu"):
    from bimu.engine import create_fused
    from bimu.experiments.sweep import method_hparams

    return create_fused(method, list(sizes), seed, method_hparams(method, preset), threads=1, dtype=dtype)


def _evaluate(method, bench, seed: int) -> dict:
    from bimu.experiments.sweep import evaluate

    return evaluate(method, bench, mc_samples=None, generator=torch.Generator().manual_seed(seed * 31 + _FINAL_EVAL_SEED))


def _load_lambda(method, lam: np.ndarray, train_step: int) -> None:
    """Give a fused method this lambda (and step counter), through its own state loader."""
    st = method.modules_state()
    flat = np.asarray(lam, dtype=method.dtype)
    off = np.cumsum([0] + [a * b for a, b in zip(method.sizes[:-1], method.sizes[1:])])
    st["lam"] = [torch.from_numpy(flat[off[i]:off[i + 1]].reshape(method.sizes[i + 1], method.sizes[i]).copy())
                 for i in range(len(method.sizes) - 1)]
    st["train_step"] = int(train_step)
    method.load_modules_state(st)


def _digest(mask: np.ndarray) -> str:
    """SHA-256 (first 16 hex digits) of the indices of the queried examples: equal digests, equal queries."""
    return hashlib.sha256(np.flatnonzero(mask).astype("<i8").tobytes()).hexdigest()[:16]


def _summary(R, final, asked, seconds, lam, extra) -> dict:
    from bimu.edge.device_state import fnv1a64

    asked = np.asarray(asked, dtype=bool)
    return {"accuracy": final["accuracy"], "rare_accuracy": final["rare_accuracy"],
            "frequent_accuracy": final["frequent_accuracy"], "per_task_accuracy": final["per_task_accuracy"],
            "accuracy_matrix": [list(map(float, r)) for r in R], "labels_queried": int(asked.sum()),
            "examples_seen": int(asked.size), "query_fraction": float(asked.mean()) if asked.size else 0.0,
            "queried_digest": _digest(asked), "lambda_hash": f"0x{fnv1a64(np.ascontiguousarray(lam).tobytes()):016X}",
            "seconds": float(seconds), **extra}


def python_stream(bench, *, seed: int = 0, preset: str = "openloris-8192-imbalanced", mc_samples: int = 2,
                  threshold: float = 0.5, dtype: str = "float32", quantise: str | None = None,
                  tasks: Sequence[int] | None = None, log=None) -> dict:
    """The Python learner's active stream (see the module); returns its summary (accuracy matrix, final
    accuracy, queried fraction, queried-examples digest, lambda hash, seconds)."""
    from bimu.active.learner import ActiveLearner, make_acquisition
    from bimu.experiments.stream import stream_tasks

    tasks = list(range(bench.n_tasks) if tasks is None else tasks)
    method = _method([bench.n_features, bench.n_classes], seed, preset, dtype)
    q = quantiser(quantise)
    if q is not None:
        learn = method.learn

        def learn_compact(x, y):
            learn(x, y)
            q(method.lam)  # the device keeps only the rounded values; the next step draws from them
            method._query = None

        method.learn = learn_compact
    learner = ActiveLearner(method, make_acquisition("vr", threshold=threshold, mc_samples=mc_samples, seed=seed))
    R, t0, spent = [], time.perf_counter(), 0.0
    for done in stream_tasks(bench, method, seed=seed, tasks=tasks, learner=learner):
        t1 = time.perf_counter()
        R.append(_evaluate(method, bench, seed)["per_task_accuracy"])
        spent += time.perf_counter() - t1
        if log:
            log(f"python {dtype}{' ' + quantise if quantise else ''} task {done.task + 1}: "
                f"{learner.ledger.labels_queried} labels, acc {100 * np.mean(R[-1]):.2f}%")
    seconds = time.perf_counter() - t0 - spent
    final = _evaluate(method, bench, seed)
    return _summary(R, final, learner.ledger.asked, seconds, method.lam,
                    {"learner": "python", "precision": dtype, "compact": quantise, "engine": "fused"})


def c_stream(bench, *, seed: int = 0, preset: str = "openloris-8192-imbalanced", mc_samples: int = 2,
             threshold: float = 0.5, double: bool = True, tasks: Sequence[int] | None = None, log=None) -> dict:
    """The same stream through the host build of the C learner (float64 ``double`` or float32)."""
    from bimu.active.learner import QUERY_KEY_RANGE, ActiveLearner, make_acquisition
    from bimu.active.threshold import vote_threshold
    from bimu.edge.clearner import CLearner

    dtype = "float64" if double else "float32"
    tasks = list(range(bench.n_tasks) if tasks is None else tasks)
    method = _method([bench.n_features, bench.n_classes], seed, preset, dtype)  # initial state, then evaluation
    # the engine's summation order in the query's sums (float32 too), so that the host build can be checked
    # against the Python learner example by example
    c = CLearner.from_method(method, query_samples=mc_samples, double=double, extra_flags=["-DBIMU_QUERY_DOT8=1"])
    c.set_query(mc_samples, vote_threshold(threshold, mc_samples))
    # the Python learner's query generator, to draw the same per-example keys (blocks.learn_in_blocks)
    gen = ActiveLearner(method, make_acquisition("vr", threshold=threshold, mc_samples=mc_samples,
                                                 seed=seed)).query_generator
    boundaries = bool(method.info.needs_task_boundaries)
    R, asked, t0, spent = [], [], time.perf_counter(), 0.0
    for t in tasks:
        x, y = bench.train_task(t, seed)
        xn = np.ascontiguousarray(x.numpy(), dtype=c.dtype)
        yn = y.numpy().astype(np.int64)
        keys = torch.randint(0, QUERY_KEY_RANGE, (len(yn),), generator=gen).numpy()
        for i in range(len(yn)):
            _, ask = c.observe(xn[i], int(keys[i]))
            asked.append(ask)
            if ask:
                c.learn(xn[i], int(yn[i]))
        if boundaries:
            c.task_end()
        t1 = time.perf_counter()
        _load_lambda(method, c.lam, c.counters["train_step"])
        R.append(_evaluate(method, bench, seed)["per_task_accuracy"])
        spent += time.perf_counter() - t1
        if log:
            log(f"C {dtype} task {t + 1}: {sum(asked)} labels, acc {100 * np.mean(R[-1]):.2f}%")
    seconds = time.perf_counter() - t0 - spent
    final = _evaluate(method, bench, seed)
    return _summary(R, final, asked, seconds, c.lam.copy(),
                    {"learner": "c", "precision": dtype, "compact": None, "engine": "c-host",
                     "state_bytes": c.state_bytes})


def emulated_prefix(bench, n_examples: int, *, core: str = "m7", seed: int = 0,
                    preset: str = "openloris-8192-imbalanced", mc_samples: int = 2, threshold: float = 0.5,
                    engine_order: bool = False) -> dict:
    """The first ``n_examples`` of the stream's first task through the float32 C learner on an emulated
    Cortex-M core (:func:`bimu.edge.emulated_stream.run_stream`), with the Python learner's per-example keys,
    beside the host build of the same learner and the Python learner (fused engine, float32) on the same
    examples. ``engine_order``: the device build sums its queries in the engine's order
    (``BIMU_QUERY_DOT8 1``); by default it uses the device's masked sums.

    Returns ``{"asked", "host_asked", "python_asked"}`` (lists of bools), ``matches_host`` (same queries,
    predictions and final lambda bits as the host build), ``same_decisions`` (same queries and
    predictions), ``matches_python`` (same queries) and the counts. On a core without a double-precision
    FPU the softmax's ``expf`` is not the host's (see ``c/emu/bimu_emu_libm.c``), so lambda can drift from
    the host's in its last bits over a long stream."""
    from bimu.active.blocks import learn_in_blocks
    from bimu.active.learner import QUERY_KEY_RANGE, ActiveLearner, make_acquisition
    from bimu.active.threshold import vote_threshold
    from bimu.edge.emulated_stream import run_stream

    x, y = bench.train_task(0, seed)
    n = min(int(n_examples), len(y))
    X, Y = x[:n].numpy().astype(np.float32), y[:n].numpy().astype(np.int64)
    method = _method([bench.n_features, bench.n_classes], seed, preset, "float32")
    learner = ActiveLearner(method, make_acquisition("vr", threshold=threshold, mc_samples=mc_samples, seed=seed))
    gen = torch.Generator()
    gen.set_state(learner.query_generator.get_state())
    keys = torch.randint(0, QUERY_KEY_RANGE, (n,), generator=gen).numpy()
    flags = ["-DBIMU_QUERY_DOT8=1"] if engine_order else []
    r = run_stream(method, X, Y, keys, mc_samples, vote_threshold(threshold, mc_samples), core, flags)
    learn_in_blocks(learner, torch.from_numpy(X), torch.from_numpy(Y), task=0)
    python_asked = [bool(a) for a in learner.ledger.asked.tolist()]
    return {"core": core, "examples": n, "asked": r.asked, "host_asked": r.host_asked, "python_asked": python_asked,
            "labels_queried": int(sum(r.asked)), "right": r.right, "lambda_hash": f"0x{r.hash:016X}",
            "matches_host": r.matches_host, "same_decisions": r.same_decisions, "matches_python": r.asked == python_asked}

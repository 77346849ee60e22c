"""Compute-cost accounting: the paper's appendix "Computational Cost Evaluation", measured here.

The paper (STM32 at 216 MHz, OpenLORIS-8192 head 8192 -> 19) reports per example
``C_inference = 13.7 ms`` (one MC forward pass), ``C_train = 266.0 ms`` (one training update),
and with ``K = 2`` MC predictors and a query rate ``B_rate = 3.3%``:

- active learning: ``C_AL = K (C_inference + B_rate C_train) = 45.0 ms``;
- full online training: ``C_full = K (C_inference + C_train) = 559.4 ms``.

:func:`compute_cost_table` measures ``C_inference`` (bit-packed path and float torch path) and
``C_train`` (one BiMU step of the torch method, one MC predictor; a fused engine step too when
``bimu.engine`` supports the network) on this machine, single-threaded, all in one run, and puts
the paper's numbers beside them. Timings are medians over interleaved repeats.

:func:`emulated_cost_section` adds the device's side: the C learners (BiMU, BayesBiNN, STE, Syn. Meta.)
cross-built for Cortex-M4 and Cortex-M7 and run under QEMU (:mod:`bimu.edge.emulate`), INSTRUCTIONS
(not cycles) per inference of one MC sample and per training step beside the paper's cycle table,
with ``C_AL`` and ``C_full`` computed from them; one line says so when the toolchain is missing.

>>> round(expected_cost_al(13.7, 266.0, k=2, query_rate=0.033), 1), expected_cost_full(13.7, 266.0, k=2)
(45.0, 559.4)
"""

from __future__ import annotations

import contextlib
import dataclasses
import statistics
import time
from collections.abc import Callable, Sequence

import numpy as np
import torch

from bimu.engine.build import build_method

from bimu.edge.paper_cost import (PAPER_K, PAPER_QUERY_RATE, PAPER_STM32,  # noqa: F401 - part of this interface
                                   check_k_rate, expected_cost_al, expected_cost_full)


@contextlib.contextmanager
def single_thread():
    """Run torch on one thread inside the block (the numba kernels are single-threaded)."""
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(old)


def _median_interleaved(fns: dict[str, Callable[[], float]], repeats: int) -> dict[str, float]:
    times = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            times[name].append(fn())
    return {name: statistics.median(v) for name, v in times.items()}


def _timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


@dataclasses.dataclass
class CostTable:
    """Measured per-example costs (seconds) and the derived expected costs; :meth:`format` prints it.

    ``inference`` maps a backend (``packed``, ``float``) to the time of one MC forward pass per
    example; ``train`` maps a backend (``torch``, maybe ``fused``) to one training step (one MC
    predictor) per example.
    """

    sizes: list[int]
    preset: str | None
    k: int
    query_rate: float
    query_rate_source: str
    inference: dict[str, float]
    train: dict[str, float]
    n_examples: int
    repeats: int
    inference_samples: int

    def expected(self, inference: str, train: str) -> dict[str, float]:
        """``C_AL``, ``C_full`` and their ratio for one pair of backends (seconds)."""
        ci, ct = self.inference[inference], self.train[train]
        al = expected_cost_al(ci, ct, self.k, self.query_rate)
        full = expected_cost_full(ci, ct, self.k)
        return {"al": al, "full": full, "full_over_al": full / al, "train_over_inference": ct / ci}

    def as_dict(self) -> dict:
        """JSON-ready content, expected costs for every pair of backends included."""
        d = dataclasses.asdict(self)
        d["expected"] = {f"{i}+{t}": self.expected(i, t) for i in self.inference for t in self.train}
        d["paper_stm32"] = PAPER_STM32
        return d

    def format(self) -> str:
        """A markdown table: this machine's numbers (ms) beside the paper's STM32 ones."""
        cols = [(i, t) for t in self.train for i in ("packed", "float") if i in self.inference]
        head = ["quantity"] + [f"{i} inference + {t} train" for i, t in cols] + ["paper STM32"]
        ms = 1e3
        paper = PAPER_STM32

        def row(name, values, p):
            return [name] + values + [p]

        rows = [
            row("C_inference: one MC forward pass (ms)", [f"{self.inference[i] * ms:.4f}" for i, _ in cols],
                f"{paper['inference_ms']}"),
            row("C_train: one training step (ms)", [f"{self.train[t] * ms:.4f}" for _, t in cols],
                f"{paper['train_ms']}"),
            row("C_train / C_inference", [f"{self.expected(i, t)['train_over_inference']:.1f}x" for i, t in cols],
                f"{paper['train_over_inference']}x"),
            row(f"C_AL = K (C_inf + B_rate C_train) (ms), K={self.k}, B_rate={self.query_rate:.2%}",
                [f"{self.expected(i, t)['al'] * ms:.4f}" for i, t in cols],
                f"{paper['al_ms']} (K=2, 3.3%)"),
            row(f"C_full = K (C_inf + C_train) (ms), K={self.k}",
                [f"{self.expected(i, t)['full'] * ms:.4f}" for i, t in cols], f"{paper['full_ms']}"),
            row("C_full / C_AL", [f"{self.expected(i, t)['full_over_al']:.1f}x" for i, t in cols],
                f"{paper['full_over_al']}x"),
        ]
        widths = [max(len(r[c]) for r in [head] + rows) for c in range(len(head))]
        lines = ["| " + " | ".join(v.ljust(w) for v, w in zip(r, widths)) + " |" for r in [head] + rows]
        lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
        extra = []
        if "packed" in self.inference and "float" in self.inference:
            extra.append(f"packed inference is {self.inference['float'] / self.inference['packed']:.1f}x "
                         "faster than the float torch path (same MC samples per example, one core)")
        extra.append(
            f"This CPU, one thread, network {'-'.join(map(str, self.sizes))}"
            f"{f' (preset {self.preset})' if self.preset else ''}; medians of {self.repeats} interleaved repeats "
            f"over {self.n_examples} examples; inference timed with {self.inference_samples} fresh MC samples per "
            f"example and divided by {self.inference_samples}; training = one BiMU update with one MC predictor "
            f"per example. Query rate: {self.query_rate_source}. Paper: {paper['device']}.")
        return "\n".join(lines) + "\n\n" + "\n".join(extra) + "\n"


def query_rate_from_run(run_dir) -> float:
    """Measured query rate ``updates_applied / examples_seen`` of a run's checkpoint."""
    from bimu.edge.export import read_checkpoint

    ms = read_checkpoint(run_dir)["method_state"]
    seen, applied = ms.get("examples_seen"), ms.get("updates_applied")
    if not seen:
        raise ValueError(f"{str(run_dir)!r} has no examples_seen counter (or it is 0)")
    return float(applied) / float(seen)


def compute_cost_table(sizes: Sequence[int] = (8192, 19), preset: str | None = "openloris-8192", k: int = PAPER_K,
                       query_rate: float | None = None, run_dir=None, n_examples: int = 32, repeats: int = 5,
                       inference_samples: int = 10, seed: int = 0,
                       train_steps: dict[str, Callable] | None = None) -> CostTable:
    """Measure ``C_inference`` (packed, float) and ``C_train`` here and derive ``C_AL`` / ``C_full``.

    Args:
        sizes, preset: the BiMU network and its paper preset (default: the OpenLORIS-8192 head).
        k, query_rate: the formula's ``K`` and ``B_rate`` (default: the paper's 2 and 3.3%, or the
            measured rate of ``run_dir``'s checkpoint when given).
        n_examples, repeats: examples per timing, interleaved repeats (the median is kept).
        inference_samples: fresh MC samples drawn per example when timing inference.
        train_steps: extra training backends, name -> ``factory(sizes, hparams, seed)`` returning an
            object with ``learn(x[1, D], y[1])``; ``torch`` (the registered method) is always
            measured, and ``fused`` when :mod:`bimu.engine` supports the network.
    """
    from bimu.edge.packed import pack
    from bimu.methods import create_method

    check_k_rate(k, 0.0 if query_rate is None else query_rate)
    if run_dir is not None and query_rate is None:
        query_rate, source = query_rate_from_run(run_dir), f"measured in {run_dir}"
    elif query_rate is None:
        query_rate, source = PAPER_QUERY_RATE, "the paper's measured 3.3%"
    else:
        source = "given"
    if n_examples < 1 or repeats < 1 or inference_samples < 1:
        raise ValueError("n_examples, repeats and inference_samples must be >= 1")
    sizes = [int(s) for s in sizes]
    with single_thread():
        method = create_method("bimu", sizes, seed=seed, preset=preset, n_samples=1)
        rng = np.random.default_rng(seed)
        x = torch.from_numpy(np.clip(rng.standard_normal((n_examples, sizes[0])), -3.9, 3.9).astype(np.float32))
        y = torch.from_numpy(rng.integers(0, sizes[-1], n_examples))
        packed = pack(method, input_max=4.0)
        gen = torch.Generator().manual_seed(seed)
        packed.logits_int(x[:1], 1, per_example=True)  # compile / warm up
        counter = iter(range(10**9))

        def packed_inference():
            off = next(counter) * n_examples * inference_samples
            return _timed(lambda: packed.logits_int(x, inference_samples, seed=seed, sample_offset=off,
                                                    per_example=True))

        def float_inference():
            def run():
                with torch.no_grad():
                    for i in range(n_examples):
                        method.predict_samples(x[i:i + 1], inference_samples, gen)
            return _timed(run)

        trainers = {"torch": method}
        fused, engine = build_method("bimu", sizes, seed, method.hparams, threads=None)
        if engine == "fused":
            trainers["fused"] = fused
        for name, factory in (train_steps or {}).items():
            trainers[name] = factory(sizes, method.hparams, seed)

        def train_fn(learner):
            def fn():
                def run():
                    for i in range(n_examples):
                        learner.learn(x[i:i + 1], y[i:i + 1])
                return _timed(run)
            return fn

        fns = {"inf:packed": packed_inference, "inf:float": float_inference}
        fns.update({f"train:{n}": train_fn(t) for n, t in trainers.items()})
        for fn in fns.values():  # warm-up
            fn()
        med = _median_interleaved(fns, repeats)
    per_inf = n_examples * inference_samples
    return CostTable(
        sizes=sizes, preset=preset, k=int(k), query_rate=float(query_rate), query_rate_source=source,
        inference={"packed": med["inf:packed"] / per_inf, "float": med["inf:float"] / per_inf},
        train={n: med[f"train:{n}"] / n_examples for n in trainers},
        n_examples=n_examples, repeats=repeats, inference_samples=inference_samples,
    )


EMULATED_NETWORKS = {"quick": [[512, 16]], "full": [[512, 16], [8192, 19]]}
"""Networks of the emulated instruction table by scale: the paper's 512 -> 16 reference layer, and at
full scale the 8192 -> 19 OpenLORIS head too."""


def emulated_cost_section(scale: str = "full", k: int = PAPER_K, query_rate: float = PAPER_QUERY_RATE,
                          cores: Sequence[str] = ("m4", "m7"), seed: int = 0, required: bool = False):
    """``(text, table)``: the emulated instruction table (:func:`bimu.edge.emulate.emulated_cost_table`)
    of the networks of ``scale`` (:data:`EMULATED_NETWORKS`) as markdown, and its
    :class:`~bimu.edge.emulate.EmulatedCostTable`; every device hash is checked against the host build.
    Without the toolchain: one line saying so and ``None`` (``required``: RuntimeError instead)."""
    from bimu.edge.emulate import emulated_cost_table, toolchain_note

    if scale not in EMULATED_NETWORKS:
        raise ValueError(f"scale must be one of {sorted(EMULATED_NETWORKS)}, got {scale!r}")
    check_k_rate(k, query_rate)
    note = toolchain_note()
    if note:
        if required:
            raise RuntimeError(note)
        return note + "\n", None
    table = emulated_cost_table(EMULATED_NETWORKS[scale], cores=list(cores), k=k, query_rate=query_rate, seed=seed)
    return table.format(), table

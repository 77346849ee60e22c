"""The C learners cross-built for Cortex-M4 and Cortex-M7 and run under QEMU: instruction counts per
inference and per training step, and the device's hash of what it learned against the host's.

Toolchain (Debian's packages; ``scripts/ci_arm.sh`` installs them): ``arm-none-eabi-gcc`` with newlib
and ``qemu-system-arm``. Cores (:data:`CORES`): QEMU's ``mps2-an386`` board (Cortex-M4, FPv4-SP, the
float32 FPU of an STM32F4) and ``mps2-an500`` (Cortex-M7 with the FPv5 double-precision FPU that QEMU
models, as on an STM32F76x/F77x or H7; the learners' LayerNorm statistics are double).
Programs: ``c/emu/bimu_bench.c`` on the bare-metal start-up ``c/emu/mps2_startup.c`` and memory map
``c/emu/mps2.ld`` (no C library start-up, console and exit status through semihosting).

Flags: the numeric flags are those of the host build, ``-std=c99 -O2 -ffp-contract=off``
(:data:`bimu.edge.clearner.CFLAGS`), so the compiler contracts nothing but the sources' explicit
``fma`` calls; the cross-build adds only target flags (:data:`ARM_FLAGS`, the core's ``-mcpu`` and
``-mfpu``) and ``-fno-math-errno``, which lets ``sqrt`` be the FPU's instruction and changes no value.
With the same flags the float32 learners compute the same bits on the host and on the cores
(:attr:`BenchResult.matches_host`) where their library functions agree: on a core without a
double-precision FPU newlib's ``fma`` rounds twice and its ``expf`` is the old fdlibm one, so those builds
link ``c/emu/bimu_emu_libm.c`` (a correctly rounded ``fma``; an ``expf`` closer to the host's, which still
differs from glibc's on about one input in 10^4). :func:`bimu.edge.emulated_stream.run_stream` runs a whole active stream.

Counting (:data:`INSTRUCTIONS_PER_TICK`): QEMU runs with ``-icount shift=0``, one nanosecond of
virtual time per executed instruction, and the board's SysTick counts the 25 MHz system clock, so one
tick is 40 INSTRUCTIONS (:func:`calibrate` measures a loop of known length). They are instructions,
not cycles: QEMU models no pipeline, no flash wait states, no caches; a Cortex-M7 also issues up to
two instructions per cycle. A measurement is the ticks between two reads around one call, less an
empty measurement, times 40; its resolution is 40 instructions. Runs are deterministic.
"""

from __future__ import annotations

import dataclasses
import importlib.resources
import re
import shutil
import statistics
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from bimu.edge.clearner import CFLAGS
from bimu.edge.paper_cost import PAPER_CYCLES_512_16, PAPER_MS_8192_19

INSTRUCTIONS_PER_TICK = 40
"""SysTick ticks to instructions under ``-icount shift=0`` (1 ns per instruction, 25 MHz SysTick)."""
NUMERIC_FLAGS = tuple(f for f in CFLAGS if f not in ("-fPIC", "-shared"))
"""The flags shared with the host build (language, optimisation, no contraction)."""
ARM_FLAGS = ("-mthumb", "-mfloat-abi=hard", "-fno-math-errno", "-nostartfiles", "--specs=nosys.specs")
"""Target flags of every cross-build (hard-float ABI, bare metal)."""
QEMU_FLAGS = ("-nographic", "-monitor", "none", "-serial", "none", "-semihosting-config",
              "enable=on,target=native", "-icount", "shift=0")
"""QEMU options of every run (semihosting console, one nanosecond per instruction)."""
METHODS = ("bimu", "bayesbinn", "ste", "synaptic-metaplasticity")
"""The methods of the paper's cost table, in its order."""
METHOD_LABELS = {"bimu": "BiMU", "bayesbinn": "BayesBiNN", "ste": "STE", "synaptic-metaplasticity": "Syn. Meta."}
TARGETS_M7 = {"inference_512_16": 80_000, "bimu_train_512_16": 1_500_000}
"""Targets on the emulated Cortex-M7, float32, instructions per call: one MC sample of 512 -> 16 and one
BiMU training step (K = 1)."""
PRESET = "openloris-8192"
"""Hyperparameters of the benchmarked learners (the paper's OpenLORIS-8192 values; K = 1)."""


@dataclasses.dataclass(frozen=True)
class Core:
    """One emulated core: its QEMU board and compiler flags."""

    name: str
    board: str
    flags: tuple[str, ...]
    single_precision_fpu: bool = False
    """No double-precision FPU: newlib's float libm is the older fdlibm one, and the build links
    ``c/emu/bimu_emu_libm.c`` (a correctly rounded ``expf``, as the host's) in its place."""


CORES = {
    "m4": Core("Cortex-M4", "mps2-an386", ("-mcpu=cortex-m4", "-mfpu=fpv4-sp-d16"), single_precision_fpu=True),
    "m7": Core("Cortex-M7", "mps2-an500", ("-mcpu=cortex-m7", "-mfpu=fpv5-d16")),
    "m7sp": Core("Cortex-M7 (FPv5-SP)", "mps2-an500", ("-mcpu=cortex-m7", "-mfpu=fpv5-sp-d16"),
                 single_precision_fpu=True),
}
"""The emulated cores by short name: ``m4``, ``m7`` (double-precision FPU) and ``m7sp`` (a Cortex-M7 built
for the single-precision FPv5-SP of an STM32F72x/F74x, such as a 216 MHz NUCLEO-64 board; QEMU runs it on
the same board)."""


def missing_tools() -> list[str]:
    """The programs of the cross toolchain that are not on ``PATH`` (empty when all are there)."""
    return [t for t in ("arm-none-eabi-gcc", "qemu-system-arm") if shutil.which(t) is None]


def toolchain_note() -> str:
    """One line saying why emulation is unavailable, or ``""`` when it is available."""
    missing = missing_tools()
    if not missing:
        return ""
    return (f"emulated Cortex-M instruction counts unavailable: {', '.join(missing)} not found "
            "(install with: sudo bash scripts/ci_arm.sh)")


def _c_dir() -> Path:
    return Path(str(importlib.resources.files("bimu.edge") / "c"))


def _run(cmd: Sequence[str], timeout: float, what: str) -> subprocess.CompletedProcess:
    proc = subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"{what} failed (exit {proc.returncode}):\n{(proc.stderr or proc.stdout).strip()[-4000:]}")
    return proc


# ----------------------------------------------------------------------------- benchmark programs
def _hex(values) -> str:
    return ",".join(float(v).hex() for v in np.asarray(values, dtype=np.float64).ravel())


@dataclasses.dataclass
class BenchCase:
    """One benchmark program's inputs (``files``: the generated headers ``bimu_bench_config.h``,
    ``bimu_bench_data.h`` and, for BiMU / BayesBiNN, ``bimu_config.h``; ``sources``: the learner's C
    files in ``bimu/edge/c``) and the host's reference results (logits of the last prediction, hash
    after the training steps)."""

    method: str
    sizes: list[int]
    files: dict[str, str]
    sources: list[str]
    host_logits: np.ndarray
    host_hash: int
    infer_repeats: int
    train_steps: int


def bench_case(method: str, sizes: Sequence[int], seed: int = 0, train_steps: int = 3, infer_repeats: int = 3,
               n_examples: int = 2) -> BenchCase:
    """The benchmark of ``method`` (:data:`METHODS`) on the float32 network ``sizes``, preset
    :data:`PRESET`, one relaxed sample per training step: initial state from the fused engine (seed
    ``seed``), ``n_examples`` random examples, ``infer_repeats`` predictions then ``train_steps`` steps,
    the same sequence replayed on the host build (ctypes) for the reference logits and hash."""
    from bimu.engine import create_fused
    from bimu.methods import get_method

    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    sizes = [int(s) for s in sizes]
    overrides = {"n_samples": 1} if method in ("bimu", "bayesbinn") else {}
    hparams = get_method(method).resolve_hyperparameters(overrides, preset=PRESET)
    m = create_fused(method, sizes, seed, hparams, threads=1, dtype="float32")
    rng = np.random.default_rng(seed + 1)
    X = np.clip(rng.standard_normal((n_examples, sizes[0])), -3.9, 3.9).astype(np.float32)
    Y = rng.integers(0, sizes[-1], n_examples)
    keys = [int(k) >> 2 for k in rng.integers(0, 2**63 - 1, infer_repeats, dtype=np.int64)]
    n_params = sum(a * b for a, b in zip(sizes[:-1], sizes[1:]))
    kind = METHODS.index(method)
    cfg = [f"#define BENCH_KIND {kind}", f"#define BENCH_N_LAYERS {len(sizes) - 1}",
           f"#define BENCH_SIZES {{{', '.join(map(str, sizes))}}}", f"#define BENCH_N_IN {sizes[0]}",
           f"#define BENCH_N_OUT {sizes[-1]}", f"#define BENCH_N_PARAMS {n_params}",
           f"#define BENCH_N_UNITS {sum(sizes[1:])}", f"#define BENCH_N_EXAMPLES {n_examples}",
           f"#define BENCH_INFER_REPEATS {infer_repeats}", f"#define BENCH_TRAIN_STEPS {train_steps}"]
    data = [f"static const bench_real bench_x[{X.size}] = {{{_hex(X)}}};",
            f"static const int bench_y[{n_examples}] = {{{', '.join(str(int(v)) for v in Y)}}};"]
    files = {}
    if kind <= 1:
        from bimu.edge.clearner import CLearner
        from bimu.engine.hparams import BinaryHP

        c = CLearner.from_method(m, query_samples=1, double=False)
        h = m._hp
        coeffs = [h[i] for i in range(6)] + [h[BinaryHP.GATE], h[BinaryHP.LN_EPS]]
        cfg += [f"#define BENCH_TRAIN_KEY {int(m.train_key)}ULL", f"#define BENCH_EVAL_KEY {int(m.eval_key)}ULL"]
        data += [f"static const bench_real bench_w0[{n_params}] = {{{_hex(m.lam)}}};",
                 f"static const double bench_hp[8] = {{{_hex(coeffs)}}};",
                 f"static const uint64_t bench_query_keys[{infer_repeats}] = {{{', '.join(f'{k}ULL' for k in keys)}}};"]
        files["bimu_config.h"] = c.config
        sources = ["bimu_learn.c"]
        logits = None
        for r in range(infer_repeats):
            logits = c.logits(X[r % n_examples], keys[r], 1)[0]
        for s in range(train_steps):
            c.learn(X[s % n_examples], int(Y[s % n_examples]))
        host_hash = c.lambda_hash()
    else:
        from bimu.edge.csign import CSignLearner, sign_hparams

        hp = sign_hparams(method, m.hparams)
        c = CSignLearner(method, sizes, m.hparams, m.Wh, double=False)
        cfg += [f"#define BENCH_{name.upper()} {float(hp[name]).hex()}"
                for name in ("lr", "weight_decay", "metaplasticity", "bn_momentum", "gate")]
        cfg += [f"#define BENCH_CLIP {int(hp['clip'])}"]
        data += [f"static const bench_real bench_w0[{n_params}] = {{{_hex(m.Wh)}}};"]
        sources = ["bimu_sign_learn.c"]
        logits = None
        for r in range(infer_repeats):
            logits = c.logits(X[r % n_examples])
        for s in range(train_steps):
            c.learn(X[s % n_examples], int(Y[s % n_examples]))
        host_hash = c.weights_hash()
    files["bimu_bench_config.h"] = "/* bimu_bench_config.h - generated by bimu.edge.emulate.bench_case */\n" + \
        "\n".join(cfg) + "\n"
    files["bimu_bench_data.h"] = "/* bimu_bench_data.h - generated by bimu.edge.emulate.bench_case */\n" + \
        "\n".join(data) + "\n"
    return BenchCase(method, sizes, files, sources, np.asarray(logits, dtype=np.float32), int(host_hash),
                     infer_repeats, train_steps)


def build_elf(case: BenchCase, core: str, folder: Path) -> Path:
    """Cross-compile ``case``'s benchmark for ``core`` (:data:`CORES`) into ``folder``; returns the ELF."""
    c = CORES[core]
    folder = Path(folder)
    for name, text in case.files.items():
        (folder / name).write_text(text)
    src, emu = _c_dir(), _c_dir() / "emu"
    elf = folder / f"bench-{case.method}-{'-'.join(map(str, case.sizes))}-{core}.elf"
    cmd = ["arm-none-eabi-gcc", *NUMERIC_FLAGS, *ARM_FLAGS, *c.flags, "-I", str(folder), "-I", str(src), "-I",
           str(emu), "-T", str(emu / "mps2.ld"), str(emu / "mps2_startup.c"), str(emu / "bimu_bench.c"),
           *(str(src / s) for s in case.sources), *([str(emu / "bimu_emu_libm.c")] if c.single_precision_fpu else []),
           "-o", str(elf), "-lm", "-lc", "-lgcc"]
    _run(cmd, 300, f"arm-none-eabi-gcc ({c.name}, {case.method})")
    return elf


def run_elf(elf: Path, core: str, timeout: float = 120) -> str:
    """Run a benchmark ELF on ``core``'s QEMU board; returns its console output (QEMU writes the
    semihosting console to its standard error)."""
    proc = _run(["qemu-system-arm", "-M", CORES[core].board, *QEMU_FLAGS, "-kernel", str(elf)], timeout,
                f"qemu-system-arm {CORES[core].board} {Path(elf).name}")
    return proc.stdout + proc.stderr


@dataclasses.dataclass
class BenchResult:
    """One emulated run: ticks of each measurement, the last logits' bits and the final hash."""

    method: str
    sizes: list[int]
    core: str
    overhead: int
    infer_ticks: list[int]
    train_ticks: list[int]
    logits_bits: list[int]
    hash: int
    host_hash: int | None = None
    """The host build's hash after the same steps (filled by :func:`emulated_cost_table`)."""
    host_logits_equal: bool | None = None
    """Whether the last prediction's logits equal the host build's bit for bit."""

    @property
    def matches_host(self) -> bool:
        """The device's final hash and last logits equal the host build's."""
        return self.hash == self.host_hash and bool(self.host_logits_equal)

    def instructions(self, ticks: Sequence[int]) -> list[int]:
        """Instructions of each measurement (``(ticks - overhead) x 40``)."""
        return [(t - self.overhead) * INSTRUCTIONS_PER_TICK for t in ticks]

    @property
    def inference(self) -> float:
        """Mean instructions of one prediction (one MC sample for BiMU / BayesBiNN)."""
        return statistics.fmean(self.instructions(self.infer_ticks))

    @property
    def train(self) -> float:
        """Mean instructions of one training step."""
        return statistics.fmean(self.instructions(self.train_ticks))


def parse_bench(text: str, method: str, sizes: Sequence[int], core: str) -> BenchResult:
    """The :class:`BenchResult` of a benchmark program's console output."""
    if "BENCH done" not in text:
        raise RuntimeError(f"the emulated benchmark did not finish; its output:\n{text[-2000:]}")

    def ints(what):
        return [int(v) for v in re.findall(rf"^BENCH {what} (\d+)$", text, re.M)]

    logits = re.search(r"^BENCH logits((?: [0-9a-f]+)+)$", text, re.M)
    h = re.search(r"^BENCH hash ([0-9a-f]+)$", text, re.M)
    return BenchResult(method, [int(s) for s in sizes], core, ints("overhead")[0], ints("infer"), ints("train"),
                       [int(v, 16) for v in logits.group(1).split()], int(h.group(1), 16))


def run_case(case: BenchCase, core: str, folder: Path | None = None) -> BenchResult:
    """Build and run ``case`` on ``core``; a temporary folder unless ``folder`` is given."""
    with tempfile.TemporaryDirectory() as tmp:
        elf = build_elf(case, core, Path(folder or tmp))
        return parse_bench(run_elf(elf, core), case.method, case.sizes, core)


def calibrate(core: str, iterations: int = 250_000) -> tuple[int, int]:
    """``(ticks, instructions)`` of a loop of ``2 x iterations`` instructions (``subs``, ``bne``) on
    ``core``: checks :data:`INSTRUCTIONS_PER_TICK` (``ticks x 40`` equals the instructions to within one
    tick plus the counter's own few instructions)."""
    c = CORES[core]
    emu = _c_dir() / "emu"
    with tempfile.TemporaryDirectory() as tmp:
        elf = Path(tmp, "calibrate.elf")
        _run(["arm-none-eabi-gcc", *NUMERIC_FLAGS, *ARM_FLAGS, *c.flags, f"-DBIMU_CALIBRATE_ITERATIONS={iterations}",
              "-I", str(emu), "-T", str(emu / "mps2.ld"), str(emu / "mps2_startup.c"), str(emu / "bimu_calibrate.c"),
              "-o", str(elf), "-lc", "-lgcc"], 120, "arm-none-eabi-gcc (calibration)")
        out = run_elf(elf, core)
    m = re.search(r"^CALIBRATE ticks (\d+) overhead (\d+)$", out, re.M)
    if not m:
        raise RuntimeError(f"the calibration program printed:\n{out}")
    return int(m.group(1)) - int(m.group(2)), 2 * iterations


# ----------------------------------------------------------------------------- the instruction table
@dataclasses.dataclass
class EmulatedCostTable:
    """Emulated instructions per call (inference: one MC sample; training: one step, K = 1) by
    ``(network, method, core)``, with :meth:`format` printing them beside the paper's cycles."""

    results: dict[tuple[str, str, str], BenchResult]
    networks: list[list[int]]
    methods: list[str]
    cores: list[str]
    k: int
    query_rate: float

    def get(self, sizes, method, core) -> BenchResult:
        """The measurement of ``method`` on network ``sizes`` and core ``core``."""
        return self.results[("-".join(map(str, sizes)), method, core)]

    def expected(self, sizes, method, core) -> tuple[float, float]:
        """``(C_AL, C_full)`` in instructions, as the paper computes them: for BiMU and BayesBiNN
        ``K (C_inf + B_rate C_train)`` and ``K (C_inf + C_train)``; STE and Syn. Meta. train on every
        example with their one deterministic network, so both are ``C_train``."""
        from bimu.edge.paper_cost import expected_cost_al, expected_cost_full

        r = self.get(sizes, method, core)
        if method in ("bimu", "bayesbinn"):
            return (expected_cost_al(r.inference, r.train, self.k, self.query_rate),
                    expected_cost_full(r.inference, r.train, self.k))
        return r.train, r.train

    def as_dict(self) -> dict:
        """JSON-ready content (instructions per call, expected costs, the paper's numbers)."""
        rows = []
        for (net, method, core), r in self.results.items():
            sizes = [int(s) for s in net.split("-")]
            al, full = self.expected(sizes, method, core)
            rows.append({"network": net, "method": method, "core": CORES[core].name, "board": CORES[core].board,
                         "inference_instructions": r.inference, "train_instructions": r.train,
                         "inference_instructions_each": r.instructions(r.infer_ticks),
                         "train_instructions_each": r.instructions(r.train_ticks),
                         "c_al_instructions": al, "c_full_instructions": full, "device_hash": f"{r.hash:016x}",
                         "host_hash": None if r.host_hash is None else f"{r.host_hash:016x}",
                         "matches_host": r.matches_host})
        return {"unit": "instructions (QEMU -icount shift=0), not cycles", "k": self.k, "query_rate": self.query_rate,
                "rows": rows, "paper_cycles_512_16": PAPER_CYCLES_512_16, "paper_ms_8192_19": PAPER_MS_8192_19,
                "targets_m7": TARGETS_M7}

    def format(self) -> str:
        """Markdown: per network, one row per method with the instructions of each core beside the
        paper's cycles (512 -> 16: measured; 8192 -> 19: the paper's projected ms), then C_AL / C_full."""
        out = []
        for sizes in self.networks:
            paper_512 = sizes == [512, 16]
            head = ["method"]
            for core in self.cores:
                head += [f"{CORES[core].name} inference", f"{CORES[core].name} training"]
            head += ["paper inference (cycles)", "paper training (cycles)"] if paper_512 else \
                ["paper inference (ms)", "paper training (ms)"]
            rows = []
            for method in self.methods:
                row = [METHOD_LABELS[method]]
                for core in self.cores:
                    r = self.get(sizes, method, core)
                    row += [f"{r.inference:,.0f}", f"{r.train:,.0f}"]
                p = PAPER_CYCLES_512_16[method] if paper_512 else PAPER_MS_8192_19.get(method)
                row += [f"{p[0]:,}", f"{p[1]:,}"] if paper_512 else [f"{p[0]}", f"{p[1]}"]
                rows.append(row)
            out.append(f"Emulated instructions per call, network {' -> '.join(map(str, sizes))}, float32 "
                       f"(inference: one MC sample; training: one step, K = 1):\n")
            out.append(_markdown(head, rows))
            head2 = ["method"] + [f"{CORES[c].name} {q}" for c in self.cores
                                  for q in ("C_AL", "C_full", "C_full / C_AL")]
            rows2 = []
            for method in self.methods:
                row = [METHOD_LABELS[method]]
                for core in self.cores:
                    al, full = self.expected(sizes, method, core)
                    row += [f"{al:,.0f}", f"{full:,.0f}", f"{full / al:.1f}x"]
                rows2.append(row)
            out.append(f"\nExpected instructions per incoming example, K = {self.k}, B_rate = {self.query_rate:.1%} "
                       "(BiMU, BayesBiNN: C_AL = K (C_inf + B_rate C_train), C_full = K (C_inf + C_train); "
                       "STE, Syn. Meta.: C_train, one deterministic network):\n")
            out.append(_markdown(head2, rows2))
            out.append("")
        for core in self.cores:
            same = [METHOD_LABELS[m] for m in self.methods
                    if all(self.get(n, m, core).matches_host for n in self.networks)]
            differ = [METHOD_LABELS[m] for m in self.methods if METHOD_LABELS[m] not in same]
            out.append(f"{CORES[core].name}: final hash and logits equal to the host build's (same flags): "
                       f"{', '.join(same) or 'none'}" + (f"; DIFFERENT: {', '.join(differ)}" if differ else "")
                       + ("" if (differ or same or ["."])[-1].endswith(".") else "."))
        m7 = "m7" in self.cores and [512, 16] in self.networks
        lines = ["These are INSTRUCTIONS counted by QEMU (-icount shift=0: 1 ns per instruction; SysTick at 25 MHz "
                 "= 40 instructions per tick, resolution 40), NOT cycles: no pipeline, wait states or caches are "
                 "modelled, so they are not comparable one for one with the paper's STM32 cycles. Boards: "
                 + ", ".join(f"{CORES[c].board} ({CORES[c].name}, {' '.join(CORES[c].flags)})" for c in self.cores)
                 + f"; flags {' '.join(NUMERIC_FLAGS)}; hyperparameters of preset {PRESET}."]
        if m7:
            inf = self.get([512, 16], "bimu", "m7").inference
            tr = self.get([512, 16], "bimu", "m7").train
            t_inf, t_tr = TARGETS_M7["inference_512_16"], TARGETS_M7["bimu_train_512_16"]
            lines.append(f"Targets on the emulated Cortex-M7 (512 -> 16): BiMU inference {inf:,.0f} <= {t_inf:,} "
                         f"({'met' if inf <= t_inf else 'MISSED'}), BiMU training step {tr:,.0f} <= {t_tr:,} "
                         f"({'met' if tr <= t_tr else 'MISSED'}).")
        return "\n".join(out) + "\n" + "\n".join(lines) + "\n"


def _markdown(head, rows) -> str:
    widths = [max(len(r[c]) for r in [head] + rows) for c in range(len(head))]
    lines = ["| " + " | ".join(v.ljust(w) for v, w in zip(r, widths)) + " |" for r in [head] + rows]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines) + "\n"


def emulated_cost_table(networks: Sequence[Sequence[int]] = ((512, 16), (8192, 19)),
                        methods: Sequence[str] = METHODS, cores: Sequence[str] = ("m4", "m7"), k: int = 2,
                        query_rate: float = 0.033, seed: int = 0, train_steps: int = 2,
                        infer_repeats: int = 3, strict: bool = False) -> EmulatedCostTable:
    """Build and run every ``(network, method, core)`` benchmark and collect the instruction counts.

    Each result records the host build's hash and whether the device's logits and hash equal it
    (:attr:`BenchResult.matches_host`); ``strict``: raise ``AssertionError`` at the first difference.
    Raises ``RuntimeError`` with :func:`toolchain_note` when the toolchain is missing.
    """
    note = toolchain_note()
    if note:
        raise RuntimeError(note)
    results = {}
    nets = [[int(s) for s in n] for n in networks]
    with tempfile.TemporaryDirectory() as tmp:
        for sizes in nets:
            for method in methods:
                case = bench_case(method, sizes, seed=seed, train_steps=train_steps, infer_repeats=infer_repeats)
                for core in cores:
                    folder = Path(tmp, f"{method}-{'-'.join(map(str, sizes))}-{core}")
                    folder.mkdir()
                    r = run_case(case, core, folder)
                    r.host_hash = case.host_hash
                    r.host_logits_equal = r.logits_bits == [int(v) for v in case.host_logits.view(np.uint32)]
                    if strict:
                        check_against_host(case, r)
                    results[("-".join(map(str, sizes)), method, core)] = r
    return EmulatedCostTable(results, nets, list(methods), list(cores), int(k), float(query_rate))


def check_against_host(case: BenchCase, r: BenchResult) -> None:
    """Raise ``AssertionError`` unless the emulated run's hash and last logits equal the host build's."""
    host_bits = [int(v) for v in case.host_logits.view(np.uint32)]
    if r.hash != case.host_hash or r.logits_bits != host_bits:
        raise AssertionError(f"{case.method} {case.sizes} on {CORES[r.core].name}: device hash {r.hash:016x}, host "
                             f"{case.host_hash:016x}; logits equal: {r.logits_bits == host_bits}")


def profile(method: str, sizes: Sequence[int], core: str = "m7", seed: int = 0, timeout: float = 600) -> dict:
    """Where the instructions of one prediction and one training step go: ``{"infer": {function:
    instructions}, "train": {...}}`` for ``method`` on ``sizes`` and ``core``.

    QEMU runs the benchmark one instruction per translation block (``-singlestep -d exec,nochain``) and
    every executed address is mapped to its function (``arm-none-eabi-nm``); the phase switches at the
    first instruction of the prediction (``bimu_logits`` / ``bimu_sign_logits``) and of the training
    step (``bimu_learn`` / ``bimu_sign_learn``). Slow (a few million log lines per million instructions):
    use it on small networks.
    """
    import bisect
    import collections

    case = bench_case(method, sizes, seed=seed, train_steps=1, infer_repeats=1)
    starts = {"bimu_logits": "infer", "bimu_sign_logits": "infer", "bimu_learn": "train",
              "bimu_sign_learn": "train", "bimu_lambda_hash": "end", "bimu_sign_weights_hash": "end"}
    with tempfile.TemporaryDirectory() as tmp:
        elf = build_elf(case, core, Path(tmp))
        syms = []
        for line in _run(["arm-none-eabi-nm", "-n", str(elf)], 60, "arm-none-eabi-nm").stdout.splitlines():
            p = line.split()
            if len(p) == 3 and p[1] in "tTW":
                syms.append((int(p[0], 16), p[2]))
        syms.sort()
        addrs = [a for a, _ in syms]
        pat = re.compile(r"\[[0-9a-f]+/([0-9a-f]+)/")
        per: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
        phase = "setup"
        cmd = ["qemu-system-arm", "-M", CORES[core].board, *QEMU_FLAGS, "-singlestep", "-d", "exec,nochain", "-D",
               "/dev/stdout", "-kernel", str(elf)]
        with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True) as proc:
            for line in proc.stdout:
                m = pat.search(line)
                if not m:
                    continue
                i = bisect.bisect_right(addrs, int(m.group(1), 16)) - 1
                name = syms[i][1] if i >= 0 else "?"
                phase = starts.get(name, phase)
                per[phase][name] += 1
            proc.wait(timeout)
    return {ph: dict(per[ph].most_common()) for ph in ("infer", "train")}


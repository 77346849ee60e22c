"""``bimu export --format c-learner`` and ``bimu import-device``: a CI run exported, the firmware example of
docs/on-device.md compiled against it with ``cc``, learning in C, its state read back bit for bit and
evaluated; damaged states refused with one line; the state sizes of the docs recomputed."""

import os
import re
import shutil
import stat
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

from bimu.cli import main
from bimu.edge.formats import FORMAT_FILES
from bimu.edge.device_state import fnv1a64, read_device_state, state_dump_bytes
from bimu.edge.learner_export import DEVICE_QUERY_STREAM, learner_spec, state_struct_bytes

CC = shutil.which("cc")
ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "on-device.md"
FLAGS = ["-std=c99", "-O2", "-ffp-contract=off", "-Wall", "-Wextra", "-Werror"]
needs_cc = pytest.mark.skipif(CC is None, reason="no C compiler (cc) on PATH")
needs_data = pytest.mark.skipif(not os.environ.get("BIMU_DATA_DIR"), reason="BIMU_DATA_DIR is not set (MNIST)")
N_TRAIN, N_DEVICE = 300, 60


def firmware_source() -> str:
    """The C example of docs/on-device.md (its first ```c block)."""
    blocks = re.findall(r"```c\n(.*?)```", DOC.read_text(), flags=re.S)
    assert blocks, "docs/on-device.md has no ```c block"
    return blocks[0]


@pytest.fixture(scope="module")
def ci_run(tmp_path_factory):
    """A one-task Permuted-MNIST BiMU run trained with the CLI (784-100-10, the fused engine), and the
    next examples of its stream as the firmware's input text."""
    if not os.environ.get("BIMU_DATA_DIR") or CC is None:
        pytest.skip("needs BIMU_DATA_DIR (MNIST) and cc")
    out = tmp_path_factory.mktemp("runs")
    assert main(["run", "pmnist", "--method", "bimu", "--tasks", "1", "--train-limit", str(N_TRAIN), "--test-limit",
                 "200", "--out", str(out), "--no-progress"]) == 0
    run = out / "pmnist-bimu" / "seed-0"
    from bimu.data.benchmarks import get_benchmark

    x, y = get_benchmark("pmnist", n_tasks=1).train_task(0, 0)
    x, y = x[N_TRAIN:N_TRAIN + N_DEVICE].numpy(), y[N_TRAIN:N_TRAIN + N_DEVICE].numpy()
    text = "".join(f"{int(b)} " + " ".join(repr(float(v)) for v in a) + "\n" for a, b in zip(x, y))
    return run, x, y, text


def export_and_build(run, folder, double=False, extra=()):
    assert main(["export", str(run), "--format", "c-learner", "--out", str(folder)]) == 0
    assert sorted(p.name for p in folder.iterdir()) == sorted(FORMAT_FILES["c-learner"])
    (folder / "firmware.c").write_text(firmware_source())
    exe = folder / ("firmware64" if double else "firmware")
    subprocess.run([CC, *FLAGS, *(["-DBIMU_DOUBLE"] if double else []), *extra, "firmware.c", "bimu_learn.c",
                    "bimu_state.c", "-o", exe.name, "-lm"], cwd=folder, check=True, capture_output=True)
    return exe


def run_firmware(exe, text, state):
    res = subprocess.run([str(exe), str(state)], input=text, capture_output=True, text=True, check=True)
    m = re.fullmatch(r"examples (\d+) right (\d+) queried (\d+) updates (\d+) lambda_hash 0x([0-9a-f]{16})\n",
                     res.stdout)
    assert m, res.stdout
    n, right, queried, updates, h = m.groups()
    return {"examples": int(n), "right": int(right), "queried": int(queried), "updates": int(updates),
            "hash": int(h, 16)}


def binding_replay(run, x, y, double=False):
    """The same device stream through the ctypes binding of the learner (bimu.edge.clearner), built from
    the run's checkpoint in Python: what the exported firmware must reproduce."""
    from bimu.edge.clearner import CLearner
    from bimu.edge.export import read_checkpoint
    from bimu.engine import create_fused
    from bimu.rng import derive_key

    ms = read_checkpoint(run)["method_state"]
    m = create_fused("bimu", ms["sizes"], ms["seed"], ms["hparams"], dtype="float32")
    m.load_state_dict(ms)
    c = CLearner.from_method(m, query_samples=2, double=double,
                             query_key=int(derive_key(ms["seed"], DEVICE_QUERY_STREAM)))
    c.set_query(2, 1)
    right = 0
    for a, b in zip(x, y):
        pred, ask = c.observe(a, c.next_query_key())
        if ask:
            c.learn(a, int(b))
        right += pred == int(b)
    return c, right


@needs_cc
@needs_data
def test_exported_learner_learns_in_c_and_reads_back_bit_for_bit(ci_run, tmp_path, capsys):
    from bimu.experiments.evaluate import evaluate_run
    from bimu.rundir import load_checkpoint_file

    run, x, y, text = ci_run
    exe = export_and_build(run, tmp_path / "device")
    out = run_firmware(exe, text, tmp_path / "state.bin")
    c, right = binding_replay(run, x, y)
    counters = c.counters
    assert out["examples"] == N_DEVICE and 0 < out["queried"] < N_DEVICE  # it asked for some labels, not all
    assert (out["queried"], out["right"]) == (counters["labels_queried"], right)
    assert out["updates"] == N_TRAIN + out["queried"] == counters["updates_applied"]
    assert out["hash"] == c.lambda_hash()  # the exported firmware is the learner the binding drives
    assert (tmp_path / "state.bin").stat().st_size == state_dump_bytes(79400, 4)

    capsys.readouterr()
    dev = tmp_path / "device-run"
    assert main(["import-device", str(run), str(tmp_path / "state.bin"), "--out", str(dev)]) == 0
    assert f"lambda hash 0x{out['hash']:016X}" in capsys.readouterr().out
    lam = load_checkpoint_file(dev / "checkpoint.pt")["method_state"]["modules"]["lam"]
    flat = np.concatenate([np.asarray(t).reshape(-1) for t in lam])
    assert flat.dtype == np.float32 and flat.tobytes() == c.lam.tobytes()  # bit for bit
    assert fnv1a64(flat.tobytes()) == out["hash"]
    before = load_checkpoint_file(run / "checkpoint.pt")["method_state"]["modules"]["lam"]
    assert not np.array_equal(np.asarray(before[0]), np.asarray(lam[0]))  # the device did learn

    assert main(["evaluate", str(dev), "--no-ood"]) == 0
    res = evaluate_run(dev, ood=False)
    assert res["after_task"] == 0 and 0.0 <= res["tasks"][0]["acc"] <= 1.0


@needs_cc
@needs_data
def test_float64_build_state_reads_back_as_float64(ci_run, tmp_path):
    from bimu.rundir import load_checkpoint_file

    run, x, y, text = ci_run
    exe = export_and_build(run, tmp_path / "device", double=True)
    out = run_firmware(exe, text[:text.index("\n", len(text) // 3) + 1], tmp_path / "state64.bin")
    st = read_device_state(tmp_path / "state64.bin", [784, 100, 10])
    assert st.real_bytes == 8 and st.lam.dtype == np.float64 and st.lambda_hash() == out["hash"]
    assert st.counters["labels_queried"] == out["queried"] and st.query_samples == 2 and st.query_need == 1
    dev = tmp_path / "device-run"
    assert main(["import-device", str(run), str(tmp_path / "state64.bin"), "--out", str(dev)]) == 0
    lam = load_checkpoint_file(dev / "checkpoint.pt")["method_state"]["modules"]["lam"]
    assert np.concatenate([np.asarray(t).reshape(-1) for t in lam]).tobytes() == st.lam.tobytes()


def _rewrite(data: bytes, offset: int, new: bytes, checksum: bool = True) -> bytes:
    out = bytearray(data)
    out[offset:offset + len(new)] = new
    if checksum:
        out[-8:] = struct.pack("<Q", fnv1a64(bytes(out[:-8])))
    return bytes(out)


@needs_cc
@needs_data
def test_damaged_or_foreign_states_are_refused_with_one_line(ci_run, tmp_path, capsys):
    run, x, y, text = ci_run
    exe = export_and_build(run, tmp_path / "device")
    run_firmware(exe, text[:text.index("\n") + 1], tmp_path / "state.bin")
    good = (tmp_path / "state.bin").read_bytes()
    nan = struct.pack("<f", float("nan"))
    cases = {
        "truncated": (good[:-1], "bytes; a state of the network"),
        "padded": (good + b"\0", "bytes; a state of the network"),
        "empty": (b"", "bytes; a state of the network"),
        "flipped": (good[:400] + bytes([good[400] ^ 1]) + good[401:], "checksum mismatch"),
        "magic": (_rewrite(good, 0, b"BIMUSTAX"), "not a bimu device state"),
        "version": (_rewrite(good, 8, struct.pack("<I", 2)), "version 2"),
        "reals": (_rewrite(good, 16, struct.pack("<I", 8)), "a state of this header has 635360"),
        "sizes": (_rewrite(good, 32, struct.pack("<I", 99)), "do not match the sizes"),
        "nan": (_rewrite(good, 152 + 4 * 7, nan), "non-finite"),
        "counters": (_rewrite(good, 128, struct.pack("<Q", 10**9)), "inconsistent counters"),
        "export id": (_rewrite(good, 136, struct.pack("<Q", 12345)), "is of export 0x0000000000003039"),
    }
    for name, (data, message) in cases.items():
        p = tmp_path / f"{name.replace(' ', '-')}.bin"
        p.write_bytes(data)
        capsys.readouterr()
        assert main(["import-device", str(run), str(p), "--out", str(tmp_path / "o" / p.stem)]) == 2, name
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("bimu import-device: error: ") and message in err, (name, err)
        assert not (tmp_path / "o" / p.stem / "checkpoint.pt").exists()
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    assert main(["import-device", str(run), str(fifo), "--out", str(tmp_path / "o" / "fifo")]) == 2
    assert "not a regular file" in capsys.readouterr().err
    assert main(["import-device", str(run), str(tmp_path / "state.bin"), "--out", str(run)]) == 2
    assert "is the run itself" in capsys.readouterr().err


def _checkpoint(tmp_path, name, method, sizes, engine="fused"):
    from bimu.engine.build import create_method

    m = create_method(method, sizes, seed=1, engine=engine)
    g = torch.Generator().manual_seed(0)
    for _ in range(4):
        m.learn(torch.randn(1, sizes[0], generator=g), torch.randint(0, sizes[-1], (1,), generator=g))
    run = tmp_path / name
    run.mkdir()
    torch.save({"method_state": m.state_dict(), "task": 0}, run / "checkpoint.pt")
    return m, run


def test_export_refuses_other_methods_and_non_finite_lambda(tmp_path, capsys):
    _, mesu = _checkpoint(tmp_path, "mesu", "mesu", [12, 3], engine="torch")
    assert main(["export", str(mesu), "--format", "c-learner", "--out", str(tmp_path / "e1")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "the C learner runs bimu and bayesbinn only" in err
    m, run = _checkpoint(tmp_path, "nan", "bimu", [12, 6, 3])
    state = torch.load(run / "checkpoint.pt", weights_only=False)
    state["method_state"]["modules"]["lam"][1][0, 0] = float("inf")  # a fused checkpoint: one tensor a layer
    torch.save(state, run / "checkpoint.pt")
    assert main(["export", str(run), "--format", "c-learner", "--out", str(tmp_path / "e2")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and ("NaN or infinite" in err or "1 of 90 lambda values are not finite" in err)
    _, ok = _checkpoint(tmp_path, "ok", "bimu", [12, 3])
    assert main(["export", str(ok), "--format", "c-learner", "--query-threshold", "1.5", "--out",
                 str(tmp_path / "e3")]) == 2
    assert "--query-threshold is a variation ratio in [0, 1]" in capsys.readouterr().err


@needs_cc
def test_bayesbinn_export_carries_its_prior_through_the_device(tmp_path):
    """A BayesBiNN state: the prior array is exported, kept by the device and read back with lambda."""
    from bimu.edge.device_state import import_device

    m, run = _checkpoint(tmp_path, "bbb", "bayesbinn", [20, 8, 4], engine="torch")  # prior in the optimizer state
    prior = np.concatenate([m.optimizer.state[p]["prior"].numpy().reshape(-1) for p in m.model.parameters()])
    (run / "config.json").write_text("{}")  # import_device needs a seed directory
    folder = tmp_path / "device"
    assert main(["export", str(run), "--format", "c-learner", "--out", str(folder)]) == 0
    (folder / "firmware.c").write_text(firmware_source())
    # -Wno-unused-function: a BayesBiNN build leaves the BiMU step unused
    subprocess.run([CC, *FLAGS, "-Wno-unused-function", "firmware.c", "bimu_learn.c", "bimu_state.c", "-o", "fw",
                    "-lm"], cwd=folder,
                   check=True, capture_output=True)
    x = np.random.default_rng(5).standard_normal((30, 20))
    text = "".join(f"{i % 4} " + " ".join(repr(float(v)) for v in a) + "\n" for i, a in enumerate(x))
    run_firmware(folder / "fw", text, tmp_path / "s.bin")
    st = read_device_state(tmp_path / "s.bin", [20, 8, 4])
    assert st.bayesbinn and st.prior is not None
    assert np.array_equal(st.prior, prior.astype(np.float32))  # no task boundary on the device: prior kept
    out = import_device(run, tmp_path / "s.bin", tmp_path / "dev")
    from bimu.rundir import load_checkpoint_file

    opt = load_checkpoint_file(out / "checkpoint.pt")["method_state"]["modules"]["optimizer"]["state"]
    back = np.concatenate([np.asarray(opt[i]["prior"]).reshape(-1) for i in range(2)])
    assert back.tobytes() == st.prior.tobytes()
    assert learner_spec(run).export_id == st.export_id


@needs_cc
@pytest.mark.parametrize("sizes,k,double,kind", [([784, 100, 10], 5, False, "bimu"), ([512, 16], 1, True, "bimu"),
                                                 ([8192, 19], 10, False, "bimu"), ([30, 9, 7, 4], 3, True, "bayesbinn")])
def test_state_sizes_are_sizeof_the_learner(sizes, k, double, kind):
    from bimu.edge.clearner import CLearner

    c = CLearner(sizes, k, 2, kind=kind, double=double)
    assert c.state_bytes == state_struct_bytes(sizes, k, 2, 8 if double else 4, kind == "bayesbinn")


def test_docs_state_table_is_recomputed():
    """Every byte count of docs/on-device.md's state table is what state_struct_bytes gives."""
    rows = [line for line in DOC.read_text().splitlines() if re.match(r"\| (784-|512 ->|8192 ->)", line)]
    assert len(rows) == 4
    for line in rows:
        cells = [c.strip() for c in line.strip("|").split("|")]
        sizes = [int(s) for s in re.findall(r"\d+", cells[0].split("(")[0].replace("MLP", ""))]
        P, K = int(cells[1].replace(",", "")), int(cells[2])
        f32, f64, lam, dump = (int(c.replace(",", "")) for c in cells[3:7])
        assert P == sum(a * b for a, b in zip(sizes[:-1], sizes[1:]))
        assert (f32, f64) == (state_struct_bytes(sizes, K, 2, 4), state_struct_bytes(sizes, K, 2, 8))
        assert lam == 4 * P and dump == state_dump_bytes(P, 4)

"""Every file bimu writes goes through bimu.atomic: a crash leaves the old file or the new one."""

import re
from pathlib import Path

import numpy as np
import pytest

import bimu
from bimu.atomic import atomic_path, atomic_write_bytes, atomic_write_text

SRC = Path(bimu.__file__).parent

# writes that may bypass bimu.atomic, with the reason: (file relative to src/bimu, text of the line)
ALLOWED = {
    ("atomic.py", "tmp.write_bytes(data)"): "the atomic writer itself",
    ("rundir.py", "np.save(buf, np.asarray(R, dtype=np.float64))"): "into a buffer, then atomic",
    ("checkpoint.py", "torch.save(value, buf)"): "into a buffer, then atomic",
    ("rundir.py", 'tmp.write_text(me.dumps() + "\\n", encoding="utf-8")'): "the lock's temporary file, then hard-linked",
    ("edge/clearner.py", "Path(tmp, name).write_text(text)"): "sources into a private temporary build folder",
    ("edge/clearner.py", 'Path(tmp, "bimu_config.h").write_text(config)'): "into a private temporary build folder",
    ("edge/csign.py", "Path(tmp, name).write_text(text)"): "sources into a private temporary build folder",
    ("edge/emulate.py", "(folder / name).write_text(text)"): "sources into the cross-build's temporary folder",
    ("edge/emulated_stream.py", "(folder / name).write_text(text)"): "sources into the cross-build's temporary folder",
    ("engine/rowpass.py", 'with os.fdopen(fd, "w") as fh:'): "generated kernel: mkstemp + os.replace",
    ("data/fetch.py", 'with urllib.request.urlopen(url, timeout=timeout) as r, open(dest, "wb") as f:'):
        "download into a temporary folder, verified, then installed atomically",
}
WRITE = re.compile(r"\.write_text\(|\.write_bytes\(|open\([^)]*[\"'][wa]b?[\"']|\.savefig\(|np\.save\(|torch\.save\(|json\.dump\(")


def test_no_module_writes_a_file_non_atomically():
    found = []
    for f in sorted(SRC.rglob("*.py")):
        prev = ""
        for line in f.read_text().splitlines():
            code, prev_code = line.strip(), prev
            if code:
                prev = code
            if code.startswith((">>>", "...", "#")) or not WRITE.search(code):
                continue
            if "atomic_path(" in code or "atomic_path(" in prev_code:
                continue  # writes to the temporary path of an atomic_path block
            key = (str(f.relative_to(SRC)), code)
            if key not in ALLOWED:
                found.append(f"{key[0]}: {code}")
    assert not found, "non-atomic writes (use bimu.atomic):\n" + "\n".join(found)


def test_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path):
    target = tmp_path / "r.json"
    atomic_write_text(target, '{"old": 1}')
    with pytest.raises(ZeroDivisionError):
        with atomic_path(target) as tmp:
            tmp.write_text('{"new": ')
            1 / 0
    assert target.read_text() == '{"old": 1}' and [p.name for p in tmp_path.iterdir()] == ["r.json"]


def test_temporaries_are_unique_beside_the_target_and_keep_its_suffix(tmp_path):
    with atomic_path(tmp_path / "fig.png") as a, atomic_path(tmp_path / "fig.png") as b:
        assert a != b and a.parent == b.parent == tmp_path and a.suffix == b.suffix == ".png"
        a.write_bytes(b"a")
        b.write_bytes(b"b")
    assert (tmp_path / "fig.png").read_bytes() == b"a"  # the last to finish wins, whole
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fig.png"]


def test_bytes_round_trip_and_permissions(tmp_path):
    data = np.arange(5, dtype=np.uint8).tobytes()
    atomic_write_bytes(tmp_path / "deep" / "x.bin", data)
    p = tmp_path / "deep" / "x.bin"
    assert p.read_bytes() == data and (p.stat().st_mode & 0o777) == 0o644

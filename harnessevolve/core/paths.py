"""Where the built-in benchmarks, templates, gate configs and reference trajectories live."""

from __future__ import annotations

import os
from pathlib import Path


def project_root() -> Path:
    """The checkout that holds ``benchmarks/``, ``harnesses/``, ``gates/`` and ``trajectories/``.

    ``HARNESSEVOLVE_HOME`` overrides it (for an install outside the checkout).
    """
    override = os.environ.get("HARNESSEVOLVE_HOME")
    return Path(override) if override else Path(__file__).resolve().parents[2]


def builtin_dir(kind: str) -> Path:
    return project_root() / kind

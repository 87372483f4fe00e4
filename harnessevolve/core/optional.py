"""Optional dependencies (extras): which of them this Python cannot import."""

from __future__ import annotations

import importlib


def missing_module(*names: str) -> str | None:
    """The first of ``names`` that does not import (the name of the module it lacks), or None."""
    for name in names:
        try:
            importlib.import_module(name)
        except ImportError as exc:
            return exc.name or name
    return None

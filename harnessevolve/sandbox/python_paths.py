"""The host folders a Python process needs inside the sandbox, beyond the system ones.

The interpreter's environment (``sys.prefix``) and its base installation hold the declared
dependencies for an ordinary venv or a wheel install. Packages can also come from site folders
outside both: the user site (``pip install --user``) or a folder a ``.pth`` file adds (a venv that
extends another). Those are on ``sys.path`` and named ``site-packages``/``dist-packages``; they are
shown too, so a sandboxed agent, check or tool server imports what harnessevolve itself imports.
Never the current directory or any other ``sys.path`` entry: a checkout may hold answers.
"""

from __future__ import annotations

import os
import sys

SYSTEM_DIRS = ("/usr", "/etc")
SITE_NAMES = ("site-packages", "dist-packages")


def _under(path: str, roots: list[str] | tuple[str, ...]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def environment_roots() -> list[str]:
    """The venv and its base interpreter (system folders left out)."""
    return [p for p in dict.fromkeys((sys.prefix, sys.base_prefix)) if not _under(p, SYSTEM_DIRS)]


def extra_site_dirs(roots: list[str] | tuple[str, ...] = ()) -> list[str]:
    """Site folders on ``sys.path`` outside ``roots`` and the system folders (see the module)."""
    found: list[str] = []
    for entry in sys.path:
        path = os.path.realpath(entry) if entry else ""
        if not path or os.path.basename(path.rstrip("/")) not in SITE_NAMES or not os.path.isdir(path):
            continue
        if _under(path, SYSTEM_DIRS) or _under(path, list(roots) + found):
            continue
        found.append(path)
    return found


def python_roots() -> list[str]:
    """Every folder a sandboxed Python process needs: :func:`environment_roots` and the extra
    site folders outside them."""
    roots = environment_roots()
    return roots + extra_site_dirs(roots)

"""Paths that must stay inside a folder (symlinks resolved), and output paths checked before
anything is written."""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

from harnessevolve.core.errors import HarnessEvolveError, OutputPathError


def escape_of(root: Path, rel: str, *, inside: str = "the folder") -> str | None:
    """Why ``root/rel`` (named by the caller) is not inside ``root`` (an absolute path, ``..``, or a
    symlink anywhere on the way that leads out, resolved), or None when it stays inside. The path
    need not exist."""
    pure = PurePosixPath(rel)
    if pure.is_absolute() or ".." in pure.parts:
        return f"must stay inside {inside} (a relative path without '..')"
    base = Path(root).resolve()
    try:
        target = (Path(root) / rel).resolve()
    except (OSError, RuntimeError) as exc:  # a symlink loop
        return f"cannot be resolved ({exc.__class__.__name__}: a symlink loop?)"
    if target != base and not target.is_relative_to(base):
        return f"is a symlink leading outside {inside} (to {target})"
    return None


def contained(
    root: Path,
    rel: str,
    *,
    error: type[HarnessEvolveError],
    file: str,
    field: str | None,
    inside: str = "the folder",
) -> Path:
    """``root/rel`` when it stays inside ``root`` (symlinks resolved), else ``error`` naming
    ``file`` and ``field``."""
    problem = escape_of(root, rel, inside=inside)
    if problem is not None:
        raise error(
            problem if file == rel else f"{rel} {problem}",
            file=file,
            field=field,
            hint="every file it uses must live inside its folder; copy the file in instead of linking it",
        )
    return Path(root) / rel


def check_output_path(path: Path, *, option: str, kind: str = "file") -> Path:
    """Refuse an output path that cannot be written, before anything is done: a directory where a
    file is wanted (or a file where a folder is wanted), a parent that is a file or a broken link,
    a place that is not writable."""
    path = Path(path)
    hint = f"pass a writable {kind} path to {option}"
    if kind == "file" and path.is_dir():
        raise OutputPathError("is a directory, not a file", file=str(path), field=option, hint=hint)
    if kind == "folder" and path.exists() and not path.is_dir():
        raise OutputPathError("is a file, not a folder", file=str(path), field=option, hint=hint)
    probe = path if kind == "folder" else path.parent
    while not probe.exists():
        if probe.is_symlink():  # a dangling link: nothing can be created through it
            raise OutputPathError(f"{probe} is a broken symlink", file=str(path), field=option, hint=hint)
        probe = probe.parent
    if not probe.is_dir():
        raise OutputPathError(f"{probe} is a file, not a folder", file=str(path), field=option, hint=hint)
    if not os.access(probe, os.W_OK | os.X_OK):
        raise OutputPathError(f"{probe} is not writable", file=str(path), field=option, hint=hint)
    return path

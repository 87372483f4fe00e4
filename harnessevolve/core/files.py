"""Reading YAML/JSON with located errors, and atomic writes (temp file, fsync, rename)."""

from __future__ import annotations

import functools
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from harnessevolve.core.errors import HarnessEvolveError, SchemaError
from harnessevolve.core.reading import read_text

__all__ = ["atomic_write_json", "atomic_write_text", "read_json", "read_text", "read_yaml"]


@functools.cache
def _umask() -> int:
    """The process's umask, read without changing it where Linux says it (``/proc/self/status``)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _new_file_mode(path: Path) -> int:
    """The mode the written file gets: the replaced file's, else what ``open`` would give it
    (0o666 less the umask), not ``mkstemp``'s 0o600."""
    try:
        return path.stat().st_mode & 0o777
    except OSError:
        return 0o666 & ~_umask()


def atomic_write_text(path: Path, text: str, *, durable: bool = True) -> None:
    """Replace ``path`` with ``text`` so a reader sees the old or the new file, never half of one.
    ``durable`` False skips the fsync (safe against a killed process, not a power loss). The file
    keeps the mode of the one it replaces; a new one gets the usual 0o666 less the umask."""
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = _new_file_mode(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            if durable:
                os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_json(path: Path, document: Any, *, durable: bool = True) -> None:
    atomic_write_text(path, json.dumps(document, indent=2, ensure_ascii=False) + "\n", durable=durable)


def read_yaml(path: Path, *, error: type[HarnessEvolveError] = SchemaError, name: str | None = None) -> Any:
    """Parse a YAML file, bounded (``core.documents``): a syntax error, a duplicate key, an alias
    bomb or too deep a nesting names the file (as ``name``, default the path) and the line."""
    from harnessevolve.core.documents import read_yaml_file

    return read_yaml_file(path, error=error, name=name)


def read_json(path: Path, *, error: type[HarnessEvolveError] = SchemaError) -> Any:
    """Parse a JSON file, bounded (``core.documents``); whatever its bytes, the result is a
    document or ``error`` naming the file."""
    from harnessevolve.core.documents import read_json_file

    return read_json_file(path, error=error)

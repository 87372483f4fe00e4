"""Reading YAML/JSON with located errors, and atomic writes (temp file, fsync, rename)."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from harnessevolve.core.errors import HarnessEvolveError, SchemaError
from harnessevolve.core.reading import read_text

__all__ = ["atomic_write_json", "atomic_write_text", "read_json", "read_text", "read_yaml"]


def atomic_write_text(path: Path, text: str, *, durable: bool = True) -> None:
    """Replace ``path`` with ``text`` so a reader sees the old or the new file, never half of one.
    ``durable`` False skips the fsync (safe against a killed process, not a power loss)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
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

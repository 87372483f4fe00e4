"""Reading YAML/JSON with located errors, and atomic writes (temp file, fsync, rename)."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from harnessevolve.core.errors import HarnessEvolveError, SchemaError


def atomic_write_text(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` so a reader sees the old or the new file, never half of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_json(path: Path, document: Any) -> None:
    atomic_write_text(path, json.dumps(document, indent=2, ensure_ascii=False) + "\n")


def read_text(path: Path, *, error: type[HarnessEvolveError] = SchemaError, name: str | None = None) -> str:
    """A UTF-8 text file; a missing file, a folder, unreadable or non-UTF-8 bytes raise ``error``
    naming it (as ``name``, default the path)."""
    shown = name or str(path)
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise error("file not found", file=shown, hint="check the path") from None
    except IsADirectoryError:
        raise error("is a directory, not a file", file=shown, hint="pass the file itself") from None
    except UnicodeDecodeError as exc:
        raise error(
            f"not UTF-8 text ({exc.reason} at byte {exc.start})",
            file=shown,
            hint="the file must be UTF-8 text; re-encode it or pass the right file",
        ) from None
    except OSError as exc:
        raise error(
            f"cannot read it ({exc.strerror or exc})", file=shown, hint="check its permissions"
        ) from None


def read_yaml(path: Path, *, error: type[HarnessEvolveError] = SchemaError, name: str | None = None) -> Any:
    """Parse a YAML file; a syntax error names the file (as ``name``, default the path) and the line."""
    import yaml

    shown = name or str(path)
    text = read_text(path, error=error, name=name)
    try:
        return yaml.safe_load(text)
    except RecursionError:
        raise error("nested too deeply to read", file=shown, hint="flatten the document") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark is not None else None
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise error(
            f"invalid YAML: {problem}", file=shown, field=where, hint="fix the YAML syntax at that line"
        ) from None


def read_json(path: Path, *, error: type[HarnessEvolveError] = SchemaError) -> Any:
    """Parse a JSON file; whatever its bytes, the result is a document or ``error`` naming the file."""
    text = read_text(path, error=error)
    try:
        return json.loads(text)
    except RecursionError:
        raise error(
            "nested too deeply to read (JSON nesting beyond Python's recursion limit)",
            file=str(path),
            hint="no valid file of this kind nests that deep; is it the right file?",
        ) from None
    except json.JSONDecodeError as exc:
        raise error(
            f"invalid JSON: {exc.msg}",
            file=str(path),
            field=f"line {exc.lineno}",
            hint="the file is not JSON; was it truncated?",
        ) from None

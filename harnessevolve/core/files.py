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


def read_yaml(path: Path, *, error: type[HarnessEvolveError] = SchemaError, name: str | None = None) -> Any:
    """Parse a YAML file; a syntax error names the file (as ``name``, default the path) and the line."""
    import yaml

    shown = name or str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise error("file not found", file=shown) from None
    except UnicodeDecodeError as exc:
        raise error(f"not UTF-8 text ({exc.reason})", file=shown) from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark is not None else None
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise error(
            f"invalid YAML: {problem}", file=shown, field=where, hint="fix the YAML syntax at that line"
        ) from None


def read_json(path: Path, *, error: type[HarnessEvolveError] = SchemaError) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise error("file not found", file=str(path)) from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise error(
            f"invalid JSON: {exc.msg}",
            file=str(path),
            field=f"line {exc.lineno}",
            hint="the file is not JSON; was it truncated?",
        ) from None

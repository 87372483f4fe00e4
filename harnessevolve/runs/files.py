"""Versions of the run files besides the ledger, and the check every reader makes.

Each JSON file a run writes carries ``"version"``: candidate files (``candidates/gen-NNN-K.json``:
a candidate that was judged and not kept, with its changes), gate reports (``gates/gen-NNN.json``,
and ``harnessevolve gate --json``), a benchmark's ``regret.json`` (``refs generate``) and the harness
lock. A reader refuses a newer version and reads an older (or an unversioned, pre-version) file as
the current shape.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harnessevolve.core.errors import HarnessEvolveError
from harnessevolve.core.files import atomic_write_json

CANDIDATE_FILE_VERSION = 1
GATE_REPORT_VERSION = 1
REGRET_VERSION = 1
"""1: ``{"version": 1, "tasks": {task_id: {pass_without_hint, pass_with_hint, regret, attempts}}}``
(before: the ``tasks`` table alone, read as version 1)."""
LOCK_VERSION = 1


class RunFileError(HarnessEvolveError):
    """A run file cannot be read: not JSON, not the expected shape, or written by a newer version."""

    default_hint = "the file was written by harnessevolve; restore it, or remove it and rerun the step"


def versioned(version: int, doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` with its format's version first."""
    return {"version": version, **{k: v for k, v in doc.items() if k != "version"}}


def check_version(doc: Any, current: int, file: Path | str, what: str) -> dict[str, Any]:
    """``doc`` when it is an object of version <= ``current`` (none: 1); RunFileError otherwise."""
    if not isinstance(doc, dict):
        raise RunFileError(f"not a {what} (expected a JSON object)", file=str(file))
    version = doc.get("version", 1)
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise RunFileError(f"invalid {what} version {version!r}", file=str(file), field="version")
    if version > current:
        raise RunFileError(
            f"{what} version {version} is newer than this harnessevolve reads (up to {current})",
            file=str(file),
            field="version",
            hint="upgrade harnessevolve",
        )
    return doc


def read_json_file(path: Path, current: int, what: str) -> dict[str, Any]:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RunFileError(f"cannot read the {what}: {exc}", file=str(path)) from None
    return check_version(doc, current, path, what)


def read_regret(path: Path) -> dict[str, dict[str, Any]]:
    """``regret.json``'s table (task id -> pass rates); {} when there is none."""
    if not path.is_file():
        return {}
    doc = read_json_file(path, REGRET_VERSION, "regret table")
    table = doc["tasks"] if "version" in doc else doc  # unversioned: the table alone
    if not isinstance(table, dict) or not all(isinstance(v, dict) for v in table.values()):
        raise RunFileError("expected task ids mapped to pass rates", file=str(path), field="tasks")
    return table


def write_regret(path: Path, table: dict[str, dict[str, Any]]) -> Path:
    atomic_write_json(path, versioned(REGRET_VERSION, {"tasks": dict(sorted(table.items()))}))
    return path

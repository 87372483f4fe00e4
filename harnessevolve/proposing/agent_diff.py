"""The optimizer agent's output: the diff of its harness copy, or a named reason to refuse it.

All or nothing: one bad path refuses the whole candidate. Refused, each with its reason named:

- ``deleted the harness``: ``harness/`` or its ``harness.yaml`` is gone;
- ``protected path P changed``: the evidence, history or task statement of the workspace, or a
  harness path that holds checks, tasks, gates, references or git/run state;
- ``outside editable paths: P``: a harness path the harness's ``editable`` globs do not cover;
- ``binary file P`` / ``huge file P``: not UTF-8 text (or holds NUL bytes), or over ``MAX_FILE_BYTES``;
- ``symlink P`` / ``too many files``: links (which could point anywhere) and floods of new files.

``copied_example`` says when an edit adds only text its optimizer was given as an example: a small
model copies the worked example of its instructions instead of writing a fix from the evidence.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from harnessevolve.core import planted
from harnessevolve.core.text import folded
from harnessevolve.harness.editable import change_allowed
from harnessevolve.proposing.agent_workspace import HARNESS_DIR, PROTECTED

MAX_FILE_BYTES = 256_000
MAX_CHANGED_FILES = 50
MAX_WALK_FILES = 5_000
PROTECTED_HARNESS = (
    ".git",
    ".harnessevolve",
    "checks",
    "tasks",
    "gates",
    "references",
    "trajectories",
    "benchmark.yaml",
)
"""Harness path parts that are never the agent's to change, whatever ``editable`` says."""


class EditRefused(Exception):
    """The agent's edit is refused; ``reason`` names why (and the path)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Snapshot:
    """Digest of every workspace file outside ``harness/`` (what must stay untouched)."""

    digests: dict[str, str]


def _walk(root: Path) -> list[str]:
    found: list[str] = []
    for folder, dirs, names in os.walk(root, followlinks=False):
        base = Path(folder)
        dirs.sort()
        for name in sorted(names) + [d for d in dirs if (base / d).is_symlink()]:
            found.append((base / name).relative_to(root).as_posix())
            if len(found) > MAX_WALK_FILES:
                raise EditRefused(f"too many files: more than {MAX_WALK_FILES} in the workspace")
    return found


def _digest(root: Path, rel: str) -> str:
    """What a protected entry is: its content's digest, or what else it became (a link, a pipe...)."""
    found = planted.entry_kind(root, rel)
    if found != "file":
        return f"{found}"
    try:
        return hashlib.sha256(planted.read_head(root, rel, MAX_FILE_BYTES + 1)).hexdigest()
    except planted.PlantedFileError as exc:
        return exc.reason


def snapshot(workspace: Path) -> Snapshot:
    """The protected part of the workspace as it was written (compared after each agent turn)."""
    return Snapshot(
        {rel: _digest(workspace, rel) for rel in _walk(workspace) if _is_protected_workspace(rel)}
    )


def _is_protected_workspace(rel: str) -> bool:
    return any(rel == p or rel.startswith(p) for p in PROTECTED)


def _is_protected_harness(rel: str) -> bool:
    return any(part in PROTECTED_HARNESS for part in rel.split("/"))


def check_protected(workspace: Path, before: Snapshot) -> None:
    """Refuse when any protected workspace file was changed, removed or added."""
    now = snapshot(workspace).digests
    for rel in sorted(set(before.digests) | set(now)):
        if before.digests.get(rel) != now.get(rel):
            raise EditRefused(f"protected path {rel} changed")


def _read_text(root: Path, rel: str) -> str:
    """A harness file the agent left: a plain, bounded UTF-8 file (``core/planted.py``), else refused."""
    kind = planted.entry_kind(root, rel)
    if kind == "a symbolic link":
        raise EditRefused(f"symlink {rel}: the harness holds only plain files")
    try:
        data = planted.read_bytes(root, rel, max_bytes=MAX_FILE_BYTES)
    except planted.PlantedFileError as exc:
        if exc.too_large:
            raise EditRefused(f"huge file {rel}: {exc.reason}") from None
        raise EditRefused(f"not a plain file: {rel} ({exc.reason})") from None
    if b"\0" in data:
        raise EditRefused(f"binary file {rel}: holds NUL bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise EditRefused(f"binary file {rel}: not UTF-8 text") from None


def harness_changes(
    workspace: Path, original: Mapping[str, str], editable: tuple[str, ...]
) -> dict[str, str | None]:
    """The agent's edit as whole-file changes relative to ``original`` (``None``: deleted);
    ``EditRefused`` names the first thing that makes it unacceptable."""
    root = workspace / HARNESS_DIR
    if root.is_symlink() or not root.is_dir():
        raise EditRefused("deleted the harness: ./harness is gone")
    if "harness.yaml" in original and not (root / "harness.yaml").is_file():
        raise EditRefused("deleted the harness: ./harness/harness.yaml is gone")
    present = _walk(root)
    changes: dict[str, str | None] = {}
    for rel in present:
        if rel.split("/")[0] == "__pycache__" or "/__pycache__/" in f"/{rel}":
            continue  # byte code a test run of the agent's code left behind
        text = _read_text(root, rel)
        if original.get(rel) != text:
            changes[rel] = text
    for rel in original:
        if rel not in present:
            changes[rel] = None
    if len(changes) > MAX_CHANGED_FILES:
        raise EditRefused(f"too many files: {len(changes)} changed > {MAX_CHANGED_FILES}")
    if original and sum(1 for v in changes.values() if v is None) == len(original):
        raise EditRefused("deleted the harness: every file is gone")
    for rel in sorted(changes):
        if _is_protected_harness(rel):
            raise EditRefused(f"protected path {HARNESS_DIR}/{rel} changed")
        if not change_allowed(rel, original.get(rel), changes[rel], editable):
            raise EditRefused(f"outside editable paths: {HARNESS_DIR}/{rel}")
    return changes


MIN_COPIED_CHARS = 24
"""Added lines shorter than this (normalized) are too generic to call a copy (``}``, ``return x``)."""


def _line_text(line: str) -> str:
    """A line as prose: lower case, one space between words, without list or quote markers."""
    return folded(re.sub(r"^[\s>*#+-]+", "", line))


def copied_example(
    changes: Mapping[str, str | None], original: Mapping[str, str], instructions: Mapping[str, str]
) -> str | None:
    """The first added line when every substantive line the edit adds (not already somewhere in
    the harness) is verbatim in the optimizer's own ``instructions`` (its folder's files): the edit
    copies the optimizer's example instead of saying something of its own. None otherwise, and
    when the edit adds no substantive line (a deletion or a small code change)."""
    known = {_line_text(line) for text in original.values() for line in text.splitlines()}
    taught = folded("\n".join(instructions.values()))
    added = [
        text
        for new in changes.values()
        if new is not None
        for line in new.splitlines()
        if len(text := _line_text(line)) >= MIN_COPIED_CHARS and text not in known
    ]
    if added and all(text in taught for text in added):
        return added[0]
    return None

"""What git knows about a run's candidates: message, trailers and diff; and a diff for a candidate
that was never committed, from the changes the run recorded and the revision it was proposed on."""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path

from harnessevolve.core.errors import HarnessGitError
from harnessevolve.core.trailers import trailer_map

MAX_DIFF_CHARS = 60_000
"""A candidate's diff beyond this is cut (the report stays small; git keeps the whole)."""


@dataclass(frozen=True)
class CommitInfo:
    sha: str
    summary: str
    message: str
    trailers: dict[str, str] = field(default_factory=dict)
    diff: str = ""


class HarnessHistory:
    """Read-only access to the harness's repository; every method degrades to ``None``."""

    def __init__(self, harness_dir: Path) -> None:
        from harnessevolve.harness.git import HarnessRepo

        self.error: str | None = None
        self.repo: HarnessRepo | None = None
        try:
            self.repo = HarnessRepo(harness_dir)
        except HarnessGitError as exc:
            self.error = exc.message

    def commit(self, sha: str) -> CommitInfo | None:
        if self.repo is None:
            return None
        try:
            commit = self.repo.repo.commit(sha)
            diff = self.repo.repo.git.show(
                sha, "--format=", "--no-color", "--no-ext-diff", "--", self.repo.rel
            )
        except Exception:  # noqa: BLE001 - gitpython raises several types for a missing object
            return None
        message = str(commit.message)
        return CommitInfo(
            sha, message.splitlines()[0] if message else "", message, trailer_map(message), diff
        )

    def file_at(self, rev: str, path: str) -> str | None:
        if self.repo is None:
            return None
        full = path if self.repo.rel == "." else f"{self.repo.rel}/{path}"
        try:
            return self.repo.repo.git.show(f"{rev}:{full}", strip_newline_in_stdout=False)
        except Exception:  # noqa: BLE001 - absent at that revision (a new file) or unknown revision
            return None


def recorded_diff(history: HarnessHistory, base_rev: str | None, changes: dict[str, str | None]) -> str:
    """A unified diff of recorded ``changes`` (path -> new text, ``None``: deleted) against the
    harness at ``base_rev``; without git every changed file shows as new."""
    out: list[str] = []
    for path, new in sorted(changes.items()):
        old = history.file_at(base_rev, path) if base_rev else None
        old_lines = [] if old is None else old.splitlines(keepends=True)
        new_lines = (
            [] if new is None else (new if new.endswith("\n") else new + "\n").splitlines(keepends=True)
        )
        out.extend(
            difflib.unified_diff(
                old_lines,
                new_lines,
                fromfile=f"a/{path}" if old is not None else "/dev/null",
                tofile=f"b/{path}" if new is not None else "/dev/null",
            )
        )
    return "".join(out).rstrip("\n")

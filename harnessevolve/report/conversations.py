"""The HTML report's conversations: each trajectory in the task matrix, read as an exchange.

Every cell of the task matrix that kept its trajectory gets one: the user turns, the agent's
messages, its tool calls and their results (cut at ``OBSERVATION_CHARS``), with the step of the
first divergence from the reference marked, and for a failure why it failed (its failed checks,
what a judge said, why the loop stopped, how the conversation ended). The matrix links to it. They
are grouped by task (``conversation_groups``), one group per task with its revisions in the
matrix's order. A trajectory that cannot be read is shown as such, never a failed report; a long
one keeps its first ``MAX_ENTRIES`` entries.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from harnessevolve.core import atif
from harnessevolve.core.conversation import Entry, conversation
from harnessevolve.core.errors import HarnessEvolveError
from harnessevolve.report.outcome import Ending
from harnessevolve.report.task_matrix import Revision, TaskCell, TaskMatrix

OBSERVATION_CHARS = 600
MAX_ENTRIES = 80
MAX_CONVERSATIONS = 400
"""Past this many cells the report links the raw trajectories only (it stays a readable size)."""


@dataclass(frozen=True)
class ConversationView:
    anchor: str
    task_id: str
    revision: str
    passed: bool
    entries: tuple[Entry, ...]
    divergent_step: int | None
    divergence: str
    hidden_entries: int = 0
    problem: str = ""
    """Why the trajectory could not be shown (empty when it was read)."""
    commit: str = ""
    """The revision's commit, short (``Revision.short``)."""
    reasons: tuple[tuple[str, str], ...] = ()
    """Why it failed (``TaskCell.reasons``); empty for a pass."""
    end: Ending = Ending()
    """Why the agent loop stopped and how a multi-turn conversation ended, pass or fail."""


@dataclass(frozen=True)
class ConversationGroup:
    """One task's conversations, one per revision that kept its trajectory."""

    task_id: str
    views: tuple[ConversationView, ...]

    @property
    def failed(self) -> int:
        return sum(not v.passed for v in self.views)


def conversation_groups(views: list[ConversationView]) -> list[ConversationGroup]:
    """``views`` grouped by task, tasks in first-seen order (the matrix's: sorted by id)."""
    by_task: dict[str, list[ConversationView]] = {}
    for view in views:
        by_task.setdefault(view.task_id, []).append(view)
    return [ConversationGroup(task, tuple(group)) for task, group in by_task.items()]


def anchor_for(harness_hash: str, task_id: str) -> str:
    return "conv-" + re.sub(r"[^A-Za-z0-9_-]", "-", f"{harness_hash[:12]}-{task_id}")


def conversation_views(run_dir: Path, matrix: TaskMatrix) -> list[ConversationView]:
    """One view per matrix cell with a kept trajectory (at most ``MAX_CONVERSATIONS``)."""
    views: list[ConversationView] = []
    for row in matrix.rows:
        for revision, cell in zip(matrix.revisions, row.cells, strict=True):
            if cell is None or cell.trajectory is None:
                continue
            if len(views) >= MAX_CONVERSATIONS:
                return views
            views.append(_view(run_dir, revision, row.task_id, cell))
    return views


def _view(run_dir: Path, revision: Revision, task_id: str, cell: TaskCell) -> ConversationView:
    entries: tuple[Entry, ...] = ()
    problem = ""
    try:
        entries = conversation(atif.load(Path(run_dir) / str(cell.trajectory)), OBSERVATION_CHARS)
    except (HarnessEvolveError, OSError, ValueError) as exc:
        problem = f"trajectory not readable: {exc}"
    return ConversationView(
        anchor=anchor_for(revision.harness_hash, task_id),
        task_id=task_id,
        revision=revision.label,
        passed=cell.passed,
        entries=entries[:MAX_ENTRIES],
        divergent_step=cell.step,
        divergence=cell.divergence,
        hidden_entries=max(0, len(entries) - MAX_ENTRIES),
        problem=problem,
        commit=revision.short,
        reasons=cell.reasons,
        end=cell.ending,
    )

"""The HTML report's conversations: each trajectory in the task matrix, read as an exchange.

Every cell of the task matrix that kept its trajectory gets one: the user turns, the agent's
messages, its tool calls and their results (cut at ``OBSERVATION_CHARS``), with the step of the
first divergence from the reference marked. The matrix links to it. A trajectory that cannot be
read is shown as such, never a failed report; a long one keeps its first ``MAX_ENTRIES`` entries.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from harnessevolve.core import atif
from harnessevolve.core.conversation import Entry, conversation
from harnessevolve.core.errors import HarnessEvolveError
from harnessevolve.report.task_matrix import TaskCell, TaskMatrix

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
            views.append(_view(run_dir, revision.harness_hash, revision.label, row.task_id, cell))
    return views


def _view(run_dir: Path, harness_hash: str, label: str, task_id: str, cell: TaskCell) -> ConversationView:
    entries: tuple[Entry, ...] = ()
    problem = ""
    try:
        entries = conversation(atif.load(Path(run_dir) / str(cell.trajectory)), OBSERVATION_CHARS)
    except (HarnessEvolveError, OSError, ValueError) as exc:
        problem = f"trajectory not readable: {exc}"
    return ConversationView(
        anchor=anchor_for(harness_hash, task_id),
        task_id=task_id,
        revision=label,
        passed=cell.passed,
        entries=entries[:MAX_ENTRIES],
        divergent_step=cell.step,
        divergence=cell.divergence,
        hidden_entries=max(0, len(entries) - MAX_ENTRIES),
        problem=problem,
    )

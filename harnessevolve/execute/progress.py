"""Progress state: a ``notes`` tool the agent writes and reads across steps and user turns.

The notes live for one rollout (a plan, what is done, what failed). ``notes`` takes ``action``:
``read`` returns them, ``write`` replaces them with ``text``, ``append`` adds ``text`` as a new
line; they are cut at ``progress.max_chars`` (the tool says so). Every call is an ordinary tool
call in the trajectory, and the final notes with the count of writes are its ``extra.progress``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from harnessevolve.execute.loop_state import Component
from harnessevolve.execute.rollout_tools import OfferedTool
from harnessevolve.execute.tools import ToolResult
from harnessevolve.harness.model import ToolSpec

if TYPE_CHECKING:
    from harnessevolve.execute.loop_state import Rollout

NOTES_TOOL = ToolSpec(
    "notes",
    "Your progress notes for this task, kept across steps and turns: read them, write (replace) them "
    "or append a line (a plan, what is done, what failed).",
    {
        "type": "object",
        "properties": {
            "action": {"type": "string", "enum": ["read", "write", "append"]},
            "text": {"type": "string"},
        },
        "required": ["action"],
    },
)


class ProgressHooks(Component):
    """Holds one rollout's notes and offers the ``notes`` tool."""

    name = "progress"

    def __init__(self, max_chars: int) -> None:
        self.max_chars = max_chars
        self.notes = ""
        self.writes = 0

    def tools(self) -> list[OfferedTool]:
        return [OfferedTool(NOTES_TOOL, local=self.call)]

    def call(self, arguments: dict[str, Any]) -> ToolResult:
        action, text = arguments.get("action"), arguments.get("text", "")
        if action == "read":
            return ToolResult(self.notes or "(no notes yet)")
        if action not in ("write", "append") or not isinstance(text, str):
            return ToolResult(
                "error: notes takes action read, write or append, and text", error="bad notes call"
            )
        new = text if action == "write" else (f"{self.notes}\n{text}" if self.notes else text)
        self.writes += 1
        self.notes = new[: self.max_chars]
        cut = f" (cut at {self.max_chars} characters)" if len(new) > self.max_chars else ""
        return ToolResult(f"notes saved{cut}")

    async def on_stop(self, rollout: Rollout, reason: Any) -> None:
        rollout.extra["progress"] = {"notes": self.notes, "writes": self.writes}

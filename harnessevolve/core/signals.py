"""Error signals: the one failure taxonomy every stage shares, and the records built on it.

The evaluate stage produces them, the optimizer reads them, reports show them.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class Cause(StrEnum):
    WRONG_TOOL = "wrong_tool"
    UNKNOWN_TOOL = "unknown_tool"
    MISSING_ARGUMENT = "missing_argument"
    WRONG_ARGUMENT = "wrong_argument"
    SKIPPED_STEP = "skipped_step"
    EXTRA_STEP = "extra_step"
    PREMATURE_FINISH = "premature_finish"
    FORMAT_ERROR = "format_error"
    STEP_LIMIT = "step_limit"
    TOOL_ERROR_IGNORED = "tool_error_ignored"
    MODEL_ERROR = "model_error"
    SETUP_ERROR = "setup_error"


# How much a failure of this kind is worth fixing first (before scaling by how badly the run failed).
BASE_SEVERITY: dict[Cause, float] = {
    Cause.FORMAT_ERROR: 0.9,
    Cause.UNKNOWN_TOOL: 0.8,
    Cause.PREMATURE_FINISH: 0.8,
    Cause.WRONG_TOOL: 0.7,
    Cause.SKIPPED_STEP: 0.7,
    Cause.MISSING_ARGUMENT: 0.6,
    Cause.WRONG_ARGUMENT: 0.6,
    Cause.STEP_LIMIT: 0.6,
    Cause.TOOL_ERROR_IGNORED: 0.5,
    Cause.EXTRA_STEP: 0.4,
    Cause.MODEL_ERROR: 0.2,
    Cause.SETUP_ERROR: 0.1,
}

# What kind of harness edit tends to fix a cluster of this cause.
FIX_DIRECTION: dict[Cause, str] = {
    Cause.WRONG_TOOL: "show which tool fits this kind of task (demonstration, sharper tool descriptions)",
    Cause.UNKNOWN_TOOL: "list the available tools by exact name in the prompt",
    Cause.MISSING_ARGUMENT: "state the required arguments in the tool description and prompt",
    Cause.WRONG_ARGUMENT: "demonstrate the right arguments; tell the agent to copy values from observations",
    Cause.SKIPPED_STEP: "add the missing step to a demonstration or a rule",
    Cause.EXTRA_STEP: "tell the agent to go straight to the needed action",
    Cause.PREMATURE_FINISH: "require inspecting the workspace with a tool before submitting",
    Cause.FORMAT_ERROR: "state the exact reply format and show an example tool call",
    Cause.STEP_LIMIT: "raise the step limit or tell the agent not to repeat an action",
    Cause.TOOL_ERROR_IGNORED: "tell the agent to read tool errors and fix the command",
    Cause.MODEL_ERROR: "check the model provider (rate limits, timeouts)",
    Cause.SETUP_ERROR: "fix the task's setup",
}


@dataclass(frozen=True)
class ErrorSignal:
    """Where and why one failed run went wrong."""

    task_id: str
    cause: Cause
    severity: float
    hint: str
    step: int | None = None
    """ATIF ``step_id`` of the run's step at the first divergence; None without a reference.
    For a skipped action: the step right after the last action the run got right (see
    ``evaluate/alignment.py`` and docs/stages/evaluate.md, "Step convention")."""
    reference_step: int | None = None
    """ATIF ``step_id`` of the reference's step holding the action expected there (None when the
    reference had already finished)."""
    actual: dict[str, Any] | None = None
    """The run's action at the divergence: ``{"tool": ..., "arguments": ...}``."""
    expected: dict[str, Any] | None = None
    """The reference action at the divergence."""
    gaps: tuple[str, ...] = ()
    """What the trajectories lacked that the signal could have used (no tool definitions, a call
    without an observation, ...): the signal is the best reading without it."""
    judge: dict[str, Any] | None = None
    """The optional LLM judge's view: ``{"model", "cause", "agrees", "hint", "reference_genuine"}``."""

    def to_dict(self) -> dict[str, Any]:
        doc = {
            "task_id": self.task_id,
            "cause": str(self.cause),
            "severity": round(self.severity, 3),
            "hint": self.hint,
            "step": self.step,
            "reference_step": self.reference_step,
            "actual": self.actual,
            "expected": self.expected,
            "gaps": list(self.gaps),
        }
        if self.judge is not None:
            doc["judge"] = dict(self.judge)
        return doc

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> ErrorSignal:
        return cls(
            task_id=doc["task_id"],
            cause=Cause(doc["cause"]),
            severity=float(doc["severity"]),
            hint=doc.get("hint", ""),
            step=doc.get("step"),
            reference_step=doc.get("reference_step"),
            actual=doc.get("actual"),
            expected=doc.get("expected"),
            gaps=tuple(doc.get("gaps") or ()),
            judge=doc.get("judge"),
        )


@dataclass(frozen=True)
class Cluster:
    """Failed runs that share a cause."""

    cause: Cause
    signals: tuple[ErrorSignal, ...]

    @property
    def size(self) -> int:
        return len(self.signals)

    @property
    def severity(self) -> float:
        return sum(s.severity for s in self.signals)

    @property
    def fix_direction(self) -> str:
        return FIX_DIRECTION[self.cause]

    @property
    def task_ids(self) -> tuple[str, ...]:
        return tuple(s.task_id for s in self.signals)

    def to_dict(self) -> dict[str, Any]:
        return {
            "cause": str(self.cause),
            "size": self.size,
            "severity": round(self.severity, 3),
            "fix_direction": self.fix_direction,
            "tasks": list(self.task_ids),
            "divergences": [
                {"task": s.task_id, "step": s.step, "reference_step": s.reference_step} for s in self.signals
            ],
        }

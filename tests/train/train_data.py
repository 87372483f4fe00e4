"""Trajectories the trainer tests learn from: shell-onecall references (successes) and edited
copies of them that failed."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from harnessevolve.core import atif
from harnessevolve.core.atif import ToolCall, Trajectory

REPO = Path(__file__).resolve().parents[2]
HARNESS = REPO / "harnesses" / "shell-agent"
REFERENCES = REPO / "trajectories" / "shell-onecall"
TASKS = ("append-line-01", "copy-file-01", "make-dir-01", "delete-file-01")


def reference(task_id: str) -> Trajectory:
    return atif.load(REFERENCES / f"{task_id}.json")


def failed_copy(trajectory: Trajectory) -> Trajectory:
    """The same run with its first call's command changed and its evaluation failed."""
    steps = list(trajectory.steps)
    first = next(i for i, s in enumerate(steps) if s.source == "agent")
    call = steps[first].tool_calls[0]
    steps[first] = replace(
        steps[first], tool_calls=(ToolCall(call.tool_call_id, call.function_name, {"command": "ls"}),)
    )
    extra = {k: v for k, v in trajectory.extra.items() if k != "reference"}
    return replace(trajectory, steps=tuple(steps), extra={**extra, "passed": False, "score": 0.0})

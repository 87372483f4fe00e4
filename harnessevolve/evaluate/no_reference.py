"""An error signal for a failed run that has no reference trajectory."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from harnessevolve.core.atif import Trajectory
from harnessevolve.core.signals import BASE_SEVERITY, Cause, ErrorSignal
from harnessevolve.evaluate.actions import LIMIT_STOPS, error_cause, read_actions, stop_key
from harnessevolve.evaluate.tool_schemas import offered_tools


def signal_without_reference(
    trajectory: Trajectory, *, score: float = 0.0, tools: Iterable[Any] | None = None
) -> ErrorSignal:
    """The same fields, from the run alone: no step, the cause read off its errors and stop reason."""
    task_id = trajectory.task_id or "?"
    listing = read_actions(trajectory, offered_tools(trajectory, tools=tools))
    for act in listing.actions:
        cause = error_cause(act)
        if cause is not None:
            return ErrorSignal(
                task_id,
                cause,
                BASE_SEVERITY[cause] * (1 - 0.5 * score),
                f"{cause.value} at step {act.step_id} ({act.error or act.kind})",
                gaps=listing.gaps,
            )
    stop = trajectory.extra.get("stop_reason")
    key = stop_key(stop)
    cause = Cause.WRONG_ARGUMENT
    if key in LIMIT_STOPS:
        cause = Cause.STEP_LIMIT
    elif key in ("modelerror", "setuperror"):
        cause = Cause.MODEL_ERROR if key == "modelerror" else Cause.SETUP_ERROR
    hint = f"no reference trajectory; the run ended with {stop} and the checker failed"
    return ErrorSignal(task_id, cause, BASE_SEVERITY[cause] * (1 - 0.5 * score), hint, gaps=listing.gaps)

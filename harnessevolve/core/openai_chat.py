"""ATIF trajectories <-> OpenAI chat messages (``system`` / ``user`` / ``assistant`` with
``tool_calls`` / ``tool``): the file forms of :mod:`harnessevolve.core.transcript`, whose one
mapping both directions use.

Export: a system or user step becomes one message of that role; an agent step becomes one
assistant message (``content`` is ``None`` when the step has tool calls and no text, tool call
arguments are JSON strings, ``reasoning_content`` is kept) followed by one ``tool`` message per
observation result that answers a call (a result with no ``source_call_id`` has no chat form and
is dropped). Import is the inverse: ``tool`` messages attach to the assistant message whose
call they answer. What chat messages cannot carry (timestamps, metrics, ``extra``) is dropped on
export; a tool call whose arguments are not a JSON object is imported with empty arguments and
``extra.error = "bad_arguments: <tool>"``, as the agent loop records it.
"""

from __future__ import annotations

import uuid
from dataclasses import replace
from typing import Any

from harnessevolve.core.atif import Step, Trajectory
from harnessevolve.core.errors import TrajectoryError
from harnessevolve.core.transcript import Entry, Transcript, steps_of


def to_messages(trajectory: Trajectory) -> list[dict[str, Any]]:
    """The trajectory as an OpenAI chat ``messages`` list."""
    return Transcript.from_steps(trajectory.steps).messages()


def _flag_bad_arguments(step: Step) -> Step:
    """An imported call whose arguments are not a JSON object: empty arguments and ``extra.error``."""
    bad = [c.function_name for c in step.tool_calls if c.raw_arguments is not None]
    if not bad:
        return step
    return replace(
        step,
        tool_calls=tuple(replace(c, raw_arguments=None) for c in step.tool_calls),
        extra={**step.extra, "error": "; ".join(f"bad_arguments: {name}" for name in bad)},
    )


def from_messages(
    messages: Any,
    *,
    session_id: str | None = None,
    agent_name: str = "openai-chat",
    agent_version: str = "unknown",
    model_name: str = "",
    extra: dict[str, Any] | None = None,
    file: str | None = None,
) -> Trajectory:
    """Build a trajectory from chat messages (a list, or a ``{"messages": [...]}`` document; its
    ``tools``, the request's tool list, become the trajectory's ``tool_definitions``).

    Raises ``TrajectoryError`` naming the message and field that cannot be read.
    """
    tool_definitions: tuple[dict[str, Any], ...] = ()
    if isinstance(messages, dict) and "messages" in messages:
        model_name = model_name or str(messages.get("model", ""))
        offered = messages.get("tools")  # the request's tool list: kept as ATIF v1.5 tool_definitions
        if isinstance(offered, list):
            tool_definitions = tuple(t for t in offered if isinstance(t, dict))
        messages = messages["messages"]
    if not isinstance(messages, list):
        raise TrajectoryError('expected a list of chat messages or {"messages": [...]}', file=file)
    try:
        for i, message in enumerate(messages):
            if not isinstance(message, dict):
                raise TrajectoryError("a message must be an object", field=f"messages[{i}]")
        steps = steps_of([Entry(m) for m in messages], strict=True)
    except TrajectoryError as exc:
        exc.file = file
        raise
    return Trajectory(
        session_id=session_id or uuid.uuid4().hex,
        agent_name=agent_name,
        agent_version=agent_version,
        model_name=model_name,
        steps=tuple(_flag_bad_arguments(s) for s in steps),
        extra=dict(extra or {}),
        tool_definitions=tool_definitions,
    )

"""ATIF trajectories <-> OpenAI chat messages (``system`` / ``user`` / ``assistant`` with
``tool_calls`` / ``tool``).

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

import json
import uuid
from dataclasses import replace
from typing import Any

from harnessevolve.core.atif import ObservationResult, Step, ToolCall, Trajectory
from harnessevolve.core.errors import TrajectoryError

ROLE_TO_SOURCE = {"system": "system", "developer": "system", "user": "user", "assistant": "agent"}


def to_messages(trajectory: Trajectory) -> list[dict[str, Any]]:
    """The trajectory as an OpenAI chat ``messages`` list."""
    messages: list[dict[str, Any]] = []
    for step in trajectory.steps:
        if step.source != "agent":
            messages.append({"role": step.source, "content": step.message})
            continue
        message: dict[str, Any] = {"role": "assistant", "content": step.message or None}
        if step.reasoning_content is not None:
            message["reasoning_content"] = step.reasoning_content
        if step.tool_calls:
            message["tool_calls"] = [
                {
                    "id": c.tool_call_id,
                    "type": "function",
                    "function": {"name": c.function_name, "arguments": json.dumps(c.arguments)},
                }
                for c in step.tool_calls
            ]
        elif message["content"] is None:
            message["content"] = ""
        messages.append(message)
        messages += [
            {"role": "tool", "tool_call_id": o.source_call_id, "content": o.content}
            for o in step.observations
            if o.source_call_id is not None
        ]
    return messages


def _text(content: Any, where: str) -> str:
    """A message's ``content``: a string, ``None`` or a list of text parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for i, part in enumerate(content):
            if (
                not isinstance(part, dict)
                or part.get("type") != "text"
                or not isinstance(part.get("text"), str)
            ):
                raise TrajectoryError(
                    "only text content parts can be imported", field=f"{where}.content[{i}]"
                )
            parts.append(part["text"])
        return "".join(parts)
    raise TrajectoryError(
        f"content must be a string or a list of parts, not {type(content).__name__}", field=f"{where}.content"
    )


def _tool_calls(message: dict[str, Any], where: str, step_id: int) -> tuple[list[ToolCall], list[str]]:
    calls: list[ToolCall] = []
    errors: list[str] = []
    for j, call in enumerate(message.get("tool_calls") or []):
        at = f"{where}.tool_calls[{j}]"
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise TrajectoryError("a tool call needs function.name", field=f"{at}.function.name")
        raw = function.get("arguments", "{}")
        try:
            arguments = json.loads(raw) if isinstance(raw, str) else raw
        except json.JSONDecodeError:
            arguments = None
        if not isinstance(arguments, dict):
            arguments = {}
            errors.append(f"bad_arguments: {function['name']}")
        calls.append(ToolCall(str(call.get("id") or f"call-{step_id}-{j}"), function["name"], arguments))
    return calls, errors


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
    steps: list[Step] = []
    pending: dict[str, int] = {}  # tool_call_id -> index in steps of the assistant step that made it
    try:
        for i, message in enumerate(messages):
            where = f"messages[{i}]"
            if not isinstance(message, dict):
                raise TrajectoryError("a message must be an object", field=where)
            role = message.get("role")
            step_id = len(steps) + 1
            if role == "tool":
                call_id = message.get("tool_call_id")
                if call_id not in pending:
                    raise TrajectoryError(
                        f"tool_call_id {call_id!r} answers no earlier assistant tool call",
                        field=f"{where}.tool_call_id",
                    )
                index = pending.pop(call_id)
                step = steps[index]
                result = ObservationResult(call_id, _text(message.get("content"), where))
                steps[index] = _with_observation(step, result)
                continue
            if role not in ROLE_TO_SOURCE:
                raise TrajectoryError(f"unsupported role {role!r}", field=f"{where}.role")
            text = _text(message.get("content"), where)
            if role != "assistant":
                steps.append(Step(step_id, ROLE_TO_SOURCE[role], text))
                continue
            calls, errors = _tool_calls(message, where, step_id)
            reasoning = message.get("reasoning_content")
            steps.append(
                Step(
                    step_id,
                    "agent",
                    text,
                    tool_calls=tuple(calls),
                    extra={"error": "; ".join(errors)} if errors else {},
                    reasoning_content=reasoning if isinstance(reasoning, str) else None,
                )
            )
            pending.update({c.tool_call_id: len(steps) - 1 for c in calls})
    except TrajectoryError as exc:
        exc.file = file
        raise
    return Trajectory(
        session_id=session_id or uuid.uuid4().hex,
        agent_name=agent_name,
        agent_version=agent_version,
        model_name=model_name,
        steps=tuple(steps),
        extra=dict(extra or {}),
        tool_definitions=tool_definitions,
    )


def _with_observation(step: Step, result: ObservationResult) -> Step:
    return replace(step, observations=(*step.observations, result))

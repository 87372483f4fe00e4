"""Trajectory steps from what the endpoint recorded, or from the agent's own ATIF file.

Rebuilt from the chat: the system and user messages become system and user steps, each model
reply an agent step (its tool calls, the endpoint's token counts and cost as metrics), and each
``tool`` message the observation of the call it answers. An agent's own ATIF file, when it wrote
one, is checked (``core.atif.from_dict``) and used for the steps instead; the token counts and cost
always come from the endpoint's records, never from what the agent says.
"""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from harnessevolve.core import atif
from harnessevolve.core.atif import ObservationResult, Step, ToolCall, Trajectory
from harnessevolve.core.errors import TrajectoryError
from harnessevolve.execute.runners.endpoint import ModelCall

MAX_ATIF_BYTES = 32 << 20
SOURCES = {"system": "system", "developer": "system", "user": "user"}


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return "" if content is None else json.dumps(content)


def _when(call: ModelCall) -> str:
    return datetime.fromtimestamp(call.timestamp, UTC).isoformat(timespec="milliseconds")


def _tool_call(raw: dict[str, Any]) -> ToolCall:
    text = raw.get("arguments") or "{}"
    try:
        parsed = json.loads(text) if isinstance(text, str) else text
    except json.JSONDecodeError:
        parsed = None
    if isinstance(parsed, dict):
        return ToolCall(str(raw.get("id", "")), str(raw.get("name", "")), parsed)
    return ToolCall(str(raw.get("id", "")), str(raw.get("name", "")), {}, raw_arguments=str(text))


def steps_from_calls(calls: list[ModelCall], model: str) -> list[Step]:
    """The conversation the endpoint saw, as ATIF steps (see the module docstring)."""
    steps: list[Step] = []
    seen: set[tuple[str, str]] = set()
    owner: dict[str, int] = {}  # tool_call_id -> index of the agent step that made the call
    for call in calls:
        for message in call.new_messages:
            role = message.get("role")
            if role in SOURCES:
                key = (SOURCES[role], _text(message.get("content")))
                if key in seen:  # a stateless agent resends its prompt each call
                    continue
                seen.add(key)
                steps.append(Step(len(steps) + 1, key[0], key[1], timestamp=_when(call)))
            elif role == "tool" and message.get("tool_call_id") in owner:
                index = owner.pop(message["tool_call_id"])
                result = ObservationResult(message["tool_call_id"], _text(message.get("content")))
                steps[index] = replace(steps[index], observations=(*steps[index].observations, result))
        if call.reply is not None:
            tool_calls = tuple(_tool_call(c) for c in call.reply["tool_calls"])
            steps.append(
                Step(
                    len(steps) + 1,
                    "agent",
                    call.reply["content"],
                    tool_calls=tool_calls,
                    metrics=dict(call.usage),
                    extra={"model_call": call.index, **call.token_ids},
                    timestamp=_when(call),
                    model_name=model,
                )
            )
            owner.update({c.tool_call_id: len(steps) - 1 for c in tool_calls})
        elif call.error:
            steps.append(
                Step(
                    len(steps) + 1,
                    "agent",
                    "",
                    extra={"error": call.error, "model_call": call.index},
                    timestamp=_when(call),
                    model_name=model,
                )
            )
    return steps


def read_agent_atif(path: Path) -> Trajectory | None:
    """The agent's ATIF file, None when it wrote none; ``TrajectoryError`` when it is not valid ATIF."""
    if not path.is_file():
        return None
    if path.stat().st_size > MAX_ATIF_BYTES:
        raise TrajectoryError(
            f"the agent's ATIF file is larger than {MAX_ATIF_BYTES >> 20} MiB", file=path.name
        )
    try:
        doc = json.loads(path.read_text(encoding="utf-8", errors="replace"))
    except (json.JSONDecodeError, RecursionError) as exc:
        raise TrajectoryError(f"not JSON: {exc}".splitlines()[0], file=path.name) from None
    return atif.from_dict(doc, file=path.name)


def merge_metrics(steps: tuple[Step, ...], calls: list[ModelCall]) -> tuple[Step, ...]:
    """The agent's own steps, each agent step's metrics replaced by the endpoint's record of the
    model call it stands for: the call whose reply made the same tool calls (by id), else -- when
    the numbers of agent steps and answered calls agree -- the call in the same place."""
    answered = [c for c in calls if c.reply is not None]
    by_ids = {tuple(t["id"] for t in c.reply["tool_calls"]): c for c in answered if c.reply["tool_calls"]}  # type: ignore[index]
    agent_steps = [i for i, s in enumerate(steps) if s.source == "agent"]
    in_order = dict(zip(agent_steps, answered, strict=False)) if len(agent_steps) == len(answered) else {}
    out = list(steps)
    for index in agent_steps:
        call = by_ids.get(tuple(c.tool_call_id for c in out[index].tool_calls)) or in_order.get(index)
        if call is not None:
            out[index] = replace(
                out[index],
                metrics=dict(call.usage),
                extra={**out[index].extra, "model_call": call.index, **call.token_ids},
            )
    return tuple(out)

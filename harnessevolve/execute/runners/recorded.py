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
from harnessevolve.core.atif import Step, Trajectory
from harnessevolve.core.errors import TrajectoryError
from harnessevolve.core.transcript import Transcript, text_of
from harnessevolve.execute.runners.endpoint import ModelCall

MAX_ATIF_BYTES = 32 << 20
SOURCES = {"system": "system", "developer": "system", "user": "user"}


def _when(call: ModelCall) -> str:
    return datetime.fromtimestamp(call.timestamp, UTC).isoformat(timespec="milliseconds")


def _reply_message(reply: dict[str, Any]) -> dict[str, Any]:
    """The endpoint's record of a reply (``{"content", "tool_calls": [{"id", "name", "arguments"}]}``)
    as the assistant message the agent received."""
    message: dict[str, Any] = {"role": "assistant", "content": reply["content"]}
    if reply["tool_calls"]:
        message["tool_calls"] = [
            {
                "id": c.get("id", ""),
                "type": "function",
                "function": {"name": str(c.get("name", "")), "arguments": c.get("arguments") or "{}"},
            }
            for c in reply["tool_calls"]
        ]
    return message


def transcript_of_calls(calls: list[ModelCall], model: str) -> Transcript:
    """The conversation the endpoint saw: each call's new system, user and tool messages (a
    stateless agent resends its prompt each call: a system or user message seen before is not
    added again), then the model's reply (or the failed call)."""
    transcript = Transcript()
    seen: set[tuple[str, str]] = set()
    for call in calls:
        when = _when(call)
        for msg in call.new_messages:
            role = msg.get("role")
            if role in SOURCES:
                key = (SOURCES[role], text_of(msg.get("content")))
                if key not in seen:
                    seen.add(key)
                    transcript.add_text(role, key[1], timestamp=when)
            elif role == "tool":
                transcript.add(msg)
        meta: dict[str, Any] = {"timestamp": when, "model_name": model}
        if call.reply is not None:
            extra = {"model_call": call.index, **call.token_ids}
            transcript.add(_reply_message(call.reply), metrics=dict(call.usage), extra=extra, **meta)
        elif call.error:
            failed = {"error": call.error, "model_call": call.index}
            transcript.add({"role": "assistant", "content": ""}, extra=failed, in_chat=False, **meta)
    return transcript


def steps_from_calls(calls: list[ModelCall], model: str) -> list[Step]:
    """The conversation the endpoint saw, as ATIF steps (see the module docstring)."""
    return transcript_of_calls(calls, model).steps()


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

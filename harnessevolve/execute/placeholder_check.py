"""``loop.refuse_placeholders``: a tool call passing a value that looks made up is answered once
instead of run, asking for the real value.

Small agents fill what they do not know with a stand-in (``'your_password'``, ``order_id='12345'``,
``"Michael's user_id"``) instead of looking it up with a tool or asking; the tool then fails or
acts on nothing, and the run goes on as if it had worked. Before a call runs, each of its values is
read against what the agent was told so far -- the user's messages and every tool result -- and
``core/placeholder_values.py`` says whether it looks like a placeholder (a fill-in marker, the digit
run ``12345``, a parameter's name instead of its value). Such a call is answered with
:data:`REFUSED_REPLY`; the same call made again runs (the agent may know better, and the check never
blocks a run). The finishing tool is never checked: an answer is free text.

Recorded in the rollout's ``extra.placeholders``: one entry per refusal (``step``, ``tool``,
``argument``, ``value``, ``why``). Nothing here names a benchmark or a task.
"""

from __future__ import annotations

from typing import Any

from harnessevolve.core.placeholder_values import placeholders
from harnessevolve.execute.loop_state import Rollout

REFUSED_REPLY = (
    "error: {tool} was not run: {argument}={value!r} looks like a placeholder ({why}); it appears nowhere in "
    "this conversation. Use the real value: one the user gave or an earlier tool result returned. "
    "If you do not have it yet, find it with a tool first, or ask the user."
)


def told(rollout: Rollout) -> str:
    """What the agent was told so far: the user's messages (the loop's own nudges left out) and
    every tool result."""
    parts = [
        str(e.message.get("content") or "")
        for e in rollout.transcript.entries
        if (e.message["role"] == "user" and not e.nudge) or e.message["role"] == "tool"
    ]
    return "\n".join(parts)


def _refused(rollout: Rollout) -> list[dict[str, Any]]:
    found = rollout.extra.get("placeholders")
    return found if isinstance(found, list) else []


def hold_placeholder(rollout: Rollout, tool: str, arguments: dict[str, Any]) -> str | None:
    """The reply to a call of ``tool`` with ``arguments`` that must not run yet (a value looks
    made up, and this very call was not refused before), else None."""
    found = placeholders(arguments, told(rollout))
    if not found:
        return None
    argument, value, why = found[0]
    before = {(r.get("tool"), r.get("argument"), r.get("value")) for r in _refused(rollout)}
    if (tool, argument, str(value)) in before:
        return None  # asked once: the agent keeps the value, so it runs
    rollout.extra.setdefault("placeholders", []).append(
        {
            "step": len(rollout.steps()) + 1,
            "tool": tool,
            "argument": argument,
            "value": str(value),
            "why": why,
        }
    )
    return REFUSED_REPLY.format(tool=tool, argument=argument, value=value, why=why)

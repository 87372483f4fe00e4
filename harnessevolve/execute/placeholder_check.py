"""``loop.refuse_placeholders``: a tool call passing a value that looks made up is answered once
instead of run, asking for the real value.

Small agents fill what they do not know with a stand-in (``'your_password'``, ``order_id='12345'``,
``"Michael's user_id"``) instead of looking it up with a tool or asking; the tool then fails or
acts on nothing, and the run goes on as if it had worked. Before a call runs, each of its values is
read against what the agent was told so far -- the user's messages and every tool result -- and
``core/placeholder_values.py`` says whether it looks like a placeholder (a fill-in marker, the digit
run ``12345``, a parameter's name instead of its value). Such a call is answered with
:data:`REFUSED_REPLY`; the same call made again runs (the agent may know better, and the check never
blocks a run).

Only a task's Python and MCP tools are checked (the harness's own tools, a runtime component's
notes and command tools are not). What the agent was told: its system message (the task's
context), the user's messages, the offered tools' schemas (a value an enum or a description
gives) and every tool result (this check's own refusals left out, so quoting a value does not
make it told). Recorded in the rollout's ``extra.placeholders``: one entry per refused call
(``step``, ``tool``, ``call``: the call's key, ``values``: each ``argument``, ``value`` and ``why``).
Nothing here names a benchmark or a task.
"""

from __future__ import annotations

import json
from typing import Any

from harnessevolve.core.placeholder_values import suspects, untold
from harnessevolve.execute.loop_state import Rollout

REFUSED_REPLY = (
    "error: {tool} was not run: {values} {looks} like a placeholder ({why}) and appears nowhere in "
    "this conversation. Use the real value: one the user gave or an earlier tool result returned. "
    "If you do not have it yet, find it with a tool first, or ask the user."
)
REFUSAL_MARK = "like a placeholder ("
"""In every refusal: a result holding it is the loop's own words, not something the agent was told."""


def told(rollout: Rollout) -> str:
    """What the agent was told so far: its system message, the user's messages (the loop's own
    nudges left out), the offered tools' schemas and every tool result but this check's refusals."""
    parts = [json.dumps(rollout.offered, ensure_ascii=False)]
    for entry in rollout.transcript.entries:
        msg = entry.message
        role, content = msg["role"], str(msg.get("content") or "")
        given = role == "system" or (role == "user" and not entry.nudge)
        if given or (role == "tool" and REFUSAL_MARK not in content):
            parts.append(content)
    return "\n".join(parts)


def _refused(rollout: Rollout) -> list[dict[str, Any]]:
    found = rollout.extra.get("placeholders")
    return found if isinstance(found, list) else []


def _call_key(tool: str, arguments: dict[str, Any]) -> str:
    return tool + json.dumps(arguments, sort_keys=True, ensure_ascii=False, default=str)


def hold_placeholder(rollout: Rollout, tool: str, arguments: dict[str, Any]) -> str | None:
    """The reply to a call of ``tool`` with ``arguments`` that must not run yet (a value looks
    made up, and this very call was not refused before), else None."""
    found = suspects(arguments)
    if found:  # what the agent was told is read only for a call with a suspect value
        found = untold(found, told(rollout))
    if not found:
        return None
    key = _call_key(tool, arguments)
    if any(r.get("call") == key for r in _refused(rollout)):
        return None  # asked once: the agent keeps the values, so the call runs
    rollout.extra.setdefault("placeholders", []).append(
        {
            "step": len(rollout.steps()) + 1,
            "tool": tool,
            "call": key,
            "values": [{"argument": a, "value": str(v), "why": w} for a, v, w in found],
        }
    )
    shown = found[:3]
    values = ", ".join(f"{a}={v!r}" for a, v, _ in shown)
    whys = "; ".join(dict.fromkeys(w for _, _, w in shown))
    return REFUSED_REPLY.format(
        tool=tool, values=values, looks="looks" if len(shown) == 1 else "look", why=whys
    )

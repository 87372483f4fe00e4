"""A trajectory read as a conversation: who said what, which tools were called, what came back.

One reading serves the ``judge`` check (``transcript_text``: what the judge model sees) and the HTML
report's conversation view (``conversation``: one entry per user turn, agent message, tool call
and observation). System steps are left out of both: the judge judges the exchange, not the
harness's prompt. Long observations are cut (``observation_limit``) and say so.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from harnessevolve.core.atif import Step, Trajectory

OBSERVATION_LIMIT = 1200
"""Characters of one observation kept before it is cut."""


@dataclass(frozen=True)
class Entry:
    """One thing in the conversation: a user turn, an agent message, a tool call or its result."""

    kind: str  # "user" | "agent" | "call" | "observation"
    text: str
    step_id: int
    cut: int = 0
    """Characters left out of ``text`` (an observation over the limit)."""


def _cut(text: str, limit: int) -> tuple[str, int]:
    return (text, 0) if len(text) <= limit else (text[:limit], len(text) - limit)


def _call_text(name: str, arguments: dict[str, object], raw: str | None) -> str:
    shown = raw if raw is not None else json.dumps(arguments, ensure_ascii=False, sort_keys=True)
    return f"{name}({shown})"


def _step_entries(step: Step, limit: int) -> list[Entry]:
    if step.source == "user":
        return [Entry("user", step.message, step.step_id)]
    if step.source != "agent":
        return []
    out = [Entry("agent", step.message, step.step_id)] if step.message.strip() else []
    out += [
        Entry("call", _call_text(c.function_name, c.arguments, c.raw_arguments), step.step_id)
        for c in step.tool_calls
    ]
    for result in step.observations:
        text, cut = _cut(result.content, limit)
        out.append(Entry("observation", text, step.step_id, cut))
    return out


def conversation(trajectory: Trajectory, observation_limit: int = OBSERVATION_LIMIT) -> tuple[Entry, ...]:
    """Every user turn, agent message, tool call and observation, in order (system steps left out)."""
    return tuple(e for step in trajectory.steps for e in _step_entries(step, observation_limit))


LABELS = {"user": "USER", "agent": "AGENT", "call": "AGENT CALLS", "observation": "TOOL RESULT"}


def transcript_text(trajectory: Trajectory, observation_limit: int = OBSERVATION_LIMIT) -> str:
    """The conversation as plain text, one labelled block per entry (what a judge model reads)."""
    blocks = []
    for entry in conversation(trajectory, observation_limit):
        more = f"\n[... {entry.cut} more characters]" if entry.cut else ""
        blocks.append(f"{LABELS[entry.kind]}: {entry.text}{more}")
    return "\n\n".join(blocks)

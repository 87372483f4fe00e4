"""One conversation, two views: the chat messages a model is shown (the source of truth) and the
ATIF steps derived from them by one function, :func:`steps_of`. Its inverse, :meth:`Transcript.
from_steps`, gives back the chat an ATIF trajectory stands for.

Every writer of a conversation uses it: the builtin agent loop (``execute/agent.py``) appends each
message as it sends or receives it; the recorder of external agents (``execute/runners/recorded.py``)
appends what the model endpoint saw; ``core/openai_chat.py`` imports and exports chat documents;
the policy trainer (``train/samples.py``) replays a trajectory as the chat its model conditioned on.

The mapping (messages -> steps):

- a ``system`` / ``developer`` / ``user`` message is one step of source ``system`` / ``system`` /
  ``user``; content parts are joined;
- an ``assistant`` message is one ``agent`` step: its text, ``reasoning_content``, tool calls
  (arguments parsed from their JSON text; text that is no JSON object is kept as
  ``raw_arguments`` with empty arguments, ids default to ``call-<step>-<j>``);
- a ``tool`` message is an observation result on the agent step whose call it answers; the
  entry's ``note`` (the loop's ``observation_note``, appended to what the model saw) is not part
  of the observation;
- a *nudge* (the loop's reply to an unreadable turn: a user message with no step of its own) is
  kept as ``extra.nudge`` of the agent step before it;
- an entry that is not ``in_chat`` (a model call that failed, a simulated user that failed) is a
  step the model never saw as a message.

Per-step data chat cannot carry (metrics, ``extra``, timestamps, the model name) rides on the entry.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from harnessevolve.core.atif import ObservationResult, Step, ToolCall
from harnessevolve.core.errors import TrajectoryError

ROLE_TO_SOURCE = {"system": "system", "developer": "system", "user": "user", "assistant": "agent"}

NO_TOOL_NUDGE = "You did not call a tool. Call one of the tools; call submit with your final answer."
"""The builtin loop's answer to a reply without a tool call (one-turn tasks)."""
PARSE_NUDGE = "Your reply could not be read as a tool call ({error}). Reply with exactly one tool call."
"""The builtin loop's answer to a reply that could not be read as a tool call."""
MISFIT_NUDGE = (
    "Your tool call was not run: {error}. Call the tool again with arguments that fit its parameters."
)
"""...and to a call that was read but does not fit its tool's schema (a missing, unexpected or
mistyped argument, a value off its enum): "could not be read" would send the model after its JSON."""
_MISFIT = ("missing required argument", "unexpected argument", "argument '")


def parse_nudge(error: str) -> str:
    """The loop's answer to a reply the provider could not turn into a call that fits (``error``)."""
    return (MISFIT_NUDGE if error.startswith(_MISFIT) else PARSE_NUDGE).format(error=error)


def legacy_nudge(step: Step) -> str | None:
    """The nudge the builtin loop sent after ``step`` before nudges were recorded on the step
    (``extra.nudge``): trajectories written earlier replay with the text the loop used then."""
    if step.source != "agent" or step.tool_calls:
        return None
    error = str(step.extra.get("error", ""))
    if error.startswith("parse_error"):
        return PARSE_NUDGE.format(error=error.removeprefix("parse_error: "))
    return NO_TOOL_NUDGE if error == "no_tool_call" else None


@dataclass(frozen=True)
class Entry:
    """One chat message and what the ATIF step it becomes keeps beside it."""

    message: dict[str, Any]
    """An OpenAI chat message (``role``, ``content``, ``tool_calls`` / ``tool_call_id``)."""
    metrics: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    timestamp: str | None = None
    model_name: str | None = None
    note: str = ""
    """``tool`` entries: text appended to the observation in the message, not part of the step."""
    nudge: bool = False
    """``user`` entries: a loop nudge, kept as ``extra.nudge`` of the agent step before it."""
    in_chat: bool = True
    """False: a step the model was never shown (a failed model or user call)."""


def text_of(content: Any, where: str | None = None) -> str:
    """A message's ``content`` as text: a string, ``None`` or a list of text parts. With ``where``
    (strict import) anything else raises ``TrajectoryError`` naming the field; without, it is
    read leniently (non-text parts skipped, other values as JSON)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for i, part in enumerate(content):
            ok = (
                isinstance(part, dict)
                and part.get("type", "text") == "text"
                and isinstance(part.get("text"), str)
            )
            if ok:
                parts.append(part["text"])
            elif where is not None:
                raise TrajectoryError(
                    "only text content parts can be imported", field=f"{where}.content[{i}]"
                )
        return "".join(parts)
    if where is not None:
        raise TrajectoryError(
            f"content must be a string or a list of parts, not {type(content).__name__}",
            field=f"{where}.content",
        )
    return json.dumps(content)


def chat_tool_calls(calls: Iterable[ToolCall]) -> list[dict[str, Any]]:
    """ATIF tool calls as an assistant message's ``tool_calls`` (arguments as JSON text)."""
    return [
        {
            "id": c.tool_call_id,
            "type": "function",
            "function": {
                "name": c.function_name,
                "arguments": c.raw_arguments if c.raw_arguments is not None else json.dumps(c.arguments),
            },
        }
        for c in calls
    ]


def parse_tool_calls(msg: dict[str, Any], step_id: int, where: str | None = None) -> tuple[ToolCall, ...]:
    """An assistant message's tool calls as ATIF (see the module docstring); with ``where``, a call
    without ``function.name`` raises ``TrajectoryError``."""
    calls = []
    for j, call in enumerate(msg.get("tool_calls") or []):
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            if where is not None:
                raise TrajectoryError(
                    "a tool call needs function.name", field=f"{where}.tool_calls[{j}].function.name"
                )
            continue
        raw = function.get("arguments", "{}")
        try:
            arguments = json.loads(raw) if isinstance(raw, str) else raw
        except json.JSONDecodeError:
            arguments = None
        call_id = str(call.get("id") or f"call-{step_id}-{j}")
        if isinstance(arguments, dict):
            calls.append(ToolCall(call_id, function["name"], arguments))
        else:
            calls.append(ToolCall(call_id, function["name"], {}, raw_arguments=str(raw)))
    return tuple(calls)


def steps_of(entries: Sequence[Entry], *, strict: bool = False) -> list[Step]:
    """The ATIF steps of a conversation (the one mapping, see the module docstring). ``strict``
    (importing a user's file): a ``tool`` message that answers no earlier call, an unknown role or
    unreadable content raise ``TrajectoryError`` naming ``messages[i]``; otherwise they are skipped
    or read leniently."""
    steps: list[Step] = []
    owner: dict[str, int] = {}  # tool_call_id -> index in steps of the agent step that made it
    for i, entry in enumerate(entries):
        msg = entry.message
        where = f"messages[{i}]" if strict else None
        role = msg.get("role")
        if role == "tool":
            call_id = msg.get("tool_call_id")
            if call_id not in owner:
                if strict:
                    raise TrajectoryError(
                        f"tool_call_id {call_id!r} answers no earlier assistant tool call",
                        field=f"messages[{i}].tool_call_id",
                    )
                continue
            index = owner.pop(call_id)
            content = text_of(msg.get("content"), where)
            if entry.note and content.endswith(entry.note):
                content = content[: -len(entry.note)]
            result = ObservationResult(call_id, content)
            steps[index] = replace(steps[index], observations=(*steps[index].observations, result))
            continue
        if role not in ROLE_TO_SOURCE:
            if strict:
                raise TrajectoryError(f"unsupported role {role!r}", field=f"messages[{i}].role")
            continue
        text = text_of(msg.get("content"), where)
        if entry.nudge:
            last = next((k for k in range(len(steps) - 1, -1, -1) if steps[k].source == "agent"), None)
            if last is not None:
                steps[last] = replace(steps[last], extra={**steps[last].extra, "nudge": text})
                continue
        step_id = len(steps) + 1
        if role != "assistant":
            steps.append(
                Step(step_id, ROLE_TO_SOURCE[role], text, extra=dict(entry.extra), timestamp=entry.timestamp)
            )
            continue
        calls = parse_tool_calls(msg, step_id, where)
        reasoning = msg.get("reasoning_content")
        steps.append(
            Step(
                step_id,
                "agent",
                text,
                tool_calls=calls,
                metrics=dict(entry.metrics),
                extra=dict(entry.extra),
                timestamp=entry.timestamp,
                model_name=entry.model_name,
                reasoning_content=reasoning if isinstance(reasoning, str) else None,
            )
        )
        owner.update({c.tool_call_id: len(steps) - 1 for c in calls})
    return steps


@dataclass
class Transcript:
    """A conversation as it grows: append messages, read ``messages()`` (what to send the model)
    or ``steps()`` (the ATIF record)."""

    entries: list[Entry] = field(default_factory=list)

    def add(self, message: dict[str, Any], **meta: Any) -> Entry:
        """Append one message (``meta``: the :class:`Entry` fields beside it)."""
        entry = Entry(dict(message), **meta)
        self.entries.append(entry)
        return entry

    def add_text(self, role: str, content: str, **meta: Any) -> Entry:
        return self.add({"role": role, "content": content}, **meta)

    def add_reply(self, content: str | None, calls: Sequence[ToolCall] = (), **meta: Any) -> Entry:
        """An assistant message: ``content`` (``None`` is sent as such beside tool calls) and its calls."""
        if not calls:
            return self.add({"role": "assistant", "content": content}, **meta)
        return self.add(
            {"role": "assistant", "content": content or None, "tool_calls": chat_tool_calls(calls)}, **meta
        )

    def add_results(self, results: Iterable[ObservationResult], note: str = "") -> None:
        """One ``tool`` message per result; ``note`` (with a newline before it) ends each message."""
        suffix = f"\n{note}" if note else ""
        for result in results:
            self.add(
                {"role": "tool", "tool_call_id": result.source_call_id, "content": result.content + suffix},
                note=suffix,
            )

    def messages(self) -> list[dict[str, Any]]:
        """The chat as the model is shown it (entries not in the chat left out)."""
        return [e.message for e in self.entries if e.in_chat]

    def steps(self, *, strict: bool = False) -> list[Step]:
        return steps_of(self.entries, strict=strict)

    @classmethod
    def from_steps(
        cls,
        steps: Iterable[Step],
        *,
        observation_note: str = "",
        nudges: bool = False,
        system_prompt: str | None = None,
    ) -> Transcript:
        """The chat ATIF ``steps`` stand for (inverse of :func:`steps_of`): an agent step is an
        assistant message (``content`` ``None`` beside tool calls without text, ``""`` when it has
        neither) followed by a ``tool`` message per result that answers a call. ``observation_note``
        ends each tool message as the loop appended it; ``nudges`` replays the loop's nudges
        (``extra.nudge``, or :func:`legacy_nudge` for older trajectories); ``system_prompt``
        replaces the system steps' text (a reference rendered under another harness)."""
        transcript = cls()
        for step in steps:
            if step.source != "agent":
                text = (
                    system_prompt if step.source == "system" and system_prompt is not None else step.message
                )
                transcript.add_text(step.source, text, extra=dict(step.extra), timestamp=step.timestamp)
                continue
            message: dict[str, Any] = {"role": "assistant", "content": step.message or None}
            if step.reasoning_content is not None:
                message["reasoning_content"] = step.reasoning_content
            if step.tool_calls:
                message["tool_calls"] = chat_tool_calls(step.tool_calls)
            elif message["content"] is None:
                message["content"] = ""
            meta = {"metrics": dict(step.metrics), "extra": dict(step.extra), "timestamp": step.timestamp}
            transcript.add(message, model_name=step.model_name, **meta)
            transcript.add_results(
                (o for o in step.observations if o.source_call_id is not None), observation_note
            )
            nudge = step.extra.get("nudge") or legacy_nudge(step) if nudges else None
            if isinstance(nudge, str) and nudge:
                transcript.add_text("user", nudge, nudge=True)
        return transcript

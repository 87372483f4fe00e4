"""The agent's actions in any ATIF trajectory, read from its content alone.

An **action** is one tool call, a **finish** (the agent said it was done), or a **malformed** turn
(a reply that should have been a call and was not). Nothing here depends on notes only the built-in
loop writes: those notes (``extra.error``) are used when present, and the same facts are read off
the content otherwise.

Finish: a ``submit`` call (or another finishing tool: ``finish``, ``final_answer``,
``task_complete``, ...), mini-swe-agent's ``echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT``, the
trajectory's last agent message when it has no tool call, or the runner's own finish (a
``stop_reason`` such as ``submitted``/``completed`` after a last step that was a call, recorded as
a finish on that last step).

Turns: each user step starts a turn. A plain agent message that ends a non-final turn is the
agent's reply to the user, not an action; one in the middle of a turn (another agent step follows)
is narration, unless it is empty or looks like a tool call that failed to parse (malformed).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from harnessevolve.core.atif import Step, Trajectory
from harnessevolve.core.signals import Cause
from harnessevolve.evaluate.observations import tool_error
from harnessevolve.evaluate.tool_schemas import ToolSet

FINISH_TOOLS = frozenset(
    {
        "submit",
        "finish",
        "final_answer",
        "task_complete",
        "complete_task",
        "attempt_completion",
        "submit_answer",
    }
)
FINISH_COMMANDS = ("COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT", "MINI_SWE_AGENT_FINAL_OUTPUT")
FINISHED_STOPS = frozenset(
    {"submitted", "finished", "completed", "complete", "done", "endturn", "stop", "success", "taskcomplete"}
)
LIMIT_STOPS = frozenset(
    {
        "steplimit",
        "repeated",
        "maxsteps",
        "maxturns",
        "maxiterations",
        "limitsexceeded",
        "costlimit",
        "turnlimit",
    }
)
_LOOKS_LIKE_CALL = re.compile(
    r"""(["']?(name|function|arguments|tool)["']?\s*[:=])|<tool_call>|^\s*\{""", re.I
)

READ_ONLY_PROGRAMS = frozenset(
    {
        "ls",
        "pwd",
        "cat",
        "head",
        "tail",
        "find",
        "grep",
        "wc",
        "stat",
        "du",
        "df",
        "tree",
        "file",
        "which",
        "whoami",
    }
)
READ_WORDS = frozenset(
    [
        "get",
        "list",
        "ls",
        "read",
        "view",
        "show",
        "display",
        "search",
        "find",
        "check",
        "describe",
        "lookup",
        "query",
        "count",
        "inspect",
        "peek",
        "fetch",
        "retrieve",
        "estimate",
        "pwd",
        "cat",
        "head",
        "tail",
        "grep",
        "wc",
        "stat",
        "du",
        "tree",
        "diff",
        "status",
        "info",
    ]
)
WRITE_WORDS = frozenset(
    [
        "set",
        "add",
        "create",
        "delete",
        "remove",
        "update",
        "write",
        "send",
        "post",
        "book",
        "cancel",
        "buy",
        "sell",
        "place",
        "move",
        "copy",
        "make",
        "fill",
        "start",
        "stop",
        "lock",
        "unlock",
        "press",
        "release",
        "activate",
        "register",
        "purchase",
        "close",
        "edit",
        "resolve",
        "follow",
        "unfollow",
        "comment",
        "retweet",
        "mention",
        "fund",
        "authenticate",
        "touch",
        "mkdir",
        "rm",
        "rmdir",
        "mv",
        "cp",
        "echo",
        "put",
        "save",
    ]
)


def stop_key(value: Any) -> str:
    return re.sub(r"[^a-z]", "", str(value or "").lower())


@dataclass(frozen=True)
class Action:
    step_id: int
    tool: str | None
    arguments: dict[str, Any]
    error: str = ""
    """Why the action failed: the loop's note (``parse_error``, ``unknown_tool``, ``tool_error``, ...)
    or the same read from the content (``tool_error: exit code 1``)."""
    kind: str = "call"
    """``call``, ``finish`` or ``malformed``."""
    turn: int = 0
    observation: str | None = None
    """The call's result text; None when the trajectory has none for it."""
    raw_arguments: str | None = None
    message: str = ""

    @property
    def is_finish(self) -> bool:
        return self.kind == "finish"

    @property
    def tool_failed(self) -> bool:
        return self.error.startswith("tool_error")

    def as_dict(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"tool": self.tool, "arguments": self.arguments}
        if self.raw_arguments is not None:
            doc["raw_arguments"] = self.raw_arguments
        return doc


@dataclass(frozen=True)
class ActionList:
    actions: tuple[Action, ...]
    turns: int
    gaps: tuple[str, ...] = field(default=())
    finished: bool = False


def read_only(action: Action, tools: ToolSet) -> bool:
    """Whether the call only looks at things (so an unneeded one is harmless)."""
    schema = tools.get(action.tool)
    if schema is not None and schema.read_only is not None:
        return schema.read_only
    if action.tool is None or action.is_finish:
        return False
    if action.tool in ("bash", "shell", "run", "execute", "terminal"):
        command = str(action.arguments.get("command", action.arguments.get("cmd", ""))).strip()
        words = command.split()
        return (
            bool(words) and words[0] in READ_ONLY_PROGRAMS and not re.search(r">|\s-i\b|;|&&|\|\|", command)
        )
    name_words = set(re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", action.tool).lower().replace("-", "_").split("_"))
    return bool(name_words & READ_WORDS) and not name_words & WRITE_WORDS


def _is_finish_call(name: str, arguments: dict[str, Any]) -> bool:
    if name in FINISH_TOOLS:
        return True
    command = str(arguments.get("command", "")) if name in ("bash", "shell") else ""
    return any(marker in command for marker in FINISH_COMMANDS)


def _next_source(steps: tuple[Step, ...], index: int) -> str | None:
    for step in steps[index + 1 :]:
        if step.source != "system":
            return step.source
    return None


def read_actions(trajectory: Trajectory, tools: ToolSet) -> ActionList:
    """Every action of the trajectory, in order, with the gaps met while reading it."""
    steps = trajectory.steps
    stop = stop_key(trajectory.extra.get("stop_reason"))
    last_agent = max((i for i, s in enumerate(steps) if s.source == "agent"), default=-1)
    out: list[Action] = []
    gaps: list[str] = []
    elsewhere = _observations_elsewhere(trajectory, gaps)
    turn = 0
    for index, step in enumerate(steps):
        if step.source == "user":
            turn += step.is_user_turn  # a component's note (recovery) opens no turn
            continue
        if step.source != "agent":
            continue
        note = str(step.extra.get("error", "") or "")
        if not step.tool_calls:
            nxt = _next_source(steps, index)
            if note:
                out.append(Action(step.step_id, None, {}, note, "malformed", turn, message=step.message))
            elif index == last_agent and stop not in LIMIT_STOPS and not stop.endswith("error"):
                out.append(Action(step.step_id, None, {}, "", "finish", turn, message=step.message))
            elif nxt == "agent" and (not step.message.strip() or _LOOKS_LIKE_CALL.search(step.message)):
                out.append(
                    Action(step.step_id, None, {}, "no_tool_call", "malformed", turn, message=step.message)
                )
            continue
        out += _calls(step, note, turn, tools, gaps, elsewhere)
    finished = bool(out) and out[-1].is_finish
    if not finished and stop in FINISHED_STOPS and out and out[-1].kind == "call":
        out.append(Action(steps[last_agent].step_id, None, {}, "", "finish", out[-1].turn))
        finished = True
    return ActionList(tuple(out), turn, tuple(gaps), finished)


def _observations_elsewhere(trajectory: Trajectory, gaps: list[str]) -> dict[str, str]:
    """Results recorded on another step than their call's (a later system step, say), by call id;
    results naming no call of the trajectory at all are named in ``gaps``."""
    owner = {c.tool_call_id: s.step_id for s in trajectory.steps for c in s.tool_calls}
    elsewhere: dict[str, str] = {}
    for step in trajectory.steps:
        stray = []
        for result in step.observations:
            call_id = result.source_call_id
            if call_id is None or owner.get(call_id) == step.step_id:
                continue
            if call_id in owner:
                elsewhere.setdefault(call_id, result.content)
            else:
                stray.append(call_id)
        if stray:
            gaps.append(f"step {step.step_id}: observation of unknown call id(s) {', '.join(stray)} ignored")
    return elsewhere


def _calls(
    step: Step, note: str, turn: int, tools: ToolSet, gaps: list[str], elsewhere: dict[str, str]
) -> list[Action]:
    by_id = {o.source_call_id: o for o in step.observations if o.source_call_id is not None}
    unnamed = [o for o in step.observations if o.source_call_id is None]
    out = []
    for position, call in enumerate(step.tool_calls):
        result = by_id.get(call.tool_call_id)
        if result is None and len(unnamed) == len(step.tool_calls):
            result = unnamed[position]
        observation = result.content if result is not None else elsewhere.get(call.tool_call_id)
        if observation is None:
            gaps.append(
                f"step {step.step_id}: no observation for call {call.tool_call_id} ({call.function_name})"
            )
        error = _call_error(call.function_name, note, len(step.tool_calls))
        if not error and call.raw_arguments is not None:
            error = f"parse_error: arguments of {call.function_name} are not a JSON object"
        if not error and tools.offers(call.function_name) is False and call.function_name not in FINISH_TOOLS:
            error = f"unknown_tool: {call.function_name} (not among the offered tools)"
        if not error:
            found = tool_error(observation)
            error = f"tool_error: {found}" if found else ""
        kind = "finish" if _is_finish_call(call.function_name, call.arguments) else "call"
        out.append(
            Action(
                step.step_id,
                call.function_name,
                dict(call.arguments),
                error,
                kind,
                turn,
                observation,
                call.raw_arguments,
                step.message,
            )
        )
    return out


def _call_error(name: str, note: str, calls: int) -> str:
    """The part of the step's error note that concerns this call (all of it for a single call)."""
    if not note or calls == 1:
        return note
    parts = [p.strip() for p in note.split(";") if p.strip()]
    own = [p for p in parts if p.split(":", 1)[-1].strip().startswith(name) or name in p]
    return "; ".join(own)


def error_cause(act: Action) -> Cause | None:
    """The cause an action's own error says, before any comparison with a reference."""
    if act.error.startswith(("parse_error", "no_tool_call", "bad_arguments")) or (
        act.kind == "malformed" and not act.error
    ):
        return Cause.FORMAT_ERROR  # bad_arguments: the loop's note for arguments that are not JSON
    if act.error.startswith("unknown_tool"):
        return Cause.UNKNOWN_TOOL
    if act.error.startswith("tool_error: missing argument"):
        return Cause.MISSING_ARGUMENT
    if act.error.startswith("model_error"):
        return Cause.MODEL_ERROR
    if act.kind == "malformed":
        return Cause.FORMAT_ERROR
    return None

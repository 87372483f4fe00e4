"""The tool-use parts of a task: its own tools, the objects behind them, MCP servers, a simulated user.

A tool's name is 1-128 characters without white space. Names a provider would refuse (OpenAI-style
providers accept ``^[a-zA-Z0-9_-]{1,64}$``), such as ``math.add``, are offered to the model under a
safe name and mapped back (``models/tool_names.py``): trajectories and checks see the original.
A tool is implemented by

- ``implementation: {python: "module:function"}`` -- called with the call's arguments;
- ``implementation: {python: "module:Class.method"}`` -- a method of one instance of ``Class`` per
  rollout, shared by every tool of that class (so state persists across calls, never across
  rollouts); ``tool_setup["module:Class"]`` says how the instance is made;
- ``implementation: {command: "..."}`` -- a shell command, arguments in ``$ARG_<name>``;
- or an MCP server of ``mcp_servers`` (its tools are listed when the rollout starts).

Python code is located and checked here without being imported (``python_refs``); it runs only
inside the sandbox, in the rollout's tool server (``execute/tool_server.py``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harnessevolve.core.errors import BenchmarkError
from harnessevolve.core.python_refs import check_ref, parse_attr_ref, parse_ref

TOOL_NAME = re.compile(r"^\S{1,128}$")
STOP_TOKEN = "###STOP###"
USER_FRAME = (
    "\n\nYou are the user in a conversation with an AI assistant. Write only your next message to "
    "the assistant, in your own words. When your goal is met, or the assistant cannot help you "
    "further, reply with exactly {stop}."
)
"""What harnessevolve appends to a simulated user's instructions unless the task sets ``frame``
(``{stop}`` is the first stop token, ``{stops}`` all of them); ``frame: ""`` appends nothing."""
USER_OPENING = "(The assistant is waiting for your first message.)"
"""The message a simulated user answers with its first turn, unless the task sets ``opening``;
``opening: ""`` sends none (the user model sees only its system prompt)."""


@dataclass(frozen=True)
class TaskTool:
    """One tool of a task, as the model sees it plus how it runs."""

    name: str
    description: str
    parameters: dict[str, Any]
    python: str = ""
    """``module:function`` or ``module:Class.method`` (served by the rollout's tool server)."""
    command: str = ""
    """A shell command run in the workspace; arguments arrive as ``$ARG_<name>``."""


@dataclass(frozen=True)
class ObjectSetup:
    """How the instance behind ``module:Class.method`` tools is made: ``Class(**arguments)``, or,
    with ``method``, ``Class()`` then ``instance.method(**arguments)`` (a scenario loader)."""

    owner: str
    method: str = ""
    arguments: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class McpServer:
    """An MCP server spoken to over stdio; ``command[0]`` ``python`` is harnessevolve's interpreter."""

    name: str
    command: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)
    tools: tuple[str, ...] = ()
    """Offer only these of its tools (empty: all it lists)."""


@dataclass(frozen=True)
class SimulatedUser:
    """A user played by a model through litellm (as in tau2-bench), at temperature 0 by default.

    After each agent turn it is shown the conversation (its own messages as ``assistant``) and
    replies with the next user turn, or with ``stop`` when its goal is met. ``max_turns`` bounds
    the user turns (the instruction included); a user that never stops ends the rollout there.
    """

    model: str
    instructions: str
    stop: str = STOP_TOKEN
    """The first stop token (what ``{stop}`` in the frame names)."""
    max_turns: int = 8
    temperature: float = 0.0
    stops: tuple[tuple[str, str], ...] = ()
    """Every stop token with the end reason it records (``extra.user_end``); empty: ``stop`` alone,
    recorded as ``stop``."""
    frame: str = USER_FRAME
    opening: str = USER_OPENING
    scenario: str = ""
    """What the user wants, in the task's words (``user.scenario``): what demonstrations, proposers
    and the leakage gate know a user-opened task by, instead of ``instructions`` (the simulator's
    whole system prompt, persona and rules included). Empty: see ``Task.opening_text``."""

    @property
    def stop_tokens(self) -> tuple[tuple[str, str], ...]:
        return self.stops or ((self.stop, "stop"),)


def stop_tokens(spec: str | list[str] | dict[str, str]) -> tuple[tuple[str, str], ...]:
    """A task's ``user.stop`` as (token, end reason) pairs: one token (reason ``stop``), a list (each
    token's reason is its letters, lower-cased: ``###TRANSFER###`` -> ``transfer``), or a mapping."""
    if isinstance(spec, str):
        return ((spec, "stop"),)
    if isinstance(spec, dict):
        return tuple((token, str(reason)) for token, reason in spec.items())
    return tuple((token, re.sub(r"[^a-z0-9]+", "_", token.lower()).strip("_") or "stop") for token in spec)


def tool_name(name: str, *, file: str, field: str) -> str:
    if not isinstance(name, str) or not TOOL_NAME.match(name):
        raise BenchmarkError(
            f"tool name {name!r} is empty, over 128 characters or holds white space",
            file=file,
            field=field,
            hint="use 1-128 characters without white space (math.add is fine: it is offered to the "
            "model as math_add and mapped back)",
        )
    return name


def python_check(text: str, search: tuple[str, ...], *, file: str, field: str) -> None:
    """A ``python`` check's ``module:function``: parsed and located (never imported)."""
    ref = parse_attr_ref(text, file=file, field=field, form="module:function (a check is a function)")
    check_ref(ref, search, file=file, field=field)


def load_tool_use(doc: dict[str, Any], search: tuple[str, ...], *, root: Path, file: str) -> dict[str, Any]:
    """``tools``, ``tool_setup``, ``mcp_servers`` and ``user`` of a schema-checked task document."""
    tools: list[TaskTool] = []
    owners: set[str] = set()
    for i, spec in enumerate(doc.get("tools", [])):
        where = f"tools[{i}]"
        name = tool_name(spec["name"], file=file, field=f"{where}.name")
        if any(t.name == name for t in tools):
            raise BenchmarkError(f"tool {name!r} is defined twice", file=file, field=f"{where}.name")
        impl = spec.get("implementation", {})
        python = impl.get("python", "")
        if python:
            ref = parse_ref(python, file=file, field=f"{where}.implementation.python")
            check_ref(ref, search, file=file, field=f"{where}.implementation.python")
            if ref.method:
                owners.add(ref.owner)
        tools.append(TaskTool(name, spec["description"], spec["parameters"], python, impl.get("command", "")))
    setups = []
    for owner, setup in doc.get("tool_setup", {}).items():
        where = f"tool_setup.{owner}"
        ref = parse_ref(owner, file=file, field=where)
        if ref.method or owner not in owners:
            raise BenchmarkError(
                f"{owner!r} is not the class of any Python tool of this task",
                file=file,
                field=where,
                hint=f"classes with tools here: {', '.join(sorted(owners)) or 'none'}",
            )
        if setup.get("method"):
            check_ref(
                parse_ref(f"{owner}.{setup['method']}", file=file, field=where),
                search,
                file=file,
                field=where,
            )
        setups.append(ObjectSetup(owner, setup.get("method", ""), setup.get("arguments", {})))
    servers: list[McpServer] = []
    for i, spec in enumerate(doc.get("mcp_servers", [])):
        command = [
            str((root / part).resolve()) if j and (root / part).is_file() else part
            for j, part in enumerate(spec["command"])
        ]
        if any(s.name == spec["name"] for s in servers):
            raise BenchmarkError(
                f"MCP server {spec['name']!r} is named twice", file=file, field=f"mcp_servers[{i}]"
            )
        servers.append(
            McpServer(spec["name"], tuple(command), dict(spec.get("env", {})), tuple(spec.get("tools", [])))
        )
    user = None
    if "user" in doc:
        u = doc["user"]
        stops = stop_tokens(u.get("stop", STOP_TOKEN))
        user = SimulatedUser(
            model=u["model"],
            instructions=u["instructions"],
            stop=stops[0][0],
            max_turns=u.get("max_turns", 8),
            temperature=u.get("temperature", 0.0),
            stops=stops,
            frame=u.get("frame", USER_FRAME),
            opening=u.get("opening", USER_OPENING),
            scenario=u.get("scenario", ""),
        )
        if doc.get("turns"):
            raise BenchmarkError(
                "a task has either turns or a simulated user, not both", file=file, field="user"
            )
    return {"tools": tuple(tools), "tool_setup": tuple(setups), "mcp_servers": tuple(servers), "user": user}

"""Tool names as a model provider accepts them, and back.

OpenAI-style providers accept tool names matching ``^[a-zA-Z0-9_-]{1,64}$``; public function-calling
suites name tools ``math.add`` or ``GorillaFileSystem/ls``. :func:`~harnessevolve.models.acomplete`
offers each tool whose name is not safe under a safe one (:func:`safe_names`), renames the calls of
the conversation so far the same way, and maps the reply's calls back: everything after the model
call (the tool that runs, tool results, trajectories, checks) sees only the original name.

The mapping is deterministic (it depends only on the set of names offered) and collision-free: a
name that is safe keeps itself; an unsafe one has each other character replaced by ``_`` (cut to 64),
and, when that is taken by another tool, a short hash of the original name appended.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from typing import Any

SAFE_TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def safe_names(names: Iterable[str]) -> dict[str, str]:
    """``original -> safe`` for the names a provider would refuse (safe names are left out)."""
    unique = list(dict.fromkeys(names))
    taken = {n for n in unique if SAFE_TOOL_NAME.match(n)}
    out: dict[str, str] = {}
    for name in sorted(n for n in unique if not SAFE_TOOL_NAME.match(n)):
        base = re.sub(r"[^a-zA-Z0-9_-]", "_", name)[:64] or "tool"
        candidate, digest, n = base, hashlib.sha256(name.encode("utf-8")).hexdigest()[:8], 0
        while candidate in taken:
            suffix = f"_{digest}" + (f"_{n}" if n else "")
            candidate, n = base[: 64 - len(suffix)] + suffix, n + 1
        taken.add(candidate)
        out[name] = candidate
    return out


def tool_names_of(tools: Iterable[Mapping[str, Any]]) -> list[str]:
    """The function names of OpenAI-style tool definitions (``{"type": "function", "function": {...}}``)."""
    out = []
    for tool in tools:
        function = tool.get("function")
        if isinstance(function, Mapping) and isinstance(function.get("name"), str):
            out.append(function["name"])
    return out


def _renamed_function(holder: Mapping[str, Any], names: Mapping[str, str]) -> dict[str, Any]:
    """A copy of ``holder`` (a tool, a tool call or a tool choice) with its ``function.name`` mapped."""
    function = holder.get("function")
    if not isinstance(function, Mapping) or function.get("name") not in names:
        return dict(holder)
    return {**holder, "function": {**function, "name": names[function["name"]]}}


def rename_tools(tools: list[dict[str, Any]], names: Mapping[str, str]) -> list[dict[str, Any]]:
    return [_renamed_function(tool, names) for tool in tools]


def rename_messages(messages: list[dict[str, Any]], names: Mapping[str, str]) -> list[dict[str, Any]]:
    """Copies of the messages whose assistant tool calls and tool messages name a mapped tool."""
    out = []
    for original in messages:
        msg = original
        calls = msg.get("tool_calls")
        if isinstance(calls, list) and calls:
            msg = {
                **msg,
                "tool_calls": [_renamed_function(c, names) if isinstance(c, Mapping) else c for c in calls],
            }
        if msg.get("role") == "tool" and msg.get("name") in names:
            msg = {**msg, "name": names[msg["name"]]}
        out.append(msg)
    return out


def rename_tool_choice(choice: Any, names: Mapping[str, str]) -> Any:
    """``tool_choice`` naming one tool (``{"type": "function", "function": {"name": ...}}``), mapped."""
    return _renamed_function(choice, names) if isinstance(choice, Mapping) else choice

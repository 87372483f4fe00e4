"""The tools one rollout offers: the harness's, layered with the task's own and its MCP servers'.

Layering, by tool name:

- a harness tool with an implementation (``builtin`` or ``command``) is offered as it is;
- a task tool is offered with its own implementation (Python, shell command); when the harness has
  a tool of the same name, the harness's description and parameters are used instead of the
  task's: that is how the harness's tool edits apply across tasks. A harness tool file with no
  implementation (only name, description, parameters) exists for exactly this: it is never
  offered on its own;
- MCP tools listed by the task's servers come last; a name already taken is skipped.

``dispatch`` runs one call wherever its tool lives (``run_tool`` for harness/command tools, the
rollout's tool server for Python and MCP tools) and never raises.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harnessevolve.core.tasks import Task
from harnessevolve.execute.check_writes import check_write, content_before, is_write
from harnessevolve.execute.tool_server import ToolServer
from harnessevolve.execute.tools import ToolResult, run_tool
from harnessevolve.harness.model import Harness, ToolSpec
from harnessevolve.sandbox.base import Sandbox


@dataclass(frozen=True)
class OfferedTool:
    spec: ToolSpec
    served: bool = False
    """True when the rollout's tool server runs it (Python and MCP tools)."""
    local: Callable[[dict[str, Any]], ToolResult] | None = None
    """A runtime component's own tool (the progress notes), run in the loop's process."""


def rollout_tools(
    harness: Harness, task: Task, offered_by_server: list[dict[str, Any]]
) -> dict[str, OfferedTool]:
    """Name -> tool for one rollout, in the order the model sees them (see the module docstring)."""
    tools: dict[str, OfferedTool] = {
        t.name: OfferedTool(t) for t in harness.tools if t.builtin is not None or t.command is not None
    }
    for tool in task.tools:
        edit = harness.tool(tool.name)
        description = edit.description if edit else tool.description
        parameters = edit.parameters if edit else tool.parameters
        if tool.python:
            tools[tool.name] = OfferedTool(ToolSpec(tool.name, description, parameters), served=True)
        else:
            tools[tool.name] = OfferedTool(ToolSpec(tool.name, description, parameters, command=tool.command))
    for listed in offered_by_server:
        name = listed["name"]
        if name in tools:
            continue
        edit = harness.tool(name)
        spec = ToolSpec(
            name,
            edit.description if edit else listed["description"],
            edit.parameters if edit else listed["parameters"],
        )
        tools[name] = OfferedTool(spec, served=True)
    return tools


async def dispatch(
    tool: OfferedTool,
    arguments: dict[str, Any],
    workspace: Path,
    *,
    server: ToolServer | None,
    timeout_s: float,
    limit: int,
    sandbox: Sandbox | None,
    check_writes: bool = False,
) -> ToolResult:
    """Run one call of ``tool``; failures are ``ToolResult``s with ``error`` set. With
    ``check_writes``, a ``write_file`` call's result carries what ``execute/check_writes.py`` found."""
    if tool.local is not None:
        return tool.local(arguments)
    if not tool.served:
        checked = check_writes and is_write(tool.spec)
        before = content_before(workspace, arguments) if checked else None
        result = await run_tool(
            tool.spec, arguments, workspace, timeout_s=timeout_s, limit=limit, sandbox=sandbox
        )
        if not checked:
            return result
        return await check_write(arguments, workspace, result, before, timeout_s=timeout_s, sandbox=sandbox)
    missing = [n for n in tool.spec.parameters.get("required", []) if n not in arguments]
    if missing:
        return ToolResult(
            f"error: missing argument(s) {', '.join(missing)} for {tool.spec.name}", error="missing argument"
        )
    if server is None:
        return ToolResult(f"error: tool {tool.spec.name} has no server", error="no tool server")
    return await server.call(tool.spec.name, arguments)

"""The agent's tools: built-ins (bash, read_file, write_file, submit) and shell-command tools.

Commands run in the task workspace inside a sandbox (``execute/sandbox.py``; bubblewrap unless
told otherwise) with a scrubbed environment, a wall-clock limit and an output cap; when they end
or time out, their whole process group (and with it the sandbox) is killed.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harnessevolve.execute.sandbox import Sandbox, resolve_sandbox
from harnessevolve.execute.sandbox_launch import READ_CHUNK, finish_process
from harnessevolve.execute.workspace import inside, tool_env
from harnessevolve.harness.model import ToolSpec


@dataclass(frozen=True)
class ToolResult:
    output: str
    error: str | None = None
    """Set when the tool failed (non-zero exit, refused path, timeout ...)."""
    submitted: str | None = None
    """The answer, when the tool was ``submit``."""


def truncate(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[... {len(text) - limit} more characters cut]"


async def run_shell(
    command: str,
    workspace: Path,
    *,
    timeout_s: float,
    limit: int,
    env: dict[str, str] | None = None,
    sandbox: Sandbox | None = None,
) -> ToolResult:
    """Run ``bash -c command`` in ``sandbox`` (the default one when None); output and errors as a result."""
    sandbox = resolve_sandbox(sandbox)
    with sandbox.launch(command, workspace, tool_env(workspace, env)) as launch:
        try:
            return await _run_launch(
                launch.argv, launch.subprocess_options(), timeout_s=timeout_s, limit=limit
            )
        finally:
            await launch.clean_up()


async def _run_launch(
    argv: tuple[str, ...], options: dict[str, Any], *, timeout_s: float, limit: int
) -> ToolResult:
    proc = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        start_new_session=True,
        **options,
    )
    chunks: list[bytes] = []
    size = 0
    cap = limit * 4 + 1

    async def read_capped() -> None:
        nonlocal size
        assert proc.stdout is not None
        while size < cap:
            chunk = await proc.stdout.read(READ_CHUNK)
            if not chunk:
                return
            chunks.append(chunk)
            size += len(chunk)

    timed_out = False
    try:
        await asyncio.wait_for(read_capped(), timeout_s)
        if size < cap:  # the output ended: give the command the same time again to exit
            await asyncio.wait_for(proc.wait(), max(1.0, timeout_s))
    except TimeoutError:
        timed_out = True
    finally:
        await finish_process(proc)
    text = truncate(b"".join(chunks).decode(errors="replace"), limit)
    if timed_out:
        return ToolResult(text + f"\n[timed out after {timeout_s:g}s]", error="timeout")
    if proc.returncode:
        return ToolResult(text + f"\n[exit code {proc.returncode}]", error=f"exit code {proc.returncode}")
    return ToolResult(text)


def missing_arguments(spec: ToolSpec, arguments: dict[str, Any]) -> list[str]:
    return [name for name in spec.parameters.get("required", []) if name not in arguments]


async def run_tool(
    spec: ToolSpec,
    arguments: dict[str, Any],
    workspace: Path,
    *,
    timeout_s: float,
    limit: int,
    sandbox: Sandbox | None = None,
) -> ToolResult:
    """Run one tool call; failures come back as a ``ToolResult`` with ``error`` set, never raised."""
    missing = missing_arguments(spec, arguments)
    if missing:
        return ToolResult(
            f"error: missing argument(s) {', '.join(missing)} for {spec.name}", error="missing argument"
        )
    try:
        if spec.builtin == "submit":
            return ToolResult("submitted", submitted=str(arguments.get("answer", "")))
        if spec.builtin == "bash":
            return await run_shell(
                str(arguments["command"]), workspace, timeout_s=timeout_s, limit=limit, sandbox=sandbox
            )
        if spec.builtin == "read_file":
            path = inside(workspace, str(arguments["path"]))
            return ToolResult(truncate(path.read_text(encoding="utf-8", errors="replace"), limit))
        if spec.builtin == "write_file":
            path = inside(workspace, str(arguments["path"]))
            path.parent.mkdir(parents=True, exist_ok=True)
            content = str(arguments.get("content", ""))
            path.write_text(content, encoding="utf-8")
            return ToolResult(f"wrote {len(content.encode())} bytes to {arguments['path']}")
        if spec.command:
            env = {f"ARG_{k}": v if isinstance(v, str) else repr(v) for k, v in arguments.items()}
            return await run_shell(
                spec.command, workspace, timeout_s=timeout_s, limit=limit, env=env, sandbox=sandbox
            )
    except (OSError, PermissionError, ValueError) as exc:
        return ToolResult(f"error: {exc}", error=type(exc).__name__)
    return ToolResult(f"error: tool {spec.name} has no implementation", error="no implementation")

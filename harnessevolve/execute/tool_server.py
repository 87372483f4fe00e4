"""The host side of a rollout's tool server: a Python process in the sandbox serving the task's tools.

One ``ToolServer`` per rollout (started by the agent loop when the task has Python or MCP tools):
it launches ``tool_server_main.py`` through the rollout's sandbox, with the Python runtime, the
harnessevolve package, the task's ``python_path`` and its read-only paths bound read-only, and
talks JSON lines to it (protocol in ``tool_server_main``). The objects behind the tools live in
that process, so their state persists across calls of one rollout and never leaks into another.

A call past its time limit is interrupted inside the server; one that does not come back even
then (``HARD_MARGIN_S`` later) kills the server, and every later call of the rollout fails with
that cause. Nothing here raises for what a tool does: results are ``ToolResult``s.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import os
import shlex
import sys
from pathlib import Path
from typing import Any

import harnessevolve
from harnessevolve.core.errors import SandboxError
from harnessevolve.core.tasks import Benchmark, Task
from harnessevolve.sandbox.base import Sandbox, resolve_sandbox
from harnessevolve.sandbox.launch import finish_process
from harnessevolve.execute.tools import ToolResult, truncate
from harnessevolve.execute.workspace import tool_env

SERVER_MAIN = Path(__file__).with_name("tool_server_main.py")
HARD_MARGIN_S = 5.0
"""Extra seconds past a call's limit before the host gives up on the server and kills it."""
START_TIMEOUT_S = 60.0
"""Start-up (imports, object set-up, MCP handshakes) must finish within this."""
MAX_RESULT_BYTES = 1_000_000
"""A tool result larger than this, JSON-encoded, is a tool error (the model sees a cut view anyway)."""
STDERR_KEEP = 4000


class ToolServerError(Exception):
    """The tool server could not start (bad module, set-up that raised, MCP server that failed)."""


def python_runtime_paths() -> tuple[str, ...]:
    """Host paths Python needs inside the sandbox: this interpreter's installation and environment
    (``sys.prefix``: the declared dependencies installed there) and the harnessevolve package."""
    candidates = [sys.prefix, sys.base_prefix, str(Path(sys.executable).resolve().parent.parent)]
    candidates.append(str(Path(harnessevolve.__file__).resolve().parent))
    return tuple(dict.fromkeys(p for p in candidates if not p.startswith(("/usr/", "/etc/")) and p != "/usr"))


def with_read_only(sandbox: Sandbox, paths: tuple[str, ...]) -> Sandbox:
    """``sandbox`` showing ``paths`` read-only as well (a copy; the original is unchanged).

    A sandbox with no isolation (``none``) sees everything already; one that cannot add paths
    raises ``SandboxError``.
    """
    paths = tuple(p for p in dict.fromkeys(paths) if p)
    if not paths or sandbox.name == "none":
        return sandbox
    if not hasattr(sandbox, "read_only_paths"):
        raise SandboxError(
            f"the {sandbox.name} sandbox cannot show extra read-only paths ({', '.join(paths)})",
            hint="use --sandbox bwrap",
        )
    missing = [p for p in paths if not Path(p).exists()]
    if missing:
        raise SandboxError(
            f"read-only path {missing[0]} does not exist", field="--sandbox-ro", hint="check --sandbox-ro"
        )
    derived = copy.copy(sandbox)
    known = tuple(sandbox.read_only_paths)  # type: ignore[attr-defined]
    derived.read_only_paths = tuple(dict.fromkeys(known + paths))  # type: ignore[attr-defined]
    return derived


def result_text(result: Any) -> str:
    """What the model sees of a tool result: a string as it is, anything else as JSON."""
    return result if isinstance(result, str) else json.dumps(result)


class ToolServer:
    """A running tool server; use ``async with ToolServer.start(...) as server``."""

    def __init__(self, proc: asyncio.subprocess.Process, timeout_s: float, limit: int) -> None:
        self.proc = proc
        self.timeout_s = timeout_s
        self.limit = limit
        self.offered: list[dict[str, Any]] = []
        self.dead: str | None = None
        self._stderr = bytearray()
        self._drain = asyncio.ensure_future(self._read_stderr())

    @classmethod
    @contextlib.asynccontextmanager
    async def start(
        cls, task: Task, workspace: Path, *, sandbox: Sandbox | None, timeout_s: float, limit: int
    ) -> Any:
        """Launch the server for ``task`` in ``workspace``; raises ``ToolServerError`` when it
        cannot start (the cause in the message)."""
        chosen = with_read_only(resolve_sandbox(sandbox), python_runtime_paths() + task.python_path)
        command = "exec " + shlex.join([os.path.abspath(sys.executable), "-P", "-B", "-s", str(SERVER_MAIN)])
        env = tool_env(workspace, {"PYTHONDONTWRITEBYTECODE": "1", "PYTHONIOENCODING": "utf-8"})
        with chosen.launch(command, workspace, env) as launch:
            proc = await asyncio.create_subprocess_exec(
                *launch.argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,
                limit=4 * MAX_RESULT_BYTES + 65536,
                **launch.subprocess_options(),
            )
            server = cls(proc, timeout_s, limit)
            try:
                await server._configure(task)
                yield server
            finally:
                await server.close()
                await launch.clean_up()

    async def _configure(self, task: Task) -> None:
        config = {
            "python_path": list(task.python_path),
            "tools": [{"name": t.name, "python": t.python} for t in task.tools if t.python],
            "setup": [
                {"owner": s.owner, "method": s.method, "arguments": s.arguments} for s in task.tool_setup
            ],
            "mcp": [
                {"name": m.name, "command": list(m.command), "env": m.env, "tools": list(m.tools)}
                for m in task.mcp_servers
            ],
            "timeout_s": self.timeout_s,
            "max_result_bytes": MAX_RESULT_BYTES,
        }
        reply = await self._request(config, START_TIMEOUT_S)
        if not reply.get("ok"):
            raise ToolServerError(str(reply.get("error")))
        self.offered = list(reply.get("tools", []))

    async def _request(self, request: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        if self.dead:
            return {"ok": False, "error": self.dead}
        assert self.proc.stdin is not None and self.proc.stdout is not None
        try:
            self.proc.stdin.write((json.dumps(request) + "\n").encode())
            await self.proc.stdin.drain()
            line = await asyncio.wait_for(self.proc.stdout.readline(), timeout_s)
        except TimeoutError:
            await self._kill(f"the tool server did not answer within {timeout_s:g}s and was stopped")
            return {"ok": False, "error": self.dead}
        except (OSError, ValueError, asyncio.LimitOverrunError) as exc:
            await self._kill(f"the tool server failed: {type(exc).__name__}: {exc}")
            return {"ok": False, "error": self.dead}
        if not line:
            await self._kill("the tool server exited")
            return {"ok": False, "error": self.dead}
        try:
            return json.loads(line)
        except json.JSONDecodeError:
            return {"ok": False, "error": f"the tool server wrote a non-JSON reply: {line[:200]!r}"}

    async def call(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        reply = await self._request(
            {"op": "call", "tool": name, "arguments": arguments}, self.timeout_s + HARD_MARGIN_S
        )
        if reply.get("ok"):
            return ToolResult(truncate(result_text(reply.get("result")), self.limit))
        error = str(reply.get("error"))
        return ToolResult(f"error: {error}", error=error.splitlines()[0][:300])

    async def state(self) -> dict[str, Any] | None:
        """The server's state (``objects`` and ``calls``), or None when it is gone."""
        reply = await self._request({"op": "state"}, START_TIMEOUT_S)
        return reply.get("state") if reply.get("ok") else None

    async def _kill(self, why: str) -> None:
        stderr = self.stderr_tail()
        self.dead = why + (f" (stderr: {stderr[-300:]})" if stderr else "")
        await finish_process(self.proc)

    def stderr_tail(self) -> str:
        return self._stderr.decode(errors="replace").strip()

    async def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        while chunk := await self.proc.stderr.read(65536):
            self._stderr += chunk
            del self._stderr[:-STDERR_KEEP]

    async def close(self) -> None:
        if self.proc.returncode is None:
            with contextlib.suppress(OSError):
                assert self.proc.stdin is not None
                self.proc.stdin.close()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.proc.wait(), 2)
        await finish_process(self.proc)
        self._drain.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self._drain


def needs_python(benchmark: Benchmark) -> bool:
    """True when some task has Python or MCP tools or a ``python`` check."""
    return any(t.needs_tool_server or any(c.type == "python" for c in t.checks) for t in benchmark.tasks)


def benchmark_sandbox(
    sandbox: Sandbox | None, benchmark: Benchmark, extra: tuple[str, ...] = ()
) -> Sandbox | None:
    """The run's sandbox for ``benchmark``: showing ``extra`` (``--sandbox-ro``) and every task's
    read-only paths, plus the Python runtime and the tasks' ``python_path`` when the benchmark has
    Python code (so its tool servers and checks run there). Those Python paths are marked
    (``code_only_paths``): the agent's own commands never see them (``agent_view``), since they
    hold the benchmark's files (task files with answers, BFCL's ground truth). None stays None
    when nothing needs adding."""
    paths = list(extra)
    for task in benchmark.tasks:
        paths += task.read_only_paths
    code: list[str] = []
    if needs_python(benchmark):
        code += python_runtime_paths()
        for task in benchmark.tasks:
            code += task.python_path
    if not paths and not code:
        return sandbox
    derived = with_read_only(resolve_sandbox(sandbox), tuple(paths + code))
    if derived.name != "none":
        shown = set(paths) | set(getattr(sandbox, "read_only_paths", ()))
        derived.code_only_paths = tuple(p for p in dict.fromkeys(code) if p not in shown)  # type: ignore[attr-defined]
    return derived


def agent_view(sandbox: Sandbox | None) -> Sandbox | None:
    """``sandbox`` without its ``code_only_paths``: what the agent's own commands (bash, command
    tools) run in. The tool server and checks keep the full view."""
    hidden = set(getattr(sandbox, "code_only_paths", ()))
    if sandbox is None or not hidden:
        return sandbox
    view = copy.copy(sandbox)
    view.read_only_paths = tuple(p for p in view.read_only_paths if p not in hidden)  # type: ignore[attr-defined]
    view.code_only_paths = ()  # type: ignore[attr-defined]
    return view

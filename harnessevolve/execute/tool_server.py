"""The host side of a rollout's tool server: a Python process in the sandbox serving the task's tools.

One ``ToolServer`` per rollout (started by the agent loop when the task has Python or MCP tools):
it launches ``tool_server_main.py`` through the rollout's sandbox as the tools see it
(``tools_view``): the Python runtime, the harnessevolve package, the task's ``python_path`` and its
read-only paths bound read-only, the benchmark's answers (its ``tasks/``, references, check-only
files) masked even inside them, and
talks JSON lines to it (protocol in ``tool_server_main``). The objects behind the tools live in
that process, so their state persists across calls of one rollout and never leaks into another.

A call past its time limit is interrupted inside the server; one that does not come back even
then (``HARD_MARGIN_S`` later) kills the server, and every later call of the rollout fails with
that cause. Nothing here raises for what a tool does: results are ``ToolResult``s.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shlex
import sys
from pathlib import Path
from typing import Any

import harnessevolve
from harnessevolve.core.tasks import Benchmark, Task
from harnessevolve.execute.call_repair import describe
from harnessevolve.execute.tools import ToolResult, truncate
from harnessevolve.execute.workspace import tool_env
from harnessevolve.sandbox.base import Sandbox, resolve_sandbox, tools_view, with_paths
from harnessevolve.sandbox.base import agent_view as sandbox_agent_view
from harnessevolve.sandbox.launch import finish_process
from harnessevolve.sandbox.python_paths import extra_site_dirs
from harnessevolve.sandbox.views import folder_private, protected_folders, refuse_read_only, suite_private

SERVER_MAIN = Path(__file__).with_name("tool_server_main.py")
HARD_MARGIN_S = 5.0
"""Extra seconds past a call's limit before the host gives up on the server and kills it."""
START_TIMEOUT_S = 60.0
"""Start-up (imports, object set-up, MCP handshakes) must finish within this."""
MAX_RESULT_BYTES = 1_000_000
"""A tool result larger than this, JSON-encoded, is a tool error (the model sees a cut view anyway)."""
STDERR_KEEP = 4000

SIGNATURE_ERROR = re.compile(
    r"unexpected keyword argument|missing \d+ required (?:positional |keyword-only )?argument|"
    r"takes (?:\d+|from \d+ to \d+) positional arguments? but \d+"
)
"""A Python tool's call-signature ``TypeError`` (its message names no parameter it does take)."""


class ToolServerError(Exception):
    """The tool server could not start (bad module, set-up that raised, MCP server that failed)."""


def python_runtime_paths() -> tuple[str, ...]:
    """Host paths Python needs inside the sandbox: this interpreter's installation and environment
    (``sys.prefix``: the declared dependencies installed there) and the harnessevolve package."""
    candidates = [sys.prefix, sys.base_prefix, str(Path(sys.executable).resolve().parent.parent)]
    candidates.append(str(Path(harnessevolve.__file__).resolve().parent))
    candidates += extra_site_dirs(candidates)
    return tuple(dict.fromkeys(p for p in candidates if not p.startswith(("/usr/", "/etc/")) and p != "/usr"))


def with_read_only(sandbox: Sandbox, paths: tuple[str, ...]) -> Sandbox:
    """``sandbox`` showing ``paths`` read-only to everyone as well (a copy; the original is
    unchanged). A sandbox with no isolation (``none``) sees everything already."""
    return with_paths(sandbox, read_only=tuple(p for p in paths if p))


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
        self.parameters: dict[str, dict[str, Any]] = {}
        """The task's Python tools' JSON-schema parameters, named in a call-signature error."""
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
        chosen = tools_view(
            with_paths(
                resolve_sandbox(sandbox),
                code_only=python_runtime_paths() + task.python_path,
                private=folder_private(task.python_path),
            )
        )
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
        self.parameters = {t.name: dict(t.parameters or {}) for t in task.tools if t.python}

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
        text = f"error: {error}"
        if name in self.parameters and SIGNATURE_ERROR.search(error):  # a Python TypeError names
            # the argument it refused, never the ones it takes: say them, as repair_calls does
            schema = self.parameters[name]
            found = schema.get("properties")
            properties: dict[str, Any] = found if isinstance(found, dict) else {}
            text += f"\nIts parameters: {describe(properties, list(schema.get('required') or []))}."
        return ToolResult(text, error=error.splitlines()[0][:300])

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


def benchmark_private(benchmark: Benchmark) -> tuple[str, ...]:
    """What of ``benchmark`` hands out answers, hidden from the agent and its tools: its tasks and
    references, every check's own files (``Check.mounts``), and the tasks of any ``python_path``
    folder that is itself a benchmark folder."""
    private = list(suite_private(benchmark.root))
    if benchmark.references_dir.exists():
        private.append(str(benchmark.references_dir.resolve()))
    for task in benchmark.tasks:
        private += [m for check in task.checks for m in check.mounts]
        private += folder_private(task.python_path)
    return tuple(dict.fromkeys(private))


def benchmark_sandbox(sandbox: Sandbox | None, benchmark: Benchmark, extra: tuple[str, ...] = ()) -> Sandbox:
    """The run's sandbox for ``benchmark`` (the checks' view: everything they need): showing
    ``extra`` (``--sandbox-ro``) and every task's read-only paths to everyone; the Python runtime
    and the tasks' ``python_path`` (when the benchmark has Python code) to the benchmark's own code
    only (``code_only``); the benchmark's answers (``benchmark_private``) and its folder marked, so
    that ``agent_view`` (the agent's commands and programs) and ``tools_view`` (its tool server)
    mask them."""
    refuse_read_only(extra, protected_folders(benchmark=benchmark.root.resolve()))
    paths = list(extra)
    for task in benchmark.tasks:
        paths += task.read_only_paths
    code: list[str] = []
    if needs_python(benchmark):
        code += python_runtime_paths()
        for task in benchmark.tasks:
            code += task.python_path
    return with_paths(
        resolve_sandbox(sandbox),
        read_only=tuple(paths),
        code_only=tuple(code),
        private=benchmark_private(benchmark),
        suites=(str(benchmark.root.resolve()),),
    )


def agent_view(sandbox: Sandbox | None) -> Sandbox | None:
    """``sandbox`` as the agent's own commands (bash, command tools) see it (``sandbox.base.
    agent_view``: no code-only paths, answers masked); None stays None (the default sandbox)."""
    return None if sandbox is None else sandbox_agent_view(sandbox)

"""The per-rollout tool server: runs INSIDE the sandbox, serving a task's Python tools and MCP servers.

Started by ``execute/tool_server.py`` as ``python tool_server_main.py`` (this file, by path, with
the standard library only; ``mcp`` is imported only when the task has MCP servers). It speaks JSON
lines: its stdin carries requests, its stdout only replies (anything the tools print goes to
stderr). The first request is the configuration::

    {"python_path": [...], "tools": [{"name", "python"}], "setup": [{"owner", "method", "arguments"}],
     "mcp": [{"name", "command", "env", "tools"}], "timeout_s": 20, "max_result_bytes": 1000000}
    -> {"ok": true, "tools": [MCP tools: {"name", "description", "parameters", "server"}]}

then ``{"op": "call", "tool", "arguments"}`` -> ``{"ok": true, "result": JSON}`` or
``{"ok": false, "error"}``; ``{"op": "state"}`` -> ``{"ok": true, "state": {"objects", "calls"}}``.

One instance per ``module:Class`` lives for the whole rollout, so state persists across calls.
A call that takes longer than ``timeout_s`` is interrupted (SIGALRM) and reported; a result that
is not JSON, or larger than ``max_result_bytes`` once encoded, is a tool error.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import json
import os
import signal
import sys
import traceback
from typing import Any


class ToolTimeout(Exception):
    pass


def _alarm(signum: int, frame: object) -> None:
    raise ToolTimeout


MAX_STATE_NODES = 200_000
"""A state snapshot stops descending after this many values (the rest is marked as cut)."""


def jsonable(value: Any) -> Any:
    """A JSON view of a tool object's state: containers recursively, objects by their public
    attributes; an object met again on the same path (a parent link) is written as a marker."""
    budget = [MAX_STATE_NODES]

    def walk(item: Any, path: frozenset[int], depth: int) -> Any:
        budget[0] -= 1
        if budget[0] < 0 or depth > 60:
            return "<cut>"
        if item is None or isinstance(item, bool | int | str):
            return item
        if isinstance(item, float):
            return item if item == item and abs(item) != float("inf") else repr(item)
        if id(item) in path:
            return f"<cycle: {type(item).__name__}>"
        inner = path | {id(item)}
        if isinstance(item, dict):
            return {str(k): walk(v, inner, depth + 1) for k, v in item.items()}
        if isinstance(item, list | tuple):
            return [walk(v, inner, depth + 1) for v in item]
        if isinstance(item, set | frozenset):
            return sorted((walk(v, inner, depth + 1) for v in item), key=repr)
        if hasattr(item, "__dict__"):
            attrs = {k: walk(v, inner, depth + 1) for k, v in vars(item).items() if not k.startswith("_")}
            return {"__class__": type(item).__name__, **attrs}
        return repr(item)

    return walk(value, frozenset(), 0)


def resolve(ref: str) -> tuple[str, Any, str]:
    """``module:attr[.method]`` -> (owner, the imported attribute, method name or "")."""
    module, _, rest = ref.partition(":")
    attr, _, method = rest.partition(".")
    obj = importlib.import_module(module)
    try:
        return f"{module}:{attr}", getattr(obj, attr), method
    except AttributeError:
        raise LookupError(f"module {module!r} has no attribute {attr!r}") from None


class Server:
    def __init__(self, config: dict[str, Any]) -> None:
        for folder in reversed(config.get("python_path", [])):
            sys.path.insert(0, folder)
        self.timeout_s = float(config.get("timeout_s", 20))
        self.max_bytes = int(config.get("max_result_bytes", 1_000_000))
        self.calls: list[dict[str, Any]] = []
        self.objects: dict[str, Any] = {}
        self.functions: dict[str, Any] = {}
        self.mcp_tools: dict[str, tuple[Any, str]] = {}
        self.stack = contextlib.AsyncExitStack()
        setups = {s["owner"]: s for s in config.get("setup", [])}
        for tool in config.get("tools", []):
            owner, target, method = resolve(tool["python"])
            if not method:
                if not callable(target):
                    raise LookupError(f"{tool['python']} is not callable")
                self.functions[tool["name"]] = target
                continue
            if owner not in self.objects:
                self.objects[owner] = self._make(target, setups.get(owner, {}), owner)
            bound = getattr(self.objects[owner], method, None)
            if not callable(bound):
                raise LookupError(f"{owner} has no method {method!r}")
            self.functions[tool["name"]] = bound

    def _make(self, cls: Any, setup: dict[str, Any], owner: str) -> Any:
        with self._time_limit():
            if setup.get("method"):
                instance = cls()
                getattr(instance, setup["method"])(**setup.get("arguments", {}))
                return instance
            return cls(**setup.get("arguments", {}))

    @contextlib.contextmanager
    def _time_limit(self) -> Any:
        signal.signal(signal.SIGALRM, _alarm)
        signal.setitimer(signal.ITIMER_REAL, self.timeout_s)
        try:
            yield
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)

    async def start_mcp(self, servers: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if not servers:
            return []
        from mcp import ClientSession, StdioServerParameters
        from mcp.client.stdio import stdio_client

        offered = []
        for server in servers:
            command = [sys.executable if c in ("python", "python3") else c for c in server["command"]]
            env = {**{k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "PYTHONPATH")}}
            params = StdioServerParameters(
                command=command[0], args=command[1:], env={**env, **server.get("env", {})}
            )
            read, write = await self.stack.enter_async_context(stdio_client(params, errlog=sys.stderr))
            session = await self.stack.enter_async_context(ClientSession(read, write))
            await asyncio.wait_for(session.initialize(), self.timeout_s)
            listed = await asyncio.wait_for(session.list_tools(), self.timeout_s)
            wanted = set(server.get("tools") or [])
            for tool in listed.tools:
                if wanted and tool.name not in wanted:
                    continue
                schema = getattr(tool, "input_schema", None) or getattr(tool, "inputSchema", None) or {}
                self.mcp_tools[tool.name] = (session, server["name"])
                offered.append(
                    {
                        "name": tool.name,
                        "description": tool.description or tool.name,
                        "parameters": schema or {"type": "object", "properties": {}},
                        "server": server["name"],
                    }
                )
            missing = wanted - {t["name"] for t in offered if t["server"] == server["name"]}
            if missing:
                raise LookupError(
                    f"MCP server {server['name']!r} has no tool(s) {', '.join(sorted(missing))}"
                )
        return offered

    async def call(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        # The log keeps copies: a tool may keep (and later change) the very lists it was given or returned.
        entry: dict[str, Any] = {"tool": name, "arguments": json.loads(json.dumps(arguments))}
        self.calls.append(entry)
        try:
            result = await self._invoke(name, arguments)
        except ToolTimeout:
            reply = {"ok": False, "error": f"timed out after {self.timeout_s:g}s"}
        except Exception as exc:  # noqa: BLE001 - the tool's own failure is the model's observation
            reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}".splitlines()[0][:1000]}
        else:
            reply = self._encoded(result)
        logged = json.loads(json.dumps(reply["result"])) if reply.get("ok") else None
        entry.update({"result": logged, "error": reply.get("error")})
        return reply

    def _encoded(self, result: Any) -> dict[str, Any]:
        try:
            size = len(json.dumps(result, allow_nan=False))
        except (TypeError, ValueError, RecursionError):
            return {"ok": False, "error": f"returned a non-JSON value of type {type(result).__name__}"}
        if size > self.max_bytes:
            return {"ok": False, "error": f"result is {size} bytes, more than the {self.max_bytes}-byte cap"}
        return {"ok": True, "result": result}

    async def _invoke(self, name: str, arguments: dict[str, Any]) -> Any:
        if name in self.mcp_tools:
            session, _ = self.mcp_tools[name]
            try:
                result = await asyncio.wait_for(session.call_tool(name, arguments), self.timeout_s)
            except TimeoutError:
                raise ToolTimeout from None
            text = "\n".join(getattr(c, "text", "") or "" for c in result.content)
            if getattr(result, "is_error", None) or getattr(result, "isError", None):
                raise RuntimeError(text or "the MCP tool failed")
            return text
        if name not in self.functions:
            raise LookupError(f"unknown tool {name!r}")
        with self._time_limit():
            return self.functions[name](**arguments)

    def state(self) -> dict[str, Any]:
        objects: dict[str, Any] = {}
        for owner, obj in self.objects.items():
            try:
                custom = getattr(obj, "harnessevolve_state", None)
                objects[owner] = jsonable(custom() if callable(custom) else obj)
            except Exception as exc:  # noqa: BLE001 - a state that cannot be read is recorded as such
                objects[owner] = {"__error__": f"{type(exc).__name__}: {exc}"[:500]}
        return {"objects": objects, "calls": jsonable(self.calls)}


async def serve(reader: Any, write: Any) -> None:
    loop = asyncio.get_running_loop()

    async def next_request() -> dict[str, Any] | None:
        line = await loop.run_in_executor(None, reader.readline)
        return json.loads(line) if line.strip() else None

    config = await next_request()
    try:
        server = Server(config or {})
        offered = await server.start_mcp((config or {}).get("mcp", []))
    except BaseException as exc:  # noqa: BLE001 - reported to the host, which records it
        if isinstance(exc, ToolTimeout):
            exc = TimeoutError("tool set-up timed out")
        detail = "".join(traceback.format_exception_only(type(exc), exc)).strip().splitlines()[-1]
        write({"ok": False, "error": f"tool set-up failed: {detail}"[:2000]})
        return
    write({"ok": True, "tools": offered})
    try:
        while (request := await next_request()) is not None:
            try:
                if request.get("op") == "call":
                    reply = await server.call(str(request.get("tool")), request.get("arguments") or {})
                elif request.get("op") == "state":
                    reply = {"ok": True, "state": server.state()}
                else:
                    reply = {"ok": False, "error": f"unknown op {request.get('op')!r}"}
            except BaseException as exc:  # noqa: BLE001 - the server itself keeps serving
                if isinstance(exc, KeyboardInterrupt | SystemExit):
                    raise
                reply = {"ok": False, "error": f"tool server: {type(exc).__name__}: {exc}"[:1000]}
            write(reply)
    finally:
        with contextlib.suppress(Exception):
            await server.stack.aclose()


def main() -> None:
    if sys.path and os.path.abspath(sys.path[0]) == os.path.dirname(os.path.abspath(__file__)):
        sys.path.pop(0)  # this folder's modules (tools.py, ...) must not shadow the task's
    protocol = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)  # what the tools print goes to stderr, never into the protocol
    sys.stdout = sys.stderr

    def write(reply: dict[str, Any]) -> None:
        protocol.write(json.dumps(reply) + "\n")
        protocol.flush()

    asyncio.run(serve(sys.stdin, write))


if __name__ == "__main__":
    main()

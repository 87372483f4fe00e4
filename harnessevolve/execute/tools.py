"""The agent's tools: built-ins (bash, read_file, write_file, submit) and shell-command tools.

Commands run in the task workspace inside a sandbox (``sandbox/base.py``; bubblewrap unless
told otherwise) with a scrubbed environment, a wall-clock limit and an output cap; when they end
or time out, their whole process group (and with it the sandbox) is killed. A whole-rollout
limit the command reached (memory, processes, workspace size or files) is named in the result.

``read_file`` and ``write_file`` run in our own process, so they must never block and never leave
the workspace: the path is resolved and must stay inside it, then opened one component at a time
with ``O_NOFOLLOW`` (a symlink swapped in meanwhile is refused, not followed) and ``O_NONBLOCK``,
and only a regular file (``fstat``) is read or written -- never a FIFO, socket or device.
"""

from __future__ import annotations

import asyncio
import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harnessevolve.execute.workspace import inside, tool_env
from harnessevolve.harness.model import ToolSpec
from harnessevolve.sandbox.base import Sandbox, resolve_sandbox, started
from harnessevolve.sandbox.launch import READ_CHUNK, finish_process, give_to_workspace
from harnessevolve.sandbox.spawn import SpawnedProcess


@dataclass(frozen=True)
class ToolResult:
    output: str
    error: str | None = None
    """Set when the tool failed (non-zero exit, refused path, timeout ...)."""
    submitted: str | None = None
    """The answer, when the tool was ``submit``."""
    note: str = ""
    """What ``loop.check_writes`` found in the file a ``write_file`` call wrote (also in ``output``)."""


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
    async with started(sandbox, command, workspace, tool_env(workspace, env)) as run:
        result = await _read_process(run.process, timeout_s=timeout_s, limit=limit)
        run.failed = result.error is not None
    if run.limit_notes:
        return ToolResult("\n".join([result.output, *run.limit_notes]), error=result.error or "rollout limit")
    return result


async def _read_process(proc: SpawnedProcess, *, timeout_s: float, limit: int) -> ToolResult:
    """Read the started command's output up to the cap and wait for it, within ``timeout_s``; then
    kill what is left of it (``finish_process``)."""
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
            data = read_workspace_file(workspace, str(arguments["path"]), limit * 4 + 1)
            return ToolResult(truncate(data.decode("utf-8", errors="replace"), limit))
        if spec.builtin == "write_file":
            content = str(arguments.get("content", ""))
            size = write_workspace_file(workspace, str(arguments["path"]), content.encode())
            return ToolResult(f"wrote {size} bytes to {arguments['path']}")
        if spec.command:
            # Strings as they are; numbers, booleans, lists, objects and null JSON-encoded.
            env = {f"ARG_{k}": v if isinstance(v, str) else json.dumps(v) for k, v in arguments.items()}
            return await run_shell(
                spec.command, workspace, timeout_s=timeout_s, limit=limit, env=env, sandbox=sandbox
            )
    except (OSError, PermissionError, ValueError) as exc:
        return ToolResult(f"error: {exc}", error=type(exc).__name__)
    return ToolResult(f"error: tool {spec.name} has no implementation", error="no implementation")


# --- the file tools: regular files inside the workspace only, never blocking ------------------------

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _parts(workspace: Path, relative: str) -> tuple[Path, list[str]]:
    """The workspace root and the path's components below it (resolved; refused when outside)."""
    root = workspace.resolve()
    target = inside(root, relative)
    parts = list(target.relative_to(root).parts)
    if not parts:
        raise IsADirectoryError(f"path {relative!r} is the workspace itself, not a file")
    return root, parts


def _open_dirs(root: Path, folders: list[str], *, create: bool) -> tuple[int, list[Path]]:
    """An fd of ``root/folders...``, walked with O_NOFOLLOW (made on the way when ``create``)."""
    fd = os.open(root, _DIR_FLAGS)
    made: list[Path] = []
    here = root
    try:
        for name in folders:
            here = here / name
            if create:
                try:
                    os.mkdir(name, 0o755, dir_fd=fd)
                    made.append(here)
                except FileExistsError:
                    pass
            try:
                child = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                where = here.relative_to(root)
                raise PermissionError(f"{where} is not a folder inside the workspace") from exc
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd, made


def _refuse_unless_regular(fd: int, relative: str) -> None:
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        kind = "a folder" if stat.S_ISDIR(mode) else "not a regular file (a FIFO, socket or device)"
        raise PermissionError(f"{relative!r} is {kind}; the file tools read and write regular files only")


def _open_regular(folder: int, name: str, flags: int, relative: str, refusals: dict[int, str]) -> int:
    """The regular file ``name`` in the open folder ``folder`` (closed here either way), opened
    with ``flags``: an open failing with an errno of ``refusals`` raises ``PermissionError`` with
    its message, and so does a file that is not regular."""
    try:
        try:
            fd = os.open(name, flags, 0o644, dir_fd=folder)
        except OSError as exc:
            if exc.errno in refusals:
                raise PermissionError(refusals[exc.errno]) from exc
            raise
    finally:
        os.close(folder)
    try:
        _refuse_unless_regular(fd, relative)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_workspace_file(workspace: Path, relative: str, max_bytes: int) -> bytes:
    """Up to ``max_bytes`` of a regular file inside the workspace (never follows a symlink out,
    never blocks: FIFOs, sockets and devices are refused)."""
    root, parts = _parts(workspace, relative)
    folder, _ = _open_dirs(root, parts[:-1], create=False)
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    # ELOOP: the last component became a symlink
    fd = _open_regular(folder, parts[-1], flags, relative, {40: f"{relative!r} is a symlink; not followed"})
    try:
        chunks, size = [], 0
        while size < max_bytes:
            chunk = os.read(fd, min(READ_CHUNK, max_bytes - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def write_workspace_file(workspace: Path, relative: str, data: bytes) -> int:
    """Write ``data`` to a regular file inside the workspace (folders made as needed, handed to the
    workspace's uid); never through a symlink, never to a FIFO, socket or device. Bytes written."""
    root, parts = _parts(workspace, relative)
    folder, made = _open_dirs(root, parts[:-1], create=True)
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    not_written = f"{relative!r} is not a regular file; not written"
    # ELOOP (a symlink), ENXIO (a FIFO nobody reads)
    fd = _open_regular(folder, parts[-1], flags, relative, {40: not_written, 6: not_written})
    try:
        os.ftruncate(fd, 0)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)
    give_to_workspace(root, [*made, root.joinpath(*parts)])
    return len(data)

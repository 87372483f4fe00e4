"""Task workspaces: a fresh temporary folder per rollout, set up from the task, removed after.

When we are root the folder is a tmpfs of its own, ``workspace_mb`` large with room for
``workspace_files`` files (``SandboxLimits``; see ``sandbox_limits``): a rollout cannot fill the
host's disk or inode table, and removing the workspace is an unmount.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile
from pathlib import Path

from harnessevolve.core.tasks import Task
from harnessevolve.sandbox.base import Sandbox, launched, resolve_sandbox
from harnessevolve.sandbox.launch import SandboxLimits, finish_process, release_workspace, remove_tree
from harnessevolve.sandbox.limits import mount_workspace, unmount_workspace

SAFE_ENV_KEYS = ("LANG", "LC_ALL", "TZ")
SANDBOX_PATH = "/usr/local/bin:/usr/bin:/bin"
"""The PATH every sandboxed command gets: fixed, never the host's (which may name folders the
sandbox cannot see, or ones a user can write)."""


class WorkspaceError(Exception):
    """The task's setup failed; the rollout is recorded as a setup error, not a crash."""


def tool_env(workspace: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment LLM-written commands see: no API keys or other secrets of the host, and a
    fixed minimal PATH."""
    env = {k: os.environ[k] for k in SAFE_ENV_KEYS if k in os.environ}
    env.update(
        {"PATH": SANDBOX_PATH, "HOME": str(workspace), "TMPDIR": str(workspace), "PWD": str(workspace)}
    )
    env.update(extra or {})
    return env


def inside(workspace: Path, relative: str) -> Path:
    """Resolve ``relative`` inside ``workspace``; anything that escapes it (.., symlinks) is refused."""
    root = workspace.resolve()
    target = (root / relative).resolve()
    if target != root and root not in target.parents:
        raise PermissionError(f"path {relative!r} is outside the workspace")
    return target


async def create_workspace(task: Task, *, timeout_s: float = 60.0, sandbox: Sandbox | None = None) -> Path:
    """A fresh workspace with the task's files; its setup commands run in ``sandbox`` (default when None)."""
    chosen = resolve_sandbox(sandbox) if (sandbox is not None or task.setup_commands) else None
    limits = chosen.limits if chosen is not None else SandboxLimits()
    workspace = Path(tempfile.mkdtemp(prefix=f"he-{task.id}-")).resolve()
    try:
        await asyncio.to_thread(
            mount_workspace, workspace, size_mb=limits.workspace_mb, files=limits.workspace_files
        )
        for rel, content in task.setup_files.items():
            path = inside(workspace, rel)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content, encoding="utf-8")
        for command in task.setup_commands:
            assert chosen is not None
            await _run_setup_command(command, workspace, timeout_s, chosen)
    except BaseException:
        await remove_workspace_async(workspace)
        raise
    return workspace


async def _run_setup_command(command: str, workspace: Path, timeout_s: float, sandbox: Sandbox) -> None:
    async with launched(sandbox, command, workspace, tool_env(workspace)) as launch:
        proc = await asyncio.create_subprocess_exec(
            *launch.argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
            **launch.subprocess_options(),
        )
        try:
            out, _ = await asyncio.wait_for(proc.communicate(), timeout_s)
        finally:
            await finish_process(proc)
    if proc.returncode != 0:
        raise WorkspaceError(
            f"setup command failed ({proc.returncode}): {command}: {out.decode(errors='replace')[-500:]}"
        )


def remove_workspace(workspace: Path) -> None:
    """Remove the workspace (an unmount when it is a tmpfs; else a removal that never follows a
    symlink and restores folder permissions a command took away) and give back its uid and cgroup."""
    workspace = Path(os.path.abspath(workspace))
    unmount_workspace(workspace)
    with contextlib.suppress(OSError):
        remove_tree(workspace)
    release_workspace(workspace)


async def remove_workspace_async(workspace: Path) -> None:
    """``remove_workspace`` in a worker thread (a tree of 100k files takes seconds to remove)."""
    await asyncio.to_thread(remove_workspace, workspace)

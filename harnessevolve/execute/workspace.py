"""Task workspaces: a fresh temporary folder per rollout, set up from the task, removed after."""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from pathlib import Path

from harnessevolve.core.tasks import Task
from harnessevolve.execute.sandbox import Sandbox, resolve_sandbox
from harnessevolve.execute.sandbox_launch import finish_process

SAFE_ENV_KEYS = ("PATH", "LANG", "LC_ALL", "TZ")


class WorkspaceError(Exception):
    """The task's setup failed; the rollout is recorded as a setup error, not a crash."""


def tool_env(workspace: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment LLM-written commands see: no API keys or other secrets of the host."""
    env = {k: os.environ[k] for k in SAFE_ENV_KEYS if k in os.environ}
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    env.update({"HOME": str(workspace), "TMPDIR": str(workspace), "PWD": str(workspace)})
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
    workspace = Path(tempfile.mkdtemp(prefix=f"he-{task.id}-"))
    try:
        for rel, content in task.setup_files.items():
            path = inside(workspace, rel)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content, encoding="utf-8")
        for command in task.setup_commands:
            await _run_setup_command(command, workspace, timeout_s, resolve_sandbox(sandbox))
    except BaseException:
        remove_workspace(workspace)
        raise
    return workspace


async def _run_setup_command(command: str, workspace: Path, timeout_s: float, sandbox: Sandbox) -> None:
    with sandbox.launch(command, workspace, tool_env(workspace)) as launch:
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
            await launch.clean_up()
    if proc.returncode != 0:
        raise WorkspaceError(
            f"setup command failed ({proc.returncode}): {command}: {out.decode(errors='replace')[-500:]}"
        )


def remove_workspace(workspace: Path) -> None:
    shutil.rmtree(workspace, ignore_errors=True)

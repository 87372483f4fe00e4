"""Checks in the sandbox: where the execute and evaluate stages meet for scoring.

Every program a check starts (a ``command`` check, Harbor's ``tests/test.sh``, both sides of an
``effect`` check, a ``python`` check) and every workspace file a check reads (``file``) goes through
the ``CommandRunner`` made here, which launches it in the rollout's sandbox: it sees the workspace,
the check's own files read-only (``Check.mounts``) and nothing else of the host, runs as the
workspace's uid, inside the rollout's cgroup. Each scoring path (``run``, ``gate``, ``refs
generate``, ``refs import``, ``report --final``) takes its runner from here.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from harnessevolve.evaluate.checkers import CommandRunner
from harnessevolve.execute.workspace import remove_workspace
from harnessevolve.sandbox.base import Sandbox, resolve_sandbox
from harnessevolve.sandbox.launch import Launch, ReadOnly, mark_changed, release_workspaces_under
from harnessevolve.sandbox.limits import mount_workspace


class SandboxedCheckRunner(CommandRunner):
    """A ``CommandRunner`` launching each command through ``sandbox`` (None: the default sandbox,
    resolved at the first command, so that scoring without commands never needs it)."""

    def __init__(self, sandbox: Sandbox | None = None) -> None:
        self.sandbox = sandbox

    @contextlib.contextmanager
    def process(
        self, command: str, workspace: Path, env: dict[str, str], read_only: tuple[str, ...], fresh: bool
    ) -> Iterator[Launch]:
        chosen = resolve_sandbox(self.sandbox)
        if fresh:
            mark_changed(workspace)
        with (
            checker_files(read_only) as binds,
            chosen.launch(command, workspace, env, read_only=binds) as launch,
        ):
            yield launch

    @contextlib.contextmanager
    def scratch(self, prefix: str) -> Iterator[Path]:
        """A fresh folder that is a tmpfs of the sandbox's ``workspace_mb`` / ``workspace_files`` (as
        root), so a submitted command cannot fill the host's disk from an effect check either."""
        limits = resolve_sandbox(self.sandbox).limits
        folder = Path(tempfile.mkdtemp(prefix=prefix)).resolve()
        try:
            mount_workspace(folder, size_mb=limits.workspace_mb, files=limits.workspace_files)
            yield folder
        finally:
            release_workspaces_under(folder)
            remove_workspace(folder)


def sandboxed_runner(sandbox: Sandbox | None = None) -> CommandRunner:
    """The runner every scoring path uses (see the module docstring)."""
    return SandboxedCheckRunner(sandbox)


@contextlib.contextmanager
def checker_files(paths: tuple[str, ...]) -> Iterator[ReadOnly]:
    """Bind pairs showing each of ``paths`` read-only at its own path. As root the command runs as
    the workspace's uid, which may not read the original (a 0700 checkout): it then sees a
    world-readable copy made for this command (symlinks copied as links, never followed)."""
    if not paths:
        yield ()
        return
    if os.geteuid() != 0:
        yield tuple((Path(p), Path(p)) for p in paths)
        return
    scratch = Path(tempfile.mkdtemp(prefix="he-checker-files-"))
    try:
        binds = []
        for index, path in enumerate(paths):
            source, copy = Path(path), scratch / str(index)
            if source.is_dir():
                shutil.copytree(source, copy, symlinks=True)
            else:
                shutil.copy2(source, copy, follow_symlinks=False)
            _open_up(copy)
            binds.append((copy, source))
        os.chmod(scratch, 0o755)
        yield tuple(binds)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _open_up(tree: Path) -> None:
    """a+rX on a tree of our own copies (links untouched)."""
    entries = [tree] if not tree.is_dir() else [tree, *tree.rglob("*")]
    for entry in entries:
        if entry.is_symlink():
            continue
        mode = entry.stat().st_mode
        extra = 0o555 if entry.is_dir() or mode & 0o100 else 0o444
        entry.chmod(mode | extra)

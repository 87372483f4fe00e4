"""Sandboxes for the LLM-written commands the agent runs. Chosen by name (``--sandbox``).

Contract (``Sandbox``): ``launch(command, workspace, env, read_only=())`` is a context manager
yielding a ``Launch`` -- how to start ``bash -c command`` so that it

- can write only inside ``workspace`` (seen at its own absolute path, its working directory),
  nothing else of the host; reads only what a user's program may read (system directories) and
  the ``read_only`` pairs (host source shown read-only at a path inside: a check's own files);
- has no network, unless the sandbox says otherwise;
- runs under ``limits`` (``SandboxLimits``: CPU time, memory, processes, file size per process;
  memory, processes, workspace size and file count per rollout where the machine allows, see
  ``sandbox_limits``); ``Launch.limits_hit()`` says afterwards which rollout limits it reached;
- sees exactly ``env`` (already scrubbed of secrets by ``workspace.tool_env``);
- shows the host paths of its ``view`` (``SandboxView``, ``sandbox/views.py``): read-only paths
  for everyone, code-only paths (the Python runtime, ``python_path``) for the benchmark's own code,
  and answers (task files, references, check-only files) masked for the agent and its tools.
  ``with_view(view)`` is a copy showing another view (``SandboxError`` when it cannot); the agent's
  commands run in ``agent_view(sandbox)``, the tool server in ``tools_view(sandbox)``, checks in
  the full one;
- dies, with everything it started, when the launched process's group is killed.

Callers enter the block off the event loop (``launched``): handing a big tree to the workspace's
uid takes a while. The caller starts the process inside the ``with`` block, applies the
wall-clock limit and the output cap, kills the process group, and leaves the block, which
releases what the launch held (descriptors, containers). ``launch`` raises ``SandboxError``
when the sandbox cannot work on this machine; it never runs the command itself.

Implementations: ``bwrap`` (default), ``docker`` (only when an engine answers) and ``none``
(no isolation at all, reachable only with ``unsafe=True``, i.e. ``--unsafe-no-sandbox``).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import subprocess
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from harnessevolve.core.errors import SandboxError
from harnessevolve.sandbox.bwrap import BwrapSandbox
from harnessevolve.sandbox.docker import DockerSandbox
from harnessevolve.sandbox.launch import Launch, ReadOnly, SandboxLimits
from harnessevolve.sandbox.spawn import SpawnedProcess, spawn_from, start_process
from harnessevolve.sandbox.views import Reach, SandboxView

__all__ = [
    "SANDBOXES",
    "BwrapSandbox",
    "DockerSandbox",
    "Launch",
    "Reach",
    "Sandbox",
    "SandboxError",
    "SandboxLimits",
    "SandboxView",
    "UnsafeNoSandbox",
    "agent_view",
    "tools_view",
    "with_paths",
    "default_sandbox",
    "launched",
    "default_sandbox_name",
    "make_sandbox",
    "resolve_sandbox",
]

DEFAULT_SANDBOX = "bwrap"
UNSAFE_HINT = "pass --unsafe-no-sandbox to run agent commands without any isolation"


class Sandbox(Protocol):
    """Turns one shell command into an isolated process launch (contract in the module docstring)."""

    name: str
    limits: SandboxLimits
    view: SandboxView
    """What of the host it shows besides the workspace and system files (``sandbox/views.py``)."""

    def with_view(self, view: SandboxView) -> Sandbox:
        """A copy showing ``view`` (this one unchanged); ``SandboxError`` when it cannot show paths."""
        ...

    def launch(
        self, command: str, workspace: Path, env: Mapping[str, str], *, read_only: ReadOnly = ()
    ) -> AbstractContextManager[Launch]: ...

    def check(self) -> None:
        """Raise ``SandboxError`` (with a hint) when this sandbox cannot work on this machine."""
        ...


class UnsafeNoSandbox:
    """No isolation: ``bash -c`` on the host, in the workspace, with the scrubbed environment.

    Only the wall-clock limit, the output cap and the process-group kill of the caller apply;
    ``limits`` are not enforced. For trusted commands on a machine without bubblewrap.
    """

    name = "none"

    def __init__(self, limits: SandboxLimits | None = None) -> None:
        self.limits = limits or SandboxLimits()
        self.view = SandboxView()

    def with_view(self, view: SandboxView) -> UnsafeNoSandbox:
        """Itself: without a sandbox every command sees the whole host anyway."""
        return self

    def check(self) -> None:
        """Always works: there is nothing to set up."""

    @contextlib.contextmanager
    def launch(
        self, command: str, workspace: Path, env: Mapping[str, str], *, read_only: ReadOnly = ()
    ) -> Iterator[Launch]:
        """``read_only`` is ignored: without a sandbox the command sees the whole host anyway."""
        yield Launch(("bash", "-c", command), env, workspace)


@contextlib.asynccontextmanager
async def launched(
    sandbox: Sandbox, command: str, workspace: Path, env: Mapping[str, str], *, read_only: ReadOnly = ()
) -> AsyncIterator[Launch]:
    """``sandbox.launch(...)`` entered and left in a worker thread, so that preparing the workspace
    (handing 100k files to its uid) never blocks the event loop; runs ``Launch.clean_up`` at the end."""
    manager = sandbox.launch(command, workspace, env, read_only=read_only)
    launch = await asyncio.to_thread(manager.__enter__)
    try:
        yield launch
    except BaseException as exc:
        await launch.clean_up()
        if not await asyncio.to_thread(manager.__exit__, type(exc), exc, exc.__traceback__):
            raise
    else:
        await launch.clean_up()
        await asyncio.to_thread(manager.__exit__, None, None, None)


@dataclass
class StartedCommand:
    """A command ``started`` in a sandbox: read ``process``; set ``failed`` (it exited non-zero or
    timed out) before the block ends, and ``limit_notes`` holds the whole-rollout limits it hit."""

    process: SpawnedProcess
    failed: bool = True
    limit_notes: list[str] = field(default_factory=list)


@contextlib.asynccontextmanager
async def started(
    sandbox: Sandbox, command: str, workspace: Path, env: Mapping[str, str], *, read_only: ReadOnly = ()
) -> AsyncIterator[StartedCommand]:
    """``launched`` and ``spawn`` with two worker-thread hops instead of four: the launch is entered
    and its command started in one, the limits read and the launch left in the other (each hop
    wakes the event loop through its self-pipe, and at tens of rollouts per loop they add up). The
    caller finishes the process (``finish_process``) inside the block."""
    manager = sandbox.launch(command, workspace, env, read_only=read_only)

    def start() -> tuple[Launch, subprocess.Popen[bytes]]:
        launch = manager.__enter__()
        try:
            return launch, start_process(launch.argv, **launch.subprocess_options())
        except BaseException as exc:
            manager.__exit__(type(exc), exc, exc.__traceback__)
            raise

    launch, process = await spawn_from(start, abandon=lambda _launch: manager.__exit__(None, None, None))
    command_run = StartedCommand(process)

    def leave(exc: BaseException | None) -> bool | None:
        if exc is None:
            command_run.limit_notes = launch.limits_hit(command_run.failed)
            return manager.__exit__(None, None, None)
        return manager.__exit__(type(exc), exc, exc.__traceback__)

    try:
        yield command_run
    except BaseException as exc:
        await launch.clean_up()
        if not await asyncio.to_thread(leave, exc):
            raise
    else:
        await launch.clean_up()
        await asyncio.to_thread(leave, None)


SANDBOXES: dict[str, Callable[..., Sandbox]] = {
    "bwrap": BwrapSandbox,
    "docker": DockerSandbox,
    "none": UnsafeNoSandbox,
}


def default_sandbox_name() -> str:
    """The sandbox used when none is chosen: always ``bwrap`` (never silently ``none``)."""
    return DEFAULT_SANDBOX


def make_sandbox(name: str, *, limits: SandboxLimits | None = None, unsafe: bool = False) -> Sandbox:
    """The sandbox called ``name``, checked to work here; ``SandboxError`` (with a hint) otherwise.

    ``none`` needs ``unsafe=True`` (the CLI's ``--unsafe-no-sandbox``). Availability is probed once
    per process and cached.
    """
    if name not in SANDBOXES:
        raise SandboxError(
            f"unknown sandbox {name!r}",
            field="--sandbox",
            hint=f"choose one of: {', '.join(sorted(SANDBOXES))}",
        )
    if name == "none" and not unsafe:
        raise SandboxError(
            "the 'none' sandbox runs agent commands unisolated on this machine", hint=UNSAFE_HINT
        )
    sandbox = SANDBOXES[name](limits)
    sandbox.check()
    return sandbox


@functools.lru_cache(maxsize=1)
def default_sandbox() -> Sandbox:
    """The default sandbox with default limits, made once; raises ``SandboxError`` when unusable."""
    return make_sandbox(default_sandbox_name())


def resolve_sandbox(sandbox: Sandbox | None) -> Sandbox:
    """``sandbox`` itself, or the default one when None (what callers that pass nothing get)."""
    return sandbox if sandbox is not None else default_sandbox()


def with_paths(
    sandbox: Sandbox,
    *,
    read_only: tuple[str, ...] = (),
    code_only: tuple[str, ...] = (),
    private: tuple[str, ...] = (),
    suites: tuple[str, ...] = (),
) -> Sandbox:
    """``sandbox`` showing (and hiding) more host paths (a copy); a path to show that does not
    exist is a ``SandboxError``. ``none`` sees everything already and is returned as it is."""
    if sandbox.name == "none":
        return sandbox
    missing = [p for p in (*read_only, *code_only) if p and not Path(p).exists()]
    if missing:
        raise SandboxError(
            f"read-only path {missing[0]} does not exist", field="--sandbox-ro", hint="check --sandbox-ro"
        )
    view = sandbox.view.adding(read_only=read_only, code_only=code_only, private=private, suites=suites)
    return sandbox if view == sandbox.view else sandbox.with_view(view)


def agent_view(sandbox: Sandbox) -> Sandbox:
    """What the agent's own commands (bash, command tools, an agent program) run in: ``sandbox``
    without its code-only paths, every answer and suite folder masked."""
    view = sandbox.view.narrowed(Reach.AGENT)
    return sandbox if view == sandbox.view else sandbox.with_view(view)


def tools_view(sandbox: Sandbox) -> Sandbox:
    """What a task's Python tools and MCP servers run in: code-only paths shown, answers masked."""
    view = sandbox.view.narrowed(Reach.TOOLS)
    return sandbox if view == sandbox.view else sandbox.with_view(view)

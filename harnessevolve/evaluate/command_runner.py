"""How a check's command runs: ``CommandRunner`` (bash -c in a workspace with exactly the given
environment, killed with everything it started after its timeout; the pipeline's runs it in the
sandbox), the process it starts and the bounds on what it reads back. The check kinds that use it
are ``evaluate/checkers.py`` and ``evaluate/effect_check.py``."""

from __future__ import annotations

import contextlib
import errno
import os
import selectors
import signal
import subprocess
import time
from abc import ABC, abstractmethod
from collections.abc import Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path

from harnessevolve.sandbox.launch import Launch

MINIMAL_PATH = "/usr/local/bin:/usr/bin:/bin"
CHECK_HOME = "/tmp"
"""HOME of a check's command: inside the sandbox /tmp is a fresh private tmpfs per command, so no
file the agent planted (``~/.local/lib/python3*/site-packages/*.pth``, ``~/.bashrc``) is there."""
MAX_FILE_BYTES = 10_000_000
"""A checked file larger than this fails rather than being read into memory."""


@dataclass(frozen=True)
class BashRun:
    """One ``bash -c`` run by a check: exit code (``None``: it timed out) and its output."""

    returncode: int | None
    output: str


class CommandRunner(ABC):
    """Runs ``bash -c command`` with ``workspace`` as its working directory and exactly ``env``,
    killed with everything it started after ``timeout_s`` (``BashRun.returncode`` None), stdout
    (and stderr when ``with_stderr``) as its output. ``read_only``: host paths the command needs
    besides the workspace (the check's own files), shown read-only at the same paths. Raises
    ``OSError`` when the command cannot be started. ``fresh``: we just (re)wrote the tree on the
    host (an effect check's copy), so it is handed to the sandbox's uid again first. The
    pipeline's runs it in the sandbox (``scoring.sandboxed_checks``).

    Each command runs as one process through ``run_process``; a runner says how it is started
    (``process``) and where check workspaces live (``scratch``)."""

    def __call__(
        self,
        command: str,
        workspace: Path,
        env: dict[str, str],
        *,
        timeout_s: float,
        with_stderr: bool = True,
        read_only: tuple[str, ...] = (),
        fresh: bool = False,
    ) -> BashRun:
        refuse_nul(command, env)
        with self.process(command, workspace, env, read_only, fresh) as launch:
            try:
                return run_process(
                    list(launch.argv),
                    launch.cwd,
                    dict(launch.env),
                    timeout_s=timeout_s,
                    with_stderr=with_stderr,
                    pass_fds=launch.pass_fds,
                )
            finally:
                if launch.cleanup_argv:
                    subprocess.run(list(launch.cleanup_argv), capture_output=True, timeout=30, check=False)

    @abstractmethod
    def process(
        self, command: str, workspace: Path, env: dict[str, str], read_only: tuple[str, ...], fresh: bool
    ) -> AbstractContextManager[Launch]:
        """How to start ``command`` (arguments as for a call), with what it needs (a sandbox,
        copies of the check's files) held until it has finished; ``cleanup_argv`` runs after it."""

    @abstractmethod
    def scratch(self, prefix: str) -> AbstractContextManager[Path]:
        """A fresh empty folder for check workspaces (an effect check's two copies), bounded like a
        rollout's workspace; removed on exit, with what running commands in it held (uids, cgroups)."""


def refuse_nul(command: str, env: Mapping[str, str]) -> None:
    """``OSError`` (the command cannot be started) when ``command`` or ``env`` holds a NUL byte: no
    program receives one in its arguments or environment. An agent's command or answer may (a
    model that copies a binary file's output into its call); the check then fails, and says why."""
    if "\0" in command:
        raise OSError(errno.EINVAL, "the command holds a NUL byte, which no program can receive")
    for name, value in env.items():
        if "\0" in name or "\0" in value:
            raise OSError(errno.EINVAL, f"${name} holds a NUL byte, which no program can receive")


MAX_OUTPUT_BYTES = MAX_FILE_BYTES + 65536
"""A check's command printing more than this is cut off there (and killed): its output is kept in memory."""


EXIT_DRAIN_S = 0.5
"""After the command exits, how long output is still read from what it left running."""


def run_process(
    argv: list[str],
    cwd: Path,
    env: dict[str, str],
    *,
    timeout_s: float,
    with_stderr: bool = True,
    pass_fds: tuple[int, ...] = (),
) -> BashRun:
    """Run ``argv`` in its own process group, keeping at most ``MAX_OUTPUT_BYTES`` of its output;
    after ``timeout_s`` (or past the output cap) the whole group is killed. It times out only when
    the command itself is still running at the deadline: background children it leaves (a daemon
    holding stdout open) get ``EXIT_DRAIN_S`` more to write, then the group is killed and the
    command's own exit status counts."""
    proc = subprocess.Popen(
        argv,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT if with_stderr else subprocess.DEVNULL,
        start_new_session=True,
        pass_fds=pass_fds,
    )
    assert proc.stdout is not None
    chunks: list[bytes] = []
    size = 0
    deadline = time.monotonic() + timeout_s
    timed_out = False
    exited_at: float | None = None
    try:
        with selectors.DefaultSelector() as selector:
            selector.register(proc.stdout, selectors.EVENT_READ)
            while size <= MAX_OUTPUT_BYTES:
                now = time.monotonic()
                if exited_at is None and proc.poll() is not None:
                    exited_at = now  # the command is done; what it left behind may hold the pipe open
                if exited_at is not None and now - exited_at > EXIT_DRAIN_S:
                    break  # a background child keeps stdout open: not a timeout, it is killed below
                left = deadline - now
                if left <= 0:
                    timed_out = exited_at is None
                    break
                if not selector.select(min(left, 0.1 if exited_at is not None else 0.25)):
                    continue
                chunk = os.read(proc.stdout.fileno(), 65536)
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
        if not timed_out:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                timed_out = True
    finally:
        _kill_group(proc)  # whatever it left running in the background, or all of it on a timeout
    if timed_out:
        return BashRun(None, "")
    raw = b"".join(chunks)[:MAX_OUTPUT_BYTES]
    return BashRun(proc.returncode, raw.decode("utf-8", errors="replace"))


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """Kill the command and everything it started (it leads its own session) and reap it."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    if proc.stdout is not None:
        proc.stdout.close()


# --- effect checks -------------------------------------------------------------------------------

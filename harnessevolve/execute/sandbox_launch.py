"""Values every sandbox shares: resource limits, how to launch one command, the sandbox's user.

A sandbox turns one shell command into a ``Launch`` (argv, environment, working directory);
``execute/tools.py`` starts it, applies the wall-clock limit and the output cap, and kills its
process group. See ``execute/sandbox.py`` for the ``Sandbox`` contract.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import os
import signal
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

SANDBOX_UID_BASE = 300_000
"""Commands never run as root: when harnessevolve itself runs as root, the commands of each workspace
run as a uid of their own from ``SANDBOX_UID_BASE`` up (no account needed). Root ignores the
process-count limit and can read root-only files such as /etc/shadow; a uid per workspace also keeps
the process count per rollout and the workspace's files handed over once."""
_uids = itertools.count()


@dataclass(frozen=True)
class SandboxLimits:
    """Per-process kernel limits (setrlimit) for every command a sandbox runs.

    The wall-clock limit and the output cap are the harness's loop settings
    (``command_timeout_s``, ``tool_output_limit``); these are the rest.
    """

    cpu_s: int = 60
    """CPU seconds per process (RLIMIT_CPU); past it the process gets SIGXCPU/SIGKILL."""
    memory_mb: int = 1024
    """Address space per process in MiB (RLIMIT_AS); allocations past it fail (MemoryError, ENOMEM)."""
    max_processes: int = 256
    """Processes and threads the sandbox's user may have at once (RLIMIT_NPROC); stops fork bombs."""
    max_file_mb: int = 64
    """Largest file a process may write, in MiB (RLIMIT_FSIZE); past it writes fail with SIGXFSZ/EFBIG."""

    def __post_init__(self) -> None:
        for name in ("cpu_s", "memory_mb", "max_processes", "max_file_mb"):
            if getattr(self, name) < 1:
                raise ValueError(f"SandboxLimits.{name} must be at least 1, got {getattr(self, name)}")

    @classmethod
    def parse(cls, text: str) -> SandboxLimits:
        """``"cpu_s=120,memory_mb=2048"`` (the CLI's ``--sandbox-limits``): the named limits changed,
        the rest at their defaults. ``ValueError`` names what is wrong."""
        names = {"cpu_s", "memory_mb", "max_processes", "max_file_mb"}
        values: dict[str, int] = {}
        for part in filter(None, (p.strip() for p in text.split(","))):
            key, sep, value = part.partition("=")
            key = key.strip()
            if not sep or key not in names:
                raise ValueError(f"{part!r} is not one of {', '.join(sorted(names))} = a whole number")
            if not value.strip().isdigit():
                raise ValueError(f"{key} must be a whole number, not {value.strip()!r}")
            values[key] = int(value)
        return cls(**values)

    def prlimit_argv(self) -> tuple[str, ...]:
        """``prlimit`` (util-linux) options setting these limits, soft and hard, on the command it runs."""
        mib = 1024 * 1024
        return (
            "prlimit",
            f"--cpu={self.cpu_s}",
            f"--as={self.memory_mb * mib}",
            f"--nproc={self.max_processes}",
            f"--fsize={self.max_file_mb * mib}",
            "--core=0",
            "--",
        )


@dataclass(frozen=True)
class Launch:
    """How to start one sandboxed command (``create_subprocess_exec(*argv, **subprocess_options())``)."""

    argv: tuple[str, ...]
    env: Mapping[str, str]
    cwd: Path
    cleanup_argv: tuple[str, ...] | None = None
    """A command to run after the process ended or was killed (e.g. ``docker rm -f``), best effort."""

    async def clean_up(self) -> None:
        """Run ``cleanup_argv`` (if any), waiting at most 30 s; failures are ignored."""
        if not self.cleanup_argv:
            return
        with contextlib.suppress(OSError):
            proc = await asyncio.create_subprocess_exec(
                *self.cleanup_argv,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.DEVNULL,
            )
            try:
                await asyncio.wait_for(proc.wait(), 30)
            except TimeoutError:
                proc.kill()
                await proc.wait()

    def subprocess_options(self) -> dict[str, object]:
        """Keyword arguments for ``create_subprocess_exec`` besides stdio."""
        return {"cwd": self.cwd, "env": dict(self.env)}


def sandbox_uid(workspace: Path) -> int | None:
    """The uid commands in ``workspace`` run as, the same for every command there and used by no
    other live workspace of this process; None when we are not root (commands then run as
    ourselves, inside a user namespace)."""
    if os.geteuid() != 0:
        return None
    return _uid_for(str(workspace))


@functools.lru_cache(maxsize=1024)
def _uid_for(workspace: str) -> int:
    return SANDBOX_UID_BASE + (os.getpid() % 64) * 1024 + next(_uids) % 1024


def claim_workspace(workspace: Path) -> tuple[Path, int | None]:
    """The workspace's resolved path and the uid its commands run as, the tree already handed over
    to that uid: what every sandbox does before it launches a command."""
    workspace = workspace.resolve()
    uid = sandbox_uid(workspace)
    hand_over(workspace, uid)
    return workspace, uid


def hand_over(workspace: Path, uid: int | None) -> None:
    """Give the workspace tree to ``uid`` (and group ``uid``) so the command can write it (None: no-op).

    Runs before each command, while no sandboxed process is alive; changes only what we wrote since
    (setup files, ``write_file``); never follows symlinks, so a link the agent planted cannot make
    us chown a host file.
    """
    if uid is None:
        return
    gid = uid
    os.lchown(workspace, uid, gid)
    for root, dirs, files in os.walk(workspace):
        for name in dirs + files:
            path = os.path.join(root, name)
            try:
                st = os.lstat(path)
                if (st.st_uid, st.st_gid) != (uid, gid):
                    os.lchown(path, uid, gid)
            except FileNotFoundError:
                continue


READ_CHUNK = 65536


async def finish_process(proc: asyncio.subprocess.Process) -> None:
    """Kill the command's process group, read its pipe to the end and reap it.

    Reading past the cap matters: asyncio only reports the exit once the pipe is closed. A process
    that left the group and still holds the pipe (possible only without a sandbox) is cut off.
    """
    kill_group(proc.pid)
    assert proc.stdout is not None
    try:
        async with asyncio.timeout(2):
            while await proc.stdout.read(READ_CHUNK):
                pass
            await proc.wait()
    except TimeoutError:
        transport = getattr(proc, "_transport", None)
        if transport is not None:
            transport.close()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(proc.wait(), 5)


def kill_group(pid: int) -> None:
    """SIGKILL the process group ``pid`` leads (a sandbox and, through it, all it started)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)

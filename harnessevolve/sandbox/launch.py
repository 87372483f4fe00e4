"""Values every sandbox shares: resource limits, how to launch one command, the workspace's claim.

A sandbox turns one shell command into a ``Launch`` (argv, environment, working directory);
``execute/tools.py`` starts it, applies the wall-clock limit and the output cap, and kills its
process group. See ``sandbox/base.py`` for the ``Sandbox`` contract.

A workspace is *claimed* before its first command (``claim_workspace``): it gets a uid of its own
(when we are root; see ``sandbox_uids``) and a cgroup holding every process of the rollout (when
the machine lets us make one; see ``sandbox_limits``). ``release_workspace`` gives both back.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import stat
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harnessevolve.sandbox import uids as sandbox_uids
from harnessevolve.sandbox.limits import (
    RolloutCgroup,
    make_rollout_cgroup,
    workspace_full,
    workspace_notes,
)
from harnessevolve.sandbox.spawn import SpawnedProcess, kill_group

SANDBOX_UID_BASE = sandbox_uids.UID_BASE
LIMIT_NAMES = (
    "cpu_s",
    "memory_mb",
    "max_processes",
    "max_file_mb",
    "rollout_memory_mb",
    "rollout_processes",
    "workspace_mb",
    "workspace_files",
)

LIMIT_RANGES: dict[str, tuple[int, int]] = {
    "cpu_s": (1, 86_400),
    "memory_mb": (32, 1 << 20),
    "max_processes": (4, 65_536),
    "max_file_mb": (1, 1 << 20),
    "rollout_memory_mb": (32, 1 << 20),
    "rollout_processes": (4, 65_536),
    "workspace_mb": (1, 1 << 20),
    "workspace_files": (100, 100_000_000),
}
"""The smallest and largest value of each limit (docs/threat-model.md): below, nothing runs (a
1 MiB address space cannot start bash); above, the limit bounds nothing (a day of CPU, a TiB)."""


@dataclass(frozen=True)
class SandboxLimits:
    """Kernel limits for every command a sandbox runs: per process (setrlimit) and per rollout.

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
    rollout_memory_mb: int = 2048
    """Memory of all of one rollout's processes together, in MiB (a cgroup's memory limit; its
    private /tmp counts too). Past it the kernel kills one of them. Needs a cgroup (see
    ``sandbox_limits``); without one the bound is ``memory_mb`` x ``max_processes``."""
    rollout_processes: int = 256
    """Processes and threads of one rollout together (a cgroup's pids.max)."""
    workspace_mb: int = 1024
    """Size of the workspace (a tmpfs of its own when we are root); writes past it fail with ENOSPC."""
    workspace_files: int = 100_000
    """Files and folders the workspace may hold (the tmpfs's inode count); past it: ENOSPC."""

    def __post_init__(self) -> None:
        for name in LIMIT_NAMES:
            low, high = LIMIT_RANGES[name]
            value = getattr(self, name)
            if not low <= value <= high:
                raise ValueError(f"{name} must be between {low} and {high}, got {value}")

    @classmethod
    def parse(cls, text: str) -> SandboxLimits:
        """``"cpu_s=120,memory_mb=2048"`` (the CLI's ``--sandbox-limits``): the named limits changed,
        the rest at their defaults. ``ValueError`` names what is wrong."""
        values: dict[str, int] = {}
        for part in filter(None, (p.strip() for p in text.split(","))):
            key, sep, value = part.partition("=")
            key = key.strip()
            if not sep or key not in LIMIT_NAMES:
                raise ValueError(f"{part!r} is not one of {', '.join(sorted(LIMIT_NAMES))} = a whole number")
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


ReadOnly = tuple[tuple[Path, Path], ...]
"""Host paths shown read-only inside a sandbox: (source on the host, path inside) pairs."""


@dataclass(frozen=True)
class Launch:
    """How to start one sandboxed command (``create_subprocess_exec(*argv, **subprocess_options())``)."""

    argv: tuple[str, ...]
    env: Mapping[str, str]
    cwd: Path
    cleanup_argv: tuple[str, ...] | None = None
    """A command to run after the process ended or was killed (e.g. ``docker rm -f``), best effort."""
    limit_notes: Callable[[bool], list[str]] | None = None
    """After the command (did it fail?): which whole-rollout limits it ran into, for the tool result."""
    pass_fds: tuple[int, ...] = ()
    """File descriptors the process inherits (the sandbox's seccomp filter); open while the launch is."""

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

    def subprocess_options(self) -> dict[str, Any]:
        """Keyword arguments for ``create_subprocess_exec`` besides stdio."""
        options: dict[str, Any] = {"cwd": self.cwd, "env": dict(self.env)}
        if self.pass_fds:
            options["pass_fds"] = self.pass_fds
        return options

    def limits_hit(self, failed: bool = True) -> list[str]:
        """One line per whole-rollout limit the command reached (``[]`` when none or unknown);
        ``failed``: it exited non-zero or timed out (a full workspace is then named even when it
        was full before)."""
        return self.limit_notes(failed) if self.limit_notes else []


@dataclass
class WorkspaceClaim:
    """What one workspace holds while it lives: its uid (root only) and its rollout cgroup."""

    uid: int | None
    lease: sandbox_uids.UidLease | None
    cgroup: RolloutCgroup | None
    handed_over: bool = False
    released: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)
    """Held while its cgroup is made or it is given back: not the registry's lock, so making one
    workspace's cgroup (a mkdir and writes in the cgroup tree) never holds up another's launch."""

    def give_back(self) -> None:
        """Remove its cgroup and give back its uid (once; a cgroup still being made is waited for)."""
        with self.lock:
            if self.released:
                return
            self.released = True
            if self.cgroup is not None:
                self.cgroup.remove()
            if self.lease is not None:
                self.lease.release()


_claims: dict[str, WorkspaceClaim] = {}
_claims_lock = threading.Lock()


def sandbox_uid(workspace: Path) -> int | None:
    """The uid commands in ``workspace`` run as, the same for every command there and held by no
    other live workspace of any process on this machine (a lock per uid, see ``sandbox_uids``);
    None when we are not root (commands then run as ourselves, inside a user namespace)."""
    return _claim(workspace.resolve(), None).uid


def _claim(workspace: Path, limits: SandboxLimits | None) -> WorkspaceClaim:
    key = str(workspace)
    vanished: list[WorkspaceClaim] = []
    with _claims_lock:  # only the registry and the uid (a record lock, no waiting) under it
        claim = _claims.get(key)
        if claim is None:
            vanished = _pop_vanished()
            lease = sandbox_uids.lease_uid() if os.geteuid() == 0 else None
            claim = WorkspaceClaim(uid=lease.uid if lease else None, lease=lease, cgroup=None)
            _claims[key] = claim
    for old in vanished:
        old.give_back()
    if claim.cgroup is None and limits is not None:
        with claim.lock:
            if claim.cgroup is None and not claim.released:
                claim.cgroup = make_rollout_cgroup(
                    key, memory_mb=limits.rollout_memory_mb, processes=limits.rollout_processes
                )
    return claim


def _pop_vanished() -> list[WorkspaceClaim]:
    """The claims of workspaces removed without ``release_workspace`` (by a caller that deleted the
    folder itself), out of the registry, for the caller to give back so that their uids and cgroups
    do not pile up. Holds ``_claims_lock``."""
    gone = [key for key in _claims if not os.path.lexists(key)]
    return [_claims.pop(key) for key in gone]


def release_vanished() -> int:
    """Give back the claims of workspaces someone else removed (a driver process removes its rollout
    workers' workspaces), as the next claim would: for a process about to end, which makes no next
    claim, so that its last rollouts' cgroups are not left behind. How many were given back."""
    with _claims_lock:
        vanished = _pop_vanished()
    for old in vanished:
        old.give_back()
    return len(vanished)


def claim_workspace(workspace: Path, limits: SandboxLimits | None = None) -> tuple[Path, int | None]:
    """The workspace's resolved path and the uid its commands run as, the tree already handed over
    to that uid: what every sandbox does before it launches a command. With ``limits``, the
    workspace also gets its rollout cgroup (``workspace_cgroup``)."""
    workspace = workspace.resolve()
    claim = _claim(workspace, limits)
    if not claim.handed_over:
        hand_over(workspace, claim.uid)
        claim.handed_over = True
    return workspace, claim.uid


def workspace_cgroup(workspace: Path) -> RolloutCgroup | None:
    """The rollout cgroup of a claimed workspace (None: not claimed, or no cgroup on this machine)."""
    claim = _claims.get(str(workspace.resolve()))
    return claim.cgroup if claim else None


def limit_watch(workspace: Path, limits: SandboxLimits) -> Callable[[bool], list[str]]:
    """Called after a command (``failed``: it exited non-zero or timed out): the whole-rollout limits
    it ran into -- cgroup counters now vs at launch; a workspace limit reached by this command, or
    already reached when the command failed."""
    cgroup = workspace_cgroup(workspace)
    before = cgroup.counters() if cgroup else {}
    full_before = workspace_full(workspace)

    def notes(failed: bool) -> list[str]:
        found = cgroup.notes_since(before) if cgroup else []
        full = workspace_full(workspace)
        shown = full if failed else full - full_before
        return found + workspace_notes(shown, size_mb=limits.workspace_mb, files=limits.workspace_files)

    return notes


def mark_changed(workspace: Path) -> None:
    """Host-side code wrote into ``workspace``: hand the tree over again before the next command."""
    claim = _claims.get(str(workspace.resolve()))
    if claim is not None:
        claim.handed_over = False


def give_to_workspace(workspace: Path, paths: Iterable[Path]) -> None:
    """Hand just ``paths`` (written by us into a claimed workspace) to its uid, never following
    symlinks; a workspace not yet claimed is handed over whole at its first command anyway."""
    claim = _claims.get(str(workspace.resolve()))
    if claim is None or claim.uid is None:
        return
    for path in paths:
        with contextlib.suppress(FileNotFoundError):
            os.lchown(path, claim.uid, claim.uid)


def release_workspace(workspace: Path) -> None:
    """Give back the workspace's uid and cgroup (after its processes are gone and it is removed)."""
    with _claims_lock:
        claim = _claims.pop(str(workspace.resolve()), None)
    if claim is not None:
        claim.give_back()


def release_workspaces_under(folder: Path) -> None:
    """``release_workspace`` for every claimed workspace at or below ``folder``."""
    top = str(folder.resolve())
    with _claims_lock:
        keys = [k for k in _claims if k == top or k.startswith(top + os.sep)]
    for key in keys:
        release_workspace(Path(key))


def hand_over(workspace: Path, uid: int | None) -> None:
    """Give the workspace tree to ``uid`` (and group ``uid``) so the command can write it (None: no-op).

    Runs before the first command (and after host-side writes, see ``mark_changed``) while no
    sandboxed process is alive; never follows symlinks, so a link the agent planted cannot make
    us chown a host file. Sandboxes call it from ``launch``, which callers enter off the event
    loop (``sandbox.launched``), so a tree of 100k files does not stall other rollouts.
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


def remove_tree(path: Path) -> None:
    """Remove a tree a sandboxed command may have made hostile: folders with their write or search
    bit taken away get them back (opened with O_NOFOLLOW, so a symlink is never followed to a host
    file), everything else is unlinked, never followed."""

    top = os.path.abspath(path)

    def make_writable(func: Callable[[str], object], target: str, _exc: object) -> None:  # shutil's onerror
        for folder in (os.path.dirname(target), target):
            if _within(folder, top):  # never the folder above the tree (that is /tmp)
                _chmod_folder(folder)
        with contextlib.suppress(OSError):
            func(target)

    import shutil

    if not os.path.lexists(path):
        return
    if not stat.S_ISDIR(os.lstat(path).st_mode):
        os.unlink(path)
        return
    shutil.rmtree(path, onerror=make_writable)


def _within(folder: str, top: str) -> bool:
    folder = os.path.abspath(folder)
    return folder == top or folder.startswith(top + os.sep)


def _chmod_folder(folder: str) -> None:
    """chmod 0700 a real folder (never a symlink's target)."""
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return
    try:
        os.fchmod(fd, 0o700)
    except OSError:
        pass
    finally:
        os.close(fd)


READ_CHUNK = 65536


async def finish_process(proc: asyncio.subprocess.Process | SpawnedProcess) -> None:
    """Kill the command's process group, read its pipe to the end and reap it (an asyncio
    subprocess, or one ``sandbox.spawn`` started).

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
        if isinstance(proc, SpawnedProcess):
            proc.close_pipe()
        elif (transport := getattr(proc, "_transport", None)) is not None:
            transport.close()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(proc.wait(), 5)

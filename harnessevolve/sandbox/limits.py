"""Whole-rollout limits: one cgroup per workspace (memory, processes) and a tmpfs per workspace (size,
file count).

Per-process rlimits (``SandboxLimits.memory_mb``, ...) do not bound a rollout: six processes of
1 GiB each are within a 1 GiB address-space limit. So every process a rollout's commands start
is put into one cgroup of the rollout's own, with ``rollout_memory_mb`` and ``rollout_processes``:

- cgroup v2 (``memory.max``, ``memory.swap.max = 0``, ``pids.max``) when this process's cgroup
  lets us enable the memory and pids controllers for a child; else
- cgroup v1 (``memory.limit_in_bytes`` and, with swap accounting, ``memory.memsw.limit_in_bytes``;
  ``pids.max``) when the memory and pids hierarchies are mounted and writable; else
- none: then the only bound is the per-process one, ``memory_mb`` x ``max_processes`` (each
  process's address space is capped, and so is their number), and ``cgroup_mode()`` says so.

The launch joins the cgroup before bwrap starts (a tiny ``sh`` that writes its pid into
``cgroup.procs`` and execs), so nothing the command starts can be outside it. Past the memory limit
the kernel's OOM killer kills a process of that rollout only; past the process limit ``fork`` fails
with EAGAIN. The counters (``oom_kill``, ``pids.events max``) tell the tool result which limit hit.

The workspace, when we are root, is a tmpfs of its own (``size=workspace_mb``,
``nr_inodes=workspace_files``), mounted over the fresh folder: writes past it fail with ENOSPC and
removing the workspace is an unmount. As a non-root user there is no such mount; each file is then
capped at ``max_file_mb`` (RLIMIT_FSIZE) and the total is not bounded (see docs/threat-model.md).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import functools
import itertools
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

JOIN_SCRIPT = 'while [ "$1" != -- ]; do echo $$ > "$1" || exit 125; shift; done; shift; exec "$@"'
"""Run by /bin/sh: join every cgroup named before ``--``, then exec the rest (bwrap)."""
PREFIX = "harnessevolve-"
_counter = itertools.count()


@dataclass(frozen=True)
class CgroupLayout:
    """Where rollout cgroups are made: ``version`` 2 (one folder) or 1 (memory and pids folders)."""

    version: int
    memory_parent: Path
    pids_parent: Path


@dataclass
class RolloutCgroup:
    """One rollout's cgroup (v2: ``memory`` and ``pids`` are the same folder)."""

    version: int
    memory: Path
    pids: Path
    memory_mb: int
    processes: int

    def procs_files(self) -> tuple[str, ...]:
        folders = dict.fromkeys((self.memory, self.pids))
        return tuple(str(f / "cgroup.procs") for f in folders)

    def wrap(self, argv: tuple[str, ...]) -> tuple[str, ...]:
        """``argv`` started inside this cgroup."""
        return ("/bin/sh", "-c", JOIN_SCRIPT, "he-cgroup-join", *self.procs_files(), "--", *argv)

    def counters(self) -> dict[str, int]:
        """How often the memory and process limits were hit so far."""
        if self.version == 2:
            memory = _keyed(self.memory / "memory.events")
            pids = _keyed(self.pids / "pids.events")
            return {"oom_kill": memory.get("oom_kill", 0), "pids_max": pids.get("max", 0)}
        memory = _keyed(self.memory / "memory.oom_control")
        pids = _keyed(self.pids / "pids.events")
        kills = memory["oom_kill"] if "oom_kill" in memory else _number(self.memory / "memory.failcnt")
        return {"oom_kill": kills, "pids_max": pids.get("max", 0)}

    def peak_mb(self) -> float | None:
        """The most memory the rollout's processes held at once, in MiB (None when not reported)."""
        name = "memory.peak" if self.version == 2 else "memory.max_usage_in_bytes"
        value = _number(self.memory / name)
        return value / 2**20 if value else None

    def notes_since(self, before: dict[str, int]) -> list[str]:
        after = self.counters()
        notes = []
        if after["oom_kill"] > before["oom_kill"]:
            notes.append(
                f"[rollout limit: the rollout's processes reached rollout_memory_mb={self.memory_mb} MiB "
                "together; the kernel killed one of them]"
            )
        if after["pids_max"] > before["pids_max"]:
            notes.append(
                f"[rollout limit: the rollout reached rollout_processes={self.processes} processes; "
                "starting more failed]"
            )
        return notes

    def remove(self) -> None:
        """Remove the cgroup (its processes are gone; a just-killed one may take a moment)."""
        for folder in dict.fromkeys((self.memory, self.pids)):
            for _ in range(20):
                try:
                    folder.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    _kill_members(folder)
                    time.sleep(0.05)


def make_rollout_cgroup(tag: str, *, memory_mb: int, processes: int) -> RolloutCgroup | None:
    """A fresh cgroup with these limits, or None when this machine gives us none (see module doc)."""
    layout = cgroup_layout()
    if layout is None:
        return None
    name = f"{PREFIX}{os.getpid()}-{next(_counter)}"
    memory, pids = layout.memory_parent / name, layout.pids_parent / name
    try:
        memory.mkdir()
        if pids != memory:
            pids.mkdir()
        limit = memory_mb * 2**20
        if layout.version == 2:
            _write(memory / "memory.max", str(limit))
            with contextlib.suppress(OSError):
                _write(memory / "memory.swap.max", "0")
        else:
            _write(memory / "memory.limit_in_bytes", str(limit))
            with contextlib.suppress(OSError):
                _write(memory / "memory.memsw.limit_in_bytes", str(limit))
        _write(pids / "pids.max", str(processes))
    except OSError:
        for folder in (memory, pids):
            with contextlib.suppress(OSError):
                folder.rmdir()
        return None
    return RolloutCgroup(layout.version, memory, pids, memory_mb, processes)


def cgroup_mode() -> str:
    """``"cgroup v2"``, ``"cgroup v1"`` or ``"none"``: how rollout memory and processes are bounded here."""
    layout = cgroup_layout()
    return f"cgroup v{layout.version}" if layout else "none"


_layout_lock = threading.Lock()


def cgroup_layout() -> CgroupLayout | None:
    """Probed once per process; stale cgroups of dead harnessevolve processes are removed on the way.

    Under a lock: the first launches of a process come from several threads at once, and two
    probes at once made the same probe folder, so one saw it exist, judged the tree unusable, and
    could leave the whole process without rollout cgroups (no memory or process limit per rollout)."""
    with _layout_lock:
        return _probe_layout()


@functools.lru_cache(maxsize=1)
def _probe_layout() -> CgroupLayout | None:
    if os.environ.get("HARNESSEVOLVE_NO_CGROUP") == "1":
        return None
    for layout in (_v2_layout(), _v1_layout()):
        if layout is not None and _usable(layout):
            for parent in {layout.memory_parent, layout.pids_parent}:
                _sweep_stale(parent)
            return layout
    return None


def _mounts() -> list[tuple[str, str, set[str]]]:
    """(mount point, fs type, super options) of every cgroup mount."""
    out = []
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            left, _, right = line.partition(" - ")
            fields, rest = left.split(), right.split()
            if len(fields) > 4 and len(rest) > 2 and rest[0] in ("cgroup", "cgroup2"):
                out.append((fields[4], rest[0], set(rest[2].split(","))))
    return out


def _own_cgroups() -> dict[str, str]:
    """controller (``""`` for v2) -> this process's cgroup path."""
    out: dict[str, str] = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            for name in controllers.split(",") if controllers else [""]:
                out[name] = path
    return out


def _v2_layout() -> CgroupLayout | None:
    own = _own_cgroups().get("")
    for point, fstype, _ in _mounts():
        if fstype != "cgroup2" or own is None:
            continue
        parent = Path(point) / own.lstrip("/")
        try:
            available = (parent / "cgroup.controllers").read_text().split()
            if not {"memory", "pids"} <= set(available):
                continue
            enabled = (parent / "cgroup.subtree_control").read_text().split()
            if not {"memory", "pids"} <= set(enabled):
                _write(parent / "cgroup.subtree_control", "+memory +pids")
        except OSError:
            continue
        return CgroupLayout(2, parent, parent)
    return None


def _v1_layout() -> CgroupLayout | None:
    own = _own_cgroups()
    found: dict[str, Path] = {}
    for point, fstype, options in _mounts():
        for controller in ("memory", "pids"):
            if fstype == "cgroup" and controller in options and controller in own:
                found[controller] = Path(point) / own[controller].lstrip("/")
    if set(found) != {"memory", "pids"}:
        return None
    return CgroupLayout(1, found["memory"], found["pids"])


def _usable(layout: CgroupLayout) -> bool:
    """Whether we may make (and remove) a child cgroup in each parent."""
    name = f"{PREFIX}probe-{os.getpid()}"
    for parent in dict.fromkeys((layout.memory_parent, layout.pids_parent)):
        try:
            (parent / name).mkdir()
        except OSError:
            return False
        with contextlib.suppress(OSError):
            (parent / name).rmdir()
    return True


def _sweep_stale(parent: Path) -> None:
    with contextlib.suppress(OSError):
        for child in parent.iterdir():
            pid = child.name.removeprefix(PREFIX).split("-")[0]
            if child.name.startswith(PREFIX) and pid.isdigit() and not process_exists(int(pid)):
                with contextlib.suppress(OSError):
                    child.rmdir()


def process_exists(pid: int) -> bool:
    """Whether ``kill(pid, 0)`` finds a process (one we may not signal exists too)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _kill_members(folder: Path) -> None:
    with contextlib.suppress(OSError, ValueError):
        for pid in (folder / "cgroup.procs").read_text().split():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(int(pid), 9)


def _write(path: Path, text: str) -> None:
    with open(path, "w") as fh:
        fh.write(text)


def _keyed(path: Path) -> dict[str, int]:
    out: dict[str, int] = {}
    with contextlib.suppress(OSError):
        for line in path.read_text().splitlines():
            key, _, value = line.partition(" ")
            if value.strip().isdigit():
                out[key] = int(value)
    return out


def _number(path: Path) -> int:
    with contextlib.suppress(OSError, ValueError):
        return int(path.read_text().strip())
    return 0


# --- the workspace as a tmpfs of its own ------------------------------------------------------------

MS_NOSUID, MS_NODEV = 2, 4
MNT_DETACH = 2
MOUNT_SOURCE = "he-workspace"
"""A workspace tmpfs is mounted with the source ``he-workspace-<pid of the harnessevolve process>``:
any process can recognise (and unmount) it, and one whose process is gone is stale."""

_mounted: set[str] = set()
"""The workspace tmpfs mounts this process made and has not unmounted (absolute paths): telling one
of them needs no read of /proc/self/mountinfo, which the kernel writes out whole at every read --
a line per mount on the machine, so its cost grows with the rollouts running at once, and it was
read three times per sandboxed command."""
_mounted_lock = threading.Lock()


@functools.lru_cache(maxsize=1)
def _libc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    return ctypes.CDLL(name, use_errno=True) if name else None


def mount_workspace(folder: Path, *, size_mb: int, files: int) -> bool:
    """Mount a tmpfs of ``size_mb`` MiB and ``files`` inodes on the empty ``folder`` (root only).
    False when not root or the mount fails (the folder is then an ordinary one). The first call in
    a process unmounts the workspaces of harnessevolve processes that died (``kill -9``)."""
    libc = _libc()
    if os.geteuid() != 0 or libc is None or os.environ.get("HARNESSEVOLVE_NO_WORKSPACE_TMPFS") == "1":
        return False
    _sweep_stale_workspaces()
    options = f"size={size_mb}m,nr_inodes={files},mode=0700".encode()
    source = f"{MOUNT_SOURCE}-{os.getpid()}".encode()
    status: int = libc.mount(source, str(folder).encode(), b"tmpfs", MS_NOSUID | MS_NODEV, options)
    if status != 0:
        return False
    with _mounted_lock:
        _mounted.add(os.path.abspath(folder))
    return True


def workspace_mounts() -> dict[str, str]:
    """Mount point -> source of every workspace tmpfs on the machine (from /proc/self/mountinfo)."""
    found: dict[str, str] = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            left, _, right = line.partition(" - ")
            fields, rest = left.split(), right.split()
            if len(fields) > 4 and len(rest) > 1 and rest[0] == "tmpfs" and rest[1].startswith(MOUNT_SOURCE):
                found[fields[4].replace("\\040", " ")] = rest[1]
    return found


def is_workspace_mount(folder: Path) -> bool:
    """Whether ``folder`` is a workspace tmpfs (this process's own: a stat; another's: mountinfo)."""
    if not os.path.ismount(folder):
        return False
    return os.path.abspath(folder) in _mounted or str(folder) in workspace_mounts()


def hand_over_mount(folder: Path) -> bool:
    """Forget a workspace tmpfs this process mounted, as another process takes it over (the driver
    of rollout workers removes their workspaces): whether it was one of ours."""
    with _mounted_lock:
        point = os.path.abspath(folder)
        ours = point in _mounted
        _mounted.discard(point)
    return ours


def adopt_mount(folder: Path) -> None:
    """Take over a workspace tmpfs a harnessevolve process of ours mounted (``hand_over_mount``
    there): telling it is a workspace mount then needs no read of /proc/self/mountinfo here."""
    with _mounted_lock:
        _mounted.add(os.path.abspath(folder))


def unmount_workspace(folder: Path) -> None:
    """Unmount the workspace's tmpfs (its files go with it); a no-op for an ordinary folder."""
    libc = _libc()
    if libc is not None and is_workspace_mount(folder):
        libc.umount2(str(folder).encode(), MNT_DETACH)
    with _mounted_lock:
        _mounted.discard(os.path.abspath(folder))


@functools.lru_cache(maxsize=1)
def _sweep_stale_workspaces() -> None:
    sweep_stale_workspaces()


def sweep_stale_workspaces() -> list[str]:
    """Unmount (and remove the empty folder of) every workspace tmpfs whose harnessevolve process is
    gone: its source names the pid, so nothing but our own mounts is touched. The mount points
    really unmounted."""
    libc = _libc()
    if libc is None:
        return []
    done = []
    for point, source in workspace_mounts().items():
        pid = source.removeprefix(f"{MOUNT_SOURCE}-")
        stale = pid.isdigit() and not process_exists(int(pid))
        if stale and libc.umount2(point.encode(), MNT_DETACH) == 0:
            done.append(point)
            with contextlib.suppress(OSError):
                os.rmdir(point)
    return done


def unmount_workspaces_under(folder: Path) -> tuple[list[str], list[str]]:
    """Unmount every workspace tmpfs at or below ``folder``: (unmounted, still mounted) mount points."""
    top = os.path.abspath(folder)
    libc = _libc()
    done: list[str] = []
    left: list[str] = []
    for point in workspace_mounts():
        if point != top and not point.startswith(top + os.sep):
            continue
        if libc is not None and libc.umount2(point.encode(), MNT_DETACH) == 0:
            done.append(point)
        else:
            left.append(point)
    with _mounted_lock:
        _mounted.difference_update(done)
    return done, left


def workspace_full(folder: Path) -> set[str]:
    """Which of a tmpfs workspace's limits it is at now: ``"size"``, ``"files"`` (empty set for an
    ordinary folder)."""
    if not is_workspace_mount(folder):
        return set()
    try:
        fs = os.statvfs(folder)
    except OSError:
        return set()
    full = set()
    if fs.f_bavail * fs.f_frsize < 64 * 1024:
        full.add("size")
    if fs.f_favail == 0:
        full.add("files")
    return full


def workspace_notes(full: set[str], *, size_mb: int, files: int) -> list[str]:
    """Tool-result lines for the workspace limits in ``full``."""
    notes = []
    if "size" in full:
        notes.append(f"[rollout limit: the workspace is full (workspace_mb={size_mb} MiB); writes fail]")
    if "files" in full:
        notes.append(f"[rollout limit: the workspace holds workspace_files={files} files; no more]")
    return notes

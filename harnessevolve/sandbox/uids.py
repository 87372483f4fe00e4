"""A uid per live workspace, unique across every harnessevolve process on the machine.

When harnessevolve runs as root, each workspace's commands run as a uid of their own from
``UID_BASE`` up (no account needed): root would ignore the process limit and could read root-only
files, and a uid per workspace keeps one rollout's processes and files apart from another's.

Two concurrent harnessevolve processes must never hand out the same uid. A uid is ours while we
hold an exclusive POSIX record lock (``fcntl.lockf``, taken without waiting) on its byte of one lock
file, ``LOCK_DIR/uids.lock`` (byte ``uid - UID_BASE``): one descriptor for all leases of a process.
The kernel drops the locks when the holder exits, however it exits, so a killed run leaks nothing.
Record locks do not tell a process's own leases apart, so those are also kept in ``_held``. The
folder is root's own (mode 0700, checked before the lock file is opened).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import random
import stat
import threading
from dataclasses import dataclass, field
from pathlib import Path

from harnessevolve.core.errors import SandboxError

UID_BASE = 300_000
UID_COUNT = 65_536
"""Uids ``UID_BASE`` .. ``UID_BASE + UID_COUNT - 1`` (outside every distribution's account range)."""
LOCK_DIR = Path(os.environ.get("HARNESSEVOLVE_UID_LOCK_DIR", "/run/harnessevolve-uids"))
"""One lock file per uid. /run is a tmpfs on most systems, so the folder is emptied at boot."""

_local = threading.Lock()
_held: set[int] = set()
_files: dict[str, int] = {}


@dataclass
class UidLease:
    """A uid held until ``release`` (or until this process ends)."""

    uid: int
    fd: int
    _released: bool = field(default=False, repr=False)

    def release(self) -> None:
        with _local:
            if self._released:
                return
            self._released = True
            with contextlib.suppress(OSError):
                fcntl.lockf(self.fd, fcntl.LOCK_UN, 1, self.uid - UID_BASE, os.SEEK_SET)
            _held.discard(self.uid)


def lease_uid(lock_dir: Path | None = None) -> UidLease:
    """Lock and return a free uid; ``SandboxError`` when all ``UID_COUNT`` are taken or the lock
    folder is not safe to use."""
    folder = lock_dir or LOCK_DIR
    start = random.randrange(UID_COUNT)
    with _local:
        fd = _lock_file(folder)
        for step in range(UID_COUNT):
            uid = UID_BASE + (start + step) % UID_COUNT
            if uid in _held:
                continue
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, uid - UID_BASE, os.SEEK_SET)
            except (BlockingIOError, PermissionError):  # EAGAIN / EACCES: another process holds it
                continue
            _held.add(uid)
            return UidLease(uid, fd)
    raise SandboxError(f"all {UID_COUNT} sandbox uids are in use", hint=f"see {folder / 'uids.lock'}")


def _lock_file(folder: Path) -> int:
    """The lock file's descriptor, opened once per process (closing it would drop every lease)."""
    key = str(folder)
    if key not in _files:
        _prepare(folder)
        try:
            _files[key] = os.open(
                folder / "uids.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600
            )
        except OSError as exc:
            raise SandboxError(f"cannot open the uid lock file in {folder}: {exc}") from None
    return _files[key]


def _prepare(folder: Path) -> None:
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = os.lstat(folder)
    except OSError as exc:
        raise SandboxError(f"cannot make the uid lock folder {folder}: {exc}") from None
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o022:
        raise SandboxError(
            f"the uid lock folder {folder} is not a folder of ours that only we can write",
            hint="remove it (it is recreated), or set HARNESSEVOLVE_UID_LOCK_DIR",
        )

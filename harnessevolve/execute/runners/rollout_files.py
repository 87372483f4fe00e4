"""Reading back what an external agent left in its output folder, without trusting any of it.

The folder is opened once, before the agent starts (``open_folder``: ``O_DIRECTORY | O_NOFOLLOW``),
and every file is then opened relative to that handle (``dir_fd``) with ``O_NOFOLLOW`` and
``O_NONBLOCK``: a symbolic link is refused, never followed (``answer.txt -> /root/secret`` or
``-> /proc/self/environ`` gives a failed rollout, not the file), a FIFO or device does not block,
and only a regular file with one link and at most ``limit`` bytes is read. The agent cannot swap
the folder itself: it is a mount point inside a read-only bind, and the handle is held anyway.
"""

from __future__ import annotations

import errno
import json
import os
import stat
from pathlib import Path

from harnessevolve.core import atif
from harnessevolve.core.atif import Trajectory
from harnessevolve.core.errors import TrajectoryError


class UnsafeOutput(Exception):
    """A file the agent left is not a plain regular file within its size limit (the message says
    which and why); the rollout fails with ``bad_output``."""


def open_folder(path: Path) -> int:
    """A handle on the output folder (never through a link); close it with ``os.close``."""
    return os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)


def read_regular(folder: int, name: str, limit: int) -> bytes | None:
    """The bytes of ``name`` in the folder ``folder`` (a handle), None when there is no such entry;
    ``UnsafeOutput`` when it is a link, not a regular file, hard-linked, or over ``limit`` bytes."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
    try:
        fd = os.open(name, flags, dir_fd=folder)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafeOutput(f"{name} is a symbolic link (not followed)") from None
        raise UnsafeOutput(f"{name} cannot be opened: {exc.strerror}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UnsafeOutput(f"{name} is not a regular file")
        if info.st_nlink != 1:
            raise UnsafeOutput(f"{name} has {info.st_nlink} hard links (not read)")
        if info.st_size > limit:
            raise UnsafeOutput(f"{name} is {info.st_size} bytes, over its {limit}-byte limit")
        chunks: list[bytes] = []
        size = 0
        while chunk := os.read(fd, min(1 << 20, limit + 1 - size)):
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:
                raise UnsafeOutput(f"{name} grew past its {limit}-byte limit while read")
        return b"".join(chunks)
    finally:
        os.close(fd)


def parse_atif(data: bytes, name: str) -> Trajectory:
    """The agent's own ATIF file; ``TrajectoryError`` when it is not valid ATIF."""
    try:
        doc = json.loads(data.decode("utf-8", errors="replace"))
    except (json.JSONDecodeError, RecursionError) as exc:
        raise TrajectoryError(f"not JSON: {exc}".splitlines()[0], file=name) from None
    return atif.from_dict(doc, file=name)

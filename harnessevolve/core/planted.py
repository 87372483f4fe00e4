"""The one way into a folder a model or an agent wrote: an optimizer agent's workspace, an agent's
workspace or output folder. Anything there may be a link, a named pipe, a device, a hard link to a
file outside, or a file of any size.

Every path is opened relative to the folder's descriptor, one component at a time, with
``O_NOFOLLOW`` (no link is followed, not even in a parent folder); the file is checked on the open
descriptor (a regular file, one link); opens never block (``O_NONBLOCK``: a FIFO is refused, not
waited on); reads are bounded. A write rewrites a plain one-link file in place, and otherwise
goes to a fresh file created with ``O_EXCL`` beside the target and renamed over it, so a link
planted where the file was is replaced, never written through. Whatever is refused raises
``PlantedFileError`` with the reason.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

from harnessevolve.core.errors import HarnessEvolveError

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
DEFAULT_MAX_BYTES = 1 << 20


class PlantedFileError(HarnessEvolveError):
    """A file in a model-written folder that is not a plain, bounded file (or cannot be reached
    without following a link); ``reason`` says what it is."""

    default_hint = "files a model wrote are read only when they are plain files within the folder"

    def __init__(self, reason: str, *, file: str | None = None, too_large: bool = False) -> None:
        super().__init__(reason, file=file)
        self.reason = reason
        self.too_large = too_large
        """Refused for its size alone (a plain file, longer than the bound)."""


def _parts(rel: str | PurePosixPath) -> list[str]:
    parts = [p for p in PurePosixPath(rel).parts if p not in ("", ".")]
    if not parts or any(p == ".." or p == "/" for p in parts):
        raise PlantedFileError(f"not a path inside the folder: {rel}", file=str(rel))
    return parts


@contextlib.contextmanager
def _folder(root: Path, parts: list[str], *, create: bool = False) -> Iterator[int]:
    """A descriptor of ``root/parts...`` (each component opened without following a link)."""
    try:
        fd = os.open(root, DIR_FLAGS)
    except OSError as exc:
        raise PlantedFileError(f"cannot open the folder: {exc.strerror}", file=str(root)) from None
    try:
        for index, name in enumerate(parts):
            try:
                nxt = os.open(name, DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise PlantedFileError("no such folder", file="/".join(parts[: index + 1])) from None
                os.mkdir(name, 0o755, dir_fd=fd)
                nxt = os.open(name, DIR_FLAGS, dir_fd=fd)
            except OSError as exc:  # ELOOP / ENOTDIR: a link or a file where a folder belongs
                raise PlantedFileError(
                    f"not a plain folder ({exc.strerror})", file="/".join(parts[: index + 1])
                ) from None
            os.close(fd)
            fd = nxt
        yield fd
    finally:
        os.close(fd)


def kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISFIFO(mode):
        return "a named pipe"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISDIR(mode):
        return "a folder"
    return "not a plain file"


def _open_regular(root: Path, rel: str | PurePosixPath) -> tuple[int, os.stat_result, str]:
    """An open descriptor of the regular file ``root/rel`` (one link), its stat, and its shown name."""
    parts = _parts(rel)
    shown = "/".join(parts)
    with _folder(root, parts[:-1]) as parent:
        try:
            before = os.stat(parts[-1], dir_fd=parent, follow_symlinks=False)
        except FileNotFoundError:
            raise PlantedFileError("no such file", file=shown) from None
        if not stat.S_ISREG(before.st_mode):
            raise PlantedFileError(f"refused: {kind(before.st_mode)}", file=shown)
        try:
            fd = os.open(parts[-1], READ_FLAGS, dir_fd=parent)
        except OSError as exc:
            raise PlantedFileError(f"refused: {exc.strerror}", file=shown) from None
    info = os.fstat(fd)
    problem = (
        f"refused: {kind(info.st_mode)}"  # swapped between the look and the open
        if not stat.S_ISREG(info.st_mode)
        else "refused: a hard link (the file has other names)"
        if info.st_nlink > 1
        else ""
    )
    if problem:
        os.close(fd)
        raise PlantedFileError(problem, file=shown)
    return fd, info, shown


def _read_up_to(fd: int, limit: int) -> bytes:
    chunks: list[bytes] = []
    left = limit
    while left > 0:
        chunk = os.read(fd, min(left, 1 << 16))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def read_bytes(root: Path, rel: str | PurePosixPath, *, max_bytes: int = DEFAULT_MAX_BYTES) -> bytes:
    """The bytes of ``root/rel``: a regular file with one link, at most ``max_bytes`` long."""
    fd, info, shown = _open_regular(root, rel)
    try:
        if info.st_size > max_bytes:
            raise PlantedFileError(
                f"refused: {info.st_size} bytes, more than {max_bytes}", file=shown, too_large=True
            )
        data = _read_up_to(fd, max_bytes + 1)
        if len(data) > max_bytes:
            raise PlantedFileError(f"refused: more than {max_bytes} bytes", file=shown, too_large=True)
        return data
    finally:
        os.close(fd)


def read_head(root: Path, rel: str | PurePosixPath, limit: int) -> bytes:
    """The first ``limit`` bytes of the regular file ``root/rel`` (one link), however long it is."""
    fd, _info, _shown = _open_regular(root, rel)
    try:
        return _read_up_to(fd, limit)
    finally:
        os.close(fd)


def read_text(root: Path, rel: str | PurePosixPath, *, max_bytes: int = DEFAULT_MAX_BYTES) -> str:
    """``read_bytes`` decoded as UTF-8 text without NUL bytes (else ``PlantedFileError``)."""
    data = read_bytes(root, rel, max_bytes=max_bytes)
    shown = "/".join(_parts(rel))
    if b"\0" in data:
        raise PlantedFileError("refused: a binary file (NUL bytes)", file=shown)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise PlantedFileError("refused: not UTF-8 text", file=shown) from None


def write_text(root: Path, rel: str | PurePosixPath, text: str) -> None:
    """Put ``text`` at ``root/rel``. A regular file with one link there is rewritten in place (its
    owner and mode kept: the agent that owns the folder can still edit it); anything else (a
    link, a pipe, nothing) is replaced by a fresh ``O_EXCL`` file renamed over it, owned like its
    folder, so a planted link is replaced, never written through. Missing folders are made; a link
    or a file where a folder belongs is refused."""
    parts = _parts(rel)
    data = text.encode("utf-8")
    with _folder(root, parts[:-1], create=True) as parent:
        try:
            fd = os.open(parts[-1], os.O_WRONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=parent)
        except OSError:
            fd = -1  # missing, a link (ELOOP), a pipe with no reader (ENXIO), a folder...
        if fd >= 0:
            info = os.fstat(fd)
            if stat.S_ISREG(info.st_mode) and info.st_nlink == 1:
                try:
                    os.ftruncate(fd, 0)
                    view = memoryview(data)
                    while view:
                        view = view[os.write(fd, view) :]
                    os.fsync(fd)
                finally:
                    os.close(fd)
                return
            os.close(fd)
        owner = os.fstat(parent)
        temp = f".{parts[-1]}.{secrets.token_hex(6)}.tmp"
        fd = os.open(
            temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=parent
        )
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                if os.geteuid() == 0 and (owner.st_uid, owner.st_gid) != (0, 0):
                    os.fchown(handle.fileno(), owner.st_uid, owner.st_gid)
                os.fsync(handle.fileno())
            os.replace(temp, parts[-1], src_dir_fd=parent, dst_dir_fd=parent)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temp, dir_fd=parent)
            raise


def remove(root: Path, rel: str | PurePosixPath) -> None:
    """Remove the entry ``root/rel`` (a link itself, never its target); missing is fine."""
    parts = _parts(rel)
    try:
        with _folder(root, parts[:-1]) as parent, contextlib.suppress(FileNotFoundError):
            os.unlink(parts[-1], dir_fd=parent)
    except PlantedFileError:
        return  # a parent that is gone or a link: nothing of ours to remove


def entry_kind(root: Path, rel: str | PurePosixPath) -> str | None:
    """``file`` for a regular file, else what the entry is (``kind``); None when there is none."""
    parts = _parts(rel)
    try:
        with _folder(root, parts[:-1]) as parent:
            info = os.stat(parts[-1], dir_fd=parent, follow_symlinks=False)
    except (PlantedFileError, FileNotFoundError):
        return None
    return "file" if stat.S_ISREG(info.st_mode) else kind(info.st_mode)

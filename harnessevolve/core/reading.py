"""Reading a user's text file: regular files only (opened non-blocking: a FIFO or a device is
refused at once, never waited on), bounded, UTF-8, every problem a located error."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from harnessevolve.core.errors import HarnessEvolveError, SchemaError


def read_text(
    path: Path,
    *,
    error: type[HarnessEvolveError] = SchemaError,
    name: str | None = None,
    max_bytes: int | None = None,
) -> str:
    """A UTF-8 text file; a missing file, a folder, unreadable or non-UTF-8 bytes raise ``error``
    naming it (as ``name``, default the path). Only a regular file is read: a named pipe or a device
    is refused at once (opened non-blocking), never waited on. ``max_bytes``: a longer file is
    refused, read only that far (a 10 GB file is an error, not a hang)."""
    shown = name or str(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)  # a FIFO answers at once
        with os.fdopen(fd, "rb") as handle:
            mode = os.fstat(handle.fileno()).st_mode
            if stat.S_ISDIR(mode):
                raise IsADirectoryError
            if not stat.S_ISREG(mode):
                what = "a named pipe" if stat.S_ISFIFO(mode) else "a device or socket"
                raise error(f"refused: {what}, not a regular file", file=shown, hint="pass a regular file")
            data = handle.read() if max_bytes is None else handle.read(max_bytes + 1)
        if max_bytes is not None and len(data) > max_bytes:
            raise error(
                f"refused: larger than {max_bytes // 2**20} MiB",
                file=shown,
                hint="is it the right file? no valid file of this kind is that large",
            )
        return data.decode("utf-8")
    except FileNotFoundError:
        raise error("file not found", file=shown, hint="check the path") from None
    except IsADirectoryError:
        raise error("is a directory, not a file", file=shown, hint="pass the file itself") from None
    except UnicodeDecodeError as exc:
        raise error(
            f"not UTF-8 text ({exc.reason} at byte {exc.start})",
            file=shown,
            hint="the file must be UTF-8 text; re-encode it or pass the right file",
        ) from None
    except OSError as exc:
        raise error(
            f"cannot read it ({exc.strerror or exc})", file=shown, hint="check its permissions"
        ) from None

"""The command's console: a terminal's, or, in a pipe, a wide one whose lines end at their text."""

from __future__ import annotations

import os
import re
import sys
from typing import IO

from rich.console import Console

NON_TTY_WIDTH = 240
"""Columns of piped output (no terminal): wide enough that paths and table rows are never split;
``COLUMNS`` overrides it. Lines are never padded to it (``TrimmedStream``)."""

_PADDING = re.compile(r" +((?:\x1b\[[0-9;]*m)*)$")


class TrimmedStream:
    """Standard output (looked up at each write, so a swapped ``sys.stdout`` is honoured) without
    the spaces rich pads table cells and lines with: piped output ends each line at its text."""

    def __init__(self, stream: IO[str] | None = None) -> None:
        self._stream = stream
        self._held = ""

    @property
    def stream(self) -> IO[str]:
        return self._stream or sys.stdout

    def write(self, text: str) -> int:
        *lines, rest = (self._held + text).split("\n")
        out = "".join(_PADDING.sub(r"\1", line) + "\n" for line in lines)
        match = _PADDING.search(rest)
        self._held = match.group(0) if match else ""
        self.stream.write(out + rest[: len(rest) - len(self._held)])
        return len(text)

    def flush(self) -> None:
        self.stream.flush()

    def isatty(self) -> bool:
        return self.stream.isatty()

    def fileno(self) -> int:
        return self.stream.fileno()

    @property
    def encoding(self) -> str:
        return getattr(self.stream, "encoding", None) or "utf-8"


def _console() -> Console:
    """Rich wraps piped output at 80 columns, splitting paths and rows, and pads table cells to
    their column: not a TTY gets a wide console whose lines end at their text."""
    probe = Console()
    if probe.is_terminal:
        return Console(highlight=False)
    if os.environ.get("COLUMNS"):
        return Console(highlight=False, file=TrimmedStream())  # type: ignore[arg-type]
    return Console(highlight=False, width=NON_TTY_WIDTH, soft_wrap=True, file=TrimmedStream())  # type: ignore[arg-type]


console = _console()

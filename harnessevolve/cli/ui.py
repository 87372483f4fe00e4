"""What commands print with: the console (``terminal.py``), the progress display (``progress.py``),
and small helpers their tables use."""

from __future__ import annotations

from pathlib import Path

from harnessevolve.cli.progress import (
    ProgressLines,
    heartbeat,
    live_display,
    progress_bars,
    progress_hooks,
    progress_lines,
)
from harnessevolve.cli.terminal import NON_TTY_WIDTH, TrimmedStream, console


def mark(value: bool | None) -> str:
    return {True: "[green]pass[/]", False: "[red]fail[/]", None: "[dim]-[/]"}[value]


def score(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def note_malformed(ledger: Path) -> None:
    """Say on stderr which ledger lines a read-only command left out (known events whose fields do
    not fit their record); nothing when there are none."""
    from harnessevolve.cli._errors import err_console
    from harnessevolve.core.errors import HarnessEvolveError
    from harnessevolve.runs.ledger import malformed_note, read_ledger

    try:
        note = malformed_note(ledger, read_ledger(ledger))
    except (HarnessEvolveError, OSError):
        return  # the command reading it says what is wrong
    if note:
        err_console.print(f"warning: {note}", style="yellow", markup=False)


__all__ = [
    "NON_TTY_WIDTH",
    "ProgressLines",
    "TrimmedStream",
    "console",
    "heartbeat",
    "live_display",
    "mark",
    "note_malformed",
    "progress_bars",
    "progress_hooks",
    "progress_lines",
    "score",
]

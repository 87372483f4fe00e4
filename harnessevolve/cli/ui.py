"""Rich progress bars and tables for long commands."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from harnessevolve.pipeline.state import RunHooks

NON_TTY_WIDTH = 240
"""Columns of piped output (no terminal): wide enough that paths and table rows are never split;
``COLUMNS`` overrides it."""


def _console() -> Console:
    """Rich wraps piped output at 80 columns, splitting paths and rows: not a TTY gets a wide one."""
    probe = Console()
    if probe.is_terminal or os.environ.get("COLUMNS"):
        return Console(highlight=False)
    return Console(highlight=False, width=NON_TTY_WIDTH, soft_wrap=True)


console = _console()


def live_display() -> bool:
    """Whether progress is drawn as live bars: only on a terminal that can redraw them. Rich's
    ``is_interactive`` is False for TERM=dumb and TTY_INTERACTIVE=0; FORCE_COLOR (set by many CI
    systems for colour) makes rich treat a log file as a terminal, where a bar is drawn only when it
    stops, so standard output must also be a real terminal unless TTY_INTERACTIVE=1 asks for bars."""
    if not console.is_interactive:
        return False
    if os.environ.get("TTY_INTERACTIVE") == "1":
        return True
    try:
        return console.file.isatty()
    except ValueError:  # a closed stream
        return False


def progress_bars(*, disable: bool = False) -> Progress:
    """The progress display every long command uses: label, bar, done/total, elapsed."""
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=False,
        disable=disable,
    )


@contextmanager
def progress_hooks(enabled: bool = True) -> Iterator[RunHooks]:
    """Hooks that show progress bars; the display starts with the first bar, so input errors
    raised before any work begins print alone (no blank line from an empty live display)."""
    if not enabled:
        yield RunHooks()
        return
    if not live_display():
        # piped output (CI logs), a dumb terminal: a live bar is drawn only when it stops, so a long
        # gate or run would print nothing for as long as it works; plain lines instead
        lines = ProgressLines()
        with heartbeat(lines):
            yield RunHooks(on_progress=lines, log=lambda m: console.print(m))
        return
    progress = progress_bars()

    def on_progress(label: str, total: int) -> Callable[[], None]:
        if not progress.live.is_started:
            progress.start()
        task = progress.add_task(label, total=total)
        return lambda: progress.advance(task)

    try:
        yield RunHooks(on_progress=on_progress, log=lambda m: progress.console.print(m))
    finally:
        if progress.live.is_started:
            progress.stop()


LINE_EVERY_S = 30.0
"""Piped output: the least time between two progress lines of one label."""


def _now() -> float:
    return time.monotonic()


@dataclass
class _Label:
    label: str
    total: int
    started: float
    last: float
    done: int = 0
    shown: bool = False


class ProgressLines:
    """Progress of piped output (an ``on_progress`` hook): a line ``label: done/total (H:MM:SS)``
    when a rollout ends at least LINE_EVERY_S after the label's last line (or its start), and the
    last one once any was shown. Quick work prints nothing; a 20-minute gate prints a line about
    every half minute. ``tick`` (called every few seconds by ``heartbeat``) prints the line of the
    newest unfinished label when none was printed for LINE_EVERY_S, so rollouts that each take
    minutes (a large model on a CPU) do not leave the log silent until the first one ends."""

    def __init__(self, clock: Callable[[], float] | None = None) -> None:
        self.clock = clock or _now
        self._lock = threading.Lock()
        self._newest: _Label | None = None

    def __call__(self, label: str, total: int) -> Callable[[], None]:
        now = self.clock()
        line = _Label(label, total, started=now, last=now)
        with self._lock:
            self._newest = line

        def advance() -> None:
            with self._lock:
                line.done += 1
                now = self.clock()
                if now - line.last >= LINE_EVERY_S or (line.shown and line.done == line.total):
                    self._print(line, now)

        return advance

    def tick(self) -> None:
        with self._lock:
            line, now = self._newest, self.clock()
            if line is not None and line.done < line.total and now - line.last >= LINE_EVERY_S:
                self._print(line, now)

    @staticmethod
    def _print(line: _Label, now: float) -> None:
        line.last, line.shown = now, True
        hours, rest = divmod(int(now - line.started), 3600)
        text = f"{line.label}: {line.done}/{line.total} ({hours}:{rest // 60:02d}:{rest % 60:02d})"
        console.print(text, markup=False)


def progress_lines(label: str, total: int, clock: Callable[[], float] | None = None) -> Callable[[], None]:
    """One label's progress lines (``ProgressLines`` without a heartbeat)."""
    return ProgressLines(clock)(label, total)


@contextmanager
def heartbeat(lines: ProgressLines, every_s: float = 5.0) -> Iterator[None]:
    """Call ``lines.tick`` every ``every_s`` seconds in a daemon thread until the block ends."""
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(every_s):
            lines.tick()

    thread = threading.Thread(target=beat, name="harnessevolve-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


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

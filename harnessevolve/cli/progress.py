"""Progress of long commands (``run``, ``gate``, ``report --final``, ``refs import``, ``compare``):
one display every command uses.

What a person plans by: the outer count (a run's ``generation N of M``), each stage's rollouts
done/total, an ETA (the stage's, and the run's once a generation has ended), and the running
tokens and cost (the stage's and the command's, from the usage meter the model calls are recorded
into). On a terminal that can redraw them these are rich bars; otherwise (a pipe, a CI log, a dumb
terminal) a plain line per stage every ``every_s`` seconds (``HARNESSEVOLVE_PROGRESS_EVERY_S``,
default 30) and the stage's last one::

    generation 2 of 5: gen 2: run current harness: 12/40 rollouts, 0:01:10 elapsed, ETA 0:03:10; \
execute 15234 tokens $0.0123; total 40112 tokens $0.0400; run ETA 0:12:00

A command enters :func:`progress_hooks` and hands its :class:`RunHooks` to the pipeline:
``on_progress(label, total)`` starts a stage and returns its ``advance``; ``on_outer(n, m)`` says
which of the outer units is under way.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
)
from rich.text import Text

from harnessevolve.cli import terminal
from harnessevolve.models.budget import metering
from harnessevolve.models.usage import Usage, UsageMeter, UsageScope, current_scope, usage_scope
from harnessevolve.pipeline.state import RunHooks

LINE_EVERY_S = 30.0
"""Piped output: the least time between two progress lines of one stage (``every_s``)."""
EVERY_ENV = "HARNESSEVOLVE_PROGRESS_EVERY_S"
"""Overrides LINE_EVERY_S (seconds; 0: a line per rollout)."""
BEAT_S = 5.0
"""How often the heartbeat looks whether a slow stage is due a line."""
_OUTER = "outer"
"""The field of the outer count's bar (its ``_Outer``)."""


def _now() -> float:
    return time.monotonic()


def _console() -> Console:
    return terminal.console  # looked up at each use: tests swap it


def line_period() -> float:
    """Seconds between plain lines: ``HARNESSEVOLVE_PROGRESS_EVERY_S``, else LINE_EVERY_S."""
    raw = os.environ.get(EVERY_ENV, "").strip()
    try:
        return max(0.0, float(raw)) if raw else LINE_EVERY_S
    except ValueError:
        return LINE_EVERY_S


def clock_text(seconds: float) -> str:
    """``H:MM:SS``."""
    hours, rest = divmod(max(0, int(seconds)), 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}"


def usage_text(usage: Usage) -> str:
    return f"{usage.tokens} tokens ${usage.cost_usd:.4f}"


def stage_usage(scope: UsageScope | None) -> Usage | None:
    """What the scope's stage has spent so far (None: the calls are not metered)."""
    if scope is None:
        return None
    rows = scope.meter.rows()
    return sum((u for (stage, _p, _m), u in rows.items() if stage == scope.stage), Usage())


def spend_text(scope: UsageScope | None) -> str:
    """``execute 1234 tokens $0.0012; total 5678 tokens $0.0050`` (the total only when other
    stages spent too); empty when the calls are not metered."""
    usage = stage_usage(scope)
    if scope is None or usage is None:
        return ""
    total = scope.meter.totals()
    text = f"{scope.stage} {usage_text(usage)}"
    return text if total == usage else f"{text}; total {usage_text(total)}"


@dataclass
class _Outer:
    """The outer count: ``unit`` ``n`` of ``total``, with when each began (for the run's ETA)."""

    unit: str
    whole: str = "run"
    n: int = 0
    total: int = 0
    first: int = 0
    first_started: float = 0.0
    started: float = 0.0

    def begin(self, n: int, total: int, now: float) -> None:
        """Unit ``n`` of ``total`` begins now."""
        if not self.first:
            self.first, self.first_started = n, now
        self.n, self.total, self.started = n, total, now

    def text(self) -> str:
        return f"{self.unit} {self.n} of {self.total}" if self.n else ""

    def eta(self, now: float) -> float | None:
        """The rest of the outer units at the mean pace of those ended in this process."""
        ended = self.n - self.first
        if ended < 1 or not self.total:
            return None
        per = (self.started - self.first_started) / ended
        return max(0.0, per * (self.total - self.n + 1) - (now - self.started))


@dataclass
class _Stage:
    label: str
    total: int
    started: float
    last: float
    scope: UsageScope | None
    done: int = 0
    shown: bool = False
    outer: str = field(default="")

    def eta(self, now: float) -> float | None:
        if not self.done:
            return None
        return (now - self.started) / self.done * max(0, self.total - self.done)


class ProgressLines:
    """Progress of piped output (an ``on_progress`` hook): a stage's line when a rollout ends at
    least ``every_s`` after its last line (or its start), and its last one once any was shown.
    Quick work prints nothing; a 20-minute gate prints a line about every half minute. ``tick``
    (called every few seconds by ``heartbeat``) prints the line of the newest unfinished stage when
    none was printed for ``every_s``, so rollouts that each take minutes (a large model on a CPU)
    do not leave the log silent until the first one ends."""

    def __init__(
        self,
        clock: Callable[[], float] | None = None,
        *,
        every_s: float | None = None,
        console: Console | None = None,
        unit: str = "generation",
        whole: str = "run",
    ) -> None:
        self.clock = clock or _now
        self.every_s = line_period() if every_s is None else every_s
        self.console = console
        self._lock = threading.Lock()
        self._newest: _Stage | None = None
        self._outer = _Outer(unit, whole)

    def outer(self, n: int, total: int) -> None:
        """``unit`` ``n`` of ``total`` has begun (an ``on_outer`` hook)."""
        with self._lock:
            self._outer.begin(n, total, self.clock())

    def __call__(self, label: str, total: int) -> Callable[[], None]:
        now = self.clock()
        stage = _Stage(label, total, started=now, last=now, scope=current_scope(), outer=self._outer.text())
        with self._lock:
            self._newest = stage

        def advance() -> None:
            with self._lock:
                stage.done += 1
                now = self.clock()
                if now - stage.last >= self.every_s or (stage.shown and stage.done == stage.total):
                    self._print(stage, now)

        return advance

    def tick(self) -> None:
        with self._lock:
            stage, now = self._newest, self.clock()
            if stage is not None and stage.done < stage.total and now - stage.last >= self.every_s:
                self._print(stage, now)

    def line(self, stage: _Stage, now: float) -> str:
        eta = stage.eta(now)
        text = (
            f"{stage.outer + ': ' if stage.outer else ''}{stage.label}: {stage.done}/{stage.total} rollouts, "
            f"{clock_text(now - stage.started)} elapsed, ETA {'?' if eta is None else clock_text(eta)}"
        )
        spend = spend_text(stage.scope)
        run_eta = self._outer.eta(now) if stage.outer else None
        return (
            text
            + (f"; {spend}" if spend else "")
            + (f"; {self._outer.whole} ETA {clock_text(run_eta)}" if run_eta is not None else "")
        )

    def _print(self, stage: _Stage, now: float) -> None:
        stage.last, stage.shown = now, True
        (self.console or _console()).print(self.line(stage, now), markup=False, soft_wrap=True)


def progress_lines(
    label: str, total: int, clock: Callable[[], float] | None = None, every_s: float | None = None
) -> Callable[[], None]:
    """One stage's progress lines (``ProgressLines`` without a heartbeat)."""
    return ProgressLines(clock, every_s=every_s)(label, total)


@contextmanager
def heartbeat(lines: ProgressLines, every_s: float = BEAT_S) -> Iterator[None]:
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


def live_display(console: Console | None = None) -> bool:
    """Whether progress is drawn as live bars: only on a terminal that can redraw them. Rich's
    ``is_interactive`` is False for TERM=dumb and TTY_INTERACTIVE=0; FORCE_COLOR (set by many CI
    systems for colour) makes rich treat a log file as a terminal, where a bar is drawn only when it
    stops, so standard output must also be a real terminal unless TTY_INTERACTIVE=1 asks for bars."""
    console = console or _console()
    if not console.is_interactive:
        return False
    if os.environ.get("TTY_INTERACTIVE") == "1":
        return True
    try:
        return console.file.isatty()
    except ValueError:  # a closed stream
        return False


class EtaColumn(ProgressColumn):
    """``ETA H:MM:SS`` at the mean pace since the bar began (an outer bar: of the units ended);
    ``ETA ?`` before the first is done."""

    def render(self, task: Task) -> Text:
        outer = task.fields.get(_OUTER)
        if isinstance(outer, _Outer):
            eta = outer.eta(_now())
        elif task.completed and task.elapsed is not None and task.total is not None:
            eta = task.elapsed / task.completed * max(0.0, task.total - task.completed)
        else:
            eta = None
        return Text(f"ETA {'?' if eta is None else clock_text(eta)}", style="progress.remaining")


class SpendColumn(ProgressColumn):
    """The stage's running tokens and cost (and the command's, when other stages spent too)."""

    def render(self, task: Task) -> Text:
        scope = task.fields.get("scope")
        return Text(spend_text(scope) if isinstance(scope, UsageScope) else "", style="progress.data.speed")


def progress_bars(*, disable: bool = False, console: Console | None = None) -> Progress:
    """The bars every long command draws: label, bar, done/total, elapsed, ETA, tokens and cost."""
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        EtaColumn(),
        SpendColumn(),
        console=console or _console(),
        transient=False,
        disable=disable,
    )


@contextmanager
def _metered(stage: str) -> Iterator[None]:
    """Model calls made inside are metered (as ``stage``) unless a meter already counts them; a
    run's own meter (``metering`` in the pipeline) takes over inside it."""
    if current_scope() is not None:
        yield
        return
    meter = UsageMeter()
    with metering(meter), usage_scope(meter, stage=stage):
        yield


@contextmanager
def progress_hooks(
    enabled: bool = True,
    *,
    console: Console | None = None,
    every_s: float | None = None,
    clock: Callable[[], float] | None = None,
    unit: str = "generation",
    whole: str = "run",
    stage: str = "model calls",
) -> Iterator[RunHooks]:
    """The hooks a long command hands its pipeline: rich bars on a terminal that can redraw them,
    plain periodic lines otherwise (``ProgressLines``), both with done/total, ETA, tokens and cost.

    ``console``: where it is shown (default: the command's standard output console; ``compare``
    passes its standard error one). ``every_s`` and ``clock``: the plain lines' period and clock
    (tests pass both). ``unit``: what ``on_outer(n, m)`` counts and ``whole`` what they make up,
    whose ETA the lines give (``generation`` of a ``run``; ``cell`` of a ``comparison``).
    ``stage``: the name model calls made outside any pipeline stage are metered under. The bars
    start with the first stage, so input errors raised before any work begins print alone."""
    if not enabled:
        yield RunHooks()
        return
    out = console or _console()
    with ExitStack() as stack:
        stack.enter_context(_metered(stage))
        if not live_display(out):
            # piped output (CI logs), a dumb terminal: a live bar is drawn only when it stops, so a
            # long gate or run would print nothing for as long as it works; plain lines instead
            lines = ProgressLines(clock, every_s=every_s, console=out, unit=unit, whole=whole)
            stack.enter_context(heartbeat(lines, min(BEAT_S, max(lines.every_s, 0.5))))
            yield RunHooks(
                on_progress=lines,
                log=lambda m: out.print(m, soft_wrap=True),
                on_outer=lines.outer,
            )
            return
        progress = progress_bars(console=out)
        stack.callback(lambda: progress.stop() if progress.live.is_started else None)
        yield RunHooks(
            on_progress=lambda label, total: _bar(progress, label, total),
            log=lambda m: progress.console.print(m),
            on_outer=lambda n, total: _outer_bar(progress, _Outer(unit, whole), n, total),
        )


def _bar(progress: Progress, label: str, total: int) -> Callable[[], None]:
    if not progress.live.is_started:
        progress.start()
    task = progress.add_task(label, total=total, scope=current_scope())
    return lambda: progress.advance(task)


def _outer_bar(progress: Progress, fresh: _Outer, n: int, total: int) -> None:
    """The outer count's bar (``generation N of M``), done up to the unit before ``n``, its ETA
    that of the whole (``fresh``: the count the first call starts)."""
    if not progress.live.is_started:
        progress.start()
    task = next((t for t in progress.tasks if isinstance(t.fields.get(_OUTER), _Outer)), None)
    outer = fresh if task is None else task.fields[_OUTER]
    outer.begin(n, total, _now())
    description = outer.text()
    if task is None:
        fields: dict[str, Any] = {_OUTER: outer}
        progress.add_task(description, total=total, completed=n - 1, **fields)
    else:
        progress.update(task.id, description=description, completed=n - 1, total=total)

"""Ctrl-C and SIGTERM: one way to stop a long command cleanly.

A terminal's Ctrl-C sends SIGINT to the whole foreground process group, so helper processes die
too; a service manager (or ``kill``) sends SIGTERM to the main process. Both are handled alike:

* :func:`stop_signals` (a context manager around a long command) makes SIGTERM raise
  ``KeyboardInterrupt`` as SIGINT does;
* :func:`run_async` (``asyncio.run`` for the long async part) cancels the main task on the first
  signal and raises ``KeyboardInterrupt`` once it has unwound; a second signal is counted, not
  raised mid-clean-up (a third stops at once);
* :func:`saving` (around the clean-up after an interrupt) defers further SIGINT/SIGTERM, so a
  second Ctrl-C cannot break off writing where the run stopped; they are counted, not lost;
* :func:`stopping` tells work in other threads that a stop signal came (set by the first one): a
  local model's completion checks it at each token and ends there, so a stopped command does not
  wait out a completion whose reply nobody will read;
* :func:`received` lists the SIGTERMs and the deferred signals that arrived, :func:`signal_name`
  the one that stopped the command.

The git helper processes of :class:`harnessevolve.harness.git.HarnessRepo` run in their own
session and never see the terminal's SIGINT at all.

:class:`Interrupted` is what ``run`` raises after it has recorded ``run_interrupted``: a
``KeyboardInterrupt`` carrying where it stopped, which the CLI prints with exit code 130.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
import threading
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any, TypeVar

T = TypeVar("T")
FORCE_AFTER = 3
"""The third stop signal during a graceful stop gives up waiting and stops at once."""

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_received: list[str] = []
_stopping = threading.Event()


@dataclass(frozen=True)
class StopPoint:
    run_id: str
    run_dir: Path
    harness_dir: Path
    generation: int
    stage: str


class Interrupted(KeyboardInterrupt):
    """A run stopped by Ctrl-C or SIGTERM, after its ledger recorded ``run_interrupted``."""

    def __init__(self, point: StopPoint, signal_name: str) -> None:
        super().__init__(signal_name)
        self.point = point
        self.signal_name = signal_name


def received() -> tuple[str, ...]:
    return tuple(_received)


def stopping() -> bool:
    """Whether a stop signal reached the command running now (thread-safe; cleared when
    :func:`stop_signals` ends and when the next command's :func:`run_async` begins)."""
    return _stopping.is_set()


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def _stop(signum: int, _frame: FrameType | None) -> None:
    name = signal.Signals(signum).name
    _received.append(name)
    _stopping.set()
    raise KeyboardInterrupt(name)


def _count(signum: int, _frame: FrameType | None) -> None:
    _received.append(signal.Signals(signum).name)


@contextmanager
def _handled_by(handler: Callable[[int, FrameType | None], None]) -> Iterator[None]:
    """SIGINT and SIGTERM go to ``handler`` inside the block, then back to the handlers they had;
    outside the main thread this does nothing."""
    if not _main_thread():
        yield
        return
    before = {s: signal.getsignal(s) for s in STOP_SIGNALS}
    for sig in STOP_SIGNALS:
        signal.signal(sig, handler)
    try:
        yield
    finally:
        for sig, old in before.items():
            signal.signal(sig, old if old is not None else signal.SIG_DFL)


@contextmanager
def stop_signals() -> Iterator[None]:
    """SIGINT and SIGTERM both stop the command with ``KeyboardInterrupt``, and are recorded (see
    :func:`signal_name`); outside the main thread this does nothing."""
    if _main_thread():
        _received.clear()
        _stopping.clear()
    try:
        with _handled_by(_stop):
            yield
    finally:
        if _main_thread():
            _stopping.clear()  # a later command in this process (the Python API) starts clear


def saving() -> AbstractContextManager[None]:
    """Defer SIGINT and SIGTERM while the clean-up after an interrupt writes where it stopped."""
    return _handled_by(_count)


def signal_name() -> str:
    """The first stop signal of this command (``SIGINT`` when none other was recorded)."""
    return _received[0] if _received else "SIGINT"


_LOOP_END: list[Callable[[], Awaitable[None]]] = []
"""Coroutines awaited at the end of every ``run_async`` loop whose main task finished (a library's
clean-up that must run on the loop it used: litellm's logging worker, ``models/quiet.py``)."""


def at_loop_end(hook: Callable[[], Awaitable[None]]) -> None:
    """Register ``hook`` (once) to run at the end of every ``run_async`` loop; a hook never fails it."""
    if hook not in _LOOP_END:
        _LOOP_END.append(hook)


async def _settled(main: Coroutine[Any, Any, T]) -> T:
    result = await main
    for hook in list(_LOOP_END):
        with contextlib.suppress(Exception):
            await hook()
    return result


UNWIND_GRACE_S = 30.0
"""How long tasks still unwinding when the main task ended get to finish their clean-up (a
rollout closing its tool server: kill, reap) before the loop cancels what is left and closes."""
SAY_AFTER_S = 1.0
"""A clean-up still under way after this long is announced on stderr (how long, how to force)."""


def _let_the_rest_unwind(loop: asyncio.AbstractEventLoop) -> None:
    """Wait (at most ``UNWIND_GRACE_S``) for the tasks that were cancelled and are still unwinding
    when the main task ended.

    ``asyncio.gather`` ends as soon as one child is cancelled while the others still run their
    ``finally`` blocks; ``asyncio.Runner`` would then cancel every task left, the helper tasks
    of that clean-up included (``wait_for``'s inner wait), cutting short the kill and reap of a
    rollout's processes: an unreaped subprocess is reported after the loop closed ("Event loop
    is closed" tracebacks on Ctrl-C). Tasks nobody cancelled are left to the runner."""
    unwinding = [t for t in asyncio.all_tasks(loop) if not t.done() and t.cancelling()]
    if not unwinding:
        return
    _, left = loop.run_until_complete(asyncio.wait(unwinding, timeout=SAY_AFTER_S))
    if left:
        sys.stderr.write(
            f"Waiting up to {UNWIND_GRACE_S:g} s for {len(left)} task(s) to clean up "
            f"(Ctrl-C {FORCE_AFTER - 1} more times stops at once).\n"
        )
        loop.run_until_complete(asyncio.wait(left, timeout=UNWIND_GRACE_S - SAY_AFTER_S))


def run_async(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(main)`` that stops gracefully on SIGINT or SIGTERM: the first cancels the main
    task (its ``finally`` blocks run) and ``KeyboardInterrupt`` is raised once it has unwound; a
    second one is only counted (asyncio's own handler would raise it anywhere, mid-clean-up); the
    third stops at once."""
    if not _main_thread():
        return asyncio.run(_settled(main))
    _stopping.clear()
    with asyncio.Runner() as runner:
        loop = runner.get_loop()
        task = loop.create_task(_settled(main))
        seen: list[str] = []

        def on_signal(signum: int, _frame: FrameType | None) -> None:
            name = signal.Signals(signum).name
            seen.append(name)
            _received.append(name)
            if len(seen) == 1:
                _stopping.set()
                loop.call_soon_threadsafe(task.cancel)
            elif len(seen) >= FORCE_AFTER:
                raise KeyboardInterrupt(name)

        before = {s: signal.getsignal(s) for s in STOP_SIGNALS}
        for sig in STOP_SIGNALS:
            signal.signal(sig, on_signal)
        try:
            return loop.run_until_complete(task)
        except asyncio.CancelledError:
            if seen:
                raise KeyboardInterrupt(seen[0]) from None
            raise
        finally:
            try:
                if len(seen) < FORCE_AFTER:  # a forced stop does not wait
                    _let_the_rest_unwind(loop)
            finally:
                for sig, handler in before.items():
                    # Once stopping, a later signal is only counted until the command's own
                    # handlers come back (``stop_signals``): raising it between here and
                    # ``saving()`` would cut short the clean-up that writes where the run stopped.
                    restored = _count if seen else handler if handler is not None else signal.SIG_DFL
                    signal.signal(sig, restored)

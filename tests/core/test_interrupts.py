"""Stop signals: the first one tells other threads (``stopping``), and the next command starts clear."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time

import pytest

from harnessevolve.core import interrupts


def watch(seen: list[bool]) -> None:
    """A worker thread, as a local model's completion: waits until it is told to stop."""
    started = time.monotonic()
    while not interrupts.stopping() and time.monotonic() - started < 60:
        time.sleep(0.01)
    seen.append(interrupts.stopping())


def test_the_first_stop_signal_tells_other_threads_and_the_next_command_starts_clear() -> None:
    seen: list[bool] = []
    worker = threading.Thread(target=watch, args=(seen,))

    async def main() -> None:
        assert not interrupts.stopping()
        worker.start()
        os.kill(os.getpid(), signal.SIGTERM)
        await asyncio.Event().wait()  # cancelled by the signal

    with interrupts.stop_signals():
        with pytest.raises(KeyboardInterrupt):
            interrupts.run_async(main())
        worker.join()
        assert seen == [True] and interrupts.stopping()
    assert not interrupts.stopping()  # the command is over: later work in this process is not cut


def test_stop_signals_alone_sets_it_too() -> None:
    with pytest.raises(KeyboardInterrupt), interrupts.stop_signals():
        try:
            os.kill(os.getpid(), signal.SIGINT)
        finally:
            assert interrupts.stopping()
    assert not interrupts.stopping()
    assert interrupts.run_async(asyncio.sleep(0, "ok")) == "ok" and not interrupts.stopping()


def test_model_calls_in_successive_run_async_loops_leave_no_litellm_warning(
    capfd: pytest.CaptureFixture[str],
) -> None:
    """A comparison runs one loop per cell and per scoring: litellm's logging worker, bound to the
    loop that used it last, warned "event loop changed" at the next loop's first call. Loops made
    by ``run_async`` settle it before they end (a hook ``models/registry.py`` registers)."""
    import gc

    from harnessevolve.models.call import acomplete
    from harnessevolve.models.scripted import register_script, unregister_script

    register_script("loops", lambda _messages, _tools: "hello")

    async def one_call(i: int) -> None:
        reply = await acomplete("scripted/loops", [{"role": "user", "content": f"hi {i}"}])
        assert reply.content == "hello"

    try:
        for i in range(3):
            interrupts.run_async(one_call(i))
    finally:
        unregister_script("loops")
    gc.collect()
    err = capfd.readouterr().err
    assert "LoggingWorker" not in err and "Task was destroyed" not in err, err


def test_a_stop_lets_every_cancelled_task_finish_its_clean_up_before_the_loop_closes() -> None:
    """``gather`` ends with its first cancelled child while the others still clean up (a rollout
    killing and reaping its tool server, through ``wait_for``): the loop must not cancel that
    clean-up's helper tasks (once it did, unreaped processes were reported as "Event loop is
    closed" tracebacks after Ctrl-C)."""
    cleaned: list[str] = []

    async def quick() -> None:
        try:
            await asyncio.Event().wait()
        finally:
            cleaned.append("quick")

    async def slow(released: asyncio.Event) -> None:
        try:
            await asyncio.Event().wait()
        finally:
            # a clean-up that needs more than one loop turn, through a helper task, as a reap is
            await asyncio.wait_for(released.wait(), 30)
            cleaned.append("slow")

    kept: list[asyncio.Task[None]] = []

    async def main() -> None:
        released = asyncio.Event()

        async def release_later() -> None:
            for _ in range(20):  # some loop turns after the gather has ended
                await asyncio.sleep(0)
            released.set()

        children = asyncio.gather(quick(), slow(released))
        await asyncio.sleep(0)
        os.kill(os.getpid(), signal.SIGINT)
        try:
            await children
        finally:
            kept.append(asyncio.ensure_future(release_later()))  # nobody cancels it

    with interrupts.stop_signals(), pytest.raises(KeyboardInterrupt):
        interrupts.run_async(main())
    assert sorted(cleaned) == ["quick", "slow"]


def test_a_forced_stop_does_not_wait_for_clean_up_and_the_handlers_come_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The third signal stops at once: no grace for tasks still cleaning up (a clean-up that hangs
    would otherwise hold the exit), and the command's own handlers are back either way."""
    waited: list[bool] = []
    monkeypatch.setattr(interrupts, "_let_the_rest_unwind", lambda _loop: waited.append(True))

    async def main() -> None:
        try:
            os.kill(os.getpid(), signal.SIGINT)
            await asyncio.Event().wait()
        finally:  # a clean-up the user will not wait for: Ctrl-C twice more
            for _ in range(interrupts.FORCE_AFTER - 1):
                os.kill(os.getpid(), signal.SIGINT)
            await asyncio.Event().wait()

    with interrupts.stop_signals():
        with pytest.raises(KeyboardInterrupt):
            interrupts.run_async(main())
        assert waited == []
        assert signal.getsignal(signal.SIGINT) is interrupts._count  # counted until stop_signals ends

    async def one_stop() -> None:
        os.kill(os.getpid(), signal.SIGINT)
        await asyncio.Event().wait()

    with interrupts.stop_signals(), pytest.raises(KeyboardInterrupt):
        interrupts.run_async(one_stop())
    assert waited == [True]  # a graceful stop lets the rest unwind

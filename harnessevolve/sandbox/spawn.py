"""Start a command without stalling the event loop: ``spawn`` runs ``subprocess.Popen`` in a worker
thread and hands back a process the loop reads and waits on.

Why: ``asyncio.create_subprocess_exec`` forks and waits for the child's ``exec`` in the loop's own
thread. For a sandboxed command (bwrap, setpriv, prlimit, bash) that wait is several milliseconds,
more on a busy machine where the child waits for a CPU, and every other rollout of the process
waits with it: at 64 concurrent rollouts the loop starts commands one after another. Started from a
worker thread the waits overlap (``Popen`` releases the GIL while it waits for the ``exec``).

The process's output is an ``asyncio.StreamReader`` on its pipe; its exit is seen through a pidfd
(``os.pidfd_open``, Linux 5.3+) watched by the loop, or, where there is none, by a worker thread
blocked in ``wait``. The child leads its own session (``start_new_session``), so ``kill_group``
kills it and everything it started. Same surface as ``asyncio.subprocess.Process`` where the
callers use it (``pid``, ``stdout``, ``returncode``, ``wait``), so ``finish_process`` takes both.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import signal
import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")


class SpawnedProcess:
    """A child started by ``spawn``: read ``stdout``, ``await wait()``; ``close_pipe`` gives up on
    the rest of the output (a process outside the group that still holds the pipe)."""

    def __init__(self, popen: subprocess.Popen[bytes], stdout: asyncio.StreamReader, pipe: Any) -> None:
        self._popen = popen
        self.stdout = stdout
        self._pipe = pipe
        self._exited: asyncio.Future[int] | None = None

    @property
    def pid(self) -> int:
        return self._popen.pid

    @property
    def returncode(self) -> int | None:
        return self._popen.returncode

    async def wait(self) -> int:
        """The exit status, once the process has exited (reaped here, never a zombie)."""
        if self._popen.poll() is not None:
            return self._popen.returncode
        if self._exited is None:
            self._exited = _watch_exit(self._popen)
        return await asyncio.shield(self._exited)

    def close_pipe(self) -> None:
        self._pipe.close()


def _watch_exit(popen: subprocess.Popen[bytes]) -> asyncio.Future[int]:
    """A future set to the exit status: a pidfd the loop watches, else a thread in ``wait``."""
    loop = asyncio.get_running_loop()
    try:
        pidfd = os.pidfd_open(popen.pid)
    except (AttributeError, OSError):  # no pidfd here (old kernel, not Linux): a thread waits
        return asyncio.ensure_future(asyncio.to_thread(popen.wait))
    exited: asyncio.Future[int] = loop.create_future()

    def readable() -> None:
        if popen.poll() is None:
            return
        loop.remove_reader(pidfd)
        os.close(pidfd)
        if not exited.done():
            exited.set_result(popen.returncode)

    loop.add_reader(pidfd, readable)
    readable()  # it may have exited between poll() and pidfd_open()
    return exited


async def spawn(
    argv: tuple[str, ...] | list[str], *, cwd: Path | str | None = None, env: Mapping[str, str] | None = None
) -> SpawnedProcess:
    """Start ``argv`` in its own session, stdin from /dev/null, stdout and stderr into one pipe;
    raises ``OSError`` as ``Popen`` does (a missing program, a bad ``cwd``)."""
    _, process = await spawn_from(lambda: (None, start_process(argv, cwd=cwd, env=env)))
    return process


async def spawn_from(
    start: Callable[[], tuple[T, subprocess.Popen[bytes]]], abandon: Callable[[T], object] = lambda _v: None
) -> tuple[T, SpawnedProcess]:
    """``start()`` run in one worker thread: it prepares what the command needs (a sandbox's launch)
    and starts it with ``start_process``; one thread hop instead of two. Its first value comes back
    beside the process. When the caller is cancelled meanwhile, the process is killed once it has
    started and ``abandon`` gets the value (to undo the preparation)."""
    loop = asyncio.get_running_loop()
    started = loop.run_in_executor(None, start)
    try:
        value, process = await asyncio.shield(started)
    except asyncio.CancelledError:
        started.add_done_callback(functools.partial(_abandon, undo=abandon))
        raise
    return value, await _watched(process)


async def _watched(popen: subprocess.Popen[bytes]) -> SpawnedProcess:
    loop = asyncio.get_running_loop()
    assert popen.stdout is not None
    reader = asyncio.StreamReader(limit=2**20)
    try:
        pipe, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), popen.stdout)
    except BaseException:
        _abandon_popen(popen)
        raise
    return SpawnedProcess(popen, reader, pipe)


def start_process(
    argv: tuple[str, ...] | list[str],
    *,
    cwd: Path | str | None,
    env: Mapping[str, str] | None,
    pass_fds: tuple[int, ...] = (),
) -> subprocess.Popen[bytes]:
    """The ``Popen`` ``spawn`` makes: its own session, stdin from /dev/null, one pipe for stdout and
    stderr (for ``spawn_from``'s ``start``)."""
    return subprocess.Popen(
        list(argv),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        cwd=cwd,
        env=dict(env) if env is not None else None,
        pass_fds=pass_fds,
    )


def _abandon(
    start: asyncio.Future[tuple[Any, subprocess.Popen[bytes]]], undo: Callable[[Any], object]
) -> None:
    """The caller was cancelled while the process started: kill it once it has, then ``undo``."""
    if not start.cancelled() and start.exception() is None:
        value, process = start.result()
        _abandon_popen(process)
        undo(value)


def _abandon_popen(popen: subprocess.Popen[bytes]) -> None:
    kill_group(popen.pid)
    if popen.stdout is not None:
        popen.stdout.close()
    with contextlib.suppress(RuntimeError):  # no running loop (shutting down): the reaper is ours anyway
        asyncio.get_running_loop().run_in_executor(None, popen.wait)


def kill_group(pid: int) -> None:
    """SIGKILL the process group ``pid`` leads (a sandbox and, through it, all it started)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)

"""sandbox.spawn: a command started from a worker thread, read and reaped by the event loop -- its
output, exit status, process group, a caller cancelled while it starts, and the loop kept free
while a child is being started."""

from __future__ import annotations

import asyncio
import os
import subprocess
import threading
from pathlib import Path

import pytest

from harnessevolve.execute.tools import ToolResult, run_shell
from harnessevolve.sandbox import spawn as spawn_module
from harnessevolve.sandbox.base import UnsafeNoSandbox
from harnessevolve.sandbox.launch import finish_process
from harnessevolve.sandbox.spawn import spawn


async def _output(proc: spawn_module.SpawnedProcess) -> bytes:
    chunks = []
    while chunk := await proc.stdout.read(65536):
        chunks.append(chunk)
    return b"".join(chunks)


def test_output_exit_status_and_own_session(tmp_path: Path) -> None:
    async def main() -> tuple[bytes, int, int]:
        proc = await spawn(("bash", "-c", "echo out; echo err >&2; ps -o sid= -p $$; exit 3"), cwd=tmp_path)
        out = await _output(proc)
        return out, await proc.wait(), proc.pid

    out, status, pid = asyncio.run(main())
    lines = out.decode().split()
    assert lines[:2] == ["out", "err"] and status == 3
    assert int(lines[2]) == pid  # its own session: kill_group reaches all it started


def test_environment_and_folder_are_the_callers(tmp_path: Path) -> None:
    async def main() -> bytes:
        proc = await spawn(("bash", "-c", 'echo "$GREETING $PWD"'), cwd=tmp_path, env={"GREETING": "hi"})
        out = await _output(proc)
        await proc.wait()
        return out

    assert asyncio.run(main()).decode().strip() == f"hi {tmp_path}"


@pytest.mark.parametrize("pidfd", [True, False])
def test_exit_seen_with_and_without_a_pidfd(monkeypatch: pytest.MonkeyPatch, pidfd: bool) -> None:
    if not pidfd:
        monkeypatch.delattr(os, "pidfd_open", raising=False)  # an old kernel: a thread waits

    async def main() -> tuple[int, int]:
        proc = await spawn(("bash", "-c", "exit 7"))
        first = await proc.wait()
        return first, await proc.wait()  # waiting again after the exit: the same status

    assert asyncio.run(main()) == (7, 7)


def test_finish_process_kills_the_group_and_reaps(tmp_path: Path) -> None:
    marker = tmp_path / "child.pid"

    async def main() -> int | None:
        proc = await spawn(("bash", "-c", f"sleep 600 & echo $! > {marker}; wait"))
        while not marker.exists() or not marker.read_text().strip():
            await asyncio.sleep(0.01)
        await finish_process(proc)
        return proc.returncode

    assert asyncio.run(main()) is not None
    assert not _alive(int(marker.read_text()))  # the background child went with the group


def _alive(pid: int) -> bool:
    """Running or sleeping; a zombie (dead, its reaper not there yet) or no process is not alive.
    The killed child held the pipe, so finish_process returned only once it had died."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def test_a_missing_program_raises_oserror() -> None:
    with pytest.raises(OSError):
        asyncio.run(spawn(("/nonexistent/program",)))


def test_cancelled_while_starting_the_process_is_killed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The caller is cancelled while Popen runs in its thread: the process it started is killed."""
    started, release = threading.Event(), threading.Event()
    made: list[subprocess.Popen[bytes]] = []
    real_popen = subprocess.Popen

    def slow_popen(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202 - Popen's own signature
        popen = real_popen(*args, **kwargs)
        made.append(popen)
        started.set()
        release.wait(30)
        return popen

    monkeypatch.setattr(spawn_module.subprocess, "Popen", slow_popen)

    async def main() -> None:
        task = asyncio.ensure_future(spawn(("sleep", "600")))
        await asyncio.to_thread(started.wait, 30)
        task.cancel()
        release.set()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.to_thread(made[0].wait, 30)  # killed and reaped by spawn, not by us

    asyncio.run(main())
    assert made[0].returncode is not None and made[0].returncode < 0


def test_the_loop_runs_while_a_child_is_being_started(monkeypatch: pytest.MonkeyPatch) -> None:
    """Popen blocks in its worker thread until released; meanwhile the event loop keeps running
    other coroutines (with create_subprocess_exec it would be stuck inside the fork)."""
    release = threading.Event()
    real_popen = subprocess.Popen

    def held_popen(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202 - Popen's own signature
        release.wait(30)
        return real_popen(*args, **kwargs)

    monkeypatch.setattr(spawn_module.subprocess, "Popen", held_popen)

    async def other_rollout() -> str:
        await asyncio.sleep(0)
        release.set()  # runs only if the loop is free while the first command starts
        return "ran"

    async def main() -> tuple[bytes, str]:
        proc, other = await asyncio.gather(spawn(("echo", "started")), other_rollout())
        out = await _output(proc)
        await proc.wait()
        return out, other

    out, other = asyncio.run(main())
    assert out == b"started\n" and other == "ran"


def test_run_shell_takes_two_thread_hops_per_command(tmp_path: Path) -> None:
    """Launch entered and command started in one worker-thread job, limits read and launch left in
    another (four jobs before: enter, Popen, limits, exit)."""
    from concurrent.futures import ThreadPoolExecutor

    class Counting(ThreadPoolExecutor):
        jobs = 0

        def submit(self, *args, **kwargs):  # noqa: ANN002, ANN003, ANN202 - submit's signature
            Counting.jobs += 1
            return super().submit(*args, **kwargs)

    async def main() -> ToolResult:
        asyncio.get_running_loop().set_default_executor(Counting(max_workers=2))
        sandbox = UnsafeNoSandbox()
        return await run_shell("echo hi; exit 2", tmp_path, timeout_s=20, limit=100, sandbox=sandbox)

    result = asyncio.run(main())
    assert result.output.startswith("hi") and result.error == "exit code 2"
    assert Counting.jobs == 2


def test_a_command_cancelled_while_it_starts_is_killed_and_its_launch_left(tmp_path: Path) -> None:
    import threading

    from harnessevolve.sandbox.launch import Launch

    entered, go_on, left = threading.Event(), threading.Event(), threading.Event()

    class SlowLaunch:  # a launch left only by __exit__ (a generator would also be closed by the GC)
        def __init__(self, command: str, workspace: Path) -> None:
            self.launch = Launch(("bash", "-c", command), {}, workspace)

        def __enter__(self) -> Launch:
            entered.set()
            assert go_on.wait(30)
            return self.launch

        def __exit__(self, *exc: object) -> None:
            left.set()

    class SlowSandbox(UnsafeNoSandbox):
        def launch(self, command, workspace, env, *, read_only=()):  # noqa: ANN001, ANN202
            return SlowLaunch(command, workspace)

    async def main() -> None:
        job = asyncio.create_task(
            run_shell("sleep 60", tmp_path, timeout_s=60, limit=100, sandbox=SlowSandbox())
        )
        await asyncio.to_thread(entered.wait, 30)
        job.cancel()
        go_on.set()
        with pytest.raises(asyncio.CancelledError):
            await job
        # the start's done callback kills the process, then leaves the launch
        assert await asyncio.to_thread(left.wait, 10)

    asyncio.run(main())

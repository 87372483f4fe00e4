"""Runs one launched external agent: the wall-clock limit, the output cap and flood guard, and the
stop requested by the endpoint; the process group is always reaped."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from harnessevolve.sandbox.launch import READ_CHUNK, finish_process

FLOOD_FACTOR = 100
"""An agent that prints more than this many times its ``output_limit`` is killed (``output_flood``)."""
STOP_GRACE_S = 5.0
"""Seconds an agent has to exit by itself after the endpoint refused it further calls."""


@dataclass(frozen=True)
class ProcessResult:
    exit_code: int | None
    output: str
    """Head and tail of what it printed (stdout and stderr together), within the output limit."""
    printed: int
    """Bytes it printed in all."""
    ended: str
    """``exited``, ``timeout``, ``flood`` or ``stopped`` (the endpoint refused further calls)."""


async def run_process(
    argv: tuple[str, ...], options: dict[str, Any], *, timeout_s: float, limit: int, stopped: asyncio.Event
) -> ProcessResult:
    """Run the launched agent: capped output (head and tail kept), killed past the wall-clock
    limit, on an output flood, or ``STOP_GRACE_S`` after ``stopped`` is set; its group reaped."""
    proc = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        start_new_session=True,
        **options,
    )
    head = bytearray()
    tail = bytearray()
    printed = 0
    half = max(1, limit // 2)
    flood_at = limit * FLOOD_FACTOR
    ended = "exited"

    async def read_all() -> str:
        nonlocal printed, tail
        assert proc.stdout is not None
        while chunk := await proc.stdout.read(READ_CHUNK):
            printed += len(chunk)
            if len(head) < half:
                head.extend(chunk[: half - len(head)])
            tail = (tail + chunk)[-half:]
            if printed > flood_at:
                return "flood"
        await proc.wait()
        return "exited"

    async def stop_requested() -> str:
        await stopped.wait()
        await asyncio.sleep(STOP_GRACE_S)
        return "stopped"

    reader = asyncio.ensure_future(read_all())
    watcher = asyncio.ensure_future(stop_requested())
    try:
        done, _ = await asyncio.wait(
            {reader, watcher}, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED
        )
        ended = done.pop().result() if done else "timeout"
    finally:
        for task in (reader, watcher):
            task.cancel()
        await asyncio.gather(reader, watcher, return_exceptions=True)
        await finish_process(proc)
    text = head.decode(errors="replace")
    if printed > len(head):
        skipped = printed - len(head) - len(tail)
        if skipped > 0:
            text += f"\n[... {skipped} bytes cut ...]\n"
        text += bytes(tail[-(printed - len(head)) :]).decode(errors="replace")
    return ProcessResult(proc.returncode if ended == "exited" else None, text, printed, ended)

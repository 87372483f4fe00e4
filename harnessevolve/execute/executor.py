"""Executors run a batch of tasks with one harness. Chosen by name (``--executor``).

Contract (``Executor``): ``run(harness, tasks, model=, seed=, on_done=)`` returns one ``Rollout`` per
task, in the order given, each with its full trajectory and its workspace left in place for the
checker; the caller removes workspaces (``remove_workspace``). A failing task is a rollout with
``stop_reason`` set, never an exception.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from harnessevolve.core.atif import Step, Trajectory
from harnessevolve.core.enums import StopReason
from harnessevolve.core.errors import SandboxError
from harnessevolve.core.tasks import Task
from harnessevolve.execute.runners import runner_for
from harnessevolve.execute.workspace import WorkspaceError, create_workspace, remove_workspace_async
from harnessevolve.harness.model import Harness
from harnessevolve.sandbox.base import Sandbox


@dataclass(frozen=True)
class Rollout:
    task_id: str
    trajectory: Trajectory
    workspace: Path | None

    @property
    def answer(self) -> str | None:
        return self.trajectory.extra.get("answer")

    @property
    def stop_reason(self) -> str:
        return self.trajectory.extra.get("stop_reason", "")


def rollout_seed(seed: int, task_id: str) -> int:
    """A per-task seed derived from the run's seed, stable across processes."""
    return int.from_bytes(hashlib.sha256(f"{seed}:{task_id}".encode()).digest()[:4], "big")


class Executor(Protocol):
    sandbox: Sandbox | None
    """Where every command of every rollout runs (None: the default sandbox); checks of a rollout's
    effects run there too."""
    meters_remotely: bool
    """True when rollouts run in other processes, whose model calls this process's usage meter
    never sees (the scorer then meters them from their trajectories)."""

    async def run(
        self,
        harness: Harness,
        tasks: Sequence[Task],
        *,
        model: str,
        seed: int,
        on_done: Callable[[Rollout], None] | None = None,
    ) -> list[Rollout]: ...


RunOn = Callable[[int, Task], Awaitable[Rollout]]
"""How one task runs on worker ``index`` (a slot of ``run_on_slots``)."""


class SlotExecutor:
    """The ``run`` every executor here shares: ``concurrency`` slots dealt round ``worker_count``
    workers (``run_on_slots``); a subclass says how one batch's tasks run (``runner``)."""

    concurrency: int
    worker_count: int = 1

    async def runner(self, harness: Harness, *, model: str, seed: int) -> RunOn:
        raise NotImplementedError

    async def run(
        self,
        harness: Harness,
        tasks: Sequence[Task],
        *,
        model: str,
        seed: int,
        on_done: Callable[[Rollout], None] | None = None,
    ) -> list[Rollout]:
        return await run_on_slots(
            tasks,
            await self.runner(harness, model=model, seed=seed),
            concurrency=self.concurrency,
            worker_count=self.worker_count,
            on_done=on_done,
        )


class LocalExecutor(SlotExecutor):
    """Runs rollouts as asyncio tasks in this process, at most ``concurrency`` at once."""

    meters_remotely = False

    def __init__(self, concurrency: int = 4, sandbox: Sandbox | None = None) -> None:
        """``sandbox`` runs every command of every rollout; None means the default sandbox."""
        self.concurrency = max(1, concurrency)
        self.sandbox = sandbox

    async def runner(self, harness: Harness, *, model: str, seed: int) -> RunOn:
        async def one(_: int, task: Task) -> Rollout:
            task_seed = rollout_seed(seed, task.id)
            return await run_one(harness, task, model=model, seed=task_seed, sandbox=self.sandbox)

        return one


async def gather_rollouts(
    tasks: Sequence[Task],
    run_task: Callable[[Task], Awaitable[Rollout]],
    on_done: Callable[[Rollout], None] | None = None,
) -> list[Rollout]:
    """Every task's rollout by ``run_task``, all awaited at once (``run_task`` bounds how many run),
    ``on_done`` called as each one finishes; the rollouts in the order of ``tasks``."""

    async def one(task: Task) -> Rollout:
        rollout = await run_task(task)
        if on_done:
            on_done(rollout)
        return rollout

    return list(await asyncio.gather(*(one(t) for t in tasks)))


async def run_on_slots(
    tasks: Sequence[Task],
    run_on: RunOn,
    *,
    concurrency: int,
    worker_count: int,
    on_done: Callable[[Rollout], None] | None = None,
) -> list[Rollout]:
    """``gather_rollouts`` over workers: ``concurrency`` slots, one per rollout at once, dealt round
    the workers (slot ``i`` on worker ``i % worker_count``); each task waits for a free slot and runs
    as ``run_on(worker index, task)``, its slot freed before ``on_done`` sees it."""
    slots: asyncio.Queue[int] = asyncio.Queue()
    for i in range(concurrency):
        slots.put_nowait(i % worker_count)

    async def on_a_slot(task: Task) -> Rollout:
        index = await slots.get()
        try:
            return await run_on(index, task)
        finally:
            slots.put_nowait(index)

    return await gather_rollouts(tasks, on_a_slot, on_done)


async def run_one(
    harness: Harness, task: Task, *, model: str, seed: int, sandbox: Sandbox | None = None
) -> Rollout:
    """One rollout: set up the workspace, run the harness's agent runner (``agent.kind``); setup and
    commands run in ``sandbox``."""
    try:
        workspace = await create_workspace(task, sandbox=sandbox)
    except SandboxError as exc:  # the machine, not the task: infra (core/infra.py)
        return failed_rollout(
            harness, task, model=model, seed=seed, reason=StopReason.SANDBOX_ERROR, detail=exc.one_line()
        )
    except (WorkspaceError, OSError, TimeoutError) as exc:
        return failed_rollout(
            harness, task, model=model, seed=seed, reason=StopReason.SETUP_ERROR, detail=str(exc)
        )
    runner = runner_for(harness)
    try:
        trajectory = await runner.run(harness, task, workspace, model=model, seed=seed, sandbox=sandbox)
    except SandboxError as exc:  # a command's sandbox could not start mid-rollout
        await remove_workspace_async(workspace)
        return failed_rollout(
            harness, task, model=model, seed=seed, reason=StopReason.SANDBOX_ERROR, detail=exc.one_line()
        )
    return Rollout(task.id, trajectory, workspace)


def failed_rollout(
    harness: Harness, task: Task, *, model: str, seed: int, reason: StopReason, detail: str
) -> Rollout:
    """A rollout that never produced a trajectory of its own (its set-up or sandbox failed, its
    worker was lost or raised): no workspace, the reason as its one step."""
    trajectory = Trajectory(
        session_id=f"{reason.value}-{task.id}",
        agent_name="harnessevolve",
        agent_version="",
        model_name=model,
        steps=(Step(1, "system", "", extra={"error": f"{reason.value}: {detail}"[:1000]}),),
        extra={
            "task_id": task.id,
            "stop_reason": reason,
            "answer": None,
            "harness_hash": harness.content_hash(),
            "seed": seed,
        },
    )
    return Rollout(task.id, trajectory, None)

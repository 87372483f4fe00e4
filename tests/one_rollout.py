"""``run_rollout``: one rollout of a harness on a task, end to end, in a fresh workspace that is
removed afterwards."""

from __future__ import annotations

import asyncio

from harnessevolve.core.atif import Trajectory
from harnessevolve.core.tasks import Task
from harnessevolve.execute.runners import runner_for
from harnessevolve.execute.workspace import create_workspace, remove_workspace
from harnessevolve.harness.model import Harness
from harnessevolve.sandbox.base import Sandbox


def run_rollout(
    harness: Harness, task: Task, *, model: str, seed: int = 0, sandbox: Sandbox | None = None
) -> Trajectory:
    """The trajectory of ``harness`` on ``task`` with ``model``; the workspace (and the task's setup
    commands) use ``sandbox``, the default one when None."""

    async def go() -> Trajectory:
        workspace = await create_workspace(task, sandbox=sandbox)
        try:
            return await runner_for(harness).run(
                harness, task, workspace, model=model, seed=seed, sandbox=sandbox
            )
        finally:
            remove_workspace(workspace)

    return asyncio.run(go())

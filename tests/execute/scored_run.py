"""One rollout of a task with a scripted model, scored by the task's own checks in its sandbox
(the BFCL lever tests replay gold calls with one value changed)."""

from __future__ import annotations

import asyncio
from typing import Any

from harnessevolve.core.atif import Trajectory
from harnessevolve.core.tasks import Task
from harnessevolve.evaluate.checkers import run_checks
from harnessevolve.execute.agent import run_agent
from harnessevolve.execute.workspace import create_workspace, remove_workspace
from harnessevolve.harness.model import Harness
from harnessevolve.scoring.sandboxed_checks import sandboxed_runner


def scored_run(harness: Harness, task: Task, model: str, sandbox: Any) -> tuple[float, Trajectory]:
    """``(score, trajectory)`` of one rollout of ``task`` by ``model`` under ``harness``."""

    async def go() -> tuple[float, Trajectory]:
        workspace = await create_workspace(task, sandbox=sandbox)
        try:
            run = await run_agent(harness, task, workspace, model=model, seed=0, sandbox=sandbox)
            checked = run_checks(task, workspace, None, runner=sandboxed_runner(sandbox), trajectory=run)
            return checked.score, run
        finally:
            remove_workspace(workspace)

    return asyncio.run(go())

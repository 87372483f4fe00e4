"""The ``builtin`` runner: harnessevolve's own agent loop (``execute/agent.py``), unchanged."""

from __future__ import annotations

from pathlib import Path

from harnessevolve.core.atif import Trajectory
from harnessevolve.core.tasks import Task
from harnessevolve.execute.agent import run_agent
from harnessevolve.harness.model import Harness
from harnessevolve.sandbox.base import Sandbox


class BuiltinRunner:
    """Runs the harness's prompts, tools and loop settings with ``run_agent``."""

    kind = "builtin"
    version = "1"

    async def run(
        self,
        harness: Harness,
        task: Task,
        workspace: Path,
        *,
        model: str,
        seed: int,
        sandbox: Sandbox | None = None,
    ) -> Trajectory:
        trajectory = await run_agent(harness, task, workspace, model=model, seed=seed, sandbox=sandbox)
        return trajectory.with_extra(runner=self.kind, runner_version=self.version)

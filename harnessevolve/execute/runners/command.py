"""The ``command`` runner: any agent program, run in the sandbox (``agent.command`` argv).

How the program is run and what it sees: ``runners/external.py`` (environment, task file, stop
reasons) and ``runners/agent_sandbox.py`` (mounts, network). docs/agents.md shows a 20-line agent.
"""

from __future__ import annotations

from pathlib import Path

from harnessevolve.core.atif import Trajectory
from harnessevolve.core.tasks import Task
from harnessevolve.execute.runners.external import ExternalAgent, run_external
from harnessevolve.execute.sandbox import Sandbox
from harnessevolve.harness.model import Harness


class CommandRunner:
    kind = "command"
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
        agent = ExternalAgent(self.kind, self.version, harness.agent.command, {}, harness.name)
        return await run_external(agent, harness, task, workspace, model=model, seed=seed, sandbox=sandbox)

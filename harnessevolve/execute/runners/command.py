"""The ``command`` runner: any agent program, run in the sandbox (``agent.command`` argv).

How the program is run and what it sees: ``runners/external.py`` (environment, task file, stop
reasons) and ``runners/agent_sandbox.py`` (mounts, network). docs/agents.md shows a 20-line agent.
"""

from __future__ import annotations

from harnessevolve.execute.runners.external import ExternalAgent, ExternalRunner
from harnessevolve.harness.model import Harness


class CommandRunner(ExternalRunner):
    kind = "command"
    version = "1"

    def agent(self, harness: Harness, model: str) -> ExternalAgent:
        return ExternalAgent(self.kind, self.version, harness.agent.command, {}, harness.name)

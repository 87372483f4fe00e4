"""Agent runners: who runs a harness on one task. Chosen by ``harness.yaml: agent.kind``.

Contract (``AgentRunner``): ``await runner.run(harness, task, workspace, model=, seed=, sandbox=)``

- runs the harness's agent on ``task`` once, with ``workspace`` (already set up) as its working
  folder, every command it runs inside ``sandbox`` (the run's sandbox and limits; None: the
  default one), and every model call going to ``model`` through harnessevolve's litellm layer
  (retries, per-model limits, usage metered into the current ``usage_scope``);
- returns an ATIF ``Trajectory`` whose ``extra`` has ``task_id``, ``stop_reason`` (a
  ``core.enums.StopReason`` value), ``answer`` (or None), ``harness_hash``, ``seed``, ``runner``
  and ``runner_version``, and whose ``final_metrics`` count tokens and cost;
- never raises for anything the task, the model or the agent did: a crash, a hang, a refusal, a
  spent budget are a trajectory with a stop reason and ``extra.error``;
- leaves the workspace in place for the checker.

``kind`` names the runner; ``version`` changes whenever the runner's behaviour changes, and is part
of the rollout cache key (``runner_identity``), so a cached rollout is never reused across versions.

Runners: ``builtin`` (harnessevolve's own loop, ``execute/agent.py``), ``command`` (any program,
``runners/command.py``) and ``mini-swe-agent`` (``runners/mini_swe_agent.py``); the two external
ones reach the model only through the rollout's endpoint (``runners/endpoint.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from harnessevolve.core.atif import Trajectory
from harnessevolve.core.tasks import Task
from harnessevolve.harness.model import Harness
from harnessevolve.sandbox.base import Sandbox


class AgentRunner(Protocol):
    """Runs one task in one workspace and returns its trajectory (contract in the module docstring)."""

    kind: str
    version: str

    async def run(
        self,
        harness: Harness,
        task: Task,
        workspace: Path,
        *,
        model: str,
        seed: int,
        sandbox: Sandbox | None = None,
    ) -> Trajectory: ...


def _builtin() -> AgentRunner:
    from harnessevolve.execute.runners.builtin import BuiltinRunner

    return BuiltinRunner()


def _command() -> AgentRunner:
    from harnessevolve.execute.runners.command import CommandRunner

    return CommandRunner()


def _mini_swe_agent() -> AgentRunner:
    from harnessevolve.execute.runners.mini_swe_agent import MiniSweAgentRunner

    return MiniSweAgentRunner()


RUNNERS: dict[str, Callable[[], AgentRunner]] = {
    "builtin": _builtin,
    "command": _command,
    "mini-swe-agent": _mini_swe_agent,
}
"""Runner factories by ``agent.kind`` (``harness.model.AGENT_KINDS`` lists the same names)."""


def runner_for(harness: Harness) -> AgentRunner:
    """The runner ``harness`` names (its kind was checked when the harness was loaded)."""
    return RUNNERS[harness.agent.kind]()


def runner_identity(harness: Harness) -> str:
    """``kind@version`` of the harness's runner: what the rollout cache key records."""
    runner = runner_for(harness)
    return f"{runner.kind}@{runner.version}"


__all__ = ["RUNNERS", "AgentRunner", "runner_for", "runner_identity"]

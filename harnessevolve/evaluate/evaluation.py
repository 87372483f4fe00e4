"""Score one rollout with its task's checker and, when it failed, explain why.

Contract: ``evaluate_rollout(task, trajectory, workspace, reference)`` returns an ``Evaluation``
with a score in [0, 1] and, for a failed run, one ``ErrorSignal`` (aligned against the reference
when there is one). It never raises for anything the agent did.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harnessevolve.core.atif import Trajectory
from harnessevolve.core.signals import ErrorSignal
from harnessevolve.core.tasks import Task
from harnessevolve.evaluate.alignment import first_divergence, signal_without_reference
from harnessevolve.evaluate.checkers import CommandRunner, check_rollout
from harnessevolve.evaluate.effect_check import effect_oracle

STEP_EFFECT_TIMEOUT_S = 10.0
"""Per command, when alignment re-runs a step and its reference step to compare their effects."""


@dataclass(frozen=True)
class Evaluation:
    task_id: str
    score: float
    passed: bool
    checks: tuple[str, ...]
    signal: ErrorSignal | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "task_id": self.task_id,
            "score": self.score,
            "passed": self.passed,
            "checks": list(self.checks),
            "signal": self.signal.to_dict() if self.signal else None,
        }


def evaluate_rollout(
    task: Task,
    trajectory: Trajectory,
    workspace: Path | None,
    reference: Trajectory | None,
    *,
    runner: CommandRunner,
    tools: Iterable[Any] | None = None,
) -> Evaluation:
    """``runner``: how checks run programs and read workspace files: the pipeline's sandboxed one
    (``scoring.sandboxed_checks``); there is no host default. ``tools``: every tool definition
    the agent was offered (harness and task), for the offered-tool check and schema-typed argument
    comparison when the trajectory does not carry them (ATIF v1.5 ``agent.tool_definitions``);
    give all or none, since a call of a tool missing from the list counts as ``unknown_tool``.
    A task with an ``effect`` check has its steps matched by effect too (``effect_check.effect_oracle``:
    commands re-run in fresh copies of its set-up, through ``runner``)."""
    if workspace is None:
        score, passed = 0.0, False
        details: tuple[str, ...] = ("workspace setup failed",)
    else:
        result = check_rollout(task, workspace, trajectory, runner=runner)
        score, passed = result.score, result.passed
        details = tuple(f"{'ok' if d.ok else 'FAIL'} {d.type}: {d.message}" for d in result.details)
    signal = None
    if not passed:
        signal = (
            first_divergence(
                trajectory,
                reference,
                score=score,
                tools=tools,
                oracle=effect_oracle(task, timeout_s=STEP_EFFECT_TIMEOUT_S, runner=runner),
            )
            if reference is not None
            else signal_without_reference(trajectory, score=score, tools=tools)
        )
    return Evaluation(task_id=task.id, score=score, passed=passed, checks=details, signal=signal)

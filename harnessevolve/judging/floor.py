"""The null-agent floor: what a benchmark's checkers give an agent that does no work.

Three agents that never call a model run on each task, in a fresh workspace set up as for a real
rollout, and the task's own checks score them in the sandbox, as a rollout's would be:

- ``do-nothing``: ends at once, no command, no answer;
- ``empty-answer``: submits the empty string;
- ``echo-instruction``: submits the task's instruction word for word.

A task one of them passes has a checker that passes without the work (``{type: command, run:
"true"}``, a file check of a file the set-up already writes, an answer the instruction contains)
-- or a benchmark whose gold really leaves the state unchanged. ``validate SUITE --floor`` checks
every task and lists those; ``run`` checks a seeded sample of ``--floor-sample`` tasks before its
first rollout, records the share in the ledger (``floor_checked``) and refuses to start (exit 2)
when more than ``--max-floor-share`` of them pass, unless ``--accept-floor`` says the benchmark
means it or fewer than ``MIN_REFUSAL_TASKS`` tasks were sampled (then it only warns). Cost: three
workspaces and three check runs per task, no model call.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from harnessevolve.core.atif import Step, Trajectory
from harnessevolve.core.enums import StopReason
from harnessevolve.core.errors import FloorTooHighError
from harnessevolve.core.tasks import Benchmark, Task
from harnessevolve.evaluate.evaluation import evaluate_rollout
from harnessevolve.execute.workspace import create_workspace, remove_workspace_async
from harnessevolve.sandbox.base import Sandbox
from harnessevolve.scoring.sandboxed_checks import sandboxed_runner

NULL_AGENTS: dict[str, Callable[[Task], str | None]] = {
    "do-nothing": lambda task: None,
    "empty-answer": lambda task: "",
    "echo-instruction": lambda task: task.instruction,
}
"""Agent name -> the answer it submits (None: it submits nothing)."""


@dataclass(frozen=True)
class FloorResult:
    tasks: tuple[str, ...]
    """The tasks checked."""
    passed: dict[str, tuple[str, ...]]
    """Task -> the null agents that pass it (only tasks some agent passes)."""
    errors: dict[str, str] = field(default_factory=dict)
    """Task -> why its workspace or checks could not run (counted as not passed)."""
    rollouts: int = 0
    """Null-agent rollouts run (3 per task)."""
    seconds: float = 0.0
    scores: dict[str, float] = field(default_factory=dict)
    """Task -> the best score a null agent got on it (partial credit counts: a check that the
    set-up already satisfies)."""

    @property
    def score(self) -> float:
        """The floor as a score: the mean over the tasks checked of the best null agent's score."""
        return sum(self.scores.values()) / len(self.tasks) if self.tasks else 0.0

    @property
    def share(self) -> float:
        return len(self.passed) / len(self.tasks) if self.tasks else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "tasks": len(self.tasks),
            "passed": {t: list(a) for t, a in self.passed.items()},
            "share": round(self.share, 4),
            "score": round(self.score, 4),
            "errors": dict(self.errors),
            "rollouts": self.rollouts,
            "seconds": round(self.seconds, 3),
        }


def null_trajectory(task: Task, agent: str) -> Trajectory:
    answer = NULL_AGENTS[agent](task)
    return Trajectory(
        session_id=f"floor-{agent}-{task.id}",
        agent_name=f"null:{agent}",
        agent_version="1",
        model_name="none",
        steps=(Step(1, "user", task.instruction),),
        extra={
            "task_id": task.id,
            "stop_reason": StopReason.SUBMITTED if answer is not None else StopReason.NO_ANSWER,
            "answer": answer,
        },
    )


async def _one(task: Task, agent: str, sandbox: Sandbox | None) -> tuple[bool, float]:
    workspace = await create_workspace(task, sandbox=sandbox)
    try:
        evaluation = await asyncio.to_thread(
            evaluate_rollout,
            task,
            null_trajectory(task, agent),
            workspace,
            None,
            runner=sandboxed_runner(sandbox),
        )
    finally:
        await remove_workspace_async(workspace)
    return evaluation.passed, evaluation.score


async def null_floor(tasks: Sequence[Task], sandbox: Sandbox | None, *, concurrency: int = 4) -> FloorResult:
    """Every null agent on every task of ``tasks`` (at most ``concurrency`` at once)."""
    started = time.monotonic()
    gate = asyncio.Semaphore(max(1, concurrency))
    passed: dict[str, list[str]] = {}
    errors: dict[str, str] = {}
    scores: dict[str, float] = {}

    async def run(task: Task, agent: str) -> None:
        async with gate:
            try:
                ok, score = await _one(task, agent, sandbox)
            except Exception as exc:  # noqa: BLE001 - a task that cannot be set up is reported, not raised
                errors.setdefault(task.id, f"{type(exc).__name__}: {exc}"[:300])
                return
        scores[task.id] = max(score, scores.get(task.id, 0.0))
        if ok:
            passed.setdefault(task.id, []).append(agent)

    await asyncio.gather(*(run(t, a) for t in tasks for a in NULL_AGENTS))
    order = list(NULL_AGENTS)
    return FloorResult(
        tasks=tuple(t.id for t in tasks),
        passed={t.id: tuple(sorted(passed[t.id], key=order.index)) for t in tasks if t.id in passed},
        errors=errors,
        rollouts=len(tasks) * len(NULL_AGENTS),
        seconds=time.monotonic() - started,
        scores=scores,
    )


def floor_sample(benchmark: Benchmark, size: int, seed: int) -> list[Task]:
    """A seeded sample of ``size`` tasks from every split (all of them when there are fewer)."""
    tasks = sorted(benchmark.tasks, key=lambda t: t.id)
    if size >= len(tasks):
        return tasks
    return sorted(random.Random(f"floor:{seed}").sample(tasks, size), key=lambda t: t.id)


MIN_REFUSAL_TASKS = 4
"""A share of fewer sampled tasks is recorded and warned about but never refuses: one always-pass
checker in a one-task smoke benchmark says that task is broken, not that the benchmark is."""


def floor_verdict(result: FloorResult, max_share: float, accepted: bool) -> str | None:
    """The one-line refusal when the floor is too high (None: the run may go on)."""
    if accepted or result.share <= max_share or len(result.tasks) < MIN_REFUSAL_TASKS:
        return None
    names = ", ".join(list(result.passed)[:5]) + (", ..." if len(result.passed) > 5 else "")
    return (
        f"benchmark floor too high: a do-nothing or trivial agent passes {len(result.passed)} of "
        f"{len(result.tasks)} sampled tasks ({result.share:.0%} > {max_share:.0%}): {names}"
    )


def refuse_high_floor(result: FloorResult, max_share: float, accepted: bool) -> None:
    message = floor_verdict(result, max_share, accepted)
    if message is not None:
        raise FloorTooHighError(message, field="--max-floor-share")


def check_floor_at_start(
    benchmark: Benchmark,
    sandbox: Sandbox | None,
    *,
    sample: int,
    max_share: float,
    accepted: bool,
    seed: int,
    ledger: Any,
    log: Callable[[str], None],
) -> FloorResult | None:
    """``run``'s floor check: a seeded sample, recorded as ``floor_checked``; a refusal is also
    recorded (``run_failed``, the ledger closed) before ``FloorTooHighError`` (exit 2) is raised."""
    from harnessevolve.runs.events import FloorChecked, RunFailed

    if sample <= 0:
        return None
    result = asyncio.run(null_floor(floor_sample(benchmark, sample, seed), sandbox))
    message = floor_verdict(result, max_share, accepted)
    ledger.append(
        FloorChecked(
            tasks=len(result.tasks),
            share=round(result.share, 4),
            score=round(result.score, 4),
            max_share=max_share,
            passed={t: list(a) for t, a in result.passed.items()},
            refused=message is not None,
            accepted=accepted,
        )
    )
    if result.passed:
        log(
            f"floor: null agents pass {len(result.passed)} of {len(result.tasks)} sampled tasks "
            f"({result.share:.0%}): {', '.join(result.passed)}"
            + (" (--accept-floor)" if accepted else "")
            + (
                f" (too few tasks to refuse on: {len(result.tasks)} < {MIN_REFUSAL_TASKS})"
                if not accepted and result.share > max_share and len(result.tasks) < MIN_REFUSAL_TASKS
                else ""
            )
        )
    if message is not None:
        ledger.append(RunFailed(generation=0, stage="baseline", error=message))
        ledger.close()
        raise FloorTooHighError(message, field="--max-floor-share")
    return result

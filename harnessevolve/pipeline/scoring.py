"""Score a harness on a set of tasks: execute, then evaluate, memoised per (harness, task) in a run.

This is where the execute and evaluate stages meet: rollouts go in, plain results come out,
trajectories and evaluations are saved under the run folder.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from harnessevolve.core import atif
from harnessevolve.core.atif import Trajectory
from harnessevolve.core.files import atomic_write_json
from harnessevolve.core.signals import ErrorSignal
from harnessevolve.core.tasks import Task
from harnessevolve.evaluate.evaluation import evaluate_rollout
from harnessevolve.execute.executor import Executor, Rollout
from harnessevolve.execute.workspace import remove_workspace
from harnessevolve.harness.model import Harness


@dataclass(frozen=True)
class TaskResult:
    task_id: str
    score: float
    passed: bool
    signal: ErrorSignal | None
    trajectory: Trajectory
    tokens: int


def mean_score(results: Sequence[TaskResult]) -> float:
    return sum(r.score for r in results) / len(results) if results else 0.0


class Scorer:
    """Runs and evaluates tasks for any harness; never runs the same (harness, task) twice in a run."""

    def __init__(
        self,
        executor: Executor,
        *,
        model: str | None,
        seed: int,
        references: dict[str, Trajectory],
        out_dir: Path | None = None,
        on_progress: Callable[[str, int], Callable[[], None]] | None = None,
    ) -> None:
        self.executor = executor
        self.model = model
        self.seed = seed
        self.references = references
        self.out_dir = out_dir
        self.on_progress = on_progress
        self.memo: dict[tuple[str, str], TaskResult] = {}
        self.rollouts = 0
        self.tokens = 0

    def model_for(self, harness: Harness) -> str:
        return self.model or harness.model

    async def score(self, harness: Harness, tasks: Sequence[Task], label: str) -> list[TaskResult]:
        key = harness.content_hash()
        todo = [t for t in tasks if (key, t.id) not in self.memo]
        if todo:
            advance = self.on_progress(label, len(todo)) if self.on_progress else None
            rollouts = await self.executor.run(
                harness,
                todo,
                model=self.model_for(harness),
                seed=self.seed,
                on_done=(lambda _r: advance()) if advance else None,
            )
            by_id = {t.id: t for t in todo}
            for rollout in rollouts:
                self.memo[(key, rollout.task_id)] = self._evaluate(by_id[rollout.task_id], rollout, key)
        return [self.memo[(key, t.id)] for t in tasks]

    def _evaluate(self, task: Task, rollout: Rollout, harness_hash: str) -> TaskResult:
        try:
            evaluation = evaluate_rollout(
                task, rollout.trajectory, rollout.workspace, self.references.get(task.id)
            )
        finally:
            if rollout.workspace is not None:
                remove_workspace(rollout.workspace)
        trajectory = rollout.trajectory.with_extra(score=evaluation.score, passed=evaluation.passed)
        tokens = int(trajectory.final_metrics.get("total_prompt_tokens", 0)) + int(
            trajectory.final_metrics.get("total_completion_tokens", 0)
        )
        self.rollouts += 1
        self.tokens += tokens
        if self.out_dir is not None:
            atif.save(trajectory, self.out_dir / "trajectories" / harness_hash / f"{task.id}.json")
            atomic_write_json(
                self.out_dir / "evaluations" / harness_hash / f"{task.id}.json", evaluation.to_dict()
            )
        return TaskResult(task.id, evaluation.score, evaluation.passed, evaluation.signal, trajectory, tokens)

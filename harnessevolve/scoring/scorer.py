"""Score a harness on a set of tasks: execute, then evaluate, memoised per (harness, task) in a run
and, across runs, in the persistent rollout cache.

This is where the execute and evaluate stages meet: rollouts go in, plain results come out,
trajectories and evaluations are saved under the run folder.
"""

from __future__ import annotations

import asyncio
import contextvars
import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from harnessevolve.core import atif, interrupts
from harnessevolve.core.atif import Trajectory
from harnessevolve.core.errors import JudgeUnavailableError, SandboxError
from harnessevolve.core.files import atomic_write_json
from harnessevolve.core.infra import infra_detail, infra_reason
from harnessevolve.core.redact import redact_obj
from harnessevolve.core.signals import ErrorSignal
from harnessevolve.core.tasks import Task
from harnessevolve.evaluate.evaluation import Evaluation, evaluate_rollout
from harnessevolve.execute.executor import Executor, Rollout
from harnessevolve.execute.runners import runner_identity
from harnessevolve.execute.workspace import remove_workspace
from harnessevolve.harness.model import Harness
from harnessevolve.models.usage import current_scope
from harnessevolve.scoring.infra import InfraFailure, InfraTally
from harnessevolve.scoring.rollout_cache import RolloutCache, rollout_environment, rollout_key
from harnessevolve.scoring.sandboxed_checks import sandboxed_runner


@dataclass(frozen=True)
class TaskResult:
    task_id: str
    score: float
    passed: bool
    signal: ErrorSignal | None
    trajectory: Trajectory
    tokens: int
    infra: str | None = None
    """Set when the rollout failed on the machine (``core/infra.py``): scored 0, counted apart."""


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
        cache: RolloutCache | None = None,
        infra: InfraTally | None = None,
        adapter: str = "",
    ) -> None:
        self.executor = executor
        self.cache = cache
        self.adapter = adapter
        """The benchmark's adapter ``name@version`` (part of the cache key, with the sandbox)."""
        self.infra = infra or InfraTally()
        """Machine failures, counted apart (shared by every scorer of a run: ``rollouts/infra.py``)."""
        self.check_runner = sandboxed_runner(executor.sandbox)
        """Effect checks run the agent's command: in the executor's sandbox."""
        self.model = model
        self.seed = seed
        self.references = references
        self.out_dir = out_dir
        self.on_progress = on_progress
        self.on_rollout: Callable[[], None] | None = None
        """Called after each rollout is counted (and cached): the run keeps its counters per rollout,
        so they are exact after a kill at any point (``runs/counters.py``)."""
        self._fresh()

    def _fresh(self) -> None:
        """Nothing run yet: no memo, no counts."""
        self.memo: dict[tuple[str, str], TaskResult] = {}
        self.runners: dict[str, str] = {}
        """Harness hash -> its runner's ``kind@version`` (part of the cache key)."""
        self.rollouts = 0
        """Rollouts actually executed (cache hits excluded)."""
        self.tokens = 0
        self.cached = 0
        """Results served by the persistent cache: no model call."""

    def with_seed(self, seed: int, out_dir: Path | None) -> Scorer:
        """A scorer like this one (executor, model, references, cache, machine-failure tally) with
        another seed and trajectory folder, nothing run yet (``sequential.RepeatedScorer``)."""
        twin = copy.copy(self)
        twin.seed, twin.out_dir = seed, out_dir
        twin._fresh()
        return twin

    def model_for(self, harness: Harness) -> str:
        return self.model or harness.model

    async def score(self, harness: Harness, tasks: Sequence[Task], label: str) -> list[TaskResult]:
        model = self.model_for(harness)
        self.runners[harness.content_hash()] = runner_identity(harness)
        key = f"{harness.content_hash()}@{model}"  # a trained agent model makes new rollouts
        todo: list[Task] = []
        for task in tasks:
            if (key, task.id) in self.memo or task in todo:
                continue
            cached = self._from_cache(task, harness.content_hash(), model)
            if cached is not None:
                self.memo[(key, task.id)] = cached
            else:
                todo.append(task)
        if todo:
            await self._run(harness, todo, label, key, model)
        return [self.memo[(key, t.id)] for t in tasks]

    async def _run(self, harness: Harness, todo: list[Task], label: str, key: str, model: str) -> None:
        """Run and score ``todo``; a rollout that failed on the machine is retried once (nothing of
        it was scored: its checker never ran), then stands as ``infra``, scored 0."""
        progress = {False: self.on_progress(label, len(todo)) if self.on_progress else None}
        by_id = {t.id: t for t in todo}
        evaluating: dict[str, asyncio.Future[TaskResult]] = {}
        retry: list[Task] = []
        context = contextvars.copy_context()  # the usage scope, whatever context on_done runs in
        harness_hash = harness.content_hash()
        handled: set[tuple[bool, str]] = set()
        recorded: set[tuple[bool, str]] = set()
        """(last try, task) whose rollout failed on the machine (told to the tally as it ended)."""

        def finished(rollout: Rollout, *, last_try: bool) -> None:
            # Scored and cached the moment it ends (checks run sandboxed programs: off the event
            # loop), so a kill mid-batch loses no finished rollout.
            if (last_try, rollout.task_id) in handled:
                return
            handled.add((last_try, rollout.task_id))
            advance = progress.get(last_try)
            if advance:
                advance()
            reason = infra_reason(rollout.trajectory)
            if reason is not None:
                failure = InfraFailure(
                    rollout.task_id, harness_hash, reason, infra_detail(rollout.trajectory), not last_try
                )
                self.infra.failed(failure)
                recorded.add((last_try, rollout.task_id))
                if not last_try:
                    retry.append(by_id[rollout.task_id])
                    if rollout.workspace is not None:
                        remove_workspace(rollout.workspace)
                    return
            self.infra.counted()
            work = asyncio.to_thread(self._evaluate, by_id[rollout.task_id], rollout, harness_hash, model)
            evaluating[rollout.task_id] = asyncio.get_running_loop().create_task(work, context=context.copy())

        async def attempt(tasks: list[Task], last_try: bool) -> None:
            def done(rollout: Rollout) -> None:
                finished(rollout, last_try=last_try)

            for rollout in await self.executor.run(harness, tasks, model=model, seed=self.seed, on_done=done):
                done(rollout)  # an executor that did not call on_done (handled ones are skipped)

        try:
            await attempt(todo, False)
            await asyncio.gather(*evaluating.values())
            for task in todo:  # a rollout whose checks' sandbox could not start: nothing scored either
                pending = evaluating.get(task.id)
                if pending is not None and pending.result().infra and (False, task.id) not in recorded:
                    first = pending.result()
                    detail = str(first.trajectory.extra.get("infra_detail", ""))
                    self.infra.failed(InfraFailure(task.id, harness_hash, str(first.infra), detail, True))
                    self.infra.uncount()
                    del evaluating[task.id]
                    retry.append(task)
            if retry:
                if self.on_progress:
                    progress[True] = self.on_progress(f"{label} (retry: the machine failed)", len(retry))
                await attempt(retry, True)
        finally:
            if evaluating:  # an interrupted batch still scores (and caches) what finished
                await asyncio.gather(*evaluating.values(), return_exceptions=True)
        for task in todo:
            result = self.memo[(key, task.id)] = await evaluating[task.id]
            if result.infra and (True, task.id) not in recorded:  # the retry's checks could not start
                detail = str(result.trajectory.extra.get("infra_detail", ""))
                self.infra.failed(InfraFailure(task.id, harness_hash, result.infra, detail, False))
        self.infra.check()

    def _cache_key(self, task: Task, harness_hash: str, model: str) -> str:
        return rollout_key(
            harness_hash=harness_hash,
            task=task,
            model=model,
            seed=self.seed,
            reference=self.references.get(task.id),
            runner=self.runners.get(harness_hash, "builtin@1"),
            environment=rollout_environment(self.executor.sandbox, self.adapter),
        )

    def _from_cache(self, task: Task, harness_hash: str, model: str) -> TaskResult | None:
        if self.cache is None:
            return None
        hit = self.cache.get(self._cache_key(task, harness_hash, model))
        if hit is None:
            return None
        trajectory, evaluation = hit
        self.cached += 1
        self._save(task, trajectory, evaluation, harness_hash)
        if self.on_rollout is not None:
            self.on_rollout()
        signal = ErrorSignal.from_dict(evaluation["signal"]) if evaluation.get("signal") else None
        return TaskResult(
            task.id,
            float(evaluation["score"]),
            bool(evaluation["passed"]),
            signal,
            trajectory,
            _tokens(trajectory),
        )

    def _evaluate(self, task: Task, rollout: Rollout, harness_hash: str, model: str) -> TaskResult:
        infra = infra_reason(rollout.trajectory)
        trajectory = rollout.trajectory
        try:
            evaluation = evaluate_rollout(
                task,
                rollout.trajectory,
                rollout.workspace,
                self.references.get(task.id),
                runner=self.check_runner,
            )
        except (SandboxError, JudgeUnavailableError) as exc:  # the checks could not run: the machine
            evaluation = Evaluation(task.id, 0.0, False, (f"checks not run: {exc.one_line()}",))
            infra = infra or ("judge" if isinstance(exc, JudgeUnavailableError) else "sandbox_start")
            trajectory = trajectory.with_extra(infra=infra, infra_detail=exc.one_line()[:300])
        finally:
            if rollout.workspace is not None:
                remove_workspace(rollout.workspace)
        if infra is not None:  # the machine failed: 0 for the gates, no signal for an edit, not cached
            evaluation = replace(evaluation, score=0.0, passed=False, signal=None)
        trajectory = trajectory.with_extra(score=evaluation.score, passed=evaluation.passed)
        tokens = _tokens(trajectory)
        if self.executor.meters_remotely:
            meter_remote_rollout(trajectory, model)
        self.rollouts += 1
        self.tokens += tokens
        record = {**evaluation.to_dict(), **({"infra": infra} if infra else {})}
        self._save(task, trajectory, record, harness_hash)
        # a rollout that ended while the command is stopping may hold a cut reply (a judge check's
        # model call ends with an error, failing the check): it is scored, never cached
        if self.cache is not None and infra is None and not interrupts.stopping():
            self.cache.put(self._cache_key(task, harness_hash, model), trajectory, evaluation.to_dict())
        if self.on_rollout is not None:  # after the cache: a kill before this is served as cached
            self.on_rollout()
        return TaskResult(
            task.id, evaluation.score, evaluation.passed, evaluation.signal, trajectory, tokens, infra
        )

    def _save(
        self, task: Task, trajectory: Trajectory, evaluation: dict[str, Any], harness_hash: str
    ) -> None:
        if self.out_dir is not None:
            atif.save(trajectory, self.out_dir / "trajectories" / harness_hash / f"{task.id}.json")
            atomic_write_json(
                self.out_dir / "evaluations" / harness_hash / f"{task.id}.json", redact_obj(evaluation)
            )


def meter_remote_rollout(trajectory: Trajectory, model: str) -> None:
    """Charge a rollout run in another process (Ray) to the current usage scope, from what its
    trajectory recorded, so budgets and the spend table count it."""
    scope = current_scope()
    if scope is None:
        return
    metrics = trajectory.final_metrics
    calls = sum(1 for s in trajectory.steps if s.source == "agent")
    scope.meter.record(
        stage=scope.stage,
        proposer=scope.proposer,
        model=model,
        prompt_tokens=int(metrics.get("total_prompt_tokens", 0)),
        completion_tokens=int(metrics.get("total_completion_tokens", 0)),
        cost_usd=float(metrics.get("total_cost_usd", 0.0)),
    )
    if calls > 1:  # one record per model call keeps the call count honest
        for _ in range(calls - 1):
            scope.meter.record(stage=scope.stage, proposer=scope.proposer, model=model)


def _tokens(trajectory: Trajectory) -> int:
    return int(trajectory.final_metrics.get("total_prompt_tokens", 0)) + int(
        trajectory.final_metrics.get("total_completion_tokens", 0)
    )

"""Drive the noise-aware performance gate: paired rollouts of both harnesses, increment by
increment, until ``SequentialGate`` accepts or rejects.

The ``Scorer`` memoises one rollout per (harness, task); repeated rollouts need other seeds, so
``RepeatedScorer`` keeps one ``Scorer`` per repetition (repetition 0 is the run's own scorer, so
rollouts the loop already has are reused), each seeded ``seed + repetition``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from harnessevolve.core.tasks import Task
from harnessevolve.gate.config import PerformanceConfig
from harnessevolve.gate.noise import Decision, Pair, SequentialGate, rollout_schedule
from harnessevolve.harness.model import Harness
from harnessevolve.scoring.scorer import Scorer, TaskResult


class RepeatedScorer:
    """``score(harness, tasks, label, repetition)``: repetition r runs with seed ``base.seed + r``;
    its trajectories go to ``<out_dir>/repeats/r<r>/`` when the base scorer saves any."""

    def __init__(self, base: Scorer) -> None:
        self.base = base
        self.scorers: dict[int, Scorer] = {0: base}

    def for_repetition(self, repetition: int) -> Scorer:
        if repetition not in self.scorers:
            base = self.base
            out_dir = base.out_dir / "repeats" / f"r{repetition}" if base.out_dir else None
            self.scorers[repetition] = base.with_seed(base.seed + repetition, out_dir)
        return self.scorers[repetition]

    async def score(
        self, harness: Harness, tasks: Sequence[Task], label: str, *, repetition: int = 0
    ) -> list[TaskResult]:
        return await self.for_repetition(repetition).score(harness, tasks, label)

    def set_model(self, model: str | None) -> None:
        """Every repetition's agent model from now on (after the trainer produced a checkpoint)."""
        for scorer in self.scorers.values():
            scorer.model = model

    @property
    def rollouts(self) -> int:
        return sum(s.rollouts for s in self.scorers.values())

    @property
    def tokens(self) -> int:
        return sum(s.tokens for s in self.scorers.values())


def repetitions(current: Harness, candidate: Harness, config: PerformanceConfig) -> int:
    """Repeated rollouts add information only when a harness samples: at temperature 0 a task's
    rerun repeats its first run, and counting it twice would fake evidence."""
    stochastic = current.loop.temperature > 0 or candidate.loop.temperature > 0
    return config.max_rollouts_per_task if stochastic else 1


class RepetitionScorer(Protocol):
    """What ``sequential_decision`` needs: ``RepeatedScorer``, or a ``Scorer`` whose memo key
    includes the repetition."""

    async def score(
        self, harness: Harness, tasks: Sequence[Task], label: str, *, repetition: int = 0
    ) -> list[TaskResult]: ...

    @property
    def rollouts(self) -> int:
        """Rollouts scored so far (what a matched-budget control spends is read from it)."""
        ...


async def sequential_decision(
    scorer: RepetitionScorer,
    current: Harness,
    candidate: Harness,
    tasks: Sequence[Task],
    config: PerformanceConfig,
    *,
    seed: int,
    label: str,
    on_increment: Callable[[Decision], None] | None = None,
) -> Decision:
    """Feed ``SequentialGate`` paired rollouts of ``tasks`` (in ``rollout_schedule`` order,
    ``increment`` tasks at a time, repeated when a harness samples) until it decides. Pass the
    train batch for stochastic harnesses; for deterministic ones (temperature 0) pass more
    distinct tasks (e.g. the batch, then the rest of the train split), since each runs once."""
    if not tasks:
        raise ValueError("the sequential performance gate needs at least one task")
    reps = repetitions(current, candidate, config)
    gate = SequentialGate(config, max_pairs=len(tasks) * reps, seed=seed)
    by_id = {t.id: t for t in tasks}
    schedule = rollout_schedule(list(by_id), increment=config.increment, repetitions=reps, seed=seed)
    for rep, chunk in schedule:
        batch = [by_id[i] for i in chunk]
        suffix = f"rollout {rep + 1}" if reps > 1 else "sequential"
        cur = await scorer.score(current, batch, f"{label} (current, {suffix})", repetition=rep)
        cand = await scorer.score(candidate, batch, f"{label} ({suffix})", repetition=rep)
        decision = gate.update(Pair(t.id, a.score, b.score) for t, a, b in zip(batch, cur, cand, strict=True))
        if on_increment is not None:
            on_increment(decision)
        if decision.final:
            return decision
    return gate.decision

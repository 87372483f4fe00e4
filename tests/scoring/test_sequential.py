"""Driving the sequential performance gate: the schedule of paired rollouts, repetitions and seeds."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path
from types import SimpleNamespace

from harnessevolve.execute.executor import LocalExecutor
from harnessevolve.gate.config import PerformanceConfig
from harnessevolve.scoring.scorer import Scorer
from harnessevolve.scoring.sequential import RepeatedScorer, repetitions, sequential_decision

CONFIG = PerformanceConfig(
    mode="sequential", confidence=0.95, power=0.8, effect=0.1, increment=5, max_rollouts_per_task=4
)


def harness(name: str, temperature: float) -> SimpleNamespace:
    return SimpleNamespace(name=name, loop=SimpleNamespace(temperature=temperature))


class FakeScorer:
    """Bernoulli outcomes per (harness, task, repetition); records every call."""

    def __init__(self, rates: dict[str, float]) -> None:
        self.rates = rates
        self.calls: list[tuple[str, tuple[str, ...], int]] = []

    async def score(self, h, tasks, label, *, repetition=0):
        self.calls.append((h.name, tuple(t.id for t in tasks), repetition))
        rng = lambda t: random.Random(f"{h.name}:{t.id}:{repetition}")  # noqa: E731
        return [SimpleNamespace(score=float(rng(t).random() < self.rates[h.name])) for t in tasks]


TASKS = [SimpleNamespace(id=f"t{i:02d}") for i in range(12)]


def decide(scorer: FakeScorer, temperature: float):
    current, candidate = harness("current", temperature), harness("candidate", temperature)
    return asyncio.run(
        sequential_decision(scorer, current, candidate, TASKS, CONFIG, seed=3, label="gen 1")  # type: ignore[arg-type]
    )


def test_repetitions_only_for_harnesses_that_sample() -> None:
    assert repetitions(harness("a", 0.0), harness("b", 0.0), CONFIG) == 1  # type: ignore[arg-type]
    assert repetitions(harness("a", 0.0), harness("b", 0.7), CONFIG) == 4  # type: ignore[arg-type]


def test_a_deterministic_pair_runs_each_task_once_and_gives_up_undecided() -> None:
    scorer = FakeScorer({"current": 0.5, "candidate": 0.5})
    decision = decide(scorer, 0.0)
    assert decision.final and decision.numbers["pairs"] <= 12
    assert {rep for _h, _t, rep in scorer.calls} == {0}
    ran = [t for h, tasks, _ in scorer.calls if h == "candidate" for t in tasks]
    assert len(ran) == len(set(ran)) == decision.numbers["pairs"]


def test_a_stochastic_pair_repeats_tasks_in_increments_until_a_decision() -> None:
    scorer = FakeScorer({"current": 0.0, "candidate": 1.0})  # every pair a win
    decision = decide(scorer, 0.7)
    assert decision.accepted
    sizes = [len(tasks) for h, tasks, _ in scorer.calls if h == "candidate"]
    assert sizes == ([5, 5, 2] * 4)[: len(sizes)]  # increments of 5 within each pass over 12 tasks
    assert 3 < len(sizes) < 12  # one pass is not enough evidence here, four would be the budget
    assert {rep for _h, _t, rep in scorer.calls} == {0, 1}
    assert decision.numbers["pairs"] == sum(sizes)

    worse = FakeScorer({"current": 0.9, "candidate": 0.3})
    assert not decide(worse, 0.7).accepted
    budget = FakeScorer({"current": 1.0, "candidate": 1.0})  # only ties: the budget runs out
    spent = decide(budget, 0.7)
    assert not spent.accepted and spent.numbers["pairs"] == 12 * 4
    assert {rep for _h, _t, rep in budget.calls} == {0, 1, 2, 3}


def test_repeated_scorer_seeds_and_saves_each_repetition_apart(tmp_path: Path) -> None:
    base = Scorer(LocalExecutor(1), model="m", seed=7, references={}, out_dir=tmp_path)
    repeated = RepeatedScorer(base)
    assert repeated.for_repetition(0) is base
    second = repeated.for_repetition(2)
    assert second.seed == 9 and second.out_dir == tmp_path / "repeats" / "r2"
    assert repeated.for_repetition(2) is second and repeated.rollouts == 0

"""Running one cell of each arm kind, and scoring its final harness on the test split with the
same scorer every arm gets (``scoring.build.build_scorer`` from the plan's ``execution``).

- ``seed``: the seed harness as it is, scored.
- ``harness``: a fixed folder (at a git revision when the arm names one), scored.
- ``evolve``: ``harnessevolve run`` on the cell's own copy of the seed harness (its own git
  repository), then its final harness scored. A cell killed mid-run is resumed from the run's
  ledger (``run --resume``), its rollout cache serving what already ran.
- ``best-of-k``: the seed harness sampled k times per test task (k matched to an evolve cell's
  rollouts, or given); the self-consistent pick is the arm's per-task score, pass@k its oracle.
- ``gepa``: GEPA on the seed harness's texts (``compare/gepa_cell.py``), its metric calls matched
  to an evolve cell's rollouts or given; its best candidate scored.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harnessevolve.compare.arm_spec import Arm
from harnessevolve.compare.plan import Plan
from harnessevolve.core.atif import Trajectory
from harnessevolve.core.interrupts import run_async
from harnessevolve.core.tasks import Task
from harnessevolve.harness.model import Harness
from harnessevolve.scoring.rollout_cache import RolloutCache
from harnessevolve.scoring.scorer import Scorer, TaskResult
from harnessevolve.scoring.sequential import RepeatedScorer

SAMPLE_SEEDS = 1000
"""Best-of-k's sample j of cell seed s runs with model seed (s + 1) * 1000 + j: no two cells'
samples share a seed (k is at most 1000)."""
Progress = Callable[[str, int], Callable[[], None]]


@dataclass(frozen=True)
class ArmOutcome:
    """What a cell's arm made: its per-task test scores and what making and scoring it spent."""

    tasks: dict[str, float]
    harness: str
    """The content hash of the harness scored (best-of-k: the seed's)."""
    rollouts: int = 0
    tokens: int = 0
    cost_usd: float = 0.0
    """Model calls made outside the usage scope the cell runs in (an evolve cell's run meters its
    own); the cell adds what its scope metered."""
    oracle: dict[str, float] | None = None
    test: dict[str, Any] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class CellContext:
    """What every cell of one comparison shares."""

    plan: Plan
    cache: Path
    """The rollout cache of every cell's test scoring (``OUT/cache/rollouts``)."""
    references: dict[str, Trajectory]
    log: Callable[[str], None] = lambda _m: None
    progress: Progress | None = None

    @property
    def tests(self) -> tuple[Task, ...]:
        return self.plan.suite.split("test")

    def scorer(self, seed: int, out_dir: Path | None) -> Scorer:
        from harnessevolve.scoring.build import build_scorer

        return build_scorer(
            self.plan.execution,
            benchmark=self.plan.suite,
            model=self.plan.model,
            default_model=self.plan.model,
            seed=seed,
            references=self.references,
            out_dir=out_dir,
            on_progress=self.progress,
            cache=RolloutCache(self.cache),
        )


def run_arm(
    ctx: CellContext, arm: Arm, seed: int, work: Path, *, matched_rollouts: int | None = None
) -> ArmOutcome:
    """One cell: ``arm`` at ``seed``, its files under ``work``. A best-of-k arm matched to an
    evolve arm needs that arm's rollouts at this seed (``matched_rollouts``)."""
    if arm.kind == "seed":
        return score_harness(ctx, load(ctx.plan.harness.path), seed, work, f"{arm.name} seed {seed}: test")
    if arm.kind == "harness":
        return score_harness(ctx, load(fixed_harness(arm, work)), seed, work, f"{arm.name} seed {seed}: test")
    if arm.kind == "evolve":
        from harnessevolve.compare.evolve_cell import evolve

        harness_dir, numbers = evolve(ctx.plan, arm, seed, work, log=ctx.log, progress=ctx.progress)
        numbers["cost_usd"] = numbers.pop("run_cost_usd")
        return made_and_scored(ctx, arm, seed, work, harness_dir, numbers)
    if arm.kind == "best-of-k":
        return sample_best_of_k(ctx, arm, seed, work, matched_rollouts)
    if arm.kind == "gepa":
        return gepa_cell(ctx, arm, seed, work, matched_rollouts)
    raise ValueError(f"no runner for arm kind {arm.kind!r}")


def load(folder: Path) -> Harness:
    from harnessevolve.harness.load import load_harness

    return load_harness(folder)


def fixed_harness(arm: Arm, work: Path) -> Path:
    """A harness arm's folder: as it is, or exported at its git revision into ``work``."""
    assert arm.path is not None
    if arm.revision is None:
        return arm.path
    from harnessevolve.harness.git import HarnessRepo

    dest = work / "at-revision"
    shutil.rmtree(dest, ignore_errors=True)
    return HarnessRepo(arm.path).export(arm.revision, dest)


def score_harness(ctx: CellContext, harness: Harness, seed: int, work: Path, label: str) -> ArmOutcome:
    """``harness`` on the test split (trajectories under ``work/test``)."""
    scorer = ctx.scorer(seed, work / "test")
    results = run_async(scorer.score(harness, ctx.tests, label))
    return ArmOutcome(
        {r.task_id: r.score for r in results},
        harness.content_hash(),
        test=test_numbers(results, rollouts=scorer.rollouts, cached=scorer.cached),
    )


def test_numbers(results: Sequence[TaskResult], *, rollouts: int, cached: int) -> dict[str, Any]:
    return {
        "rollouts": rollouts,
        "cached": cached,
        "tokens": sum(r.tokens for r in results),
        "infra": sum(1 for r in results if r.infra),
    }


class SampleCounter(RepeatedScorer):
    """A ``RepeatedScorer`` that keeps every sample's tokens and infra failures, cached or not (a
    resumed cell reports what its samples cost, not what this attempt ran)."""

    def __init__(self, base: Scorer) -> None:
        super().__init__(base)
        self.sample_tokens = 0
        self.sample_infra = 0

    async def score(
        self, harness: Harness, tasks: Sequence[Task], label: str, *, repetition: int = 0
    ) -> list[TaskResult]:
        results = await super().score(harness, tasks, label, repetition=repetition)
        self.sample_tokens += sum(r.tokens for r in results)
        self.sample_infra += sum(1 for r in results if r.infra)
        return results


def sample_best_of_k(
    ctx: CellContext, arm: Arm, seed: int, work: Path, matched_rollouts: int | None
) -> ArmOutcome:
    from harnessevolve.scoring.best_of_k import DEFAULT_TEMPERATURE, best_of_k, matched_k, sampling_harness

    tests = ctx.tests
    if arm.k is not None:
        k = arm.k
    else:
        assert matched_rollouts is not None, "a matched best-of-k cell needs its evolve cell's rollouts"
        k = matched_k(matched_rollouts, len(tests))
    seed_harness = load(ctx.plan.harness.path)
    if arm.temperature is None and seed_harness.loop.temperature > 0:
        sampler = seed_harness
    else:
        temperature = DEFAULT_TEMPERATURE if arm.temperature is None else arm.temperature
        shutil.rmtree(work / "sampler", ignore_errors=True)
        sampler = sampling_harness(ctx.plan.harness.path, work / "sampler", temperature)
    counter = SampleCounter(ctx.scorer((seed + 1) * SAMPLE_SEEDS, work / "samples"))
    found = run_async(
        best_of_k(counter, sampler, tests, k, f"{arm.name} seed {seed}", matched_to=matched_rollouts)
    )
    cached = sum(s.cached for s in counter.scorers.values())
    return ArmOutcome(
        dict(zip(found.task_ids, found.sc_scores, strict=True)),
        seed_harness.content_hash(),
        rollouts=found.samples,
        tokens=counter.sample_tokens,
        oracle=dict(zip(found.task_ids, found.oracle_scores, strict=True)),
        test={
            "rollouts": counter.rollouts,
            "cached": cached,
            "tokens": counter.sample_tokens,
            "infra": counter.sample_infra,
        },
        details={
            "k": k,
            "matched_to": arm.matched_to,
            "matched_rollouts": matched_rollouts if arm.matched_to else None,
            "temperature": found.temperature,
            "sc": round(found.sc, 6),
            "oracle": round(found.oracle, 6),
            "pass1": round(found.pass1, 6),
        },
    )


def gepa_cell(ctx: CellContext, arm: Arm, seed: int, work: Path, matched_rollouts: int | None) -> ArmOutcome:
    from harnessevolve.compare.gepa_cell import evolve_with_gepa

    budget = arm.budget if arm.budget is not None else matched_rollouts
    assert budget is not None and arm.reflection_model is not None and arm.max_tokens is not None
    best, numbers = evolve_with_gepa(
        ctx.plan.harness.path,
        ctx.plan.suite,
        ctx.scorer(seed, work / "gepa-rollouts"),
        budget=max(1, budget),
        reflection_model=arm.reflection_model,
        max_tokens=arm.max_tokens,
        seed=seed,
        work=work,
    )
    numbers.update(matched_to=arm.matched_to, matched_rollouts=matched_rollouts)
    return made_and_scored(ctx, arm, seed, work, best, numbers)


def made_and_scored(
    ctx: CellContext, arm: Arm, seed: int, work: Path, harness_dir: Path, numbers: dict[str, Any]
) -> ArmOutcome:
    """A harness an arm made (``numbers``: what making it spent, ``rollouts``, ``tokens`` and
    perhaps ``cost_usd`` not metered in the cell's scope; the rest its details), scored on test."""
    scored = score_harness(ctx, load(harness_dir), seed, work, f"{arm.name} seed {seed}: test")
    return ArmOutcome(
        scored.tasks,
        scored.harness,
        rollouts=int(numbers.pop("rollouts")),
        tokens=int(numbers.pop("tokens")),
        cost_usd=float(numbers.pop("cost_usd", 0.0)),
        test=scored.test,
        details=numbers,
    )

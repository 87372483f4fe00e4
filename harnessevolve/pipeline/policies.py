"""The generation loop's policies as small swappable objects (after gepa's ``BatchSampler``,
``AcceptanceCriterion``, ``StopCondition`` and ``CandidateSelector``): which tasks a generation
runs on, which judged candidate is kept, when the run stops, and which snapshot becomes current at
an epoch's end. Each is a Protocol with its contract in the docstring; the implementations are
chosen by name through a dict, and the defaults are the loop's behaviour as it always was.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from harnessevolve.core.enums import Sampling
from harnessevolve.core.tasks import Task
from harnessevolve.judging.trials import Trial, pick_winner
from harnessevolve.pipeline.epochs import Snapshot, SnapshotPool


def sample_batch(
    train: tuple[Task, ...], size: int, seed: int, generation: int, weights: dict[str, float] | None = None
) -> list[Task]:
    """A seeded minibatch; with ``weights`` (task id -> regret), tasks that are solvable but not yet
    solved are drawn more often (weighted sampling without replacement, every task keeps a floor)."""
    rng = random.Random(f"{seed}:{generation}")
    if not weights:
        return rng.sample(list(train), min(size, len(train)))
    keyed = sorted(train, key=lambda t: rng.random() ** (1.0 / (0.1 + max(0.0, weights.get(t.id, 0.0)))))
    return keyed[::-1][: min(size, len(train))]


class BatchSampler(Protocol):
    """Draws generation ``generation``'s minibatch from the train split. The same (train, size,
    generation) must give the same batch on every call (a resumed run draws the same batches);
    at most ``size`` tasks, each at most once."""

    def sample(self, train: tuple[Task, ...], size: int, generation: int) -> list[Task]: ...


@dataclass(frozen=True)
class UniformSampler:
    """Every train task equally likely, seeded by the run's seed and the generation."""

    seed: int

    def sample(self, train: tuple[Task, ...], size: int, generation: int) -> list[Task]:
        return sample_batch(train, size, self.seed, generation)


@dataclass(frozen=True)
class RegretSampler:
    """Tasks with a high pass-rate gap (solvable, not yet solved: ``refs generate``'s regret.json)
    drawn more often; a task without a weight keeps the floor."""

    seed: int
    weights: Mapping[str, float] = field(default_factory=dict)

    def sample(self, train: tuple[Task, ...], size: int, generation: int) -> list[Task]:
        return sample_batch(train, size, self.seed, generation, dict(self.weights) or None)


class AcceptanceCriterion(Protocol):
    """Picks the trial to keep among a generation's judged trials (each carries its gate
    verdicts); None keeps none. Only a trial whose judgement passed every gate may be picked."""

    def pick(self, trials: Sequence[Trial]) -> Trial | None: ...


class PassedEveryGate:
    """The default: of the trials that passed every gate, the highest validation score, then
    train score, then the earliest proposal."""

    def pick(self, trials: Sequence[Trial]) -> Trial | None:
        return pick_winner(list(trials))


class StopCondition(Protocol):
    """Says whether the run ends after generation ``generation`` (True: no later generation runs;
    the epoch's end still runs). A budget is not a stop condition: it stops mid-generation."""

    def done(self, generation: int) -> bool: ...


@dataclass(frozen=True)
class GenerationLimit:
    """The default: stop after ``generations`` generations (``--generations``)."""

    generations: int

    def done(self, generation: int) -> bool:
        return generation >= self.generations


class CandidateSelector(Protocol):
    """Chooses, at an epoch's end, the snapshot (an accepted revision with its validation score)
    that becomes current; the pool is never empty."""

    def select(self, pool: SnapshotPool) -> Snapshot: ...


class BestOnValidation:
    """The default (HarnessEvolve): the highest validation score, the latest among ties."""

    def select(self, pool: SnapshotPool) -> Snapshot:
        return pool.best()


@dataclass(frozen=True)
class PolicyInputs:
    """What a policy factory may use."""

    seed: int
    batch_size: int
    generations: int
    regret: Callable[[], dict[str, float]] = dict
    """The benchmark's regret weights, read only by the sampler that needs them."""


BATCH_SAMPLERS: dict[Sampling, Callable[[PolicyInputs], BatchSampler]] = {
    Sampling.UNIFORM: lambda i: UniformSampler(i.seed),
    Sampling.REGRET: lambda i: RegretSampler(i.seed, i.regret()),
}
ACCEPTANCE: dict[str, Callable[[PolicyInputs], AcceptanceCriterion]] = {
    "every-gate": lambda _i: PassedEveryGate()
}
STOPPING: dict[str, Callable[[PolicyInputs], StopCondition]] = {
    "generations": lambda i: GenerationLimit(i.generations)
}
SELECTORS: dict[str, Callable[[PolicyInputs], CandidateSelector]] = {
    "best-validation": lambda _i: BestOnValidation()
}


@dataclass(frozen=True)
class LoopPolicies:
    """The four policies one run uses."""

    sampler: BatchSampler
    acceptance: AcceptanceCriterion
    stop: StopCondition
    selector: CandidateSelector

    @classmethod
    def by_name(
        cls,
        inputs: PolicyInputs,
        *,
        sampling: Sampling = Sampling.UNIFORM,
        acceptance: str = "every-gate",
        stop: str = "generations",
        selector: str = "best-validation",
    ) -> LoopPolicies:
        """The policies named (each a key of its dict above)."""
        return cls(
            BATCH_SAMPLERS[sampling](inputs),
            ACCEPTANCE[acceptance](inputs),
            STOPPING[stop](inputs),
            SELECTORS[selector](inputs),
        )

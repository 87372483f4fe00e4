"""The loop's policies: Protocols with the loop's own behaviour as the defaults, chosen by name."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from harnessevolve.core.enums import Sampling
from harnessevolve.core.tasks import Task
from harnessevolve.pipeline.epochs import Snapshot, SnapshotPool
from harnessevolve.pipeline.policies import (
    BATCH_SAMPLERS,
    BestOnValidation,
    GenerationLimit,
    LoopPolicies,
    PassedEveryGate,
    PolicyInputs,
    RegretSampler,
    UniformSampler,
    sample_batch,
)

TRAIN = tuple(Task(id=f"t{i}", instruction="x", split="train", checks=()) for i in range(12))


def trial(index: int, passed: bool, validation: float) -> Any:
    judgement = SimpleNamespace(passed=passed, validation_score=validation, train_candidate=0.0)
    return SimpleNamespace(index=index, judgement=judgement)


def test_every_sampling_choice_has_a_sampler_and_the_defaults_draw_what_the_loop_drew() -> None:
    assert set(BATCH_SAMPLERS) == set(Sampling)
    inputs = PolicyInputs(seed=3, batch_size=5, generations=2, regret=lambda: {"t1": 1.0})
    policies = LoopPolicies.by_name(inputs)
    assert isinstance(policies.sampler, UniformSampler)
    assert policies.sampler.sample(TRAIN, 5, 2) == sample_batch(TRAIN, 5, 3, 2)
    regret = LoopPolicies.by_name(inputs, sampling=Sampling.REGRET).sampler
    assert isinstance(regret, RegretSampler)
    assert regret.sample(TRAIN, 5, 2) == sample_batch(TRAIN, 5, 3, 2, {"t1": 1.0})
    # the same generation draws the same batch (a resumed run draws what the killed one drew)
    assert regret.sample(TRAIN, 5, 2) == regret.sample(TRAIN, 5, 2)


def test_acceptance_keeps_the_best_trial_that_passed_every_gate() -> None:
    trials = [trial(0, True, 0.5), trial(1, False, 0.9), trial(2, True, 0.7)]
    assert PassedEveryGate().pick(trials) is trials[2]
    assert PassedEveryGate().pick([trial(0, False, 1.0)]) is None


def test_the_stop_and_the_epoch_choice() -> None:
    stop = GenerationLimit(3)
    assert [stop.done(g) for g in (0, 2, 3, 4)] == [False, False, True, True]
    pool = SnapshotPool(
        [Snapshot("a", "h1", 0.5, 0), Snapshot("b", "h2", 0.5, 1), Snapshot("c", "h3", 0.4, 2)]
    )
    assert BestOnValidation().select(pool).sha == "b"  # the latest among ties

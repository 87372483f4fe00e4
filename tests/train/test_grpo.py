"""GRPO's advantages are normalised within each task's group, never across tasks."""

from __future__ import annotations

import math

import pytest

from harnessevolve.train.grpo import group_advantages, grpo_samples
from harnessevolve.train.rft import rft_samples
from harnessevolve.train.samples import Sample


def sample(task: str, reward: float, passed: bool | None = None) -> Sample:
    return Sample(task, (1, 2, 3), (0, 1, 1), reward, passed=reward >= 1 if passed is None else passed)


def test_advantages_are_normalised_per_task() -> None:
    advantages = group_advantages({"a": [1.0, 0.0], "b": [1.0, 1.0, 0.0, 0.0, 0.0, 1.0, 0.5]})
    assert advantages["a"] == pytest.approx([1.0, -1.0], abs=1e-5)
    for values in advantages.values():
        mean = sum(values) / len(values)
        std = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))
        assert mean == pytest.approx(0.0, abs=1e-9) and std == pytest.approx(1.0, abs=1e-4)


def test_grpo_samples_carry_their_group_advantage_and_drop_groups_without_signal() -> None:
    samples = [
        sample("a", 1.0),
        sample("a", 0.0),
        sample("a", 0.0),
        sample("b", 0.2),
        sample("b", 0.8),
        sample("same", 1.0),  # equal rewards: no signal
        sample("same", 1.0),
        sample("alone", 0.0),  # a group of one
    ]
    chosen = grpo_samples(samples, eps=0.0)
    assert [s.task_id for s in chosen] == ["a", "a", "a", "b", "b"]
    a = [s.advantage for s in chosen if s.task_id == "a"]
    assert a == pytest.approx([math.sqrt(2), -1 / math.sqrt(2), -1 / math.sqrt(2)])
    assert [s.advantage for s in chosen if s.task_id == "b"] == pytest.approx([-1.0, 1.0])
    assert grpo_samples(samples, eps=0.0, min_group=3) == [s for s in chosen if s.task_id == "a"]


def test_rft_keeps_successes_only_with_unit_weight() -> None:
    chosen = rft_samples([sample("a", 1.0), sample("a", 0.0), sample("b", 0.0, passed=True)])
    assert [(s.task_id, s.reward, s.advantage) for s in chosen] == [("a", 1.0, 1.0), ("b", 0.0, 1.0)]

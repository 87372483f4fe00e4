"""The matched-budget control's arithmetic: k from the run's rollouts, the self-consistency pick,
the pass@k oracle, the seed's own rollouts reused as the first sample, and the intervals."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from harnessevolve.core.atif import Step, ToolCall, Trajectory
from harnessevolve.gate.noise import mean_ci
from harnessevolve.scoring.best_of_k import best_of_k, matched_k, self_consistent_pick
from harnessevolve.scoring.scorer import TaskResult


def result(task: str, score: float, answer: str, stop: str = "submitted") -> TaskResult:
    call = ToolCall("c1", "submit", {"answer": answer})
    steps = (Step(1, "agent", "", tool_calls=(call,)),)
    trajectory = Trajectory("s", "a", "1", "m", steps, extra={"stop_reason": stop})
    return TaskResult(task, score, score >= 1, None, trajectory, 0)


class Samples:
    """A RepetitionScorer that answers from a table: repetition -> task -> (score, answer)."""

    def __init__(self, table: dict[int, dict[str, tuple[float, str]]]) -> None:
        self.table = table
        self.asked: list[int] = []
        self.rollouts = 0

    async def score(self, harness, tasks: Sequence, label: str, *, repetition: int = 0) -> list[TaskResult]:
        self.asked.append(repetition)
        self.rollouts += len(tasks)
        return [result(t.id, *self.table[repetition][t.id]) for t in tasks]


class FakeTask:
    def __init__(self, task_id: str) -> None:
        self.id = task_id


class FakeHarness:
    class loop:  # noqa: N801 - the attribute best_of_k reads
        temperature = 0.7


def test_matched_k_spends_the_runs_rollouts_on_the_test_tasks() -> None:
    assert matched_k(96, 8) == 12
    assert matched_k(20, 8) == 2  # round(2.5) is 2: banker's rounding, within one sample per task
    assert matched_k(3, 8) == 1
    assert matched_k(0, 0) == 1


def test_self_consistency_picks_the_largest_group_without_the_checker() -> None:
    wrong, right = result("t", 0, "4"), result("t", 1, "5")
    assert self_consistent_pick([wrong, right, result("t", 1, "5")]).score == 1
    assert self_consistent_pick([wrong, right]) is wrong  # a tie goes to the earliest sample
    crashed = result("t", 1, "5", stop="step_limit")
    assert self_consistent_pick([wrong, crashed, crashed]) is wrong  # submitted runs first


def test_best_of_k_reuses_the_seeds_own_rollouts_and_scores_pick_and_oracle() -> None:
    tasks = [FakeTask("a"), FakeTask("b")]
    seed_results = [result("a", 0, "x"), result("b", 1, "y")]
    table = {1: {"a": (1, "z"), "b": (0, "w")}, 2: {"a": (1, "z"), "b": (0, "v")}}
    scorer = Samples(table)
    control = asyncio.run(
        best_of_k(scorer, FakeHarness(), tasks, 3, "control", first=seed_results, matched_to=6)
    )
    assert scorer.asked == [1, 2]  # sample 1 is the seed's own test rollout: not run again
    assert control.new_rollouts == 4 and control.samples == 6
    # a: x, z, z -> the pick is z (1); b: y, w, v -> all differ, the earliest (y, 1)
    assert control.sc_scores == (1, 1)
    assert control.oracle_scores == (1, 1)
    assert control.pass1 == pytest.approx((2 / 3 + 1 / 3) / 2)
    doc = control.to_dict()
    assert doc["k"] == 3 and doc["matched_to"] == 6 and doc["sc"] == 1.0
    gain, ci = control.gain_over_sc([1, 0])
    assert gain == -0.5 and ci is not None and ci[0] <= gain <= ci[1]


def test_the_oracle_is_at_least_the_pick() -> None:
    tasks = [FakeTask("a")]
    table = {0: {"a": (0, "x")}, 1: {"a": (0, "x")}, 2: {"a": (1, "y")}}
    control = asyncio.run(best_of_k(Samples(table), FakeHarness(), tasks, 3, "control"))
    assert control.sc == 0 and control.oracle == 1  # the majority is wrong; one sample is right


def test_mean_ci_is_wilson_for_pass_rates_and_never_leaves_0_1() -> None:
    lo, hi = mean_ci([1.0] * 5 + [0.0] * 5, 0.95)
    assert (lo, hi) == pytest.approx((0.2366, 0.7634), abs=1e-4)
    lo, hi = mean_ci([0.0] * 8, 0.95)
    assert lo == 0.0 and 0.3 < hi < 0.33  # Wilson: 0 of 8 is not "certainly 0"
    assert mean_ci([], 0.95) is None
    lo, hi = mean_ci([0.5, 0.25, 1.0, 0.0], 0.95)  # fractional scores: bootstrap
    assert 0.0 <= lo <= 0.4375 <= hi <= 1.0


@pytest.mark.parametrize("given, used", [(0.0, 0.0), (None, 0.7), (1.3, 1.3)])
def test_a_control_temperature_is_used_as_given_zero_included(
    given: float | None, used: float, monkeypatch: pytest.MonkeyPatch, tmp_path
) -> None:
    from harnessevolve.scoring import best_of_k as module

    made: list[float] = []

    def sampling_harness(_source, _dest, temperature: float):  # type: ignore[no-untyped-def]
        made.append(temperature)
        return FakeHarness()

    async def fake_best_of_k(*_args, **_kwargs):  # type: ignore[no-untyped-def]
        return None

    class Greedy:  # a seed that does not sample: the control gets its own sampler
        root = tmp_path

        class loop:  # noqa: N801
            temperature = 0.0

    monkeypatch.setattr(module, "sampling_harness", sampling_harness)
    monkeypatch.setattr(module, "best_of_k", fake_best_of_k)
    asyncio.run(
        module.seed_control(
            object(), Greedy(), [], [], k=2, matched_to=None, work_dir=tmp_path, temperature=given
        )
    )
    assert made == [used]

"""Why a rollout failed, in the report's words: how a conversation ended for each way a multi-turn
rollout stops, what judges said, and an unreadable trajectory giving no reasons (never an error)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harnessevolve.report.outcome import conversation_end, judge_reasons, read_ending
from harnessevolve.report.task_matrix import TaskCell

LIMIT = "the simulated user reached its turn limit after 4 user turns without writing its stop token"


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        ({"stop_reason": "submitted"}, ""),  # a single-turn task has no conversation to end
        (
            {"stop_reason": "ended", "turns": 2, "user_end": "transfer"},
            "the simulated user ended it (transfer) after 2 user turns",
        ),
        ({"stop_reason": "user_turn_limit", "turns": 4}, LIMIT),
        ({"stop_reason": "user_error", "turns": 1}, "the simulated user's model failed after 1 user turn"),
        ({"stop_reason": "ended", "turns": 2}, "the agent ended the last user turn after 2 user turns"),
        (
            {"stop_reason": "step_limit", "turns": 3},
            "cut off after 3 user turns: the loop hit its step limit",
        ),
    ],
)
def test_how_a_conversation_ended(extra: dict, said: str) -> None:
    assert conversation_end(extra) == said


def test_judge_reasons_come_from_judge_checks_and_the_signal_judge() -> None:
    checks = (
        "FAIL answer: expected '3', found '4'",
        "FAIL judge: judge m: does not hold (never confirmed the order)",
        "ok judge: judge m: holds (greeted the user)",
    )
    view = {
        "model": "j",
        "cause": "skipped_step",
        "rules_cause": "premature_finish",
        "agrees": False,
        "why": "no lookup",
    }
    assert judge_reasons(checks, view) == (
        "judge m: does not hold (never confirmed the order)",
        "judge m: holds (greeted the user)",
        "judge j on the divergence: skipped_step (the rules said premature_finish): no lookup",
    )
    cell = TaskCell(0.0, False, None, checks=checks, judge=judge_reasons(checks))
    assert [what for what, _ in cell.reasons] == ["check", "judge", "judge"]  # a judge check once
    assert TaskCell(1.0, True, None, checks=("ok answer: 3",)).reasons == ()


def test_an_unreadable_trajectory_gives_no_reasons(tmp_path: Path) -> None:
    bad = tmp_path / "t.json"
    bad.write_text("{not json")
    assert read_ending(bad).stop == "" and read_ending(tmp_path / "missing.json").conversation == ""
    bad.write_text('{"extra": {"stop_reason": "something_new"}}')
    assert read_ending(bad).stop == "something_new"  # an unknown reason is shown as it is

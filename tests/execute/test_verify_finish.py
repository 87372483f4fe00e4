"""``loop.verify_finish``: the first attempt to finish is held back once with the request quoted, on
two benchmarks of other shapes (shell-basics' one-turn submit; tool-use-example's two-turn cart,
whose turns end with a message), and the held answer stands when the run ends without another."""

from __future__ import annotations

import pytest
from test_tool_use import call, rollout

from harnessevolve.core import paths
from harnessevolve.execute.verify_finish import VERIFY_SUBMIT, VERIFY_TURN

SHELL = paths.builtin_dir("benchmarks") / "shell-basics"
TOOLS = paths.builtin_dir("benchmarks") / "tool-use-example"
ASKED = VERIFY_SUBMIT.split("\n")[0]


def hasty_mover(messages: list[dict], tools: list[dict]) -> dict:
    """Makes the folder but leaves the file; submits; moves the file only when asked to check."""
    if any(m["role"] == "tool" and m["content"].startswith(ASKED) for m in messages):
        if not any("mv draft.txt" in str(m.get("tool_calls", "")) for m in messages):
            return call("bash", command="mv draft.txt old/")
        return call("submit", answer="done")
    if not any(m["role"] == "assistant" for m in messages):
        return call("bash", command="mkdir -p old")
    return call("submit", answer="done")


@pytest.mark.parametrize("verify", [False, True])
def test_a_run_that_submits_half_done_finishes_the_work_when_asked_to_check(scripts, verify: bool) -> None:
    trajectory, result = rollout(
        SHELL, "move-file-01", scripts("hasty-mover", hasty_mover), loop={"verify_finish": verify}
    )
    assert result.passed is verify
    if not verify:
        assert "verify_finish" not in trajectory.extra
        return
    held = trajectory.extra["verify_finish"]
    assert held == [{"turn": 0, "step": 4, "answer": "done"}]  # the step id of the held submit
    asked = trajectory.agent_steps[1].observations[0].content
    assert asked.startswith(ASKED) and "Make the folder old and put draft.txt inside it" in asked
    assert trajectory.extra["stop_reason"] == "submitted" and trajectory.extra["answer"] == "done"


def stubborn(messages: list[dict], tools: list[dict]) -> dict:
    """Submits at once, then only lists files when asked to check, until the step limit."""
    if not any(m["role"] == "assistant" for m in messages):
        return call("submit", answer="7")
    return call("bash", command="ls")


def test_the_held_answer_stands_when_the_run_ends_without_another(scripts) -> None:
    trajectory, result = rollout(
        SHELL,
        "count-lines-01",
        scripts("stubborn", stubborn),
        loop={"verify_finish": True, "max_steps": 3},
    )
    assert trajectory.extra["stop_reason"] == "submitted" and trajectory.extra["answer"] == "7"
    assert trajectory.extra["verify_finish"][0]["stood"] is True
    assert len(trajectory.agent_steps) == 3  # held at step 1, two more steps, then the limit


def half_turn(messages: list[dict], tools: list[dict]) -> dict:
    """Turn 1 asks for pears; it answers without adding them, and adds them only when asked to check."""
    users = [m["content"] for m in messages if m["role"] == "user"]
    asked, last = users[-1].startswith(VERIFY_TURN.split("\n")[0]), messages[-1]
    if not any(u.startswith("Now add") for u in users):  # turn 0: add the apples, then say so
        return (
            call("addItem", name="apple", quantity=2)
            if last["role"] == "user" and not asked
            else {"content": "Added."}
        )
    if asked and last["role"] == "user":
        return call("addItem", name="pear", quantity=2)
    if last["role"] == "tool":
        return {"content": "Added 2 pears."}
    return {"content": "Sure, done."}


@pytest.mark.parametrize("verify", [False, True])
def test_a_turn_ended_half_done_is_finished_when_asked_to_check(scripts, verify: bool) -> None:
    trajectory, result = rollout(
        TOOLS, "cart-two-turns", scripts("half-turn", half_turn), loop={"verify_finish": verify}
    )
    assert result.passed is verify
    if verify:
        turns = [entry["turn"] for entry in trajectory.extra["verify_finish"]]
        assert turns == [0, 1]  # each turn's first end held once
        # the loop's message after a held end is kept on the agent step before it (extra.nudge)
        nudges = [n for s in trajectory.agent_steps if "check your work" in (n := s.extra.get("nudge", ""))]
        assert len(nudges) == 2 and "Now add as many pears" in nudges[1]

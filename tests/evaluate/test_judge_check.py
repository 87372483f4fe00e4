"""The judge check: a model sees only the assertion and the transcript; replies cached by (model, prompt)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harnessevolve.core.atif import ObservationResult, Step, ToolCall, Trajectory
from harnessevolve.core.errors import JudgeUnavailableError
from harnessevolve.core.tasks import Check, Task
from harnessevolve.evaluate.checkers import run_checks
from harnessevolve.evaluate.judge_check import check_judge, parse_verdict
from harnessevolve.models import UsageMeter, usage_scope


def conversation_run(answer_text: str) -> Trajectory:
    steps = (
        Step(1, "system", "You are a helpful agent. SECRET-HARNESS-PROMPT"),
        Step(2, "user", "How much is my refund for order 17?"),
        Step(
            3,
            "agent",
            "",
            tool_calls=(ToolCall("c1", "get_order", {"id": 17}),),
            observations=(ObservationResult("c1", '{"refund": 42.5}'),),
        ),
        Step(4, "agent", answer_text),
    )
    return Trajectory("s", "builtin", "1", "scripted/x", steps)


@pytest.fixture
def judge(scripts, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    seen: list[list[dict]] = []

    def reply(messages, tools):
        seen.append(messages)
        holds = "AGENT: Your refund is 42.5" in messages[-1]["content"].split("Transcript:")[1]
        return {"content": f'{{"holds": {str(holds).lower()}, "reason": "read the transcript"}}'}

    return scripts("judge-refund", reply), seen


def test_judge_passes_and_fails_on_what_the_agent_said(judge, tmp_path: Path) -> None:
    model, seen = judge
    check = Check(type="judge", assertion="The agent told the user the refund amount.", model=model)
    ok, message = check_judge(check, conversation_run("Your refund is 42.5 dollars."))
    assert ok and "holds" in message
    ok, message = check_judge(check, conversation_run("I cannot tell you."))
    assert not ok and "does not hold" in message
    prompt = seen[0][-1]["content"]
    assert "get_order" in prompt and "How much is my refund" in prompt
    assert "SECRET-HARNESS-PROMPT" not in prompt  # system steps are not part of the transcript


def test_judge_replies_are_cached_and_metered(judge) -> None:
    model, seen = judge
    check = Check(type="judge", assertion="The agent told the user the refund amount.", model=model)
    meter = UsageMeter()
    with usage_scope(meter, stage="evaluate"):
        assert check_judge(check, conversation_run("Your refund is 42.5."))[0]
        assert check_judge(check, conversation_run("Your refund is 42.5."))[0]
    assert len(seen) == 1  # the second judgement came from the cache
    assert meter.totals().calls == 1


def test_judge_without_a_verdict_or_a_trajectory_fails(scripts, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    model = scripts("judge-mumbles", lambda messages, tools: {"content": "hard to say, maybe"})
    check = Check(type="judge", assertion="The agent greeted the user.", model=model)
    ok, message = check_judge(check, conversation_run("Hello!"))
    assert not ok and "gave no verdict" in message
    assert check_judge(check, None) == (False, "judge check needs the run's trajectory (none was given)")


def test_a_judge_whose_model_call_fails_raises_so_the_check_is_not_counted_as_failed(
    scripts, tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))

    def down(messages, tools):
        raise TimeoutError("no reply in 600 s (fake)")

    check = Check(type="judge", assertion="The agent greeted the user.", model=scripts("judge-down", down))
    with pytest.raises(JudgeUnavailableError, match="judge-down failed: .*no reply in 600 s"):
        check_judge(check, conversation_run("Hello!"))


def test_judge_is_a_check_kind_of_run_checks(judge, tmp_path: Path) -> None:
    model, _ = judge
    task = Task(
        id="t",
        instruction="refund?",
        split="train",
        checks=(Check(type="judge", assertion="The agent told the user the refund amount.", model=model),),
    )
    result = run_checks(task, tmp_path, None, runner=None, trajectory=conversation_run("Your refund is 42.5"))  # type: ignore[arg-type]
    assert result.passed and result.details[0].type == "judge"


@pytest.mark.parametrize(
    "content, verdict",
    [
        ('{"holds": true, "reason": "r"}', (True, "r")),
        ('Sure. {"holds": false}', (False, "")),
        ("yes", (True, "")),
        ("yes and no", None),
        ('{"holds": "true"}', (True, "")),
    ],
)
def test_parse_verdict(content: str, verdict) -> None:
    assert parse_verdict(content) == verdict


def test_judge_calls_are_quiet_and_leave_no_pending_task(judge, capfd: pytest.CaptureFixture[str]) -> None:
    """Each judge call runs on an event loop of its own: litellm's logging worker and clients are
    settled before that loop ends, so no "event loop changed" warning per call, no pending task."""
    import asyncio
    import gc
    import logging

    model, seen = judge
    level = logging.getLogger("LiteLLM").level
    check = Check(type="judge", assertion="The agent told the user the refund amount.", model=model)
    for i in range(4):
        assert check_judge(check, conversation_run(f"Your refund is 42.5 (call {i})."))[0]

    async def inside_a_loop() -> None:  # the way a run calls it: from inside its event loop
        assert check_judge(check, conversation_run("Your refund is 42.5 (in a loop)."))[0]

    asyncio.run(inside_a_loop())
    gc.collect()
    assert len(seen) == 5
    err = capfd.readouterr().err
    assert "LoggingWorker" not in err and "Task was destroyed" not in err and "WARNING" not in err, err
    assert logging.getLogger("LiteLLM").level == level  # quiet only during the calls

"""The builtin loop's cut points: hooks run before each query, between the actions and their
record, and hear the stop reason; a hook may end the rollout by raising ``Stopped``; the messages
the model is shown are the transcript the trajectory's steps are derived from."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest
from test_agent import HARNESS, make_task

from harnessevolve.core.enums import StopReason
from harnessevolve.core.transcript import NO_TOOL_NUDGE, Transcript
from harnessevolve.execute.agent import Actions, Rollout, Settings, Stopped, run_with_hooks
from harnessevolve.models import ModelReply
from harnessevolve.models.scripted import register_script, unregister_script

TASK = make_task()


class Recorder:
    """Hooks that log every cut point; ``stop_after`` ends the rollout after that many actions."""

    def __init__(self, stop_after: int | None = None) -> None:
        self.calls: list[str] = []
        self.stop_after = stop_after
        self.shown: list[int] = []

    def tools(self) -> list[Any]:
        return []

    async def before_query(self, rollout: Rollout) -> None:
        self.calls.append("before_query")
        self.shown.append(len(rollout.transcript.messages()))

    async def around_query(self, loop: Any) -> ModelReply | None:
        self.calls.append("around_query")
        return None

    async def after_actions(self, rollout: Rollout, reply: ModelReply, actions: Actions) -> None:
        self.calls.append(f"after_actions:{','.join(c.function_name for c in actions.calls) or '-'}")
        if self.stop_after is not None and self.calls.count("before_query") >= self.stop_after:
            raise Stopped(StopReason.REPEATED)

    async def on_stop(self, rollout: Rollout, reason: StopReason) -> None:
        self.calls.append(f"on_stop:{reason}")


@pytest.fixture
def model() -> Any:
    name = f"hooks-{uuid.uuid4().hex[:8]}"
    yield name
    unregister_script(name)


def run(model: str, replies: list[dict[str, Any]], workspace: Path, hooks: Recorder) -> Any:
    register_script(model, replies)
    settings = Settings(f"scripted/{model}", 1, hooks=hooks)
    return asyncio.run(run_with_hooks(HARNESS, TASK, workspace, settings))


def test_hooks_run_at_every_cut_point_in_order(model: str, tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("maple\n")
    hooks = Recorder()
    replies = [
        {"content": "let me look"},
        {"tool_calls": [{"name": "read_file", "arguments": {"path": "a.txt"}}]},
        {"tool_calls": [{"name": "submit", "arguments": {"answer": "maple"}}]},
    ]
    trajectory = run(model, replies, tmp_path, hooks)
    assert hooks.calls == [
        "before_query",
        "around_query",
        "after_actions:-",
        "before_query",
        "around_query",
        "after_actions:read_file",
        "before_query",
        "around_query",
        "after_actions:submit",
        "on_stop:submitted",
    ]
    # each query saw what the one before added: system+user, +reply+nudge, +call+result
    assert hooks.shown == [2, 4, 6]
    assert trajectory.extra["stop_reason"] == "submitted"
    nudged = trajectory.agent_steps[0]
    assert nudged.extra["error"] == "no_tool_call" and nudged.extra["nudge"] == NO_TOOL_NUDGE
    # the chat the steps stand for is the chat the model was shown
    replay = Transcript.from_steps(trajectory.steps, nudges=True).messages()
    assert [m["role"] for m in replay] == [
        "system",
        "user",
        "assistant",
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
    ]


def test_a_hook_ends_the_rollout_with_its_own_reason(model: str, tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("maple\n")
    hooks = Recorder(stop_after=1)
    replies = [{"tool_calls": [{"name": "read_file", "arguments": {"path": "a.txt"}}]}] * 3
    trajectory = run(model, replies, tmp_path, hooks)
    assert trajectory.extra["stop_reason"] == StopReason.REPEATED
    assert hooks.calls == ["before_query", "around_query", "after_actions:read_file", "on_stop:repeated"]

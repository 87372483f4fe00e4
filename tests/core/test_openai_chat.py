"""ATIF <-> OpenAI chat messages: both round trips, the loader's v1.4 fields and rules, bad input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harnessevolve.core import atif
from harnessevolve.core.atif import ObservationResult, Step, ToolCall, Trajectory
from harnessevolve.core.errors import TrajectoryError
from harnessevolve.core.openai_chat import from_messages, to_messages
from harnessevolve.core.paths import builtin_dir

MESSAGES: list[dict[str, Any]] = [
    {"role": "system", "content": "You are an agent."},
    {"role": "user", "content": "Count the lines in a.txt."},
    {
        "role": "assistant",
        "content": "Reading both.",
        "reasoning_content": "two files",
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "bash", "arguments": '{"command": "wc -l a.txt"}'},
            },
            {"id": "c2", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "b"}'}},
        ],
    },
    {"role": "tool", "tool_call_id": "c1", "content": "3 a.txt\n"},
    {"role": "tool", "tool_call_id": "c2", "content": "x"},
    {"role": "assistant", "content": "I think it is 3"},
    {"role": "user", "content": "You did not call a tool."},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c3", "type": "function", "function": {"name": "submit", "arguments": '{"answer": "3"}'}}
        ],
    },
    {"role": "tool", "tool_call_id": "c3", "content": "submitted"},
]


def test_messages_to_trajectory_to_messages_is_exact() -> None:
    trajectory = from_messages(MESSAGES, model_name="openai/gpt-4o-mini")
    assert [s.source for s in trajectory.steps] == ["system", "user", "agent", "agent", "user", "agent"]
    assert [s.step_id for s in trajectory.steps] == [1, 2, 3, 4, 5, 6]
    step = trajectory.steps[2]
    assert [c.function_name for c in step.tool_calls] == ["bash", "read_file"]
    assert step.tool_calls[0].arguments == {"command": "wc -l a.txt"}
    assert step.observations == (ObservationResult("c1", "3 a.txt\n"), ObservationResult("c2", "x"))
    assert step.reasoning_content == "two files"
    assert to_messages(trajectory) == MESSAGES


def test_trajectory_to_messages_to_trajectory_keeps_every_action_and_observation(tmp_path: Path) -> None:
    reference = atif.load(builtin_dir("trajectories") / "shell-basics" / "replace-word-01.json")
    back = from_messages(to_messages(reference), session_id=reference.session_id)
    assert len(back.steps) == len(reference.steps)
    for ours, theirs in zip(back.steps, reference.steps, strict=True):
        assert (ours.step_id, ours.source, ours.message) == (theirs.step_id, theirs.source, theirs.message)
        assert ours.tool_calls == theirs.tool_calls
        assert ours.observations == theirs.observations
    # and the imported trajectory is valid ATIF on disk
    atif.save(back, tmp_path / "t.json")
    assert atif.load(tmp_path / "t.json") == back


def test_the_fine_tuning_document_form_and_text_parts() -> None:
    doc = {
        "model": "m",
        "messages": [
            {
                "role": "developer",
                "content": [{"type": "text", "text": "be "}, {"type": "text", "text": "brief"}],
            },
            {"role": "user", "content": "hi"},
        ],
    }
    trajectory = from_messages(doc)
    assert trajectory.model_name == "m"
    assert (trajectory.steps[0].source, trajectory.steps[0].message) == ("system", "be brief")


def test_unreadable_tool_arguments_are_recorded_as_the_agent_loop_does() -> None:
    messages = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "c", "function": {"name": "bash", "arguments": "{oops"}}],
        },
    ]
    step = from_messages(messages).steps[1]
    assert step.tool_calls == (ToolCall("c", "bash", {}),)
    assert step.extra == {"error": "bad_arguments: bash"}


@pytest.mark.parametrize(
    ("messages", "field"),
    [
        ([{"role": "tool", "tool_call_id": "zz", "content": "x"}], "messages[0].tool_call_id"),
        ([{"role": "user", "content": "a"}, {"role": "critic", "content": "b"}], "messages[1].role"),
        ([{"role": "user", "content": [{"type": "image_url"}]}], "messages[0].content[0]"),
        (
            [{"role": "assistant", "tool_calls": [{"id": "c", "function": {}}]}],
            "messages[0].tool_calls[0].function.name",
        ),
        ("not a list", None),
    ],
)
def test_bad_messages_name_the_message_and_field(messages: Any, field: str | None) -> None:
    with pytest.raises(TrajectoryError) as caught:
        from_messages(messages, file="chat.json")
    assert caught.value.field == field
    assert caught.value.file == "chat.json"


# --- the loader's ATIF v1.4 fields and rules ----------------------------------------------------------


def doc_with(**step_fields: Any) -> dict[str, Any]:
    step = {"step_id": 1, "source": "agent", "message": "", **step_fields}
    return {
        "schema_version": "ATIF-v1.4",
        "session_id": "s",
        "agent": {"name": "a", "version": "1"},
        "steps": [step],
    }


def test_v14_fields_survive_a_load_and_save() -> None:
    doc = doc_with(
        reasoning_effort="medium",
        reasoning_content="think",
        metrics={
            "prompt_tokens": 3,
            "prompt_token_ids": [1, 2, 3],
            "completion_token_ids": [4],
            "logprobs": [-0.1],
        },
    )
    doc["agent"]["extra"] = {"strategy": "react"}
    trajectory = atif.from_dict(doc)
    assert trajectory.steps[0].reasoning_effort == "medium"
    assert trajectory.agent_extra == {"strategy": "react"}
    again = trajectory.to_dict()
    assert again["steps"][0]["metrics"]["prompt_token_ids"] == [1, 2, 3]
    assert again["steps"][0]["reasoning_content"] == "think"
    assert again["agent"]["extra"] == {"strategy": "react"}


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"source": "robot"}, "steps[0].source"),
        ({"source": "user", "tool_calls": []}, "steps[0].tool_calls"),
        ({"source": "system", "metrics": {}}, "steps[0].metrics"),
        ({"metrics": {"prompt_token_ids": ["a"]}}, "steps[0].metrics.prompt_token_ids[0]"),
        (
            {"observation": {"results": [{"source_call_id": "nope", "content": ""}]}},
            "steps[0].observation.results[0].source_call_id",
        ),
        (
            {"tool_calls": [{"tool_call_id": "c", "function_name": "bash"}]},
            "steps[0].tool_calls[0].arguments",
        ),
    ],
)
def test_invalid_steps_name_the_step_and_field(change: dict[str, Any], field: str) -> None:
    with pytest.raises(TrajectoryError) as caught:
        atif.from_dict(doc_with(**change), file="x.json")
    assert caught.value.field == field
    assert caught.value.one_line().startswith(f"x.json: {field}: ")


def test_every_built_in_reference_is_valid_and_saves_back_unchanged() -> None:
    paths = sorted(builtin_dir("trajectories").glob("*/*.json"))
    assert len(paths) >= 64
    for path in paths:
        assert atif.from_dict(json.loads(path.read_text()), file=str(path)).to_dict() == json.loads(
            path.read_text()
        )


def test_step_is_a_plain_value() -> None:
    t = Trajectory("s", "a", "1", "m", (Step(1, "user", "hi"),))
    assert from_messages(to_messages(t)).steps == t.steps

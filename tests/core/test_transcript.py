"""One chat<->ATIF mapping: messages are the source of truth, steps derived from them, and the
steps give back the chat the model was shown (nudges and observation notes included)."""

from __future__ import annotations

import pytest

from harnessevolve.core.atif import ObservationResult, Step, ToolCall
from harnessevolve.core.errors import TrajectoryError
from harnessevolve.core.transcript import (
    NO_TOOL_NUDGE,
    PARSE_NUDGE,
    Entry,
    Transcript,
    legacy_nudge,
    parse_nudge,
    steps_of,
)


def agent_transcript() -> Transcript:
    """A rollout as the builtin loop writes it: a reply without a call (nudged), a call whose
    result carries the loop's observation note, and a failed model call the model never saw."""
    t = Transcript()
    t.add_text("system", "be brief", timestamp="t0")
    t.add_text("user", "make a folder notes")
    t.add_reply("thinking", metrics={"prompt_tokens": 5}, extra={"error": "no_tool_call"})
    t.add_text("user", NO_TOOL_NUDGE, nudge=True)
    t.add_reply("", [ToolCall("c1", "bash", {"command": "mkdir notes"})], model_name="m")
    t.add_results([ObservationResult("c1", "(no output)")], note="Keep going.")
    t.add({"role": "assistant", "content": ""}, extra={"error": "model_error: boom"}, in_chat=False)
    return t


def test_steps_are_derived_from_the_messages() -> None:
    t = agent_transcript()
    steps = t.steps()
    assert [s.source for s in steps] == ["system", "user", "agent", "agent", "agent"]
    assert [s.step_id for s in steps] == [1, 2, 3, 4, 5]
    nudged, call, failed = steps[2], steps[3], steps[4]
    assert nudged.extra == {"error": "no_tool_call", "nudge": NO_TOOL_NUDGE}
    assert nudged.metrics == {"prompt_tokens": 5}
    assert call.tool_calls == (ToolCall("c1", "bash", {"command": "mkdir notes"}),)
    # the note the model saw after the result is not part of the observation
    assert call.observations == (ObservationResult("c1", "(no output)"),)
    assert call.model_name == "m" and steps[0].timestamp == "t0"
    assert failed.extra["error"].startswith("model_error")
    # what the model is sent: the nudge and the note, never the failed call
    sent = t.messages()
    assert sent[3] == {"role": "user", "content": NO_TOOL_NUDGE}
    assert sent[-1] == {"role": "tool", "tool_call_id": "c1", "content": "(no output)\nKeep going."}
    assert len(sent) == 6  # system, user, reply, nudge, call, result: the failed call is no message


def test_the_steps_give_back_the_chat_the_model_was_shown() -> None:
    t = agent_transcript()
    shown = t.messages()
    replay = Transcript.from_steps(t.steps()[:4], observation_note="Keep going.", nudges=True)
    assert replay.messages() == shown
    # and without replay options: the plain export (no nudges, no notes)
    plain = Transcript.from_steps(t.steps()[:4]).messages()
    assert {"role": "user", "content": NO_TOOL_NUDGE} not in plain
    assert plain[-1]["content"] == "(no output)"


def test_trajectories_written_before_nudges_were_recorded_replay_the_loops_nudges() -> None:
    old = Step(3, "agent", "x", extra={"error": "parse_error: bad json"})
    assert legacy_nudge(old) == PARSE_NUDGE.format(error="bad json")
    assert legacy_nudge(Step(3, "agent", "x", extra={"error": "no_tool_call"})) == NO_TOOL_NUDGE
    # a multi-turn reply that ended the agent's turn was never nudged
    assert legacy_nudge(Step(3, "agent", "done")) is None
    replay = Transcript.from_steps([Step(1, "user", "hi"), old], nudges=True).messages()
    assert replay[-1] == {"role": "user", "content": PARSE_NUDGE.format(error="bad json")}


@pytest.mark.parametrize(
    ("error", "start"),
    [
        (
            "invalid JSON: Expecting ',' delimiter",
            "Your reply could not be read as a tool call (invalid JSON",
        ),
        ("unknown tool 'cat' (closest: 'cut'); available: cut, ls", "Your reply could not be read"),
        ("argument 'amount' should be integer, got str", "Your tool call was not run: argument 'amount'"),
        ("missing required argument(s) path for tool 'read_file'", "Your tool call was not run: missing"),
        ("argument 'mode' must be one of ['a', 'b'], got 'c'", "Your tool call was not run: argument 'mode'"),
    ],
)
def test_a_call_that_was_read_but_misses_its_schema_is_not_called_unreadable(error: str, start: str) -> None:
    """Read from BFCL 1.5B runs: a call with a mistyped argument was answered "could not be read
    as a tool call", and the model rewrote the same call three times."""
    assert parse_nudge(error).startswith(start)


def test_unreadable_arguments_are_kept_raw_and_sent_back_as_they_were() -> None:
    message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "c", "type": "function", "function": {"name": "bash", "arguments": "{oops"}}],
    }
    (step,) = steps_of([Entry(message)])
    assert step.tool_calls == (ToolCall("c", "bash", {}, raw_arguments="{oops"),)
    assert Transcript.from_steps([step]).messages() == [message]


def test_strict_reading_names_the_message_and_lenient_reading_skips_it() -> None:
    orphan = [Entry({"role": "tool", "tool_call_id": "zz", "content": "x"})]
    with pytest.raises(TrajectoryError) as caught:
        steps_of(orphan, strict=True)
    assert caught.value.field == "messages[0].tool_call_id"
    assert steps_of(orphan) == []


def test_the_parse_nudge_tells_misfits_from_unreadable_replies_as_the_provider_words_them() -> None:
    """``parse_nudge`` keys on the words of ``models.tool_text.validate_arguments``: a change there
    must not silently send a mistyped call back as "could not be read"."""
    from harnessevolve.models.tool_text import parse_tool_reply

    tools = [
        {
            "type": "function",
            "function": {
                "name": "wait",
                "parameters": {
                    "type": "object",
                    "properties": {"seconds": {"type": "integer"}, "mode": {"enum": ["a", "b"]}},
                    "required": ["seconds"],
                    "additionalProperties": False,
                },
            },
        }
    ]
    for misfit in (
        '{"seconds": "5"}',
        '{"mode": "a"}',
        '{"seconds": 1, "mode": "c"}',
        '{"seconds": 1, "x": 2}',
    ):
        error = parse_tool_reply(f'{{"tool": "wait", "arguments": {misfit}}}', tools).parse_error
        assert error is not None and parse_nudge(error).startswith("Your tool call was not run: "), error
    unreadable = parse_tool_reply("I will wait a second.", tools).parse_error
    assert unreadable is not None and parse_nudge(unreadable).startswith("Your reply could not be read")

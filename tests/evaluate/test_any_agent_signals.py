"""Error signals from other agents' trajectories: only ATIF content plus tool definitions.

Finish detection, the offered-tool check, tool errors read from observations (and retries),
arguments compared through the tool's schema, normalised repetition, multi-turn steps, and the
step convention (``step`` and ``reference_step`` are ATIF step_ids of their own trajectories)."""

from __future__ import annotations

from typing import Any

import pytest

from harnessevolve.core import atif
from harnessevolve.core.signals import Cause
from harnessevolve.evaluate.alignment import first_divergence, signal_without_reference


def tool(name: str, **params: str) -> dict[str, Any]:
    props = {k: {"type": v} for k, v in params.items()}
    return {
        "type": "function",
        "function": {"name": name, "parameters": {"type": "object", "properties": props}},
    }


TOOLS = [
    tool("ls", path="string"),
    tool("cat", path="string"),
    tool("rm", path="string"),
    tool("head", n="number"),
]


def traj(
    *turns: Any, tools: list | None = TOOLS, where: str = "extra", stop: str | None = None
) -> atif.Trajectory:
    """``turns``: a user text, ``(name, args)`` or ``(name, args, observation)`` for a call, or
    ``("msg", text)`` for an agent message without a call."""
    steps: list[dict[str, Any]] = []
    for t in turns:
        sid = len(steps) + 1
        if isinstance(t, str):
            steps.append({"step_id": sid, "source": "user", "message": t})
        elif t[0] == "msg":
            steps.append({"step_id": sid, "source": "agent", "message": t[1]})
        else:
            name, args, *obs = t
            call = {"tool_call_id": f"c{sid}", "function_name": name, "arguments": args}
            step = {"step_id": sid, "source": "agent", "message": "", "tool_calls": [call]}
            if obs != [None]:
                step["observation"] = {
                    "results": [{"source_call_id": f"c{sid}", "content": obs[0] if obs else "ok"}]
                }
            steps.append(step)
    agent: dict[str, Any] = {"name": "other", "version": "1", "model_name": "m"}
    version = "ATIF-v1.4"
    if tools is not None and where == "extra":
        agent["extra"] = {"tool_definitions": tools}
    elif tools is not None:
        agent["tool_definitions"] = tools
        version = "ATIF-v1.5"
    doc = {"schema_version": version, "session_id": "s", "agent": agent, "steps": steps}
    if stop:
        doc["extra"] = {"stop_reason": stop}
    return atif.from_dict(doc, strict=False)


LS, CAT, RM = ("ls", {"path": "."}), ("cat", {"path": "notes.txt"}), ("rm", {"path": "tmp.txt"})
ASK = "Tidy the folder: list it, read notes.txt, remove tmp.txt."
REF = traj(ASK, LS, CAT, RM, ("msg", "Done."))


def signal_of(run: atif.Trajectory, ref: atif.Trajectory = REF) -> tuple[Cause, int | None, int | None]:
    s = first_divergence(run, ref)
    return s.cause, s.step, s.reference_step


# --- the acceptance probe's two cases, and their variants -----------------------------------------


def test_a_plain_final_message_before_the_last_reference_call_is_a_premature_finish() -> None:
    assert signal_of(traj(ASK, LS, CAT, ("msg", "Done."))) == (Cause.PREMATURE_FINISH, 4, 4)


@pytest.mark.parametrize("where", ["extra", "v1.5"])
def test_a_tool_no_definition_offers_is_unknown_not_wrong(where: str) -> None:
    run = traj(ASK, LS, ("read_everything", {"path": "notes.txt"}), RM, ("msg", "Done."), where=where)
    signal = first_divergence(run, REF)
    assert (signal.cause, signal.step, signal.reference_step) == (Cause.UNKNOWN_TOOL, 3, 3)
    assert "read_everything" in signal.hint and not signal.gaps


def test_an_offered_tool_in_the_wrong_place_is_wrong_tool() -> None:
    run = traj(ASK, LS, ("head", {"n": 3}), RM, ("msg", "Done."))
    assert signal_of(run) == (Cause.WRONG_TOOL, 3, 3)


def test_the_harness_tools_passed_by_the_caller_count_as_offered() -> None:
    run = traj(ASK, LS, ("read_everything", {"path": "x"}), RM, ("msg", "Done."), tools=None)
    ref = traj(ASK, LS, CAT, RM, ("msg", "Done."), tools=None)
    assert first_divergence(run, ref).cause is Cause.WRONG_TOOL  # nothing says what was offered
    assert first_divergence(run, ref, tools=TOOLS).cause is Cause.UNKNOWN_TOOL


# --- finishing -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "finish",
    [("submit", {"answer": "done"}), ("bash", {"command": "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"})],
)
def test_submit_and_the_runners_finish_command_are_finishes(finish: tuple) -> None:
    tools = [*TOOLS, tool("submit", answer="string"), tool("bash", command="string")]
    run = traj(ASK, LS, finish, tools=tools)
    assert signal_of(run, traj(ASK, LS, CAT, ("msg", "Done."), tools=tools)) == (Cause.PREMATURE_FINISH, 3, 3)


def test_the_runners_own_stop_reason_is_a_finish_after_a_last_call() -> None:
    ref = traj(ASK, LS, CAT, RM, stop="completed")
    early = traj(ASK, LS, CAT, stop="completed")
    assert signal_of(early, ref) == (Cause.PREMATURE_FINISH, 3, 4)  # the implicit finish sits on step 3
    assert signal_of(traj(ASK, LS, CAT, stop="max_steps"), ref)[0] is Cause.STEP_LIMIT


def test_narration_between_calls_is_not_an_action_but_an_empty_or_textual_call_is() -> None:
    run = traj(ASK, LS, ("msg", "Let me read the notes now."), CAT, RM, ("msg", "Done."))
    assert signal_of(run)[0] is Cause.WRONG_ARGUMENT  # nothing diverged: the checker's failure stands
    garbled = traj(
        ASK, LS, ("msg", '{"name": "cat", "arguments": {"path": "notes.txt"'), CAT, RM, ("msg", "ok")
    )
    assert signal_of(garbled) == (Cause.FORMAT_ERROR, 3, 3)


# --- tool errors read from observations ----------------------------------------------------------------


@pytest.mark.parametrize(
    "observation",
    [
        '{"error": "cat: notes.txt: No such file or directory"}',
        "cat: notes.txt: No such file or directory",
        "some output\n[exit code 1]",
        'Traceback (most recent call last):\n  File "t.py", line 1\nFileNotFoundError: notes.txt',
        "Error during execution: cat() failed",
    ],
)
def test_an_error_in_the_observation_that_the_agent_ignored(observation: str) -> None:
    run = traj(ASK, LS, ("cat", {"path": "notes.txt"}, observation), RM, ("msg", "Done."))
    signal = first_divergence(run, REF)
    assert (signal.cause, signal.step, signal.reference_step) == (Cause.TOOL_ERROR_IGNORED, 4, 4)
    assert "failed" in signal.hint


@pytest.mark.parametrize(
    "observation", ['{"matching_lines": ["Error: disk full"]}', "exit code 0", "all good", ""]
)
def test_observations_that_report_no_error(observation: str) -> None:
    run = traj(ASK, LS, ("cat", {"path": "notes.txt"}, observation), RM, ("msg", "Done."))
    assert signal_of(run)[0] is Cause.WRONG_ARGUMENT  # followed the reference; no error to ignore


def test_a_failed_call_retried_right_is_not_a_divergence() -> None:
    failed = ("cat", {"path": "note.txt"}, "cat: note.txt: No such file or directory")
    run = traj(ASK, LS, failed, ("ls", {"path": "."}), CAT, ("msg", "Done."))
    assert signal_of(run) == (Cause.PREMATURE_FINISH, 6, 4)  # the real divergence: rm never done


def test_the_same_call_failing_then_redone_after_a_fix_is_a_recovery() -> None:
    run = traj(
        ASK,
        LS,
        ("cat", {"path": "notes.txt"}, "[exit code 1]"),
        ("rm", {"path": "lock"}),
        CAT,
        RM,
        ("msg", "x"),
    )
    assert signal_of(run)[0] is Cause.WRONG_ARGUMENT


@pytest.mark.parametrize("between", [0, 1, 2, 3])
def test_a_recovery_counts_up_to_three_actions_after_the_failed_call_and_not_four(between: int) -> None:
    """``RECOVERY_WINDOW`` pinned at its boundary: the failed ``cat`` redone as the 3rd action after
    it (two read-only calls between) is a recovery, so the run's divergence is elsewhere; as the
    4th it is not, and the run went on from the error (``tool_error_ignored`` on the step after)."""
    failed = ("cat", {"path": "notes.txt"}, "[exit code 1]")
    looks = [("ls", {"path": f"d{i}"}) for i in range(between)]
    run = traj(ASK, LS, failed, *looks, CAT, RM, ("msg", "Done."))
    cause, step, _ = signal_of(run)
    if between < 3:
        assert cause is Cause.WRONG_ARGUMENT  # followed the reference; the checker still failed
    else:
        assert (cause, step) == (Cause.TOOL_ERROR_IGNORED, 4)


# --- arguments through the schema ----------------------------------------------------------------------


HEAD_REF = traj(ASK, ("head", {"n": 5}), LS, ("msg", "Done."))


def test_numbers_compare_by_value() -> None:
    run = traj(ASK, ("head", {"n": 5.0}), ("rm", {"path": "x"}), ("msg", "Done."))
    assert signal_of(run, HEAD_REF) == (Cause.WRONG_TOOL, 3, 3)  # 5.0 matched 5; rm is the divergence


def test_a_string_where_the_schema_says_number_is_flagged() -> None:
    run = traj(ASK, ("head", {"n": "5"}), LS, ("msg", "Done."))
    signal = first_divergence(run, HEAD_REF)
    assert (signal.cause, signal.step) == (Cause.WRONG_ARGUMENT, 2)
    assert "string where the schema says number" in signal.hint


def test_key_order_and_surrounding_whitespace_do_not_matter() -> None:
    tools = [
        {
            "type": "function",
            "function": {
                "name": "cp",
                "parameters": {"properties": {"a": {"type": "string"}, "b": {"type": "string"}}},
            },
        }
    ]
    ref = traj(ASK, ("cp", {"a": "x.txt", "b": "y.txt"}), ("msg", "Done."), tools=tools)
    run = traj(ASK, ("cp", {"b": " y.txt\n", "a": "x.txt"}), ("msg", "Done."), tools=tools)
    assert first_divergence(run, ref).hint.endswith("checker still failed")


def test_a_required_argument_left_out_is_missing_argument() -> None:
    tools = [
        {
            "type": "function",
            "function": {
                "name": "cat",
                "parameters": {"properties": {"path": {"type": "string"}}, "required": ["path"]},
            },
        }
    ]
    ref = traj(ASK, CAT, ("msg", "Done."), tools=tools)
    run = traj(ASK, ("cat", {}, "Error: missing path"), ("msg", "Done."), tools=tools)
    assert signal_of(run, ref) == (Cause.MISSING_ARGUMENT, 2, 2)


# --- repetition ----------------------------------------------------------------------------------------


def test_repeats_that_differ_only_in_whitespace_are_a_loop() -> None:
    run = traj(
        ASK, LS, ("ls", {"path": " ."}), ("ls", {"path": ".\n"}), ("ls", {"path": "."}), stop="max_steps"
    )
    assert signal_of(run) == (Cause.STEP_LIMIT, 3, 3)


# --- turns and the step convention ---------------------------------------------------------------------


MULTI_REF = traj("list it", LS, CAT, "now remove tmp", RM, ("msg", "Done."))


def test_a_skipped_call_that_ended_a_turn_is_placed_where_it_belonged() -> None:
    run = traj("list it", LS, "now remove tmp", RM, ("msg", "Done."))
    # the run's step 3 is the user step where it left turn 1 without reading notes.txt
    assert signal_of(run, MULTI_REF) == (Cause.SKIPPED_STEP, 3, 3)


def test_while_the_run_matches_step_for_step_both_indices_agree() -> None:
    run = traj("list it", LS, CAT, "now remove tmp", ("rm", {"path": "other.txt"}), ("msg", "Done."))
    assert signal_of(run, MULTI_REF) == (Cause.WRONG_ARGUMENT, 5, 5)


def test_an_extra_call_at_the_end_of_a_turn_is_extra() -> None:
    run = traj("list it", LS, CAT, ("rm", {"path": "notes.txt"}), "now remove tmp", RM, ("msg", "Done."))
    assert signal_of(run, MULTI_REF) == (Cause.EXTRA_STEP, 4, 5)


def test_a_harmless_read_before_the_real_divergence_is_not_counted() -> None:
    run = traj(ASK, LS, ("cat", {"path": "README"}), CAT, ("rm", {"path": "notes.txt"}), ("msg", "Done."))
    assert signal_of(run) == (Cause.WRONG_ARGUMENT, 5, 4)


def test_a_harmless_read_alone_is_still_reported_as_extra() -> None:
    run = traj(ASK, LS, ("cat", {"path": "README"}), CAT, RM, ("msg", "Done."))
    assert signal_of(run) == (Cause.EXTRA_STEP, 3, 3)


def test_without_a_reference_the_offered_tools_still_give_the_cause() -> None:
    run = traj(ASK, LS, ("read_everything", {}), ("msg", "Done."))
    assert signal_without_reference(run).cause is Cause.UNKNOWN_TOOL


def test_openai_chat_logs_with_their_tools_list_get_the_offered_tool_check(cli, tmp_path) -> None:
    import json

    from harnessevolve.cli.app import app

    def chat(name: str) -> dict[str, Any]:
        call = {"id": "c1", "type": "function", "function": {"name": name, "arguments": '{"path": "."}'}}
        return {
            "tools": TOOLS,
            "messages": [
                {"role": "user", "content": ASK},
                {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "c1", "content": "a.txt"},
                {"role": "assistant", "content": "Done."},
            ],
        }

    (tmp_path / "run.json").write_text(json.dumps(chat("list_everything")))
    (tmp_path / "ref.json").write_text(json.dumps(chat("ls")))
    result = cli.invoke(app, ["diff", str(tmp_path / "run.json"), str(tmp_path / "ref.json"), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["signal"]["cause"] == "unknown_tool"

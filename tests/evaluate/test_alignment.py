"""Trajectory alignment: first_divergence finds the right step, reference step and cause for every
cause in the taxonomy; signal_without_reference; argument_similarity; cluster_signals."""

from __future__ import annotations

from typing import Any

import pytest

from harnessevolve.core.atif import ObservationResult, Step, ToolCall, Trajectory
from harnessevolve.core.signals import BASE_SEVERITY, Cause, ErrorSignal
from harnessevolve.evaluate.alignment import argument_similarity, first_divergence, signal_without_reference
from harnessevolve.evaluate.clustering import cluster_signals

# An agent turn: a (tool, arguments) call, a list of calls, or None (no tool call); plus an optional error.
Call = tuple[str, dict[str, Any]]


def turn(calls: Call | list[Call] | None, error: str | None = None) -> dict[str, Any]:
    if calls is None:
        calls = []
    elif isinstance(calls, tuple):
        calls = [calls]
    return {"calls": calls, "error": error}


def trajectory(
    *turns: dict[str, Any] | Call, task_id: str = "t-1", stop: str | None = "submitted"
) -> Trajectory:
    """System step 1, user step 2, then one agent step per turn (ATIF step_ids 3, 4, ...)."""
    steps = [Step(1, "system", "You are an agent."), Step(2, "user", "Do the task.")]
    for t in turns:
        spec = t if isinstance(t, dict) else turn(t)
        step_id = len(steps) + 1
        calls = tuple(ToolCall(f"c{step_id}-{i}", name, args) for i, (name, args) in enumerate(spec["calls"]))
        observations = tuple(ObservationResult(c.tool_call_id, "ok") for c in calls)
        extra = {"error": spec["error"]} if spec["error"] else {}
        steps.append(Step(step_id, "agent", "", tool_calls=calls, observations=observations, extra=extra))
    extra: dict[str, Any] = {"task_id": task_id}
    if stop is not None:
        extra["stop_reason"] = stop
    return Trajectory("s", "harnessevolve", "0", "scripted/x", tuple(steps), extra=extra)


READ_A: Call = ("read_file", {"path": "a.txt"})
COUNT_A: Call = ("bash", {"command": "wc -l a.txt"})


def submit(answer: str) -> Call:
    return ("submit", {"answer": answer})


# Reference: read a.txt, count its lines, submit 3.
REFERENCE = trajectory(READ_A, COUNT_A, submit("3"), stop="submitted")


def check(signal: ErrorSignal, cause: Cause, step: int | None, reference_step: int | None) -> None:
    """``step`` and ``reference_step`` are ATIF step_ids (system 1, user 2, actions from 3)."""
    assert (signal.cause, signal.step, signal.reference_step) == (cause, step, reference_step), signal
    assert signal.task_id == "t-1"


# --- one test per cause -------------------------------------------------------------------------


def test_wrong_tool() -> None:
    # second action: write_file where the reference ran bash, and neither look-ahead matches
    run = trajectory(READ_A, ("write_file", {"path": "out.txt", "content": "x"}), submit("2"))
    signal = first_divergence(run, REFERENCE)
    check(signal, Cause.WRONG_TOOL, 4, 4)
    assert signal.actual == {"tool": "write_file", "arguments": {"path": "out.txt", "content": "x"}}
    assert signal.expected == {"tool": "bash", "arguments": {"command": "wc -l a.txt"}}
    assert "write_file" in signal.hint and "bash" in signal.hint


def test_unknown_tool_from_step_error() -> None:
    run = trajectory(READ_A, turn(("cat", {"file": "a.txt"}), "unknown_tool: cat"), submit("3"))
    signal = first_divergence(run, REFERENCE)
    check(signal, Cause.UNKNOWN_TOOL, 4, 4)
    assert signal.actual == {"tool": "cat", "arguments": {"file": "a.txt"}}


def test_missing_argument_from_step_error() -> None:
    run = trajectory(turn(("read_file", {}), "tool_error: missing argument"), READ_A, COUNT_A, submit("3"))
    check(first_divergence(run, REFERENCE), Cause.MISSING_ARGUMENT, 3, 3)


def test_arguments_that_are_not_json_are_a_format_error() -> None:
    run = trajectory(turn(("read_file", {}), "bad_arguments: read_file"), READ_A, COUNT_A, submit("3"))
    check(first_divergence(run, REFERENCE), Cause.FORMAT_ERROR, 3, 3)


def test_wrong_argument() -> None:
    run = trajectory(READ_A, ("bash", {"command": "grep -c maple notes/other.md"}), submit("3"))
    signal = first_divergence(run, REFERENCE)
    check(signal, Cause.WRONG_ARGUMENT, 4, 4)
    assert "grep -c maple" in signal.hint


def test_near_identical_arguments_are_the_same_action() -> None:
    # whitespace differences are normalised away: no divergence until the wrong answer
    run = trajectory(READ_A, ("bash", {"command": "  wc  -l   a.txt\n"}), submit("4"))
    check(first_divergence(run, REFERENCE), Cause.WRONG_ARGUMENT, 5, 5)


def test_submitted_answer_must_match_exactly_not_by_similarity() -> None:
    run = trajectory(READ_A, COUNT_A, submit("30"))
    signal = first_divergence(run, REFERENCE)
    check(signal, Cause.WRONG_ARGUMENT, 5, 5)
    # case and surrounding whitespace do not matter for the answer
    matched = first_divergence(trajectory(READ_A, COUNT_A, submit("  3 ")), REFERENCE)
    assert matched.step == 5 and "checker still failed" in matched.hint


def test_skipped_step() -> None:
    run = trajectory(COUNT_A, submit("3"))
    signal = first_divergence(run, REFERENCE)
    check(signal, Cause.SKIPPED_STEP, 3, 3)
    assert signal.expected == {"tool": "read_file", "arguments": {"path": "a.txt"}}


def test_extra_step_before_the_expected_action() -> None:
    run = trajectory(("bash", {"command": "ls -la"}), READ_A, COUNT_A, submit("3"))
    signal = first_divergence(run, REFERENCE)
    check(signal, Cause.EXTRA_STEP, 3, 3)
    assert signal.actual == {"tool": "bash", "arguments": {"command": "ls -la"}}


def test_extra_step_after_the_reference_finished() -> None:
    reference = trajectory(READ_A, stop="submitted")
    run = trajectory(READ_A, ("bash", {"command": "ls"}), stop="step_limit")
    signal = first_divergence(run, reference)
    check(signal, Cause.EXTRA_STEP, 4, None)
    assert signal.expected is None


def test_premature_finish() -> None:
    run = trajectory(READ_A, submit("3"))
    signal = first_divergence(run, REFERENCE)
    check(signal, Cause.PREMATURE_FINISH, 4, 4)
    assert "submitted before" in signal.hint


@pytest.mark.parametrize("error", ["parse_error: expected ',' at column 7", "no_tool_call", None])
def test_format_error_for_a_turn_without_tool_calls(error: str | None) -> None:
    run = trajectory(READ_A, turn(None, error), COUNT_A, submit("3"))
    signal = first_divergence(run, REFERENCE)
    check(signal, Cause.FORMAT_ERROR, 4, 4)
    assert signal.actual == {"tool": None, "arguments": {}}


def test_step_limit_when_every_action_matched_the_reference_prefix() -> None:
    run = trajectory(READ_A, COUNT_A, stop="step_limit")
    signal = first_divergence(run, REFERENCE)
    check(signal, Cause.STEP_LIMIT, 4, 5)
    assert signal.expected == {"tool": "submit", "arguments": {"answer": "3"}}


def test_loop_of_three_identical_calls_inside_the_reference_prefix() -> None:
    ls: Call = ("bash", {"command": "ls"})
    reference = trajectory(ls, ls, ls, submit("x"))
    run = trajectory(ls, ls, ls, stop=None)
    signal = first_divergence(run, reference)
    check(signal, Cause.STEP_LIMIT, 3, 6)
    assert "repeating bash" in signal.hint


def test_loop_of_three_identical_calls_until_step_limit() -> None:
    run = trajectory(READ_A, READ_A, READ_A, READ_A, stop="step_limit")
    reference = trajectory(READ_A, submit("maple"))
    signal = first_divergence(run, reference)
    check(signal, Cause.STEP_LIMIT, 4, 4)


def test_tool_error_ignored() -> None:
    reference = trajectory(("bash", {"command": "cat data.txt"}), submit("42"))
    run = trajectory(turn(("bash", {"command": "cat data.txt"}), "tool_error: exit code 1"), submit("0"))
    signal = first_divergence(run, reference)
    check(signal, Cause.TOOL_ERROR_IGNORED, 4, 4)
    assert "exit code 1" in signal.hint


def test_model_error_stop_reason_after_a_matching_prefix() -> None:
    run = trajectory(READ_A, stop="model_error")
    check(first_divergence(run, REFERENCE), Cause.MODEL_ERROR, 3, 4)


def test_model_error_step_as_the_agent_loop_records_it() -> None:
    run = trajectory(READ_A, turn(None, "model_error: APIConnectionError: boom"), stop="model_error")
    check(first_divergence(run, REFERENCE), Cause.MODEL_ERROR, 4, 4)


def test_run_that_followed_the_reference_but_failed_the_checker() -> None:
    run = trajectory(READ_A, COUNT_A, submit("3"))
    signal = first_divergence(run, REFERENCE)
    check(signal, Cause.WRONG_ARGUMENT, 5, 5)


def test_severity_scales_with_partial_score() -> None:
    run = trajectory(COUNT_A, submit("3"))
    assert first_divergence(run, REFERENCE).severity == pytest.approx(BASE_SEVERITY[Cause.SKIPPED_STEP])
    half = first_divergence(run, REFERENCE, score=0.5)
    assert half.severity == pytest.approx(BASE_SEVERITY[Cause.SKIPPED_STEP] * 0.75)


def test_task_id_falls_back_to_the_reference() -> None:
    run = Trajectory("s", "a", "0", "m", trajectory(COUNT_A).steps, extra={"stop_reason": "submitted"})
    assert first_divergence(run, REFERENCE).task_id == "t-1"


def test_only_the_first_divergence_is_reported() -> None:
    run = trajectory(("bash", {"command": "ls"}), turn(("cat", {}), "unknown_tool: cat"), submit("9"))
    signal = first_divergence(run, REFERENCE)
    check(signal, Cause.WRONG_TOOL, 3, 3)


# --- without a reference --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("run", "cause"),
    [
        (trajectory(READ_A, turn(("cat", {}), "unknown_tool: cat"), stop="step_limit"), Cause.UNKNOWN_TOOL),
        (trajectory(turn(None, "parse_error: bad json"), submit("1")), Cause.FORMAT_ERROR),
        (
            trajectory(turn(("read_file", {}), "tool_error: missing argument(s) path"), submit("1")),
            Cause.MISSING_ARGUMENT,
        ),
        (trajectory(turn(("read_file", {}), "bad_arguments: read_file"), submit("1")), Cause.FORMAT_ERROR),
        (trajectory(READ_A, READ_A, stop="step_limit"), Cause.STEP_LIMIT),
        (trajectory(READ_A, stop="model_error"), Cause.MODEL_ERROR),
        (trajectory(stop="setup_error"), Cause.SETUP_ERROR),
        (trajectory(READ_A, submit("2")), Cause.WRONG_ARGUMENT),
    ],
)
def test_signal_without_reference(run: Trajectory, cause: Cause) -> None:
    signal = signal_without_reference(run)
    assert signal.cause == cause
    assert signal.task_id == "t-1"
    assert (signal.step, signal.reference_step, signal.actual, signal.expected) == (None, None, None, None)
    assert signal.severity == pytest.approx(BASE_SEVERITY[cause])
    assert signal.hint


def test_signal_without_reference_names_the_error_step() -> None:
    run = trajectory(READ_A, turn(("cat", {}), "unknown_tool: cat"))
    assert "step 4" in signal_without_reference(run).hint
    assert signal_without_reference(run, score=1.0).severity == pytest.approx(
        BASE_SEVERITY[Cause.UNKNOWN_TOOL] / 2
    )


# --- argument_similarity ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ({}, {}, 1.0),
        ({"path": "a.txt"}, {}, 0.0),
        ({}, {"path": "a.txt"}, 0.0),
        ({"path": "a.txt"}, {"path": "a.txt"}, 1.0),
        ({"path": "a.txt", "mode": "r"}, {"path": "a.txt"}, 0.5),
        ({"command": "ls   -la\n"}, {"command": "ls -la"}, 1.0),
        ({"n": 3}, {"n": 3}, 1.0),
        ({"n": 3}, {"n": "3"}, 1.0),
        ({"x": "abcd"}, {"x": "wxyz"}, 0.0),
        ({"x": "abcd"}, {"x": "abce"}, 0.75),
    ],
)
def test_argument_similarity(a: dict[str, Any], b: dict[str, Any], expected: float) -> None:
    assert argument_similarity(a, b) == pytest.approx(expected)
    assert argument_similarity(b, a) == pytest.approx(expected)


# --- clustering -------------------------------------------------------------------------------------


def sig(task_id: str, cause: Cause, severity: float) -> ErrorSignal:
    return ErrorSignal(task_id=task_id, cause=cause, severity=severity, hint=f"{cause} in {task_id}")


def test_cluster_signals_groups_by_cause_and_orders_largest_then_most_severe() -> None:
    signals = [
        sig("a", Cause.WRONG_TOOL, 0.1),
        sig("b", Cause.FORMAT_ERROR, 0.9),
        sig("c", Cause.WRONG_TOOL, 0.7),
        sig("d", Cause.EXTRA_STEP, 0.4),
        sig("e", Cause.STEP_LIMIT, 0.2),
        sig("f", Cause.WRONG_TOOL, 0.35),
        sig("g", Cause.STEP_LIMIT, 0.2),
    ]
    clusters = cluster_signals(signals)
    assert [c.cause for c in clusters] == [
        Cause.WRONG_TOOL,
        Cause.STEP_LIMIT,
        Cause.FORMAT_ERROR,
        Cause.EXTRA_STEP,
    ]
    assert [c.size for c in clusters] == [3, 2, 1, 1]
    # members sorted most severe first; every signal kept exactly once
    assert clusters[0].task_ids == ("c", "f", "a")
    assert clusters[0].severity == pytest.approx(1.15)
    assert sorted(t for c in clusters for t in c.task_ids) == list("abcdefg")


def test_cluster_signals_never_splits_a_cause_by_severity() -> None:
    clusters = cluster_signals([sig("a", Cause.WRONG_ARGUMENT, 0.01), sig("b", Cause.WRONG_ARGUMENT, 0.99)])
    assert len(clusters) == 1 and clusters[0].size == 2


def test_cluster_signals_ties_break_by_severity_then_cause_name() -> None:
    clusters = cluster_signals(
        [sig("a", Cause.WRONG_TOOL, 0.5), sig("b", Cause.EXTRA_STEP, 0.5), sig("c", Cause.UNKNOWN_TOOL, 0.6)]
    )
    assert [c.cause for c in clusters] == [Cause.UNKNOWN_TOOL, Cause.EXTRA_STEP, Cause.WRONG_TOOL]


def test_cluster_signals_of_nothing_is_empty() -> None:
    assert cluster_signals([]) == []


def test_a_clusters_record_keeps_both_step_indices_of_each_member() -> None:
    signal = first_divergence(trajectory(COUNT_A, submit("3")), REFERENCE)
    (cluster,) = cluster_signals([signal])
    assert cluster.to_dict()["divergences"] == [{"task": "t-1", "step": 3, "reference_step": 3}]

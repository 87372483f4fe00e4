"""Effect-aware alignment: a call whose text differs from the reference's but whose effect is the same
(the same informative observation, or the same stdout, exit status and files under a task's effect
check) matches it, so the first divergence lands on the real failure: the answer submitted, a
finish without an answer, a repeated call. General: shell commands, a python tool, any suite."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from check_runners import HostRunner, effect_task

from harnessevolve.core.atif import ObservationResult, Step, ToolCall, Trajectory
from harnessevolve.core.signals import Cause
from harnessevolve.core.tasks import Check, Task
from harnessevolve.evaluate.actions import Action
from harnessevolve.evaluate.alignment import first_divergence
from harnessevolve.evaluate.effect_check import effect_oracle
from harnessevolve.evaluate.effect_match import informative, same_observation

Turn = tuple[str, dict[str, Any], str]  # tool, arguments, observation


def run(*turns: Turn | str, answer: str | None = None, stop: str = "submitted") -> Trajectory:
    """System 1, user 2, then one agent step per turn; a string is a final plain message."""
    steps = [Step(1, "system", "You are an agent."), Step(2, "user", "Do the task.")]
    for t in turns:
        step_id = len(steps) + 1
        if isinstance(t, str):
            steps.append(Step(step_id, "agent", t))
            continue
        name, args, seen = t
        call = ToolCall(f"c{step_id}", name, args)
        steps.append(
            Step(
                step_id,
                "agent",
                "",
                tool_calls=(call,),
                observations=(ObservationResult(call.tool_call_id, seen),),
            )
        )
    extra: dict[str, Any] = {"task_id": "t-1", "stop_reason": stop}
    if answer is not None:
        extra["answer"] = answer
    return Trajectory("s", "harnessevolve", "0", "scripted/x", tuple(steps), extra=extra)


def bash(command: str, seen: str) -> Turn:
    return ("bash", {"command": command}, seen)


def submit(answer: str) -> Turn:
    return ("submit", {"answer": answer}, "submitted")


GOLD = "sed -n '$p' notes.txt"
LAST = "the last line"
REFERENCE = run(bash(GOLD, LAST), submit(GOLD), answer=GOLD)


def test_same_output_matches_and_the_divergence_is_the_submitted_output() -> None:
    """tail -n 1 has sed -n '$p''s effect; the failure is submitting the output, not the command."""
    failed = run(bash("tail -n 1 notes.txt", LAST), submit(LAST), answer=LAST)
    signal = first_divergence(failed, REFERENCE)
    assert (signal.cause, signal.step, signal.reference_step) == (Cause.WRONG_ARGUMENT, 4, 4)
    assert "the output of step 3 instead of the call that produced it" in signal.hint
    assert "the argument of its call at step 3" in signal.hint  # the reference submitted its command


def test_submitting_another_command_than_the_one_that_worked() -> None:
    failed = run(bash("tail -n 1 notes.txt", LAST), submit("cat notes.txt"), answer="cat notes.txt")
    signal = first_divergence(failed, REFERENCE)
    assert (signal.cause, signal.step) == (Cause.WRONG_ARGUMENT, 4)
    assert "submitted 'cat notes.txt'" in signal.hint


def test_a_plain_message_instead_of_submit_is_a_premature_finish() -> None:
    """Another agent's loop may end on a message: no answer reached the checker."""
    failed = run(bash("tail -n 1 notes.txt", LAST), "The last line is: the last line", stop="completed")
    signal = first_divergence(failed, REFERENCE)
    assert (signal.cause, signal.step, signal.reference_step) == (Cause.PREMATURE_FINISH, 4, 4)
    assert "plain message instead of submit" in signal.hint


def test_the_same_call_repeated_is_a_step_limit_not_a_wrong_first_call() -> None:
    tail = bash("tail -n 1 notes.txt", LAST)
    failed = run(tail, tail, tail, tail, stop="step_limit")
    signal = first_divergence(failed, REFERENCE)
    assert signal.cause is Cause.STEP_LIMIT and signal.step == 4
    assert "repeating bash" in signal.hint


def test_silent_or_failing_commands_never_match_by_observation() -> None:
    """Commands that print nothing may have changed different files; errors are no effect."""
    reference = run(bash("mv a.txt old/", ""), submit("done"), answer="done")
    failed = run(bash("mv b.txt old/", ""), submit("done"), answer="done")
    assert first_divergence(failed, reference).step == 3
    reference = run(bash("cat a.txt", "x: No such file or directory"), submit("x"), answer="x")
    failed = run(bash("cat b.txt", "x: No such file or directory"), submit("x"), answer="x")
    assert first_divergence(failed, reference).step == 3


def test_other_code_tools_match_by_observation_structured_tools_by_schema() -> None:
    """A python tool's code is code too; a structured call whose argument differs does not match on
    an equal observation (the schema says which arguments matter)."""
    reference = run(("python", {"code": "print('sum', sum([1, 2, 3]))"}, "sum 6"), submit("6"), answer="6")
    failed = run(("python", {"code": "print('sum', 1 + 2 + 3)"}, "sum 6"), submit("7"), answer="7")
    assert first_divergence(failed, reference).step == 4
    listing = '{"current_directory_content": ["workspace"]}'
    reference = run(("ls", {"a": True}, listing), submit("workspace"), answer="workspace")
    failed = run(("ls", {"a": False}, listing), submit("x"), answer="x")
    assert first_divergence(failed, reference).step == 3


def test_informative_observations() -> None:
    assert not informative("") and not informative("ok") and not informative('{"status": true}')
    assert informative("the last line") and informative('{"lines": ["a"]}')
    a = Action(3, "bash", {"command": "tail -n 1 f"}, observation="abc def\nexit code 0")
    b = Action(3, "bash", {"command": "sed -n '$p' f"}, observation="abc   def")
    assert same_observation(a, b)


MOVE_INTO_OLD = effect_task(
    "t-1", "Make a folder old and move a.txt into it.", "mkdir old && mv a.txt old/", {"a.txt": "hello\n"}
)


def test_an_effect_check_matches_silent_commands_by_their_files(tmp_path: Path) -> None:
    """Under a task's effect check, silent commands are compared by stdout, exit status and files."""
    gold = "mkdir old && mv a.txt old/"
    reference = run(bash(gold, ""), submit(gold), answer=gold)
    same = "mkdir -p old; mv ./a.txt old"
    failed = run(bash(same, ""), submit("mkdir old"), answer="mkdir old")
    runner = HostRunner()
    oracle = effect_oracle(MOVE_INTO_OLD, timeout_s=10, runner=runner)
    assert oracle is not None
    signal = first_divergence(failed, reference, oracle=oracle)
    assert (signal.cause, signal.step) == (Cause.WRONG_ARGUMENT, 4)  # the submit, not the command
    assert "the argument of its call at step 3" not in signal.hint.split("where")[0]
    other = run(bash("mkdir old && cp a.txt old/", ""), submit(gold), answer=gold)
    assert first_divergence(other, reference, oracle=oracle).step == 3  # a.txt is still there
    without = first_divergence(failed, reference)
    assert without.step == 3  # no oracle: silent commands cannot be told apart


def test_no_oracle_without_an_effect_check(tmp_path: Path) -> None:
    task = Task(id="t", instruction="x", split="train", checks=(Check(type="answer", expected="1"),))
    assert effect_oracle(task, timeout_s=1, runner=HostRunner()) is None


def test_a_call_redone_where_the_reference_finished_is_a_step_limit() -> None:
    """The gold command ran, then again (with a junk argument) instead of the submit."""
    failed = run(bash(GOLD, LAST), ("bash", {"command": GOLD, "exit_code": 1}, LAST), stop="repeated")
    signal = first_divergence(failed, REFERENCE)
    assert (signal.cause, signal.step, signal.reference_step) == (Cause.STEP_LIMIT, 4, 4)
    assert "instead of finishing with submit" in signal.hint
    cat = bash("cat notes.txt", "all\nthe last line")
    never = first_divergence(run(bash(GOLD, LAST), cat, stop="step_limit"), REFERENCE)
    assert (never.cause, never.step) == (Cause.STEP_LIMIT, 4) and "never finished" in never.hint
    late = run(bash(GOLD, LAST), cat, submit("x"), answer="x")
    signal = first_divergence(late, REFERENCE)
    assert signal.cause is Cause.EXTRA_STEP and "the reference did submit(" in signal.hint


def test_a_command_holding_a_nul_byte_is_compared_by_text_not_run() -> None:
    """The oracle cannot run a command with a NUL byte (no program receives one): it answers
    None (unknown) and alignment goes on by text, instead of the run ending with a ValueError."""
    oracle = effect_oracle(MOVE_INTO_OLD, timeout_s=10, runner=HostRunner())
    assert oracle is not None
    gold = "mkdir -p old && mv a.txt old/"
    reference = run(bash(gold, ""), submit(gold), answer=gold)
    failed = run(bash("mv a.txt\x00 old", "error: embedded null byte"), submit("x"), answer="x")
    signal = first_divergence(failed, reference, oracle=oracle)
    assert signal.step == 3

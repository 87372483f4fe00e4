"""The agent loop (run_agent) and LocalExecutor with the shell-agent template and scripted models."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from harnessevolve.core import atif, paths
from harnessevolve.core.atif import Trajectory
from harnessevolve.core.tasks import Check, Task
from harnessevolve.execute.agent import FINAL_SUBMIT_ASK, NO_TOOL_NUDGE, run_agent
from harnessevolve.execute.executor import LocalExecutor, Rollout, rollout_seed
from harnessevolve.execute.workspace import remove_workspace
from harnessevolve.harness.load import load_harness
from harnessevolve.harness.model import Harness
from harnessevolve.models.scripted import register_script, unregister_script

HARNESS = load_harness(paths.builtin_dir("harnesses") / "shell-agent")


def call(tool: str, arguments: dict[str, Any] | str) -> dict[str, Any]:
    return {"tool_calls": [{"name": tool, "arguments": arguments}]}


def make_task(task_id: str = "t-read", instruction: str = "What word is in a.txt?") -> Task:
    return Task(
        id=task_id,
        instruction=instruction,
        split="train",
        checks=(Check(type="answer", expected="maple"),),
        setup_files={"a.txt": "maple\n"},
    )


@pytest.fixture
def model(request: pytest.FixtureRequest) -> Any:
    """A unique scripted model name; the test registers its replies with ``script(...)``."""
    name = f"agent-{request.node.name}-{uuid.uuid4().hex[:8]}"
    yield name
    unregister_script(name)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("maple\n")
    return ws


def run(
    name: str, replies: Any, workspace: Path, harness: Harness = HARNESS, task: Task | None = None
) -> Trajectory:
    register_script(name, replies)
    return asyncio.run(run_agent(harness, task or make_task(), workspace, model=f"scripted/{name}", seed=1))


def with_loop(**changes: Any) -> Harness:
    return dataclasses.replace(HARNESS, loop=dataclasses.replace(HARNESS.loop, **changes))


def agent_steps(trajectory: Trajectory) -> list[atif.Step]:
    return list(trajectory.agent_steps)


# --- a successful run --------------------------------------------------------------------------------


def test_read_then_submit(model: str, workspace: Path) -> None:
    replies = [
        call("read_file", {"path": "a.txt"}),
        {"content": "found it", **call("submit", {"answer": "maple"})},
    ]
    trajectory = run(model, replies, workspace)
    assert trajectory.extra["stop_reason"] == "submitted"
    assert trajectory.extra["answer"] == "maple"
    assert trajectory.extra["task_id"] == "t-read"
    assert trajectory.extra["harness_hash"] == HARNESS.content_hash()
    assert [(s.step_id, s.source) for s in trajectory.steps] == [
        (1, "system"),
        (2, "user"),
        (3, "agent"),
        (4, "agent"),
    ]
    assert trajectory.steps[0].message == HARNESS.assembled_prompt()
    assert trajectory.steps[1].message == "What word is in a.txt?"
    read, submit = agent_steps(trajectory)
    assert read.tool_calls[0].function_name == "read_file"
    assert read.tool_calls[0].arguments == {"path": "a.txt"}
    assert [o.content for o in read.observations] == ["maple\n"]
    assert read.observations[0].source_call_id == read.tool_calls[0].tool_call_id
    assert read.extra == {}
    assert submit.message == "found it"
    assert submit.tool_calls[0].arguments == {"answer": "maple"}
    assert trajectory.final_metrics["total_steps"] == 4
    assert trajectory.final_metrics["total_prompt_tokens"] > 0
    # the trajectory is valid ATIF and survives a round trip
    again = atif.from_dict(trajectory.to_dict())
    assert again.to_dict() == trajectory.to_dict()


def test_the_model_sees_tool_results_and_the_harness_tools(model: str, workspace: Path) -> None:
    seen: list[tuple[list[dict[str, Any]], list[dict[str, Any]]]] = []

    def policy(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
        seen.append(([dict(m) for m in messages], tools))
        return call("read_file", {"path": "a.txt"}) if len(seen) == 1 else call("submit", {"answer": "maple"})

    run(model, policy, workspace)
    assert [t["function"]["name"] for t in seen[0][1]] == ["bash", "read_file", "write_file", "submit"]
    assert [m["role"] for m in seen[0][0]] == ["system", "user"]
    second = seen[1][0]
    assert [m["role"] for m in second] == ["system", "user", "assistant", "tool"]
    assert second[3]["content"] == "maple\n"
    assert second[3]["tool_call_id"] == second[2]["tool_calls"][0]["id"]


def test_write_file_writes_inside_the_workspace(model: str, workspace: Path) -> None:
    replies = [
        call("write_file", {"path": "out/b.txt", "content": "oak\n"}),
        call("submit", {"answer": "done"}),
    ]
    trajectory = run(model, replies, workspace)
    assert (workspace / "out" / "b.txt").read_text() == "oak\n"
    assert agent_steps(trajectory)[0].observations[0].content == "wrote 4 bytes to out/b.txt"


# --- nothing the model does is a crash ------------------------------------------------------------------


def test_unknown_tool_is_recorded_and_the_loop_continues(model: str, workspace: Path) -> None:
    trajectory = run(model, [call("cat", {"path": "a.txt"}), call("submit", {"answer": "maple"})], workspace)
    bad, _ = agent_steps(trajectory)
    assert bad.extra["error"] == "unknown_tool: cat"
    assert bad.tool_calls[0].function_name == "cat"
    assert "unknown tool 'cat'" in bad.observations[0].content
    assert "read_file" in bad.observations[0].content
    assert trajectory.extra["stop_reason"] == "submitted"


def test_the_trajectory_names_the_offered_tools_and_survives_a_round_trip(
    model: str, workspace: Path, tmp_path: Path
) -> None:
    trajectory = run(model, [call("cat", {"path": "a.txt"}), call("submit", {"answer": "maple"})], workspace)
    offered = {d["function"]["name"] for d in trajectory.tool_definitions}
    assert offered == {t.name for t in HARNESS.tools} and "cat" not in offered
    path = tmp_path / "t.json"
    path.write_text(json.dumps(trajectory.to_dict()))
    again = atif.load(path)
    assert again.tool_definitions == trajectory.tool_definitions
    assert again.to_dict()["schema_version"] == "ATIF-v1.5"


def test_non_json_arguments_are_recorded(model: str, workspace: Path) -> None:
    trajectory = run(
        model, [call("read_file", "{path: a.txt"), call("submit", {"answer": "maple"})], workspace
    )
    bad = agent_steps(trajectory)[0]
    assert bad.extra["error"] == "bad_arguments: read_file"
    assert bad.tool_calls[0].arguments == {}
    assert "not a JSON object" in bad.observations[0].content
    assert "{path: a.txt" in bad.observations[0].content
    atif.from_dict(trajectory.to_dict())


def test_missing_required_argument_is_recorded(model: str, workspace: Path) -> None:
    trajectory = run(
        model, [call("read_file", {"file": "a.txt"}), call("submit", {"answer": "maple"})], workspace
    )
    bad = agent_steps(trajectory)[0]
    assert bad.extra["error"] == "tool_error: missing argument"
    assert bad.observations[0].content == "error: missing argument(s) path for read_file"


def test_a_reply_without_a_tool_call_is_recorded_and_nudged(model: str, workspace: Path) -> None:
    seen: list[list[dict[str, Any]]] = []

    def policy(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        seen.append(messages)
        return "I think it is maple." if len(seen) == 1 else call("submit", {"answer": "maple"})

    trajectory = run(model, policy, workspace)
    text, submit = agent_steps(trajectory)
    assert text.message == "I think it is maple."
    assert text.tool_calls == ()
    assert text.extra["error"] == "no_tool_call"
    assert seen[1][-1] == {"role": "user", "content": NO_TOOL_NUDGE}
    assert trajectory.extra["stop_reason"] == "submitted" and trajectory.extra["answer"] == "maple"
    atif.from_dict(trajectory.to_dict())


def test_step_limit(model: str, workspace: Path) -> None:
    trajectory = run(
        model,
        lambda m, t: call("bash", {"command": "ls"}),
        workspace,
        harness=with_loop(max_steps=3, stop_on_repeat=0),
    )
    assert trajectory.extra["stop_reason"] == "step_limit"
    assert trajectory.extra["answer"] is None
    assert len(agent_steps(trajectory)) == 3
    assert trajectory.final_metrics["total_steps"] == 5


def test_a_model_failure_ends_the_run_as_model_error(model: str, workspace: Path) -> None:
    def policy(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        raise RuntimeError("provider is down")

    trajectory = run(model, policy, workspace)
    assert trajectory.extra["stop_reason"] == "model_error"
    (step,) = agent_steps(trajectory)
    assert step.extra["error"].startswith("model_error:")
    assert "provider is down" in step.extra["error"]
    atif.from_dict(trajectory.to_dict())


# --- tools --------------------------------------------------------------------------------------------


def test_bash_non_zero_exit(model: str, workspace: Path) -> None:
    trajectory = run(
        model, [call("bash", {"command": "echo oops; exit 3"}), call("submit", {"answer": "x"})], workspace
    )
    step = agent_steps(trajectory)[0]
    assert step.observations[0].content == "oops\n\n[exit code 3]"
    assert step.extra["error"] == "tool_error: exit code 3"


def test_bash_runs_in_the_workspace(model: str, workspace: Path) -> None:
    trajectory = run(
        model, [call("bash", {"command": "cat a.txt; pwd"}), call("submit", {"answer": "x"})], workspace
    )
    assert agent_steps(trajectory)[0].observations[0].content == f"maple\n{workspace.resolve()}\n"


def test_long_output_is_cut(model: str, workspace: Path) -> None:
    harness = with_loop(tool_output_limit=100)
    trajectory = run(
        model,
        [call("bash", {"command": "head -c 5000 /dev/zero | tr '\\0' x"}), call("submit", {"answer": "x"})],
        workspace,
        harness=harness,
    )
    content = agent_steps(trajectory)[0].observations[0].content
    assert content.startswith("x" * 100 + "\n[...")
    assert "more characters cut" in content
    assert len(content) < 200


def test_read_file_outside_the_workspace_is_refused(model: str, workspace: Path) -> None:
    (workspace.parent / "outside").write_text("TOP SECRET\n")
    trajectory = run(
        model, [call("read_file", {"path": "../outside"}), call("submit", {"answer": "x"})], workspace
    )
    step = agent_steps(trajectory)[0]
    content = step.observations[0].content
    assert content.startswith("error:") and "outside the workspace" in content
    assert "TOP SECRET" not in content
    assert step.extra["error"] == "tool_error: PermissionError"


def test_write_file_outside_the_workspace_is_refused(model: str, workspace: Path) -> None:
    trajectory = run(
        model,
        [call("write_file", {"path": "../escaped.txt", "content": "x"}), call("submit", {"answer": "x"})],
        workspace,
    )
    assert not (workspace.parent / "escaped.txt").exists()
    assert agent_steps(trajectory)[0].extra["error"] == "tool_error: PermissionError"


def test_command_timeout_is_recorded(model: str, workspace: Path) -> None:
    harness = with_loop(command_timeout_s=0.3)
    started = time.monotonic()
    trajectory = run(
        model,
        [call("bash", {"command": "echo started; sleep 10"}), call("submit", {"answer": "x"})],
        workspace,
        harness=harness,
    )
    assert time.monotonic() - started < 5
    step = agent_steps(trajectory)[0]
    assert step.extra["error"] == "tool_error: timeout"
    assert step.observations[0].content.endswith("[timed out after 0.3s]")
    assert trajectory.extra["stop_reason"] == "submitted"


def test_the_environment_is_scrubbed(model: str, workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-very-secret")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws-very-secret")
    command = 'echo "key=[$OPENAI_API_KEY] aws=[$AWS_SECRET_ACCESS_KEY] home=$HOME"; env'
    trajectory = run(model, [call("bash", {"command": command}), call("submit", {"answer": "x"})], workspace)
    content = agent_steps(trajectory)[0].observations[0].content
    assert content.startswith(f"key=[] aws=[] home={workspace}\n")
    assert "very-secret" not in content


# --- executor -----------------------------------------------------------------------------------------


def record_turns(log: list[tuple[str, int]]) -> Any:
    """A policy that logs (instruction, turn) and runs a slow command before submitting."""

    def policy(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
        turn = sum(1 for m in messages if m["role"] == "assistant")
        log.append((messages[1]["content"], turn))
        if turn == 0:
            return call("bash", {"command": "sleep 0.1; cat a.txt"})
        return call("submit", {"answer": messages[1]["content"]})

    return policy


def run_batch(model: str, concurrency: int) -> tuple[list[Rollout], list[tuple[str, int]], list[str]]:
    log: list[tuple[str, int]] = []
    done: list[str] = []
    register_script(model, record_turns(log))
    tasks = [make_task(f"t-{i}", f"task number {i}") for i in range(4)]
    rollouts = asyncio.run(
        LocalExecutor(concurrency=concurrency).run(
            HARNESS, tasks, model=f"scripted/{model}", seed=7, on_done=lambda r: done.append(r.task_id)
        )
    )
    try:
        return rollouts, log, done
    finally:
        for rollout in rollouts:
            if rollout.workspace is not None:
                remove_workspace(rollout.workspace)


def test_executor_interleaves_rollouts(model: str) -> None:
    rollouts, log, done = run_batch(model, concurrency=4)
    assert [r.task_id for r in rollouts] == ["t-0", "t-1", "t-2", "t-3"]
    assert [r.answer for r in rollouts] == [f"task number {i}" for i in range(4)]
    assert all(r.stop_reason == "submitted" for r in rollouts)
    assert sorted(done) == ["t-0", "t-1", "t-2", "t-3"]
    assert len(log) == 8
    first_four = log[:4]
    assert {turn for _, turn in first_four} == {0}
    assert len({instruction for instruction, _ in first_four}) == 4
    # each rollout's own workspace was set up from the task and read by the agent
    assert all(r.trajectory.steps[2].observations[0].content == "maple\n" for r in rollouts)
    assert len({r.workspace for r in rollouts}) == 4


def test_executor_with_concurrency_one_runs_tasks_one_after_another(model: str) -> None:
    rollouts, log, _ = run_batch(model, concurrency=1)
    assert [r.task_id for r in rollouts] == ["t-0", "t-1", "t-2", "t-3"]
    instructions = [instruction for instruction, _ in log]
    blocks = [
        instructions[i] for i in range(len(instructions)) if i == 0 or instructions[i] != instructions[i - 1]
    ]
    assert len(blocks) == 4 and len(set(blocks)) == 4
    assert [turn for _, turn in log] == [0, 1] * 4


def test_rollout_seed_is_stable_and_per_task() -> None:
    assert rollout_seed(7, "t-0") == rollout_seed(7, "t-0")
    assert rollout_seed(7, "t-0") != rollout_seed(7, "t-1")
    assert rollout_seed(7, "t-0") != rollout_seed(8, "t-0")


def test_a_failing_setup_is_a_rollout_not_an_exception(model: str) -> None:
    register_script(model, [call("submit", {"answer": "x"})])
    task = dataclasses.replace(make_task("t-bad"), setup_commands=("exit 4",))
    (rollout,) = asyncio.run(LocalExecutor().run(HARNESS, [task], model=f"scripted/{model}", seed=0))
    assert rollout.workspace is None
    assert rollout.stop_reason == "setup_error"
    assert "setup command failed (4)" in rollout.trajectory.steps[0].extra["error"]


def test_stop_on_repeat_ends_a_looping_run(tmp_path) -> None:
    import asyncio
    import dataclasses
    from pathlib import Path

    from harnessevolve.core.tasks import Check, Task
    from harnessevolve.execute.agent import run_agent
    from harnessevolve.harness.load import load_harness
    from harnessevolve.models.scripted import register_script, unregister_script

    base = load_harness(Path(__file__).parents[2] / "harnesses" / "shell-agent")
    harness = dataclasses.replace(base, loop=dataclasses.replace(base.loop, max_steps=6, stop_on_repeat=3))
    task = Task("loop-1", "Say hi.", "train", (Check("answer", expected="hi"),))
    register_script(
        "looper", lambda m, t: {"tool_calls": [{"name": "bash", "arguments": {"command": "true"}}]}
    )
    try:
        trajectory = asyncio.run(run_agent(harness, task, tmp_path, model="scripted/looper", seed=0))
    finally:
        unregister_script("looper")
    assert trajectory.extra["stop_reason"] == "repeated"
    assert len(trajectory.agent_steps) == 3


# --- loop.final_submit / loop.answer_from: a run ending (step limit, a repeat) without an answer ------


def repeating_cat(seen: list[list[str]], final: dict[str, Any]):
    """A model that runs ``cat a.txt`` every turn; asked with only submit offered, it replies ``final``."""

    def policy(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
        seen.append([t["function"]["name"] for t in tools])
        return final if len(seen[-1]) == 1 else call("bash", {"command": "cat a.txt"})

    return policy


def test_off_by_default_a_run_at_the_step_limit_has_no_answer(model: str, workspace: Path) -> None:
    seen: list[list[str]] = []
    trajectory = run(model, repeating_cat(seen, call("submit", {"answer": "maple"})), workspace)
    assert trajectory.extra["stop_reason"] == "repeated" and trajectory.extra["answer"] is None
    assert all(len(names) == 4 for names in seen)


def test_final_submit_asks_once_more_offering_only_submit(model: str, workspace: Path) -> None:
    seen: list[list[str]] = []
    harness = with_loop(final_submit=True)
    trajectory = run(
        model, repeating_cat(seen, call("submit", {"answer": "maple"})), workspace, harness=harness
    )
    assert trajectory.extra["stop_reason"] == "submitted" and trajectory.extra["answer"] == "maple"
    assert seen[-1] == ["submit"] and len(seen) == 3  # two repeated calls (stop_on_repeat: 2), then the ask
    *_, before, last = agent_steps(trajectory)
    assert before.extra["nudge"] == FINAL_SUBMIT_ASK  # the ask is a loop nudge, kept on the step before
    assert last.tool_calls[0].function_name == "submit"
    assert "answer_from" not in trajectory.extra
    atif.from_dict(trajectory.to_dict())


def test_final_submit_without_a_submit_reply_records_why_and_keeps_the_stop(
    model: str, workspace: Path
) -> None:
    seen: list[list[str]] = []
    harness = with_loop(final_submit=True, max_steps=3, stop_on_repeat=0)
    trajectory = run(model, repeating_cat(seen, call("bash", {"command": "ls"})), workspace, harness=harness)
    assert trajectory.extra["stop_reason"] == "step_limit" and trajectory.extra["answer"] is None
    last = agent_steps(trajectory)[-1]
    assert last.extra["error"] == "final_submit: no submit call (called bash)" and not last.tool_calls
    atif.from_dict(trajectory.to_dict())


def test_answer_from_submits_the_last_such_argument(model: str, workspace: Path) -> None:
    replies = [call("bash", {"command": "ls"}), call("read_file", {"path": "a.txt"})] + [
        {"content": "I think I am done."}
    ] * 4
    harness = with_loop(answer_from="bash.command", max_steps=4, stop_on_repeat=0)
    trajectory = run(model, replies, workspace, harness=harness)
    assert trajectory.extra["stop_reason"] == "submitted" and trajectory.extra["answer"] == "ls"
    assert trajectory.extra["answer_from"] == {"setting": "bash.command", "step": 3}


def test_answer_from_with_no_such_call_leaves_the_run_unanswered(model: str, workspace: Path) -> None:
    harness = with_loop(answer_from="bash.command", max_steps=2, stop_on_repeat=0)
    trajectory = run(model, [call("read_file", {"path": "a.txt"})] * 2, workspace, harness=harness)
    assert trajectory.extra["stop_reason"] == "step_limit" and trajectory.extra["answer"] is None


# --- loop.answer_check: a submit that is none of the run's calls' arguments is turned back once ------


def test_answer_check_turns_back_a_description_once_naming_the_last_command(
    model: str, workspace: Path
) -> None:
    replies = [
        call("bash", {"command": "ls"}),
        call("bash", {"command": "ls -1 | wc -l"}),
        call("submit", {"answer": "The command ran successfully."}),
        call("submit", {"answer": " ls -1 | wc -l"}),
    ]
    harness = with_loop(answer_check="bash.command", max_steps=6, stop_on_repeat=0)
    trajectory = run(model, replies, workspace, harness=harness)
    assert trajectory.extra["stop_reason"] == "submitted" and trajectory.extra["answer"] == " ls -1 | wc -l"
    assert trajectory.extra["answer_check"] == {
        "setting": "bash.command",
        "step": agent_steps(trajectory)[2].step_id,
        "answer": "The command ran successfully.",
    }
    turned = agent_steps(trajectory)[2]
    assert turned.extra["error"] == "answer_check: not one of the run's calls"
    shown = turned.observations[0].content
    assert shown.startswith("error: not submitted.") and "was:\nls -1 | wc -l\n" in shown
    atif.from_dict(trajectory.to_dict())


@pytest.mark.parametrize(
    "replies, answer",
    [
        # the answer is a command the run ran: taken at once
        ([call("bash", {"command": "du -sh ."}), call("submit", {"answer": "du -sh ."})], "du -sh ."),
        # no bash call before the submit: nothing to hold it to
        ([call("submit", {"answer": "du -sh ."})], "du -sh ."),
        # turned back once; a second answer that is not a command run: the last command is taken
        (
            [
                call("bash", {"command": "ls"}),
                call("submit", {"answer": "3"}),
                call("submit", {"answer": "4"}),
            ],
            "ls",
        ),
    ],
)
def test_answer_check_takes_a_run_command_an_unchecked_run_and_the_last_command_second(
    model: str, workspace: Path, replies: list[dict[str, Any]], answer: str
) -> None:
    harness = with_loop(answer_check="bash.command", max_steps=6, stop_on_repeat=0)
    trajectory = run(model, replies, workspace, harness=harness)
    assert trajectory.extra["stop_reason"] == "submitted" and trajectory.extra["answer"] == answer
    assert ("answer_check" in trajectory.extra) == (answer == "ls")
    if answer == "ls":
        assert trajectory.extra["answer_check"]["answer"] == "3"
        assert trajectory.extra["answer_check"]["taken"]["answer"] == "4"
        last = agent_steps(trajectory)[-1]
        assert last.observations[0].content == "submitted: your last bash command (not '4')"


def test_answer_check_is_off_by_default(model: str, workspace: Path) -> None:
    replies = [call("bash", {"command": "ls"}), call("submit", {"answer": "done"})]
    trajectory = run(model, replies, workspace)
    assert trajectory.extra["answer"] == "done" and "answer_check" not in trajectory.extra


def test_a_multi_turn_task_is_left_as_it_is(model: str, workspace: Path) -> None:
    task = Task(id="t-turns", instruction="first", split="train", checks=(), turns=("first", "second"))
    harness = with_loop(final_submit=True, answer_from="bash.command", max_steps=2, stop_on_repeat=0)
    trajectory = run(
        model, lambda m, t: call("bash", {"command": "ls"}), workspace, harness=harness, task=task
    )
    assert trajectory.extra["stop_reason"] == "step_limit" and trajectory.extra["answer"] is None


def _steps(*turns: list[tuple[str, dict]]) -> list:
    from harnessevolve.core.atif import Step, ToolCall

    return [
        Step(
            step_id=i + 1,
            source="agent",
            message="",
            tool_calls=tuple(ToolCall(f"c{i}-{j}", name, args) for j, (name, args) in enumerate(turn)),
        )
        for i, turn in enumerate(turns)
    ]


def test_stop_on_repeat_sees_a_cycle_of_up_to_three_turns_repeated() -> None:
    """ls, rm, ls, rm, ...: a two-turn cycle repeated ``times`` times is a repeat (nothing new comes
    of it); one other call inside the window, or one cycle too few, is not."""
    from harnessevolve.execute.loop_state import repeats_last

    ls, rm, cd = [("ls", {"a": True})], [("rm", {"file_name": "w"})], [("cd", {"folder": "x"})]
    assert repeats_last(_steps(ls, ls, ls), 3)
    assert repeats_last(_steps(cd, ls, rm, ls, rm, ls, rm), 3)
    assert not repeats_last(_steps(cd, ls, rm, ls, rm), 3)  # the cycle twice: one too few
    assert repeats_last(_steps(ls, rm, ls, rm), 2)
    assert not repeats_last(_steps(ls, rm, cd, ls, rm), 2)
    assert repeats_last(_steps(ls, rm, cd, ls, rm, cd), 2)  # a three-turn cycle
    assert not repeats_last(_steps(ls, rm, cd, rm, ls, rm, cd), 2)
    assert not repeats_last(_steps(ls, ls, ls), 0) and not repeats_last(_steps(ls, ls), 1)
    four = [("a", {}), ("b", {}), ("c", {}), ("d", {})]
    assert not repeats_last(_steps(*([[x] for x in four] * 2)), 2)  # a cycle of 4 is not looked for


def test_the_same_unreadable_reply_again_and_again_is_a_repeat(model: str, workspace: Path) -> None:
    """Read from BFCL 1.5B trajectories: one call written with a word for a number, not readable as
    a call, sent 20 times to the step limit. The same unreadable text ``stop_on_repeat`` times in a
    row now ends the turn (a one-turn run: ``repeated``); different unreadable replies do not."""
    from harnessevolve.execute.loop_state import repeats_last

    bad = '{"tool": "place_order", "arguments": {"amount": "150", "price": "current"}}'
    same = {"content": bad, "parse_error": "argument 'price' should be number, got str"}
    trajectory = run(model, lambda m, t: same, workspace, harness=with_loop(max_steps=8, stop_on_repeat=3))
    assert trajectory.extra["stop_reason"] == "repeated" and len(agent_steps(trajectory)) == 3
    steps = agent_steps(trajectory)
    assert repeats_last(steps, 3) and not repeats_last(steps[:2], 3)
    counter = iter(range(100))
    varied = run(
        f"{model}-v",
        lambda m, t: {"content": f"{bad} {next(counter)}", "parse_error": "no"},
        workspace,
        harness=with_loop(max_steps=5, stop_on_repeat=3),
    )
    unregister_script(f"{model}-v")
    assert varied.extra["stop_reason"] == "step_limit"


def test_in_a_conversation_a_repeat_ends_the_turn_not_the_conversation(model: str, workspace: Path) -> None:
    """Stuck on one call in the first turn, the agent yields to the user (the turn ends); the
    second turn goes right. Repeats are counted within a turn: the same call opening the second
    turn is not a repeat. On the last turn a repeat still ends the run (``repeated``)."""
    task = Task(id="t-conv", instruction="first", split="train", checks=(), turns=("first", "second"))
    harness = with_loop(max_steps=6, stop_on_repeat=2)

    def agent(messages: list[dict[str, Any]], _tools: list[dict[str, Any]]) -> dict[str, Any]:
        users = [m for m in messages if m["role"] == "user"]
        if users[-1]["content"] == "first":
            return call("bash", {"command": "ls"})
        done = sum(1 for m in messages[messages.index(users[-1]) :] if m["role"] == "assistant")
        return call("bash", {"command": "ls"}) if done == 0 else call("submit", {"answer": "ok"})

    trajectory = run(model, agent, workspace, harness=harness, task=task)
    assert trajectory.extra["turns"] == 2 and trajectory.extra["stop_reason"] == "submitted"
    assert [s.tool_calls[0].function_name for s in agent_steps(trajectory)] == [
        "bash",
        "bash",
        "bash",
        "submit",
    ]
    stuck = run(
        f"{model}-2", lambda m, t: call("bash", {"command": "ls"}), workspace, harness=harness, task=task
    )
    unregister_script(f"{model}-2")
    assert stuck.extra["turns"] == 2 and stuck.extra["stop_reason"] == "repeated"
    assert len(agent_steps(stuck)) == 4  # two calls a turn, then the turn (and at the end, the run) ends

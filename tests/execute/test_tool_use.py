"""Multi-turn tasks, per-task tools, the per-rollout tool server (Python + MCP) and Python checks,
through the CLI (run, refs import, validate) and the agent loop, with the scripted provider."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
from tool_use_bench import NONE, copy_example, counter_tools, write_bench

from harnessevolve.cli.app import app
from harnessevolve.core import atif, paths
from harnessevolve.core.tasks import load_benchmark
from harnessevolve.evaluate.checkers import check_rollout
from harnessevolve.execute.agent import run_agent
from harnessevolve.execute.tool_server import benchmark_sandbox
from harnessevolve.execute.workspace import create_workspace, remove_workspace
from harnessevolve.harness.load import load_harness
from harnessevolve.scoring.sandboxed_checks import sandboxed_runner

SHELL_AGENT = paths.builtin_dir("harnesses") / "shell-agent"


def call(tool: str, /, **arguments: object) -> dict:
    return {"tool_calls": [{"name": tool, "arguments": arguments}]}


def tool_results(messages: list[dict]) -> list[str]:
    return [m["content"] for m in messages if m["role"] == "tool"]


def rollout(
    bench: Path,
    task_id: str,
    model: str,
    *,
    loop: dict | None = None,
    harness_dir: Path = SHELL_AGENT,
    check_timeout_s: float = 30.0,
):
    """One rollout and its check result, through the same sandbox set-up as `run`."""
    benchmark = load_benchmark(str(bench))
    task = benchmark.task(task_id)
    harness = load_harness(harness_dir)
    if loop:
        harness = replace(harness, loop=replace(harness.loop, **loop))
    sandbox = benchmark_sandbox(None, benchmark)

    async def go():
        workspace = await create_workspace(task, sandbox=sandbox)
        try:
            trajectory = await run_agent(harness, task, workspace, model=model, seed=0, sandbox=sandbox)
            runner = sandboxed_runner(sandbox)
            result = check_rollout(task, workspace, trajectory, runner=runner, timeout_s=check_timeout_s)
        finally:
            remove_workspace(workspace)
        return trajectory, result

    return asyncio.run(go())


@pytest.fixture
def scripted(scripts):
    return scripts


# --- the shipped example: validate, refs import, run ------------------------------------------------


def test_validate_a_benchmark_with_turns_python_tools_mcp_and_python_checks(cli) -> None:
    result = cli.invoke(app, ["validate", str(paths.builtin_dir("benchmarks") / "tool-use-example")])
    assert result.exit_code == 0, result.output
    assert "valid" in result.output and "4 tasks" in result.output


def test_refs_import_replays_every_gold_turn_by_turn(cli, tmp_path: Path) -> None:
    out = tmp_path / "refs"
    args = [
        "refs",
        "import",
        "-b",
        str(paths.builtin_dir("benchmarks") / "tool-use-example"),
        "--split",
        "all",
    ]
    result = cli.invoke(app, [*args, "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "wrote 4 reference trajectories" in result.output
    two = atif.load(out / "cart-two-turns.json")
    users = [s for s in two.steps if s.source == "user"]
    assert [s.extra.get("turn") for s in users] == [0, 1]  # turn boundaries are user steps
    assert users[1].message.startswith("Now add as many pears")
    assert two.extra["tool_states"][0]["cart:Cart"]["items"] == {"apple": 2}
    assert two.extra["tool_states"][1]["cart:Cart"]["items"] == {"apple": 2, "pear": 2}
    assert two.extra["turn_call_counts"] == [1, 3] and two.extra["stop_reason"] == "ended"
    notes = atif.load(out / "notes-mcp.json")  # the MCP server kept its note across calls
    observed = [o.content for s in notes.agent_steps for o in s.observations]
    assert observed[:2] == ["saved note 1", "buy milk"]


def cart_agent(pear_offset: int = 0, seen: list | None = None):
    """Turn 1: add 2 apples; turn 2: as many pears as the first turn's tool result said (+ offset)."""

    def policy(messages: list[dict], tools: list[dict]) -> dict | str:
        if seen is not None:
            seen.append(sorted(t["function"]["name"] for t in tools))
        users = [m["content"] for m in messages if m["role"] == "user"]
        last = messages[-1]
        if last["role"] == "tool":
            return "Done."
        if "pears" in users[-1]:
            apples = json.loads(tool_results(messages)[0])["quantity"]  # depends on turn 1
            return call("addItem", name="pear", quantity=apples + pear_offset)
        if "apples" in users[-1]:
            return call("addItem", name="apple", quantity=2)
        return call("submit", answer="?")

    return policy


def test_second_turn_depends_on_the_first_and_the_check_scores_each_turn(scripted, tmp_path) -> None:
    bench = copy_example(tmp_path / "bench")
    trajectory, result = rollout(bench, "cart-two-turns", scripted("cart-ok", cart_agent()))
    assert result.passed and "all 2 turns pass" in result.details[0].message
    trajectory, result = rollout(bench, "cart-two-turns", scripted("cart-off", cart_agent(pear_offset=1)))
    assert result.score == 0.5 and not result.passed
    assert "1/2 turns pass; turn 1: cart {'apple': 2, 'pear': 3}" in result.details[0].message


def test_run_on_multi_turn_tasks_through_the_cli(cli, harness_dir: Path, scripted, tmp_path) -> None:
    bench = copy_example(tmp_path / "bench")
    for name in ("cart-total", "notes-mcp", "sum-json-args"):
        (bench / "tasks" / f"{name}.yaml").unlink()
    doc = (bench / "tasks" / "cart-two-turns.yaml").read_text()
    for split in ("validation", "test"):
        (bench / "tasks" / f"cart-{split}.yaml").write_text(
            doc.replace("id: cart-two-turns", f"id: cart-{split}").replace("split: train", f"split: {split}")
        )
    seen: list = []
    model = scripted("cart-cli", cart_agent(seen=seen))
    args = ["run", "--harness", str(harness_dir), "--benchmark", str(bench), "-n", "1", "--batch-size", "1"]
    result = cli.invoke(app, [*args, "--model", model, "--proposer", "rules", "--no-cache"])
    assert result.exit_code in (0, 1), result.output
    (run_dir,) = (harness_dir / ".harnessevolve" / "runs").iterdir()
    saved = [
        atif.load(p)
        for p in run_dir.rglob("*.json")
        if p.parent.name != "final" and '"ATIF-v1.' in p.read_text()[:200]
    ]
    assert saved, "the run saved trajectories"
    scored = [t for t in saved if t.extra.get("task_id") == "cart-two-turns"]
    assert scored and all(t.extra["turns"] == 2 for t in scored)
    # Per-task tools layered on the harness's: the task's own two next to the template's.
    assert {"addItem", "listCart", "submit"} <= set(seen[0]) and "save_note" not in seen[0]


EDITED_ADD_ITEM = """version: 1
name: addItem
description: Harness-edited description of addItem.
parameters:
  type: object
  properties:
    name: {type: string}
    quantity: {type: integer, description: always give it}
  required: [name, quantity]
"""


def test_harness_tool_edits_apply_to_task_tools_by_name(scripted, harness_dir: Path, tmp_path) -> None:
    (harness_dir / "tools" / "addItem.yaml").write_text(EDITED_ADD_ITEM)
    manifest = harness_dir / "harness.yaml"
    manifest.write_text(manifest.read_text().replace("submit]", "submit, addItem]"))
    bench = copy_example(tmp_path / "bench")
    offered: list[dict] = []
    model = scripted(
        "edits-seen",
        lambda m, t: (
            offered.append({x["function"]["name"]: x["function"] for x in t}) or call("submit", answer="?")
        ),
    )
    rollout(bench, "cart-total", model, harness_dir=harness_dir)
    rollout(bench, "sum-json-args", model, harness_dir=harness_dir)
    cart, other = offered
    assert cart["addItem"]["description"] == "Harness-edited description of addItem."
    assert cart["addItem"]["parameters"]["required"] == ["name", "quantity"]
    assert cart["listCart"]["description"] == "The cart's items and total price."  # unedited: the task's
    assert "addItem" not in other and "sumNumbers" in other  # an edit alone offers no tool


# --- the tool server ---------------------------------------------------------------------------------


def counter_bench(tmp_path: Path, **task: object) -> Path:
    doc = {"instruction": "count", "checker": [{"type": "answer", "expected": "x"}], **task}
    return write_bench(tmp_path / "bench", {"count": doc})


def test_state_persists_across_calls_and_never_across_rollouts(scripted, tmp_path) -> None:
    bench = counter_bench(tmp_path, tools=counter_tools("add", "read"))
    replies = [
        call("addToCounter", n=2),
        call("addToCounter", n=3),
        call("readCounter"),
        call("submit", answer="x"),
    ]
    model = scripted("count-twice", lambda m, t: replies[sum(x["role"] == "assistant" for x in m)])
    first, _ = rollout(bench, "count", model)
    assert [o.content for s in first.agent_steps for o in s.observations][:3] == [
        '{"value": 2}',
        '{"value": 5}',
        "5",
    ]
    second, _ = rollout(bench, "count", model)  # a fresh rollout: a fresh Counter
    assert [o.content for s in second.agent_steps for o in s.observations][:3] == [
        '{"value": 2}',
        '{"value": 5}',
        "5",
    ]
    assert second.extra["tool_states"] == [{"counter_tools:Counter": {"__class__": "Counter", "value": 5}}]


def test_tool_failures_are_tool_errors_and_the_server_keeps_serving(scripted, tmp_path) -> None:
    bench = counter_bench(tmp_path, tools=counter_tools("add", "boom", "opaque", "huge", "hang"))
    plan = ["boom", "opaque", "huge", "hang", "addToCounter"]
    replies = [call(n, **({"n": 1} if n == "addToCounter" else {})) for n in plan] + [
        call("submit", answer="x")
    ]
    model = scripted("failing-tools", lambda m, t: replies[sum(x["role"] == "assistant" for x in m)])
    trajectory, _ = rollout(bench, "count", model, loop={"command_timeout_s": 1.0, "max_steps": 10})
    errors = [s.extra.get("error", "") for s in trajectory.agent_steps]
    assert errors[0] == "tool_error: ValueError: the counter broke"
    assert errors[1] == "tool_error: returned a non-JSON value of type object"
    assert errors[2].startswith("tool_error: result is 3000002 bytes, more than the")
    assert errors[3] == "tool_error: timed out after 1s"
    assert trajectory.agent_steps[4].observations[0].content == '{"value": 1}'  # state survived it all


def test_a_tool_set_up_that_raises_fails_the_rollout_with_its_cause(scripted, tmp_path) -> None:
    tool = {
        "name": "ping",
        "description": "p",
        "parameters": NONE,
        "implementation": {"python": "counter_tools:BrokenSetup.ping"},
    }
    bench = counter_bench(tmp_path, tools=[tool])
    trajectory, result = rollout(
        bench, "count", scripted("never-called", lambda m, t: call("submit", answer="x"))
    )
    assert trajectory.extra["stop_reason"] == "tool_error"
    assert "RuntimeError: cannot connect to the backend" in trajectory.extra["error"]
    assert not trajectory.agent_steps and not result.passed


def test_json_encoded_shell_arguments(scripted, tmp_path) -> None:
    tool = {
        "name": "echoArgs",
        "description": "echo",
        "parameters": {"type": "object", "properties": {"flag": {}, "items": {}, "none": {}}},
        "implementation": {"command": 'printf "%s %s %s" "$ARG_flag" "$ARG_items" "$ARG_none"'},
    }
    bench = counter_bench(tmp_path, tools=[tool])
    replies = [call("echoArgs", flag=True, items=["a", 1], none=None), call("submit", answer="x")]
    model = scripted("echo-args", lambda m, t: replies[sum(x["role"] == "assistant" for x in m)])
    trajectory, _ = rollout(bench, "count", model)
    assert trajectory.agent_steps[0].observations[0].content == 'true ["a", 1] null'


def test_a_dotted_tool_name_reaches_the_model_safe_and_everything_else_as_written(scripted, tmp_path) -> None:
    """BFCL-style ``math.add``: the model is offered ``math_add``; the tool runs, and the trajectory and
    the check's tool state show ``math.add``."""
    (tool,) = counter_tools("add")
    bench = counter_bench(tmp_path, tools=[{**tool, "name": "math.add"}])
    offered: list[list[str]] = []

    def policy(messages: list[dict], tools: list[dict]) -> dict:
        offered.append(sorted(t["function"]["name"] for t in tools))
        if messages[-1]["role"] == "tool":
            return call("submit", answer="x")
        return call("math_add", n=2)

    trajectory, result = rollout(bench, "count", scripted("dotted-tool", policy))
    assert "math_add" in offered[0] and "math.add" not in offered[0]
    first = trajectory.agent_steps[0]
    assert first.tool_calls[0].function_name == "math.add"
    assert first.observations[0].content == '{"value": 2}'
    assert [c["tool"] for c in trajectory.extra["tool_calls"]] == ["math.add"]
    assert result.passed


# --- simulated users -----------------------------------------------------------------------------


def test_a_simulated_user_drives_the_turns_until_it_stops(scripted, tmp_path) -> None:
    user_model = scripted("shopper", lambda m, t: "Add 3 more." if len(m) < 4 else "Thanks! ###STOP###")
    user = {"model": user_model, "instructions": "You want 5 on the counter."}
    bench = counter_bench(tmp_path, tools=counter_tools("add"), instruction="Add 2.", user=user)
    agent = scripted(
        "adder",
        lambda m, t: "ok" if m[-1]["role"] == "tool" else call("addToCounter", n=2 if len(m) < 3 else 3),
    )
    trajectory, _ = rollout(bench, "count", agent)
    users = [s for s in trajectory.steps if s.source == "user"]
    assert [u.message for u in users] == ["Add 2.", "Add 3 more."]
    assert users[1].extra["simulated_user"] == user_model and trajectory.extra["stop_reason"] == "ended"
    assert trajectory.extra["tool_states"][-1]["counter_tools:Counter"]["value"] == 5


def test_a_users_stop_tokens_frame_and_opening_come_from_the_task(scripted, tmp_path) -> None:
    seen: list[list[dict]] = []

    def transferring(messages, tools):
        seen.append(messages)
        return "Please add 2." if len(messages) == 1 else "I want a human. ###TRANSFER###"

    user = {
        "model": scripted("transferring", transferring),
        "instructions": "You are a shopper. End with ###STOP### or ###TRANSFER###.",
        "stop": ["###STOP###", "###TRANSFER###"],
        "frame": "",
        "opening": "",
    }
    doc = {"checker": [{"type": "answer", "expected": "x"}], "tools": counter_tools("add"), "user": user}
    bench = write_bench(tmp_path / "bench", {"count": doc})
    agent = scripted("adder2", lambda m, t: "ok" if m[-1]["role"] == "tool" else call("addToCounter", n=2))
    trajectory, _ = rollout(bench, "count", agent)
    assert seen[0] == [{"role": "system", "content": user["instructions"]}]  # no frame, no opening
    assert trajectory.extra["user_end"] == "transfer" and trajectory.extra["stop_reason"] == "ended"
    users = [s.message for s in trajectory.steps if s.source == "user"]
    assert users == ["Please add 2."]  # the user opened the conversation; the stop turn is not a message


def test_a_user_that_never_stops_or_fails_ends_the_rollout_with_the_cause(scripted, tmp_path) -> None:
    chatty = {
        "model": scripted("chatty", lambda m, t: "more please"),
        "instructions": "never satisfied",
        "max_turns": 3,
    }
    bench = counter_bench(tmp_path, user=chatty)
    agent = scripted("talker", lambda m, t: "here you go")
    trajectory, _ = rollout(bench, "count", agent)
    assert trajectory.extra["stop_reason"] == "user_turn_limit" and trajectory.extra["turns"] == 3
    broken = {"model": "scripted/no-such-user-script", "instructions": "x"}
    bench = counter_bench(tmp_path / "b2", user=broken)
    trajectory, _ = rollout(bench, "count", agent)
    assert trajectory.extra["stop_reason"] == "user_error"
    assert trajectory.steps[-1].extra["error"].startswith("user_error: ")


# --- Python checks -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("check", "message"),
    [
        ("counter_checks:raises", "raised RuntimeError: the check itself is broken"),
        ("counter_checks:too_high", "returned score 1.5, outside [0, 1]"),
        ("counter_checks:not_a_score", "returned str; expected a score in [0, 1]"),
    ],
)
def test_a_python_check_that_misbehaves_fails_with_the_cause(scripted, tmp_path, check, message) -> None:
    bench = counter_bench(tmp_path, tools=counter_tools("add"), checker=[{"type": "python", "python": check}])
    _, result = rollout(bench, "count", scripted(f"sub-{check}", lambda m, t: call("submit", answer="x")))
    assert not result.passed and result.score == 0.0
    assert message in result.details[0].message


def test_a_python_check_sees_the_final_tool_state(scripted, tmp_path) -> None:
    checker = [{"type": "python", "python": "counter_checks:value_is", "args": {"value": 4}}]
    bench = counter_bench(tmp_path, tools=counter_tools("add"), checker=checker)
    replies = [call("addToCounter", n=4), call("submit", answer="x")]
    model = scripted("add-four", lambda m, t: replies[sum(x["role"] == "assistant" for x in m)])
    _, result = rollout(bench, "count", model)
    assert result.passed and "value 4, expected 4" in result.details[0].message


def test_a_python_check_that_hangs_is_stopped(scripted, tmp_path) -> None:
    bench = counter_bench(tmp_path, checker=[{"type": "python", "python": "counter_checks:hangs"}])
    started = time.monotonic()
    _, result = rollout(
        bench, "count", scripted("sub-hang", lambda m, t: call("submit", answer="x")), check_timeout_s=2
    )
    assert not result.passed and "counter_checks:hangs: timed out after 2s" in result.details[0].message
    assert time.monotonic() - started < 30


def test_an_mcp_server_that_dies_fails_the_rollout_with_its_cause(scripted, tmp_path) -> None:
    servers = [{"name": "dead", "command": ["python", "-c", "import sys; sys.exit(3)"]}]
    bench = counter_bench(tmp_path, mcp_servers=servers)
    started = time.monotonic()
    trajectory, _ = rollout(
        bench,
        "count",
        scripted("mcp-dead", lambda m, t: call("submit", answer="x")),
        loop={"command_timeout_s": 3},
    )
    assert (
        trajectory.extra["stop_reason"] == "tool_error" and "tool set-up failed" in trajectory.extra["error"]
    )
    assert time.monotonic() - started < 30


def test_the_agents_commands_never_see_the_benchmarks_code_or_runtime(scripted, tmp_path) -> None:
    checker = [{"type": "python", "python": "counter_checks:value_is", "args": {"value": 1}}]
    bench = counter_bench(tmp_path, tools=counter_tools("add"), checker=checker)
    peek = f"cat {bench}/tasks/count.yaml; ls {sys.prefix}/bin"
    replies = [call("addToCounter", n=1), call("bash", command=peek), call("submit", answer="x")]
    model = scripted("peeker", lambda m, t: replies[sum(x["role"] == "assistant" for x in m)])
    trajectory, result = rollout(bench, "count", model)
    seen = trajectory.agent_steps[1].observations[0].content
    assert "No such file or directory" in seen and "instruction" not in seen and "python" not in seen
    assert result.passed  # the tool server and the check still ran with them

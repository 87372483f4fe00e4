"""What a Python check receives: ``check.calls``, the agent's tool calls read from the trajectory,
whether or not the task's tools have implementations served by a tool server."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tool_use_bench import write_bench

from harnessevolve.core import paths
from harnessevolve.core.tasks import load_benchmark
from harnessevolve.evaluate.checkers import check_rollout
from harnessevolve.evaluate.python_check_main import agent_calls
from harnessevolve.execute.agent import run_agent
from harnessevolve.execute.tool_server import benchmark_sandbox
from harnessevolve.execute.workspace import create_workspace, remove_workspace
from harnessevolve.harness.load import load_harness

CALLS_CHECK = """
def saw_the_calls(check):
    tools = [c["tool"] for c in check.calls]
    echoed = [c["result"] for c in check.calls if c["tool"] == "echoIt"]
    ok = check.state is None and tools == ["echoIt", "nowhere", "submit"] and echoed == ["hi"]
    return (1.0 if ok else 0.0), f"calls {tools}, echoed {echoed}, state {check.state}"
"""


def test_a_check_sees_the_calls_without_a_tool_server(scripts, tmp_path: Path) -> None:
    echo = {
        "name": "echoIt",
        "description": "echo",
        "parameters": {"type": "object", "properties": {"text": {"type": "string"}}},
        "implementation": {"command": 'printf "%s" "$ARG_text"'},
    }
    doc = {
        "instruction": "echo hi",
        "tools": [echo],
        "checker": [{"type": "python", "python": "calls_checks:saw_the_calls"}],
    }
    bench = write_bench(tmp_path / "bench", {"echo": doc})
    (bench / "calls_checks.py").write_text(CALLS_CHECK)
    plan = [("echoIt", {"text": "hi"}), ("nowhere", {}), ("submit", {"answer": "done"})]

    def policy(messages: list[dict], tools: list[dict]) -> dict:
        name, arguments = plan[sum(x["role"] == "assistant" for x in messages)]
        return {"tool_calls": [{"name": name, "arguments": arguments}]}

    model = scripts("calls-seen", policy)
    benchmark = load_benchmark(str(bench))
    task = benchmark.task("echo")
    harness = load_harness(paths.builtin_dir("harnesses") / "shell-agent")
    sandbox = benchmark_sandbox(None, benchmark)

    async def go():
        workspace = await create_workspace(task, sandbox=sandbox)
        try:
            trajectory = await run_agent(harness, task, workspace, model=model, seed=0, sandbox=sandbox)
            from harnessevolve.scoring.sandboxed_checks import sandboxed_runner

            result = check_rollout(
                task, workspace, trajectory, runner=sandboxed_runner(sandbox), timeout_s=30
            )
        finally:
            remove_workspace(workspace)
        return trajectory, result

    trajectory, result = asyncio.run(go())
    assert "tool_states" not in trajectory.extra  # no tool server: no state, yet the calls are seen
    assert result.passed, result.details[0].message


def test_agent_calls_pair_each_call_with_its_result_and_error() -> None:
    trajectory = {
        "steps": [
            {"source": "user", "message": "go"},
            {
                "source": "agent",
                "tool_calls": [
                    {"tool_call_id": "a", "function_name": "math.add", "arguments": {"a": 1}},
                    {"tool_call_id": "b", "function_name": "nope", "arguments": {}},
                ],
                "observation": {"results": [{"source_call_id": "a", "content": "2"}]},
                "extra": {"error": "unknown_tool: nope"},
            },
        ]
    }
    assert agent_calls(trajectory) == [
        {"tool": "math.add", "arguments": {"a": 1}, "result": "2", "error": "unknown_tool: nope"},
        {"tool": "nope", "arguments": {}, "result": None, "error": "unknown_tool: nope"},
    ]

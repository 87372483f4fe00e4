"""The agent's view (issue 26): a validation task's answer planted in the suite, and an agent of each
runner kind (builtin bash, per-task Python tool, MCP server, command program, mini-swe-agent) trying
to read it, in the same sandbox set-up as ``run`` (``benchmark_sandbox``). Each test has a positive
control: the same probe reads a file of the suite that is *not* an answer, or the check's own view
(the full one) reads the answer, so the probe would see the hole if it were there.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import shutil
import textwrap
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml
from one_rollout import run_rollout

from harnessevolve.core import paths
from harnessevolve.core.tasks import Benchmark, load_benchmark
from harnessevolve.execute.agent import run_agent
from harnessevolve.execute.tool_server import benchmark_sandbox
from harnessevolve.execute.workspace import create_workspace, remove_workspace, tool_env
from harnessevolve.harness.load import load_harness
from harnessevolve.sandbox.base import Sandbox, agent_view, launched, tools_view
from harnessevolve.sandbox.views import Reach

pytestmark = pytest.mark.skipif(not os.access("/usr/bin/bwrap", os.X_OK), reason="needs bubblewrap")

SECRET = "HELDOUT-7f3a9c-ANSWER"
VISIBLE = "VISIBLE-SUITE-FILE-0b2e"
HARNESSES = paths.builtin_dir("harnesses")

PROBE_TOOLS = """
def read_path(path):
    try:
        with open(path) as handle:
            return handle.read()
    except Exception as exc:
        return f"cannot read {path}: {type(exc).__name__}"
"""
PROBE_SERVER = '''
try:  # mcp 2.x
    from mcp.server.mcpserver import MCPServer as Server
except ImportError:  # mcp 1.x
    from mcp.server.fastmcp import FastMCP as Server

app = Server("files")


@app.tool()
def read_host_path(path: str) -> str:
    """Read a file."""
    try:
        with open(path) as handle:
            return handle.read()
    except Exception as exc:
        return f"cannot read {path}: {type(exc).__name__}"


if __name__ == "__main__":
    app.run()
'''
CHECKS = """
def always(check):
    return 1.0, "ok"
"""
READ_PATH = {
    "name": "readPath",
    "description": "Read a host file.",
    "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    "implementation": {"python": "probe_tools:read_path"},
}


def make_suite(root: Path, *, show_suite: bool = False) -> Benchmark:
    """A suite with a held-out (validation) answer in its task file and a reference; a train task
    with a Python tool, one with an MCP server; Python checks (so the suite is code-only in view).
    ``show_suite``: benchmark.yaml shows the suite's own folder to agents (``sandbox_ro: [.]``)."""
    (root / "tasks").mkdir(parents=True)
    (root / "trajectories").mkdir()
    (root / "visible.txt").write_text(VISIBLE)
    (root / "probe_tools.py").write_text(PROBE_TOOLS)
    (root / "probe_server.py").write_text(PROBE_SERVER)
    (root / "probe_checks.py").write_text(CHECKS)
    (root / "trajectories" / "heldout.txt").write_text(f"reference answer: {SECRET}\n")
    meta: dict[str, Any] = {"version": 1, "name": "isolation-suite"}
    if show_suite:
        meta["sandbox_ro"] = ["."]
    (root / "benchmark.yaml").write_text(yaml.safe_dump(meta))
    checks = [{"type": "answer", "expected": "x"}, {"type": "python", "python": "probe_checks:always"}]
    tasks = {
        "probe": {"split": "train", "instruction": "Find it.", "tools": [READ_PATH], "checker": checks},
        "probe-mcp": {
            "split": "train",
            "instruction": "Find it.",
            "mcp_servers": [{"name": "files", "command": ["python", "probe_server.py"]}],
            "checker": checks,
        },
        "heldout": {
            "split": "validation",
            "instruction": "What is the answer?",
            "answer": SECRET,
            "checker": [{"type": "answer", "expected": SECRET}],
        },
    }
    for task_id, doc in tasks.items():
        full = {"version": 1, "id": task_id, **doc}
        (root / "tasks" / f"{task_id}.yaml").write_text(yaml.safe_dump(full, sort_keys=False))
    return load_benchmark(str(root))


def probe_paths(suite: Path) -> list[str]:
    return [str(suite / "tasks" / "heldout.yaml"), str(suite / "trajectories" / "heldout.txt")]


def builtin_rollout(bench: Benchmark, task_id: str, replies: list[dict], scripts) -> dict:
    """The builtin loop on ``task_id`` in the run's sandbox; the trajectory as JSON."""
    model = scripts(
        f"iso-{task_id}", replies + [{"tool_calls": [{"name": "submit", "arguments": {"answer": "x"}}]}]
    )
    harness = load_harness(HARNESSES / "shell-agent")
    harness = replace(harness, loop=replace(harness.loop, max_steps=len(replies) + 2))
    task = bench.task(task_id)
    sandbox = benchmark_sandbox(None, bench)

    async def go() -> Any:
        workspace = await create_workspace(task, sandbox=sandbox)
        try:
            return await run_agent(harness, task, workspace, model=model, seed=0, sandbox=sandbox)
        finally:
            remove_workspace(workspace)

    return asyncio.run(go()).to_dict()


def observations(trajectory: dict) -> list[str]:
    return [
        r["content"] for s in trajectory["steps"] for r in (s.get("observation") or {}).get("results", [])
    ]


def run_in(sandbox: Sandbox, command: str) -> str:
    """``command`` launched in ``sandbox`` in a fresh workspace; what it printed."""

    async def go() -> str:
        workspace = await create_workspace(load_benchmark_task_stub(), sandbox=sandbox)
        try:
            async with launched(sandbox, command, workspace, tool_env(workspace)) as launch:
                proc = await asyncio.create_subprocess_exec(
                    *launch.argv,
                    stdout=asyncio.subprocess.PIPE,
                    stderr=asyncio.subprocess.STDOUT,
                    start_new_session=True,
                    **launch.subprocess_options(),
                )
                out, _ = await proc.communicate()
            return out.decode(errors="replace")
        finally:
            remove_workspace(workspace)

    return asyncio.run(go())


def load_benchmark_task_stub() -> Any:
    from harnessevolve.core.tasks import Check, Task

    return Task(id="view", instruction="x", split="train", checks=(Check(type="answer", expected="x"),))


# --- the views themselves ----------------------------------------------------------------------------


def test_agent_view_hides_the_heldout_answer_the_checks_view_shows(tmp_path: Path) -> None:
    suite = tmp_path / "suite"
    bench = make_suite(suite, show_suite=True)
    full = benchmark_sandbox(None, bench)
    command = f"cat {' '.join(probe_paths(suite))} {suite / 'visible.txt'} 2>&1"
    assert SECRET in run_in(full, command)  # the checks' view: everything (control)
    for view in (agent_view(full), tools_view(full)):
        seen = run_in(view, command)
        assert VISIBLE in seen and SECRET not in seen, seen
    assert agent_view(full).view.reach == Reach.AGENT and tools_view(full).view.reach == Reach.TOOLS
    assert agent_view(tools_view(full)).view.reach == Reach.AGENT  # a view only narrows


def test_agent_view_without_sandbox_ro_has_no_suite_at_all(tmp_path: Path) -> None:
    suite = tmp_path / "suite"
    bench = make_suite(suite)  # Python checks: the suite is code-only, shown to tools and checks
    full = benchmark_sandbox(None, bench)
    command = f"ls {suite} 2>&1; cat {suite / 'visible.txt'} 2>&1"
    assert VISIBLE in run_in(full, command)
    seen = run_in(agent_view(full), command)
    assert VISIBLE not in seen and "No such file" in seen, seen


# --- one test per runner kind ------------------------------------------------------------------------


def assert_reads_only_the_visible_file(
    tmp_path: Path, scripts, task_id: str, tool: str, arguments, *, show_suite: bool = False
) -> None:
    """A builtin rollout of ``task_id`` that reads each probe path, then the suite's visible file,
    with ``tool`` (``arguments(path)``): the visible file is seen (the control), the secret never."""
    suite = tmp_path / "suite"
    bench = make_suite(suite, show_suite=show_suite)
    replies = [
        {"tool_calls": [{"name": tool, "arguments": arguments(p)}]}
        for p in [*probe_paths(suite), str(suite / "visible.txt")]
    ]
    trajectory = builtin_rollout(bench, task_id, replies, scripts)
    seen = observations(trajectory)
    assert any(VISIBLE in o for o in seen), seen
    assert SECRET not in json.dumps(trajectory)


def test_builtin_bash_cannot_read_heldout_answer(tmp_path: Path, scripts) -> None:
    def cat(path: str) -> dict[str, str]:
        return {"command": f"cat {path} 2>&1"}

    # the control: the suite's own folder is shown to bash
    assert_reads_only_the_visible_file(tmp_path, scripts, "probe", "bash", cat, show_suite=True)


def test_python_tool_cannot_read_heldout_answer(tmp_path: Path, scripts) -> None:
    # the control: the tool server sees its python_path
    assert_reads_only_the_visible_file(tmp_path, scripts, "probe", "readPath", lambda p: {"path": p})


def test_mcp_server_cannot_read_heldout_answer(tmp_path: Path, scripts) -> None:
    if importlib.util.find_spec("mcp") is None:
        pytest.skip("needs the mcp extra")
    assert_reads_only_the_visible_file(
        tmp_path, scripts, "probe-mcp", "read_host_path", lambda p: {"path": p}
    )


HOSTILE_AGENT = """
import json, os, sys
found = []
for path in sys.argv[1:]:
    try:
        found.append(open(path).read())
    except Exception as exc:
        found.append(f"{path}: {type(exc).__name__}")
for root in ("/run/harnessevolve", "/harness"):
    for folder, _, files in os.walk(root):
        for name in files:
            try:
                found.append(open(os.path.join(folder, name)).read())
            except Exception:
                pass
open(os.environ["HARNESSEVOLVE_ANSWER"], "w").write("\\n".join(found))
"""


def external_rollout(
    harness_root: Path, bench: Benchmark, task_id: str, model: str = "scripted/iso-ext"
) -> dict:
    harness = load_harness(harness_root)
    task = bench.task(task_id)
    return run_rollout(harness, task, model=model, sandbox=benchmark_sandbox(None, bench)).to_dict()


def command_harness(tmp_path: Path, agent_py: str, args: list[str]) -> Path:
    root = tmp_path / "harness"
    shutil.copytree(HARNESSES / "python-agent", root)
    (root / "agent.py").write_text(textwrap.dedent(agent_py))
    doc = yaml.safe_load((root / "harness.yaml").read_text())
    doc["agent"]["command"] = ["python", "/harness/agent.py", *args]
    (root / "harness.yaml").write_text(yaml.safe_dump(doc))
    return root


@pytest.mark.parametrize("show_suite", [False, True])
def test_command_agent_cannot_read_heldout_answer(tmp_path: Path, show_suite: bool) -> None:
    suite = tmp_path / "suite"
    bench = make_suite(suite, show_suite=show_suite)
    harness = command_harness(tmp_path, HOSTILE_AGENT, [*probe_paths(suite), str(suite / "visible.txt")])
    trajectory = external_rollout(harness, bench, "probe")
    answer = trajectory["extra"]["answer"] or ""
    assert trajectory["extra"]["stop_reason"] == "submitted", trajectory["extra"].get("error")
    assert '"instruction": "Find it."' in answer  # it read its own task file (control)
    assert (VISIBLE in answer) == show_suite
    assert SECRET not in json.dumps(trajectory)


def test_mini_swe_agent_cannot_read_heldout_answer(tmp_path: Path, scripts) -> None:
    if importlib.util.find_spec("minisweagent") is None:
        pytest.skip("needs the agents extra (mini-swe-agent)")
    suite = tmp_path / "suite"
    bench = make_suite(suite, show_suite=True)
    probe = " ".join([*probe_paths(suite), str(suite / "visible.txt")])
    bash = [f"cat {probe} 2>&1", "printf 'COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\\ndone\\n'"]
    model = scripts(
        "iso-mini", [{"tool_calls": [{"name": "bash", "arguments": {"command": c}}]} for c in bash]
    )
    trajectory = external_rollout(HARNESSES / "mini-swe-agent", bench, "probe", model=model)
    text = json.dumps(trajectory)
    assert trajectory["extra"]["runner"] == "mini-swe-agent"
    assert VISIBLE in text, trajectory["extra"].get("error")  # its command really ran (control)
    assert SECRET not in text


def test_coding_agent_cannot_read_heldout_answer(tmp_path: Path, scripts) -> None:
    """The agent proposer's optimizer (``harnesses/optimizer-agent``) runs through the same runner,
    in the run's sandbox (``agent_proposer.py``: ``runner.run(..., sandbox=run.sandbox)``): a
    Python suite's held-out answer is out of its view too, by its host path."""
    if importlib.util.find_spec("minisweagent") is None:
        pytest.skip("needs the agents extra (mini-swe-agent)")
    suite = tmp_path / "suite"
    bench = make_suite(suite)
    probe = " ".join([*probe_paths(suite), str(suite / "visible.txt")])
    commands = [
        f"cat {probe} 2>&1; ls /run/harnessevolve",
        "printf 'COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\\ndone\\n'",
    ]
    replies = [{"tool_calls": [{"name": "bash", "arguments": {"command": c}}]} for c in commands]
    model = scripts("iso-coder", replies)
    trajectory = external_rollout(HARNESSES / "optimizer-agent", bench, "probe", model=model)
    text = json.dumps(trajectory)
    assert trajectory["extra"]["runner"] == "mini-swe-agent"
    assert "task.json" in text, trajectory["extra"].get("error")  # its command ran (control)
    assert SECRET not in text and VISIBLE not in text

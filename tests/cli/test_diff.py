"""`diff RUN REF` on real failed runs of the built-in benchmark (the agent loop with scripted replies,
a real workspace and the task's checker)."""

from __future__ import annotations

import asyncio
import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from harnessevolve.cli.app import app
from harnessevolve.core import atif
from harnessevolve.core.paths import builtin_dir
from harnessevolve.evaluate.checkers import run_checks
from harnessevolve.execute.agent import run_agent
from harnessevolve.execute.workspace import create_workspace, remove_workspace
from harnessevolve.harness.load import load_harness
from harnessevolve.models.scripted import register_script, unregister_script
from harnessevolve.scoring.sandboxed_checks import sandboxed_runner

REFERENCE = builtin_dir("trajectories") / "shell-basics" / "replace-word-01.json"
_names = itertools.count()


def call(tool: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": tool, "arguments": arguments}]}


def real_run(shell_basics, tmp_path: Path, replies: list[dict[str, Any]]) -> Path:
    task = shell_basics.task("replace-word-01")
    name = f"diff-{next(_names)}"
    register_script(name, replies)

    async def go():
        workspace = await create_workspace(task)
        try:
            harness = load_harness(builtin_dir("harnesses") / "shell-agent")
            trajectory = await run_agent(harness, task, workspace, model=f"scripted/{name}", seed=0)
            return trajectory, run_checks(
                task, workspace, trajectory.extra.get("answer"), runner=sandboxed_runner()
            )
        finally:
            remove_workspace(workspace)

    try:
        trajectory, result = asyncio.run(go())
    finally:
        unregister_script(name)
    path = tmp_path / "run.json"
    atif.save(trajectory.with_extra(score=result.score, passed=result.passed), path)
    return path


def diff_json(cli, run: Path) -> dict[str, Any]:
    result = cli.invoke(app, ["diff", str(run), str(REFERENCE), "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def diff_text(cli, run: Path) -> str:
    result = cli.invoke(app, ["diff", str(run), str(REFERENCE)])
    assert result.exit_code == 0, result.output
    return result.output


def replace_run(shell_basics, tmp_path: Path, target: str) -> Path:
    """A real run that replaces violet with jasmine in ``target`` (the task's file: story.txt), reads
    story.txt and submits."""
    replies = [
        call("bash", command=f"sed -i 's/violet/jasmine/g' {target}"),
        call("read_file", path="story.txt"),
        call("submit", answer="done"),
    ]
    return real_run(shell_basics, tmp_path, replies)


def test_a_skipped_step_is_marked_on_the_missing_reference_action(cli, shell_basics, tmp_path: Path) -> None:
    run = real_run(
        shell_basics, tmp_path, [call("read_file", path="story.txt"), call("submit", answer="done")]
    )
    doc = diff_json(cli, run)
    assert doc["signal"]["cause"] == "skipped_step" and doc["signal"]["step"] == 3
    marked = [r for r in doc["rows"] if r["divergent"]]
    assert len(marked) == 1
    assert marked[0]["run"] is None and marked[0]["reference"]["arguments"]["command"].startswith("sed -i")
    assert [r["match"] for r in doc["rows"]] == [False, True, True]


def test_a_wrong_argument_is_marked_on_its_step_with_cause_and_hint(
    cli, shell_basics, tmp_path: Path
) -> None:
    run = replace_run(shell_basics, tmp_path, "notes.txt")
    output = diff_text(cli, run)
    marked = [line for line in output.splitlines() if "first divergence" in line and "◀" in line]
    assert len(marked) == 1 and marked[0].split("│")[1].strip() == "3"
    assert "first divergence: step 3 (reference step 3)" in output
    assert "cause: wrong_argument" in output and "severity: 0.60" in output
    assert "hint: step 3:" in output
    doc = diff_json(cli, run)
    assert [r["step"] for r in doc["rows"] if r["divergent"]] == [3]


def test_a_passing_run_has_nothing_to_diagnose(cli, shell_basics, tmp_path: Path) -> None:
    output = diff_text(cli, replace_run(shell_basics, tmp_path, "story.txt"))
    assert "passed its checker" in output and "◀" not in output


@pytest.mark.parametrize("content", ['{"schema_version": "ATIF-v1.4"}', "not json"])
def test_bad_input_is_one_line_and_exit_2(cli, tmp_path: Path, content: str) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    result = cli.invoke(app, ["diff", str(bad), str(REFERENCE)])
    assert result.exit_code == 2
    assert result.output.startswith(f"Error: {bad}")

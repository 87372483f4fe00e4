"""The BFCL v4 multi-turn adapter: tasks, per-task tools from BFCL's function docs, its backends as
stateful Python tools, its checker per turn; gold passes (refs import exit 0), no calls scores 0."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from harnessevolve.adapters import load_benchmark_spec
from harnessevolve.cli.app import app
from harnessevolve.core import atif, paths
from harnessevolve.evaluate.checkers import run_checks
from harnessevolve.execute.agent import run_agent
from harnessevolve.execute.tool_server import benchmark_sandbox
from harnessevolve.execute.workspace import create_workspace, remove_workspace
from harnessevolve.harness.load import load_harness
from harnessevolve.models.scripted import register_script, unregister_script
from harnessevolve.scoring.sandboxed_checks import sandboxed_runner

pytest.importorskip("bfcl_eval")

FS = "bfcl_eval.eval_checker.multi_turn_eval.func_source_code.gorilla_file_system:GorillaFileSystem"


def test_the_default_set_has_splits_turns_and_per_task_tools() -> None:
    bench = load_benchmark_spec("bfcl")
    assert len(bench.tasks) == 30 and all(bench.split(s) for s in ("train", "validation", "test"))
    first = bench.task("multi-turn-base-0")
    assert len(first.turns) == 4 and first.turns[0].startswith("Move 'final_report.pdf'")
    names = {t.name for t in first.tools}
    assert {"mv", "grep", "post_tweet"} <= names and "cp" not in names  # excluded_function honoured
    other = bench.task("multi-turn-base-4")
    assert {t.name for t in other.tools} != names  # each task its own tool set
    mv = next(t for t in first.tools if t.name == "mv")
    assert mv.python == f"{FS}.mv" and mv.parameters["type"] == "object"
    assert "dict" not in str([t.parameters for t in first.tools])
    assert first.tool_setup[0].method == "_load_scenario"
    sort = [g for g in first.gold if g.tool == "sort"]
    assert (
        sort and sort[0].arguments == {"file_name": "final_report.pdf"} and sort[0].turn == 2
    )  # positional named


@pytest.mark.parametrize("template", ["shell-agent", "tool-agent"])
def test_gold_references_pass_their_checks(cli, tmp_path: Path, template: str) -> None:
    out = tmp_path / "refs"
    args = ["refs", "import", "-b", "bfcl:base:0-5", "--split", "all", "--out", str(out)]
    result = cli.invoke(app, [*args, "--harness", str(paths.builtin_dir("harnesses") / template)])
    assert result.exit_code == 0, result.output
    assert "wrote 6 reference trajectories" in result.output
    reference = atif.load(out / "multi-turn-base-0.json")
    assert [s.extra.get("turn") for s in reference.steps if s.source == "user"] == [0, 1, 2, 3]
    assert reference.extra["score"] == 1.0


def test_an_agent_that_makes_no_calls_scores_zero() -> None:
    bench = load_benchmark_spec("bfcl:base:0-2")
    harness = load_harness(paths.builtin_dir("harnesses") / "shell-agent")
    sandbox = benchmark_sandbox(None, bench)
    register_script("bfcl-silent", lambda messages, tools: "I would rather not.")

    async def score(task):
        workspace = await create_workspace(task, sandbox=sandbox)
        try:
            trajectory = await run_agent(
                harness, task, workspace, model="scripted/bfcl-silent", seed=0, sandbox=sandbox
            )
            return run_checks(task, workspace, None, runner=sandboxed_runner(sandbox), trajectory=trajectory)
        finally:
            remove_workspace(workspace)

    try:
        results = [asyncio.run(score(t)) for t in bench.tasks]
    finally:
        unregister_script("bfcl-silent")
    assert [r.score for r in results] == [0.0, 0.0, 0.0]
    assert "empty_turn_model_response" in results[0].details[0].message


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("bfcl:miss_func", "unknown BFCL category 'miss_func'"),
        ("bfcl:base:999", "no task 999 in base"),
        ("bfcl:base:x", "bad task indexes"),
    ],
)
def test_bad_bfcl_specs_are_exit_2(cli, spec: str, message: str) -> None:
    result = cli.invoke(app, ["refs", "import", "-b", spec])
    assert result.exit_code == 2 and message in result.output and "Traceback" not in result.output

"""The ``tools`` proposer's example calls for the tools a task brings (no harness file of its own):
the task's description plus one call from a train reference, written as ``tools/<name>.yaml``
without an implementation, which the harness loads unlisted and each rollout shows in place of the
task's description. Tested on two benchmarks whose tasks bring their tools: tool-use-example and
BFCL multi-turn (its shipped references)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import shutil
from pathlib import Path

import pytest
import yaml

from harnessevolve.adapters import load_benchmark_spec
from harnessevolve.core.signals import Cause, Cluster, ErrorSignal
from harnessevolve.core.tasks import Task
from harnessevolve.execute.rollout_tools import rollout_tools
from harnessevolve.harness.load import load_harness, read_files
from harnessevolve.optimize.edits import write_changes
from harnessevolve.optimize.proposal import ProposalContext
from harnessevolve.optimize.settings_proposers import MAX_EXAMPLE_CHARS, ToolSpecProposer
from harnessevolve.proposing.context import train_calls
from harnessevolve.scoring.references import load_references

ROOT = Path(__file__).parents[2]
TOOL_AGENT = ROOT / "harnesses" / "tool-agent"


def _context(
    harness: Path,
    tasks: list[Task],
    references: dict,
    cluster: Cluster,
    editable: tuple[str, ...] | None = None,
) -> ProposalContext:
    files = read_files(harness)
    return ProposalContext(
        files=files,
        editable=editable if editable is not None else ("prompts/*.md", "tools/*.yaml", "harness.yaml#loop"),
        system_prompt_path="prompts/system.md",
        examples_path="prompts/examples.md",
        clusters=(cluster,),
        task_tools={
            t.name: {"description": t.description, "parameters": t.parameters} for x in tasks for t in x.tools
        },
        train_calls=train_calls(tasks, references),
    )


def _cluster(cause: Cause, task_id: str, tool: str, actual: dict, expected: dict) -> Cluster:
    signal = ErrorSignal(
        task_id,
        cause,
        0.6,
        "h",
        1,
        actual={"tool": tool, "arguments": actual},
        expected={"tool": tool, "arguments": expected},
    )
    return Cluster(cause, (signal,))


def _as_train(tasks: list[Task]) -> list[Task]:
    return [dataclasses.replace(t, split="train") for t in tasks]


def _apply(tmp_path: Path, changes: dict[str, str | None]) -> Path:
    harness = tmp_path / "harness"
    shutil.copytree(TOOL_AGENT, harness)
    write_changes(harness, changes)
    return harness


def _propose(context: ProposalContext):
    return asyncio.run(ToolSpecProposer().propose(context))


def test_tool_use_example_a_task_tool_gets_an_example_call_from_another_task(tmp_path: Path) -> None:
    suite = load_benchmark_spec(str(ROOT / "benchmarks" / "tool-use-example"))
    tasks = _as_train([t for t in suite.tasks if any(x.name == "addItem" for x in t.tools)])
    assert len(tasks) >= 2, [t.id for t in suite.tasks]
    failed = tasks[0]
    references = {t.id: r for t, r in ((t, load_references(suite).get(t.id)) for t in tasks) if r is not None}
    if len(references) < 2:  # the gold of each task is its reference here
        pytest.skip("tool-use-example ships fewer than two references of addItem")
    cluster = _cluster(Cause.WRONG_ARGUMENT, failed.id, "addItem", {"item": "milk"}, {"name": "milk"})
    candidate = _propose(_context(TOOL_AGENT, tasks, references, cluster))
    assert candidate is not None and candidate.proposer == "tools"
    assert list(candidate.changes) == ["tools/addItem.yaml"]
    doc = yaml.safe_load(candidate.changes["tools/addItem.yaml"])
    example = json.loads(doc["description"].split("Example call: ", 1)[1])
    assert example["tool"] == "addItem" and set(example["arguments"]) <= {"name", "quantity"}
    assert "another train task" in candidate.rationale
    # the harness loads the file unlisted, and a rollout of the task shows it in place of the task's
    harness = load_harness(_apply(tmp_path, candidate.changes))
    offered = rollout_tools(harness, failed, [])
    assert offered["addItem"].spec.description == doc["description"]
    assert offered["addItem"].served  # still the task's implementation
    assert "addItem" not in [t.name for t in harness.tools if t.builtin or t.command]


def test_bfcl_a_backend_function_gets_an_example_call_from_a_shipped_reference(tmp_path: Path) -> None:
    pytest.importorskip("bfcl_eval")
    suite = load_benchmark_spec("bfcl")
    references = load_references(suite)
    tasks = _as_train([t for t in suite.tasks if t.id in references][:8])
    calls = train_calls(tasks, references)
    tool, used = max(calls.items(), key=lambda item: len({task for task, args in item[1] if args}))
    failed = next(task for task, args in used if args)
    cluster = _cluster(Cause.WRONG_ARGUMENT, failed, tool, {}, dict(next(a for t, a in used if t == failed)))
    candidate = _propose(_context(TOOL_AGENT, tasks, references, cluster))
    assert candidate is not None, (tool, used)
    path = f"tools/{tool}.yaml"
    doc = yaml.safe_load(candidate.changes[path])
    example = json.loads(doc["description"].split("Example call: ", 1)[1])
    assert example["tool"] == tool and example["arguments"]
    if any(task != failed for task, args in used if args):
        assert example["arguments"] in [a for t, a in used if t != failed]  # another task's call
    harness = load_harness(_apply(tmp_path, candidate.changes))
    task = next(t for t in tasks if t.id == failed)
    assert rollout_tools(harness, task, [])[tool].spec.description == doc["description"]


def test_no_example_without_an_editable_tools_folder_a_fitting_cause_a_short_call_or_a_schema() -> None:
    suite = load_benchmark_spec(str(ROOT / "benchmarks" / "tool-use-example"))
    tasks = _as_train([t for t in suite.tasks if any(x.name == "addItem" for x in t.tools)])
    references = {t.id: r for t in tasks if (r := load_references(suite).get(t.id)) is not None}
    failed = tasks[0].id
    wrong = _cluster(Cause.WRONG_ARGUMENT, failed, "addItem", {}, {"name": "milk"})
    assert _propose(_context(TOOL_AGENT, tasks, references, wrong, editable=("prompts/*.md",))) is None
    step_limit = _cluster(Cause.STEP_LIMIT, failed, "addItem", {}, {"name": "milk"})
    assert _propose(_context(TOOL_AGENT, tasks, references, step_limit)) is None
    long_calls = {t: r for t, r in references.items()}
    ctx = _context(TOOL_AGENT, tasks, long_calls, wrong)
    huge = {
        "addItem": tuple((t, {"name": "x" * (MAX_EXAMPLE_CHARS + 1)}) for t, _ in ctx.train_calls["addItem"])
    }
    assert _propose(dataclasses.replace(ctx, train_calls=huge)) is None
    odd = {"addItem": {"description": "Add.", "parameters": {"type": "array"}}}  # no object schema
    assert _propose(dataclasses.replace(ctx, task_tools=odd)) is None


def test_only_train_references_are_shown() -> None:
    suite = load_benchmark_spec(str(ROOT / "benchmarks" / "tool-use-example"))
    references = load_references(suite)
    tasks = [t for t in suite.tasks if t.id in references]
    held_out = [t for t in tasks if str(t.split) != "train"]
    assert held_out, "tool-use-example has validation/test tasks with references"
    assert not any(
        task in {t.id for t in held_out}
        for calls in train_calls(tasks, references).values()
        for task, _ in calls
    )


def test_an_unlisted_tool_file_with_an_implementation_stays_unused_and_a_bad_one_is_named(
    tmp_path: Path,
) -> None:
    harness = tmp_path / "h"
    shutil.copytree(TOOL_AGENT, harness)
    (harness / "tools" / "extra.yaml").write_text(
        "version: 1\nname: extra\ndescription: d\n"
        "parameters: {type: object, properties: {}}\ncommand: 'true'\n"
    )
    assert "extra" not in [t.name for t in load_harness(harness).tools]
    (harness / "tools" / "broken.yaml").write_text("version: 1\nname: other\ndescription: d\n")
    from harnessevolve.core.errors import HarnessError

    with pytest.raises(HarnessError) as raised:
        load_harness(harness)
    assert raised.value.file == "tools/broken.yaml" and "parameters" in str(raised.value)

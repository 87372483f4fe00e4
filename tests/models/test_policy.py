"""The shipped dry-run agent `scripted/policy:learner`: its contract as documented in
harnessevolve/models/policy.py (solves a task only with exactly one demonstration of its family in
the prompt; gives up otherwise and on tasks it does not know)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from harnessevolve.core import paths
from harnessevolve.core.tasks import load_benchmark
from harnessevolve.models import policy
from harnessevolve.models.scripted import resolve_script

GIVE_UP = {"tool_calls": [{"name": "submit", "arguments": {"answer": "I do not know"}}]}


def conversation(system: str, instruction: str) -> list[dict]:
    return [{"role": "system", "content": system}, {"role": "user", "content": instruction}]


def test_scripted_policy_names_the_shipped_module() -> None:
    assert resolve_script("policy:learner").policy is policy.learner
    assert resolve_script("policy:gives_up").policy is policy.gives_up


def test_one_demonstration_of_the_family_makes_it_solve_two_confuse_it() -> None:
    tasks = load_benchmark("shell-basics").tasks
    task = next(t for t in tasks if t.gold and t.tags)
    same = next(t for t in tasks if t.tags[:1] == task.tags[:1] and t.id != task.id)
    other = next(t for t in tasks if t.tags[:1] != task.tags[:1])
    assert policy.learner(conversation("You are helpful.", task.instruction), []) == GIVE_UP
    demo = f"# Examples\n\nTask: {same.instruction}\n"
    first = policy.learner(conversation(demo, task.instruction), [])
    assert first == {"tool_calls": [{"name": task.gold[0].tool, "arguments": task.gold[0].arguments}]}
    two = demo + f"Task: {other.instruction}\n"
    assert policy.learner(conversation(two, task.instruction), []) == GIVE_UP
    assert policy.learner(conversation(demo, "Something nobody asked before."), []) == GIVE_UP


def test_more_suites_through_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    suite = tmp_path / "mine"
    shutil.copytree(paths.builtin_dir("benchmarks") / "shell-onecall", suite)
    task = load_benchmark(str(suite)).tasks[0]
    changed = task.instruction + " (my copy)"
    path = suite / "tasks" / f"{task.id}.yaml"
    path.write_text(path.read_text().replace(task.instruction, changed))
    monkeypatch.setenv("HARNESSEVOLVE_POLICY_BENCHMARKS", str(suite))
    monkeypatch.setattr(policy, "_index", None)
    demo = f"Task: {changed}\n"
    reply = policy.learner(conversation(demo, changed), [])
    assert reply["tool_calls"][0]["name"] == task.gold[0].tool

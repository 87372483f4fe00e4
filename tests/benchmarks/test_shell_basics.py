"""The shell-basics benchmark: its shape, its generator, and every gold solution replayed for real.

Gold calls run through a small local copy of the agent's four tools (same semantics as the agent
loop's), then the task's own checks score the result.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
from collections import Counter
from pathlib import Path
from types import ModuleType

import pytest

from harnessevolve.core import paths
from harnessevolve.core.tasks import SPLITS, Task, load_benchmark
from harnessevolve.evaluate.checkers import run_checks

BENCHMARK = load_benchmark("shell-basics")
FAMILIES = (
    "read-word",
    "lookup-key",
    "count-lines",
    "count-matches",
    "first-sorted",
    "write-file",
    "replace-word",
    "move-file",
)
TOOLS = ("bash", "read_file", "write_file", "submit")


def load_generator() -> ModuleType:
    path = paths.builtin_dir("benchmarks") / "shell-basics" / "generate.py"
    spec = importlib.util.spec_from_file_location("shell_basics_generate", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class LocalTools:
    """The four agent tools, run in ``workspace`` exactly as the agent loop defines them."""

    def __init__(self, workspace: Path) -> None:
        self.workspace = workspace
        self.answer: str | None = None

    def call(self, tool: str, arguments: dict[str, str]) -> str:
        return getattr(self, tool)(**arguments)

    def bash(self, command: str) -> str:
        done = subprocess.run(
            ["bash", "-c", command],
            cwd=self.workspace,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=30,
        )
        out = done.stdout
        if done.returncode != 0:
            out += ("\n" if out and not out.endswith("\n") else "") + f"[exit code {done.returncode}]"
        return out

    def read_file(self, path: str) -> str:
        return (self.workspace / path).read_text(encoding="utf-8")

    def write_file(self, path: str, content: str) -> str:
        target = self.workspace / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content, encoding="utf-8")
        return f"wrote {len(content.encode('utf-8'))} bytes to {path}"

    def submit(self, answer: str) -> str:
        self.answer = answer
        return "submitted"


def prepare(task: Task, workspace: Path) -> None:
    for rel, content in task.setup_files.items():
        target = workspace / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content, encoding="utf-8")
    for command in task.setup_commands:
        subprocess.run(["bash", "-c", command], cwd=workspace, check=True, capture_output=True)


def family(task: Task) -> str:
    return task.tags[0]


# --- shape -----------------------------------------------------------------------------------


def test_counts_per_split_and_family() -> None:
    assert len(BENCHMARK.tasks) == 64
    assert BENCHMARK.name == "shell-basics"
    assert BENCHMARK.description
    assert Counter(t.split for t in BENCHMARK.tasks) == {"train": 32, "validation": 16, "test": 16}
    assert {family(t) for t in BENCHMARK.tasks} == set(FAMILIES)
    for name in FAMILIES:
        members = [t for t in BENCHMARK.tasks if family(t) == name]
        assert Counter(t.split for t in members) == {"train": 4, "validation": 2, "test": 2}, name
        assert len({t.instruction for t in members}) == 8, f"{name}: instructions repeat"
    for split in SPLITS:
        assert len(BENCHMARK.split(split)) == {"train": 32, "validation": 16, "test": 16}[split]


def test_ids_and_tags() -> None:
    ids = [t.id for t in BENCHMARK.tasks]
    assert len(set(ids)) == len(ids)
    for task in BENCHMARK.tasks:
        assert len(task.tags) == 1
        assert re.fullmatch(rf"{re.escape(family(task))}-0[1-8]", task.id), task.id


def test_check_types_cover_file_and_command() -> None:
    kinds: dict[str, set[str]] = {}
    for task in BENCHMARK.tasks:
        kinds.setdefault(family(task), set()).update(c.type for c in task.checks)
    assert sum(kinds[f] == {"file"} for f in FAMILIES) >= 2
    assert any("command" in kinds[f] for f in FAMILIES)
    for task in BENCHMARK.tasks:
        if any(c.type == "answer" for c in task.checks):
            assert task.answer is not None, task.id


def test_committed_files_match_the_generator(tmp_path: Path) -> None:
    generator = load_generator()
    written = generator.write_tasks(tmp_path)
    committed = BENCHMARK.root / "tasks"
    assert sorted(p.name for p in written) == sorted(p.name for p in committed.glob("*.yaml"))
    for path in written:
        assert path.read_text() == (committed / path.name).read_text(), (
            f"{path.name} is stale: rerun benchmarks/shell-basics/generate.py"
        )


def test_generator_is_deterministic() -> None:
    generator = load_generator()
    assert generator.build_tasks() == generator.build_tasks()


@pytest.mark.parametrize("task", BENCHMARK.tasks, ids=lambda t: t.id)
def test_answer_not_in_instruction(task: Task) -> None:
    if task.answer is not None:
        assert not re.search(rf"\b{re.escape(task.answer)}\b", task.instruction)


# --- gold solutions --------------------------------------------------------------------------


@pytest.mark.parametrize("task", BENCHMARK.tasks, ids=lambda t: t.id)
def test_gold_solves_the_task(task: Task, tmp_path: Path) -> None:
    assert 2 <= len(task.gold) <= 3
    assert all(call.tool in TOOLS for call in task.gold)
    assert task.gold[-1].tool == "submit"
    assert all(call.tool != "submit" for call in task.gold[:-1])

    prepare(task, tmp_path)
    tools = LocalTools(tmp_path)
    observations = [tools.call(call.tool, call.arguments) for call in task.gold]
    assert not any("[exit code" in obs for obs in observations), observations

    result = run_checks(task, tmp_path, tools.answer, timeout_s=10)
    assert result.passed, [d.message for d in result.failures]
    if task.answer is not None:
        assert tools.answer == task.answer
        seen = "\n".join(observations[:-1])
        assert task.answer in seen, "the submitted answer must come from what the tools showed"


@pytest.mark.parametrize("task", BENCHMARK.tasks, ids=lambda t: t.id)
def test_wrong_submission_fails(task: Task, tmp_path: Path) -> None:
    prepare(task, tmp_path)
    result = run_checks(task, tmp_path, "wrong", timeout_s=10)
    assert not result.passed
    assert result.score < 1.0

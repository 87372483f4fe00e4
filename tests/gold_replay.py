"""Test helpers for the generated benchmarks (``tests/benchmarks/``): their shared shape checks, their
generator, and a small local copy of the agent's four tools to replay gold (and other) calls with.

The tools have the agent loop's semantics; after a replay, the task's own checks score the result.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType

from harnessevolve.core import paths
from harnessevolve.core.tasks import SPLITS, Benchmark, Task
from harnessevolve.evaluate.checkers import CheckResult, run_checks
from harnessevolve.scoring.sandboxed_checks import sandboxed_runner

TOOLS = ("bash", "read_file", "write_file", "submit")
PER_FAMILY = {"train": 4, "validation": 2, "test": 2}
"""Instances of each family in each split (8 in all, one instruction each)."""


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
    """Set ``workspace`` up as the task's setup says (files, then commands)."""
    for rel, content in task.setup_files.items():
        target = workspace / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content, encoding="utf-8")
    for command in task.setup_commands:
        subprocess.run(["bash", "-c", command], cwd=workspace, check=True, capture_output=True)


def replay(
    task: Task, workspace: Path, calls: Iterable[tuple[str, dict[str, str]]]
) -> tuple[LocalTools, list[str], CheckResult]:
    """Prepare ``workspace``, run ``calls`` (tool, arguments) in it, then score it with the task's checks.

    Returns the tools (``.answer`` is what was submitted, if anything), each call's observation, and
    the checks' result.
    """
    prepare(task, workspace)
    tools = LocalTools(workspace)
    observations = [tools.call(tool, arguments) for tool, arguments in calls]
    return (
        tools,
        observations,
        run_checks(task, workspace, tools.answer, timeout_s=10, runner=sandboxed_runner()),
    )


def replay_gold(task: Task, workspace: Path) -> tuple[str | None, list[str]]:
    """Replay the task's gold calls: none may fail, the checks must pass. Returns (answer, observations)."""
    tools, observations, result = replay(task, workspace, [(c.tool, c.arguments) for c in task.gold])
    assert not any("[exit code" in obs for obs in observations), observations
    assert result.passed, [d.message for d in result.failures]
    return tools.answer, observations


def assert_untouched_fails(task: Task, workspace: Path, answer: str | None) -> None:
    """The freshly set-up workspace with ``answer`` submitted does not pass, not even in part."""
    prepare(task, workspace)
    result = run_checks(task, workspace, answer, timeout_s=10, runner=sandboxed_runner())
    assert not result.passed, (task.id, answer)
    assert result.score < 1.0, (task.id, answer)


def family(task: Task) -> str:
    return task.tags[0]


def assert_families_splits_and_ids(benchmark: Benchmark, families: tuple[str, ...]) -> None:
    """Eight tasks a family (4 train, 2 validation, 2 test, no instruction twice), each tagged with
    just its family, with unique ids ``<family>-01`` .. ``-08``."""
    totals = {split: count * len(families) for split, count in PER_FAMILY.items()}
    splits = Counter(t.split for t in benchmark.tasks)
    assert len(benchmark.tasks) == 8 * len(families), len(benchmark.tasks)
    assert splits == totals, splits
    assert {family(t) for t in benchmark.tasks} == set(families), {family(t) for t in benchmark.tasks}
    for name in families:
        members = [t for t in benchmark.tasks if family(t) == name]
        assert Counter(t.split for t in members) == PER_FAMILY, (name, Counter(t.split for t in members))
        assert len({t.instruction for t in members}) == 8, f"{name}: instructions repeat"
    for split in SPLITS:
        assert len(benchmark.split(split)) == totals[split], split
    ids = [t.id for t in benchmark.tasks]
    assert len(set(ids)) == len(ids), sorted(i for i in ids if ids.count(i) > 1)
    for task in benchmark.tasks:
        assert len(task.tags) == 1, task.id
        assert re.fullmatch(rf"{re.escape(family(task))}-0[1-8]", task.id), task.id


def check_types(benchmark: Benchmark) -> dict[str, set[str]]:
    """Each family's check types."""
    kinds: dict[str, set[str]] = {}
    for task in benchmark.tasks:
        kinds.setdefault(family(task), set()).update(c.type for c in task.checks)
    return kinds


def load_generator(benchmark: str) -> ModuleType:
    """``benchmarks/<benchmark>/generate.py`` as a module; its ``taskgen`` is the shared plumbing."""
    path = paths.builtin_dir("benchmarks") / benchmark / "generate.py"
    spec = importlib.util.spec_from_file_location(f"{benchmark.replace('-', '_')}_generate", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def assert_generator_reproduces(benchmark: Benchmark, out: Path) -> None:
    """The generator is deterministic and, writing to ``out``, writes exactly the committed files."""
    generator = load_generator(benchmark.name)
    docs = generator.build_tasks()
    assert docs == generator.build_tasks(), "two runs of the generator differ"
    written = generator.taskgen.write_tasks(benchmark.name, docs, out)
    committed = benchmark.root / "tasks"
    names, committed_names = {p.name for p in written}, {p.name for p in committed.glob("*.yaml")}
    assert names == committed_names, (sorted(names - committed_names), sorted(committed_names - names))
    for path in written:
        assert path.read_text() == (committed / path.name).read_text(), (
            f"{path.name} is stale: rerun benchmarks/{benchmark.name}/generate.py"
        )

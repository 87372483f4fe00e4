"""The shell-onecall benchmark: its shape, its generator, and every gold solution replayed for real.

Gold calls run through a small local copy of the agent's four tools (same semantics as the agent
loop's), then the task's own checks score the result. Beyond the gold, each task is also scored
after the states a small model really leaves: the one call without a submit, the call repeated,
an equivalent call by another tool, and a plausible wrong call.
"""

from __future__ import annotations

import importlib.util
import re
import shlex
import subprocess
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

from harnessevolve.core import paths
from harnessevolve.core.tasks import SPLITS, GoldCall, Task, load_benchmark
from harnessevolve.evaluate.checkers import run_checks

BENCHMARK = load_benchmark("shell-onecall")
FAMILIES = (
    "make-dir",
    "write-file",
    "copy-file",
    "move-into-dir",
    "delete-file",
    "append-line",
    "rename-file",
    "make-empty-file",
)
TOOLS = ("bash", "read_file", "write_file", "submit")
SHELL_WORDS = {"mkdir", "-p", "&&", "mv", "cp", "rm", "touch", "echo", ">>"}
"""Command words a gold call may use that the instruction need not name."""


def load_generator() -> ModuleType:
    path = paths.builtin_dir("benchmarks") / "shell-onecall" / "generate.py"
    spec = importlib.util.spec_from_file_location("shell_onecall_generate", path)
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


def action(task: Task) -> GoldCall:
    """The one call that solves the task (the gold's first)."""
    return task.gold[0]


def passes_after(task: Task, workspace: Path, calls: list[tuple[str, dict[str, str]]]) -> bool:
    """Run ``calls`` in a fresh copy of the task's workspace; do its checks pass (no answer given)?"""
    prepare(task, workspace)
    tools = LocalTools(workspace)
    for tool, arguments in calls:
        tools.call(tool, arguments)
    return run_checks(task, workspace, tools.answer, timeout_s=10).passed


# --- shape -----------------------------------------------------------------------------------


def test_counts_per_split_and_family() -> None:
    assert len(BENCHMARK.tasks) == 64
    assert BENCHMARK.name == "shell-onecall"
    assert "one-call tier" in BENCHMARK.description
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


def test_checks_look_at_the_workspace_never_the_answer() -> None:
    kinds: dict[str, set[str]] = {}
    for task in BENCHMARK.tasks:
        assert task.answer is None, task.id
        kinds.setdefault(family(task), set()).update(c.type for c in task.checks)
    assert all(k <= {"file", "command"} for k in kinds.values()), kinds
    assert sum(kinds[f] == {"file"} for f in FAMILIES) >= 2
    assert sum("command" in kinds[f] for f in FAMILIES) >= 2
    for task in BENCHMARK.tasks:
        assert all("ANSWER" not in c.run for c in task.checks), task.id


def test_word_list_has_no_word_inside_another() -> None:
    words = load_generator().WORDS
    assert len(set(words)) == len(words)
    assert not [(a, b) for a in words for b in words if a != b and a in b]


def test_committed_files_match_the_generator(tmp_path: Path) -> None:
    generator = load_generator()
    written = generator.write_tasks(tmp_path)
    committed = BENCHMARK.root / "tasks"
    assert sorted(p.name for p in written) == sorted(p.name for p in committed.glob("*.yaml"))
    for path in written:
        assert path.read_text() == (committed / path.name).read_text(), (
            f"{path.name} is stale: rerun benchmarks/shell-onecall/generate.py"
        )


def test_generator_is_deterministic() -> None:
    generator = load_generator()
    assert generator.build_tasks() == generator.build_tasks()


@pytest.mark.parametrize("task", BENCHMARK.tasks, ids=lambda t: t.id)
def test_instruction_names_everything_the_call_needs(task: Task) -> None:
    call = action(task)
    if call.tool == "write_file":
        needed = [call.arguments["path"], call.arguments["content"].strip()]
    else:
        needed = [w.rstrip("/") for w in shlex.split(call.arguments["command"]) if w not in SHELL_WORDS]
    for item in needed:
        assert item in task.instruction, f"{item!r} is not named in the instruction"


# --- gold solutions --------------------------------------------------------------------------


@pytest.mark.parametrize("task", BENCHMARK.tasks, ids=lambda t: t.id)
def test_gold_solves_the_task(task: Task, tmp_path: Path) -> None:
    assert len(task.gold) == 2
    assert action(task).tool in TOOLS and action(task).tool != "submit"
    assert (task.gold[1].tool, task.gold[1].arguments) == ("submit", {"answer": "done"})

    prepare(task, tmp_path)
    tools = LocalTools(tmp_path)
    observations = [tools.call(call.tool, call.arguments) for call in task.gold]
    assert not any("[exit code" in obs for obs in observations), observations

    result = run_checks(task, tmp_path, tools.answer, timeout_s=10)
    assert result.passed, [d.message for d in result.failures]


@pytest.mark.parametrize("task", BENCHMARK.tasks, ids=lambda t: t.id)
def test_the_call_alone_passes_without_a_submit(task: Task, tmp_path: Path) -> None:
    call = action(task)
    assert passes_after(task, tmp_path, [(call.tool, call.arguments)])


@pytest.mark.parametrize("task", BENCHMARK.tasks, ids=lambda t: t.id)
def test_repeating_the_call_still_passes(task: Task, tmp_path: Path) -> None:
    call = action(task)
    assert passes_after(task, tmp_path, [(call.tool, call.arguments)] * 4)


@pytest.mark.parametrize("task", BENCHMARK.tasks, ids=lambda t: t.id)
def test_doing_nothing_fails(task: Task, tmp_path: Path) -> None:
    prepare(task, tmp_path)
    for answer in (None, "wrong", "done"):
        result = run_checks(task, tmp_path, answer, timeout_s=10)
        assert not result.passed
        assert result.score < 1.0


ALTERNATIVE_CALLS: dict[str, Callable[[GoldCall], tuple[str, dict[str, str]]]] = {
    "make-dir": lambda c: ("bash", {"command": c.arguments["command"].replace("mkdir ", "mkdir -p ")}),
    "write-file": lambda c: (
        "bash",
        {"command": f"echo '{c.arguments['content'].strip()}' > {c.arguments['path']}"},
    ),
    "make-empty-file": lambda c: (
        "write_file",
        {"path": shlex.split(c.arguments["command"])[-1], "content": ""},
    ),
}
"""The same effect by another tool, where a small model might reach for one."""


@pytest.mark.parametrize(
    "task", [t for t in BENCHMARK.tasks if family(t) in ALTERNATIVE_CALLS], ids=lambda t: t.id
)
def test_an_equivalent_call_passes(task: Task, tmp_path: Path) -> None:
    assert passes_after(task, tmp_path, [ALTERNATIVE_CALLS[family(task)](action(task))] * 2)


def _rewrite(old: str, new: str) -> Callable[[GoldCall], tuple[str, dict[str, str]]]:
    def wrong(call: GoldCall) -> tuple[str, dict[str, str]]:
        command = call.arguments["command"]
        assert old in command
        return "bash", {"command": command.replace(old, new, 1)}

    return wrong


WRONG_CALLS: dict[str, Callable[[GoldCall], tuple[str, dict[str, str]]]] = {
    "make-dir": _rewrite("mkdir ", "touch "),  # a file, not a folder
    "write-file": lambda c: ("write_file", {"path": c.arguments["path"], "content": "wrong\n"}),
    "copy-file": _rewrite("cp ", "mv "),  # the original is gone
    "move-into-dir": _rewrite(" mv ", " cp "),  # the original stays at the top level
    "delete-file": lambda c: ("bash", {"command": "rm -f -- *"}),  # the other files go too
    "append-line": _rewrite(">>", ">"),  # the original lines are lost
    "rename-file": _rewrite("mv ", "cp "),  # the old name stays
    "make-empty-file": _rewrite("touch ", "echo wrong > "),  # not empty
}


@pytest.mark.parametrize("task", BENCHMARK.tasks, ids=lambda t: t.id)
def test_a_plausible_wrong_call_fails(task: Task, tmp_path: Path) -> None:
    assert not passes_after(task, tmp_path, [WRONG_CALLS[family(task)](action(task))])


@pytest.mark.parametrize("task", BENCHMARK.split("train"), ids=lambda t: t.id)
def test_train_tasks_have_reference_trajectories(task: Task) -> None:
    assert (BENCHMARK.references_dir / f"{task.id}.json").is_file(), (
        "run: .venv/bin/harnessevolve refs import --benchmark shell-onecall"
    )

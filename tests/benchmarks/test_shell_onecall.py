"""The shell-onecall benchmark: its shape, its generator, and every gold solution replayed for real.

Gold calls run through a small local copy of the agent's four tools (``tests/gold_replay.py``, same
semantics as the agent loop's), then the task's own checks score the result. Beyond the gold, each
task is also scored after the states a small model really leaves: the one call without a submit,
the call repeated, an equivalent call by another tool, and a plausible wrong call.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from pathlib import Path

import pytest
from gold_replay import (
    TOOLS,
    assert_families_splits_and_ids,
    assert_generator_reproduces,
    assert_untouched_fails,
    check_types,
    family,
    load_generator,
    replay,
    replay_gold,
)

from harnessevolve.core.tasks import GoldCall, Task, load_benchmark

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
SHELL_WORDS = {"mkdir", "-p", "&&", "mv", "cp", "rm", "touch", "echo", ">>"}
"""Command words a gold call may use that the instruction need not name."""


def action(task: Task) -> GoldCall:
    """The one call that solves the task (the gold's first)."""
    return task.gold[0]


def passes_after(task: Task, workspace: Path, calls: list[tuple[str, dict[str, str]]]) -> bool:
    """Run ``calls`` in a fresh copy of the task's workspace; do its checks pass (no answer given)?"""
    return replay(task, workspace, calls)[2].passed


# --- shape -----------------------------------------------------------------------------------


def test_families_splits_ids_and_tags() -> None:
    assert BENCHMARK.name == "shell-onecall"
    assert "one-call tier" in BENCHMARK.description
    assert_families_splits_and_ids(BENCHMARK, FAMILIES)


def test_checks_look_at_the_workspace_never_the_answer() -> None:
    assert [t.id for t in BENCHMARK.tasks if t.answer is not None] == []
    kinds = check_types(BENCHMARK)
    assert all(k <= {"file", "command"} for k in kinds.values()), kinds
    assert sum(kinds[f] == {"file"} for f in FAMILIES) >= 2
    assert sum("command" in kinds[f] for f in FAMILIES) >= 2
    for task in BENCHMARK.tasks:
        assert all("ANSWER" not in c.run for c in task.checks), task.id


def test_word_list_has_no_word_inside_another() -> None:
    words = load_generator("shell-onecall").taskgen.WORDS
    assert len(set(words)) == len(words)
    assert not [(a, b) for a in words for b in words if a != b and a in b]


def test_generator_is_deterministic_and_matches_the_committed_files(tmp_path: Path) -> None:
    assert_generator_reproduces(BENCHMARK, tmp_path)


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

    replay_gold(task, tmp_path)


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
    for answer in (None, "wrong", "done"):
        assert_untouched_fails(task, tmp_path, answer)


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

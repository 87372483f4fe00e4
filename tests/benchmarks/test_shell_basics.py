"""The shell-basics benchmark: its shape, its generator, and every gold solution replayed for real.

Gold calls run through a small local copy of the agent's four tools (``tests/gold_replay.py``, same
semantics as the agent loop's), then the task's own checks score the result.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from gold_replay import (
    TOOLS,
    assert_families_splits_and_ids,
    assert_generator_reproduces,
    assert_untouched_fails,
    check_types,
    replay_gold,
)

from harnessevolve.core.tasks import Task, load_benchmark

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


# --- shape -----------------------------------------------------------------------------------


def test_families_splits_ids_and_tags() -> None:
    assert BENCHMARK.name == "shell-basics"
    assert BENCHMARK.description
    assert_families_splits_and_ids(BENCHMARK, FAMILIES)


def test_check_types_cover_file_and_command() -> None:
    kinds = check_types(BENCHMARK)
    assert sum(kinds[f] == {"file"} for f in FAMILIES) >= 2
    assert any("command" in kinds[f] for f in FAMILIES)
    for task in BENCHMARK.tasks:
        if any(c.type == "answer" for c in task.checks):
            assert task.answer is not None, task.id


def test_generator_is_deterministic_and_matches_the_committed_files(tmp_path: Path) -> None:
    assert_generator_reproduces(BENCHMARK, tmp_path)


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

    answer, observations = replay_gold(task, tmp_path)
    if task.answer is not None:
        assert answer == task.answer
        seen = "\n".join(observations[:-1])
        assert task.answer in seen, "the submitted answer must come from what the tools showed"


@pytest.mark.parametrize("task", BENCHMARK.tasks, ids=lambda t: t.id)
def test_wrong_submission_fails(task: Task, tmp_path: Path) -> None:
    assert_untouched_fails(task, tmp_path, "wrong")

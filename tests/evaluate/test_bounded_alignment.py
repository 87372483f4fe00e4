"""Bounded alignment: past the full table's size the banded alignment is used, costs the same on
runs that differ by exact steps, and its memory grows with n + m, not n * m."""

from __future__ import annotations

import pytest

from harnessevolve.core.atif import Step, ToolCall, Trajectory
from harnessevolve.evaluate.alignment import align
from harnessevolve.evaluate.bounded_alignment import align_bounded


def run_of(commands: list[str]) -> Trajectory:
    steps = [Step(1, "user", "Do the task.")]
    for i, command in enumerate(commands):
        call = ToolCall(f"c{i}", "submit" if command == "SUBMIT" else "bash", {"command": command})
        steps.append(Step(len(steps) + 1, "agent", "", tool_calls=(call,)))
    return Trajectory("s", "a", "1", "m", tuple(steps))


def shape(rows) -> list[tuple[str | None, str | None, bool]]:
    return [
        (
            r.run.arguments["command"] if r.run else None,
            r.reference.arguments["command"] if r.reference else None,
            r.match,
        )
        for r in rows
    ]


REFERENCE = [f"step {i}" for i in range(30)] + ["SUBMIT"]


@pytest.mark.parametrize(
    "run",
    [
        REFERENCE,
        REFERENCE[:10] + ["extra"] + REFERENCE[10:],
        REFERENCE[:10] + REFERENCE[11:],
        REFERENCE[:5] + ["other"] + REFERENCE[6:],
        REFERENCE[:12],
    ],
    ids=["identical", "extra-step", "skipped-step", "changed-step", "stopped-early"],
)
def test_banded_matches_the_full_alignment(run: list[str]) -> None:
    full = align(run_of(run), run_of(REFERENCE))
    banded = align_bounded(run_of(run), run_of(REFERENCE), max_cells=0)
    assert banded.banded
    assert shape(banded.rows) == shape(full)


def test_small_trajectories_use_the_full_table() -> None:
    result = align_bounded(run_of(REFERENCE), run_of(REFERENCE))
    assert not result.banded
    assert result.cells == 32 * 32


def test_long_trajectories_fill_cells_linear_in_their_length() -> None:
    long = [f"cmd {i}" for i in range(20_000)]
    result = align_bounded(run_of(long[:100] + long[101:]), run_of(long))
    assert result.banded
    assert result.cells < 30 * 20_000  # the full table would be 400 million cells
    assert sum(not r.match for r in result.rows) == 1
    assert len(result.rows) == 20_000


def test_very_unequal_lengths_still_align() -> None:
    result = align_bounded(run_of(["cmd 0"]), run_of([f"cmd {i}" for i in range(5_000)]), max_cells=0)
    assert [r.match for r in result.rows].count(True) == 1
    assert len(result.rows) == 5_000

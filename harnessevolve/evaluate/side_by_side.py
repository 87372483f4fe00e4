"""The run and its reference laid out side by side, action by action (what ``diff`` prints).

A global alignment: the fewest unmatched actions, a changed argument costing less than a changed
tool. Display only: ``alignment.first_divergence`` decides the divergent step.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from harnessevolve.core.atif import Trajectory
from harnessevolve.evaluate.actions import Action, read_actions
from harnessevolve.evaluate.call_match import difference
from harnessevolve.evaluate.tool_schemas import offered_tools


@dataclass(frozen=True)
class AlignedRow:
    """One row of a full alignment: a run action, a reference action, or both side by side."""

    run: Action | None
    reference: Action | None
    reference_index: int | None
    """1-based index of ``reference`` among the reference's actions."""
    match: bool


GAP_COST, SAME_TOOL_COST, OTHER_TOOL_COST = 1.0, 1.0, 1.5


def align(
    trajectory: Trajectory, reference: Trajectory, *, tools: Iterable[Any] | None = None
) -> list[AlignedRow]:
    """Every action of the run against every action of the reference (a global alignment: the
    fewest unmatched actions, a changed argument costing less than a changed tool), for display.

    ``first_divergence`` is what decides the divergent step; this only lays the two runs out.
    """
    offered = offered_tools(trajectory, reference, tools=tools)
    run = list(read_actions(trajectory, offered).actions)
    ref = [a for a in read_actions(reference, offered).actions if a.kind != "malformed"]
    n, m = len(run), len(ref)

    def same(a: Action, b: Action) -> bool:
        return difference(a, b, offered.get(b.tool)) is None

    def pair_cost(a: Action, b: Action) -> float:
        if same(a, b):
            return 0.0
        return SAME_TOOL_COST if a.tool == b.tool else OTHER_TOOL_COST

    cost = [[0.0] * (m + 1) for _ in range(n + 1)]
    for i in range(n + 1):
        for j in range(m + 1):
            if i == 0 or j == 0:
                cost[i][j] = (i + j) * GAP_COST
                continue
            cost[i][j] = min(
                cost[i - 1][j - 1] + pair_cost(run[i - 1], ref[j - 1]),
                cost[i - 1][j] + GAP_COST,
                cost[i][j - 1] + GAP_COST,
            )
    rows: list[AlignedRow] = []
    i, j = n, m
    while i or j:
        if i and j and cost[i][j] == cost[i - 1][j - 1] + pair_cost(run[i - 1], ref[j - 1]):
            rows.append(AlignedRow(run[i - 1], ref[j - 1], j, same(run[i - 1], ref[j - 1])))
            i, j = i - 1, j - 1
        elif i and cost[i][j] == cost[i - 1][j] + GAP_COST:
            rows.append(AlignedRow(run[i - 1], None, None, False))
            i -= 1
        else:
            rows.append(AlignedRow(None, ref[j - 1], j, False))
            j -= 1
    return rows[::-1]

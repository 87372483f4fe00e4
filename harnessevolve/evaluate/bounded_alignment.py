"""Alignment of trajectories of any length in bounded memory and time.

``alignment.align`` fills a full (n+1) x (m+1) table, comparing every run action with every
reference action by argument similarity: right for display, but two 100 MB trajectories
(160,000 actions each) would need 25 billion cells. Past ``MAX_FULL_CELLS`` pairs,
``align_bounded`` aligns within a band around the diagonal instead (a banded global alignment:
the same costs, cells only where ``|j - i*m/n| <= band``, so memory and time grow with n + m),
and two actions match there when their tool and normalised arguments are equal (a hash compare,
not a similarity). ``first_divergence`` is linear and unaffected; only the side-by-side layout
is approximated for such sizes.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from harnessevolve.core.atif import Trajectory
from harnessevolve.evaluate.alignment import (
    GAP_COST,
    OTHER_TOOL_COST,
    SAME_TOOL_COST,
    Action,
    AlignedRow,
    actions,
    align,
)

MAX_FULL_CELLS = 4_000_000
"""Largest (n+1) x (m+1) table ``align`` fills (about 2,000 x 2,000 actions)."""
BAND = 8
"""Half-width of the band, in reference actions, beyond the diagonal's own slope."""

DIAGONAL, UP, LEFT = 0, 1, 2


@dataclass(frozen=True)
class BoundedAlignment:
    rows: list[AlignedRow]
    banded: bool
    """True when the trajectories were too long for the full table (the band was used)."""
    cells: int
    """Cells of the table that was filled."""


def align_bounded(
    trajectory: Trajectory,
    reference: Trajectory,
    *,
    max_cells: int = MAX_FULL_CELLS,
    band: int = BAND,
    tools: Iterable[Any] | None = None,
) -> BoundedAlignment:
    """``align`` when the full table has at most ``max_cells`` cells, else a banded alignment.
    ``tools``: tool definitions, as for ``align``."""
    run, ref = actions(trajectory, tools), [a for a in actions(reference, tools) if a.kind != "malformed"]
    n, m = len(run), len(ref)
    if (n + 1) * (m + 1) <= max_cells:
        return BoundedAlignment(align(trajectory, reference, tools=tools), False, (n + 1) * (m + 1))
    rows, cells = banded_align(run, ref, band)
    return BoundedAlignment(rows, True, cells)


def _norm(value: Any) -> str:
    return re.sub(r"\s+", " ", str(value)).strip()


def _key(action: Action) -> str:
    """What must be equal for two actions to match in the band: tool and whitespace-normalised
    arguments (a submitted answer also case-folded)."""
    args = {k: _norm(v) for k, v in action.arguments.items()}
    if action.tool == "submit":
        args = {"answer": args.get("answer", "").lower()}
    return f"{action.tool}\0{json.dumps(args, sort_keys=True, ensure_ascii=False)}"


MAX_BAND_CELLS = 8_000_000
"""Cells the diagonal band may fill; past it the band follows the slope m/n instead."""


def _band(n: int, m: int, band: int) -> Callable[[int], tuple[int, int]]:
    """Row i's columns [low, high]: every path with at most ``band`` off-diagonal moves beyond the
    length difference (a run that stops early, or runs on, aligns exactly) -- or, when that strip
    is too wide, a strip of ``band`` around the line from (0, 0) to (n, m)."""
    below, above = band + max(0, n - m), band + max(0, m - n)
    if (n + 1) * (below + above + 1) <= MAX_BAND_CELLS:
        return lambda i: (max(0, i - below), min(m, i + above))
    width = band + (math.ceil(m / n) if n else m)  # consecutive rows' strips always overlap
    slope = m / n if n else 0.0

    def sloped(i: int) -> tuple[int, int]:
        centre = round(i * slope) if i < n else m
        return max(0, centre - width), m if i == n else min(m, centre + width)

    return sloped


def banded_align(run: list[Action], ref: list[Action], band: int = BAND) -> tuple[list[AlignedRow], int]:
    """A global alignment restricted to cells near the diagonal; (rows, cells filled)."""
    n, m = len(run), len(ref)
    run_keys, ref_keys = [_key(a) for a in run], [_key(a) for a in ref]
    bounds = _band(n, m, band)
    lows: list[int] = []
    steps: list[bytearray] = []
    previous: list[float] = []
    previous_low = 0
    inf = math.inf
    for i in range(n + 1):
        low, high = bounds(i)
        row_cost = [inf] * (high - low + 1)
        row_step = bytearray(high - low + 1)
        for j in range(low, high + 1):
            k = j - low
            if i == 0:
                row_cost[k], row_step[k] = j * GAP_COST, LEFT
                continue
            best, step = inf, DIAGONAL
            p = j - 1 - previous_low
            if j > 0 and 0 <= p < len(previous):
                a, b = run[i - 1], ref[j - 1]
                pair = (
                    0.0
                    if run_keys[i - 1] == ref_keys[j - 1]
                    else (SAME_TOOL_COST if a.tool == b.tool else OTHER_TOOL_COST)
                )
                best = previous[p] + pair
            p = j - previous_low
            if 0 <= p < len(previous) and previous[p] + GAP_COST < best:
                best, step = previous[p] + GAP_COST, UP
            if k > 0 and row_cost[k - 1] + GAP_COST < best:
                best, step = row_cost[k - 1] + GAP_COST, LEFT
            row_cost[k], row_step[k] = best, step
        lows.append(low)
        steps.append(row_step)
        previous, previous_low = row_cost, low
    rows: list[AlignedRow] = []
    i, j = n, m
    while i or j:
        step = steps[i][j - lows[i]] if i else LEFT
        if step == DIAGONAL and i and j:
            rows.append(AlignedRow(run[i - 1], ref[j - 1], j, run_keys[i - 1] == ref_keys[j - 1]))
            i, j = i - 1, j - 1
        elif step == UP and i:
            rows.append(AlignedRow(run[i - 1], None, None, False))
            i -= 1
        else:
            rows.append(AlignedRow(None, ref[j - 1], j, False))
            j -= 1
    return rows[::-1], sum(len(s) for s in steps)

"""The headroom section ``run`` and ``report`` print for a run with no net change or a small one."""

from __future__ import annotations

from collections.abc import Sequence

from harnessevolve.cli.ui import console
from harnessevolve.report.headroom import Headroom, headroom, headroom_lines, wanted
from harnessevolve.runs import events as ev


def run_headroom(events: Sequence[ev.Event]) -> Headroom | None:
    """The run's headroom when it is worth showing (no net change, or a small one), else None."""
    return headroom(events) if wanted(events) else None


def print_headroom(room: Headroom) -> None:
    console.print("headroom (what the evidence says could still help):", style="bold", markup=False)
    for line in headroom_lines(room):
        console.print(f"  {line}", markup=False, soft_wrap=True)

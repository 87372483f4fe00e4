"""Whether a benchmark's train split has reference trajectories, and what their absence costs."""

from __future__ import annotations

from typing import Any

from harnessevolve.core.tasks import Benchmark


def missing_references_warning(benchmark: Benchmark, references: dict[str, Any]) -> str | None:
    """One line for a run to show once at its start when no train task has a reference; None when
    some do (or there are no train tasks)."""
    train = benchmark.split("train")
    if not train or any(t.id in references for t in train):
        return None
    return (
        f"no reference trajectories for the {len(train)} train tasks of {benchmark.name}: failed runs "
        "get no first divergent step, only a generic signal, so the proposers fall back to generic "
        f"rules; build them with `harnessevolve refs import -b {benchmark.root}` (gold solutions) or "
        "`refs generate`"
    )

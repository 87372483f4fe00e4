"""Whether a benchmark's train split has reference trajectories, and what their absence costs."""

from __future__ import annotations

from typing import Any

from harnessevolve.core import paths
from harnessevolve.core.tasks import Benchmark


def benchmark_spec(benchmark: Benchmark) -> str:
    """What to pass as ``-b`` to name this benchmark again: an adapter's spec (``nl2bash:5``), a
    built-in suite's name, else the suite's folder."""
    source = getattr(benchmark, "source", "")
    if source:
        return str(source)
    if paths.is_builtin(benchmark.root):
        return benchmark.name
    return str(benchmark.root)


def missing_references_warning(benchmark: Benchmark, references: dict[str, Any]) -> str | None:
    """One line for a run to show once at its start when no train task has a reference; None when
    some do (or there are no train tasks). The command it names writes where ``run`` reads (the
    suite's folder, or the user's reference folder when that one is read-only)."""
    train = benchmark.split("train")
    if not train or any(t.id in references for t in train):
        return None
    spec = benchmark_spec(benchmark)
    lead = (
        f"no reference trajectories for the {len(train)} train tasks of {benchmark.name}: failed runs "
        "get no first divergent step, only a generic signal, so the proposers fall back to generic rules"
    )
    if any(t.gold for t in train):
        return f"{lead}; build them from the tasks' gold solutions with `harnessevolve refs import -b {spec}`"
    return (
        f"{lead}. Its tasks have no gold solutions: let the agent make them with the answer as a hint, "
        f"`harnessevolve refs generate -b {spec}`, or import successful runs with "
        f"`harnessevolve refs import -b {spec} --from-atif FILE...`"
    )

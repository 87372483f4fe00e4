"""What an evolve arm's run really used once every default was filled in: the proposer chain, the
failure detectors the deterministic proposers act on, the gates (the content of the gates file, not
its path) and every other run option (a digest). A plan names only the options it sets, so without
this a default changed between two days of one table (the default gates, a proposer added to
``auto``) would make cells of one arm that are not the same experiment, and merge them unnoticed.

Recorded in each evolve cell's result file (``arm.resolved``), compared on ``compare run --resume``
and on ``compare merge``. Code changes inside a proposer are not seen here: the cell's
``harnessevolve.commit`` records those; run a table's cells from one commit.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harnessevolve.compare.identity import digest

if TYPE_CHECKING:
    from harnessevolve.compare.arm_spec import Arm
    from harnessevolve.compare.plan import Plan

PER_CELL = ("harness_dir", "benchmark", "model", "seed", "gates_file", "sandbox_ro", "adapters")
"""Run options that are not the arm's: the cell's folder and seed, the plan's benchmark and model
(compared on their own), paths that differ between machines (the gates file: its content is
compared instead)."""


def resolved_defaults(plan: Plan, arm: Arm) -> dict[str, Any] | None:
    """``proposers``, ``detectors``, ``gates`` (its source name and a digest of its content) and
    ``options`` (a digest of the run's options, defaults included); None for other arm kinds."""
    if arm.kind != "evolve":
        return None
    from harnessevolve.compare.evolve_cell import run_config
    from harnessevolve.gate.config import load_gate_config
    from harnessevolve.optimize.registry import resolved_names
    from harnessevolve.optimize.trajectory_patterns import DETECTORS

    config = run_config(plan, arm, 0, plan.harness.path)
    flat = config.to_json()
    names = resolved_names(flat.get("proposers") or (), flat.get("optimizer_model"))
    gates = asdict(load_gate_config(flat.get("gates_file")))
    source = gates.pop("source", None)
    options = {k: v for k, v in flat.items() if k not in PER_CELL}
    return {
        "proposers": names,
        "detectors": [d.__name__ for d in DETECTORS],
        "gates": {"source": Path(source).name if source else None, "sha": digest(gates)},
        "options": digest(options),
    }

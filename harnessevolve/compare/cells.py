"""Cells: one (arm, seed) of a plan each, with its own folder under the output folder.

    OUT/.gitignore                       work/ and cache/ stay out of a commit of OUT
    OUT/plan.yaml                        the plan as last run
    OUT/cells/<arm>/seed-<n>/result.json the finished cell (the only file worth committing)
    OUT/cells/<arm>/seed-<n>/work/       its harness, run, trajectories (ignored)
    OUT/cache/rollouts/                  the rollout cache every cell's test scoring shares

A cell is finished when its result file exists. ``--cells`` picks cells with selectors such as
``seed=0``, ``arm=evolve`` or ``arm=evolve,seed=1`` (all conditions of one selector hold; a cell
picked by any selector runs).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from harnessevolve.compare.arm_spec import Arm
from harnessevolve.compare.plan import Plan
from harnessevolve.compare.results import RESULT_FILE
from harnessevolve.core.errors import HarnessEvolveError

CELLS_DIR = "cells"
WORK_DIR = "work"
CACHE_DIR = "cache"
IGNORED = f"{CELLS_DIR}/*/*/{WORK_DIR}/\n{CACHE_DIR}/\n"
"""OUT/.gitignore: the result files and the plan are what a comparison commits."""
SELECTOR_KEYS = ("arm", "seed", "kind")


class CellSelectionError(HarnessEvolveError):
    """``--cells`` names no cell, or a key cells do not have."""

    default_hint = "e.g. --cells seed=0, --cells arm=evolve, --cells arm=evolve,seed=1 (repeatable)"


@dataclass(frozen=True)
class Cell:
    arm: Arm
    seed: int

    @property
    def id(self) -> str:
        return f"{self.arm.name}/seed-{self.seed}"

    def folder(self, out: Path) -> Path:
        return out / CELLS_DIR / self.arm.name / f"seed-{self.seed}"

    def result_file(self, out: Path) -> Path:
        return self.folder(out) / RESULT_FILE

    def work(self, out: Path) -> Path:
        return self.folder(out) / WORK_DIR

    def matches(self, selector: dict[str, str]) -> bool:
        values = {"arm": self.arm.name, "seed": str(self.seed), "kind": self.arm.kind}
        return all(values[key] == value for key, value in selector.items())


def plan_cells(plan: Plan) -> list[Cell]:
    """Every cell, seed by seed; within a seed the arms in plan order, best-of-k arms last (their
    k is matched to an evolve cell of the same seed, which runs first)."""
    ordered = [a for a in plan.arms if a.kind != "best-of-k"] + [
        a for a in plan.arms if a.kind == "best-of-k"
    ]
    return [Cell(arm, seed) for seed in plan.seeds for arm in ordered]


def parse_selector(text: str) -> dict[str, str]:
    selector: dict[str, str] = {}
    for part in text.split(","):
        key, sep, value = part.strip().partition("=")
        if not sep or not value.strip() or key.strip() not in SELECTOR_KEYS:
            raise CellSelectionError(
                f"{text!r} is not a cell selector (KEY=VALUE with KEY one of {', '.join(SELECTOR_KEYS)})",
                field="--cells",
            )
        selector[key.strip()] = value.strip()
    return selector


def select_cells(cells: Sequence[Cell], selectors: Sequence[str]) -> list[Cell]:
    """The cells any selector picks (every cell when there is none), in their order."""
    if not selectors:
        return list(cells)
    parsed = [(text, parse_selector(text)) for text in selectors]
    for text, selector in parsed:
        if not any(c.matches(selector) for c in cells):
            arms = sorted({c.arm.name for c in cells})
            seeds = sorted({c.seed for c in cells})
            raise CellSelectionError(
                f"{text!r} picks no cell of the plan",
                field="--cells",
                hint=f"arms: {', '.join(arms)}; seeds: {', '.join(map(str, seeds))}",
            )
    return [c for c in cells if any(c.matches(s) for _, s in parsed)]


def finished(cell: Cell, out: Path) -> bool:
    return cell.result_file(out).is_file()


def has_cells(out: Path) -> bool:
    """Whether ``out`` holds cell folders already (a comparison ran there)."""
    folder = out / CELLS_DIR
    return folder.is_dir() and any(folder.iterdir())

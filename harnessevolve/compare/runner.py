"""Running a comparison's cells one after the other.

Everything is checked before the first cell starts: the output folder (a folder holding cells is
only gone on with ``--resume``), the ``--cells`` selection, the finished cells (each must come from
this plan: same benchmark slice, model, scorer, seed harness and arm definition), and that each
best-of-k cell's evolve cell is finished or runs before it. A cell's result file is written only
when the cell finished; a killed cell has none, and ``--resume`` runs it again (an evolve cell's
run is resumed from its ledger, and the rollout cache serves what already ran). ``max_hours`` and
``max_cost_usd`` (what this invocation's finished cells cost) stop between cells.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from harnessevolve.compare.arms import CellContext, Progress, run_arm
from harnessevolve.compare.cells import (
    CACHE_DIR,
    IGNORED,
    Cell,
    finished,
    has_cells,
    plan_cells,
    select_cells,
)
from harnessevolve.compare.identity import (
    benchmark_identity,
    model_identity,
    package_identity,
    scorer_identity,
)
from harnessevolve.compare.merge import MergeRefused, first_difference, result_files, value_at
from harnessevolve.compare.plan import Plan
from harnessevolve.compare.results import CellResult, read_result, write_result
from harnessevolve.core.containment import check_output_path
from harnessevolve.core.errors import HarnessEvolveError
from harnessevolve.core.files import atomic_write_json, atomic_write_text, read_json

PLAN_COPY = "plan.yaml"
ATTEMPTS_FILE = "attempts.json"


class CompareError(HarnessEvolveError):
    """A comparison cannot start as asked (its output folder, its cells)."""


@dataclass(frozen=True)
class CellDone:
    """A cell that just finished: its result, its place in this invocation, the time so far."""

    result: CellResult
    index: int
    total: int
    elapsed_s: float
    eta_s: float | None
    """Estimated seconds until the last selected cell ends (the mean cell time so far)."""


@dataclass(frozen=True)
class Comparison:
    out: Path
    ran: tuple[str, ...]
    skipped: tuple[str, ...]
    """Selected cells finished before this invocation (``--resume``)."""
    left: tuple[str, ...] = ()
    """Selected cells not run: ``max_hours`` stopped the comparison before them."""
    stopped: str | None = None
    elapsed_s: float = 0.0
    cost_usd: float = 0.0
    """What this invocation's cells cost (``max_cost_usd`` counts it)."""


@dataclass(frozen=True)
class Expected:
    """What every cell of a plan records about what it measured (compared on ``--resume``)."""

    benchmark: dict[str, Any]
    model: dict[str, Any]
    scorer: dict[str, Any]
    seed_harness: str
    resolved: dict[str, dict[str, Any]]
    """Each evolve arm's resolved defaults (``compare/resolved.py``), by arm name."""

    @classmethod
    def of(cls, plan: Plan) -> Expected:
        from harnessevolve.compare.resolved import resolved_defaults
        from harnessevolve.harness.load import load_harness

        resolved = {a.name: resolved_defaults(plan, a) for a in plan.arms}
        package_identity()  # the commit read as the comparison starts (cached): a checkout moved
        # while a cell runs must not name code the process never loaded
        return cls(
            benchmark_identity(plan.suite, plan.benchmark_given),
            model_identity(plan.model),
            scorer_identity(plan.execution, plan.suite),
            load_harness(plan.harness.path).content_hash(),
            {name: doc for name, doc in resolved.items() if doc is not None},
        )

    def shared(self) -> dict[str, Any]:
        """What every cell of the plan shares (``recorded`` of its result, less the arm)."""
        return {
            "benchmark": {k: self.benchmark[k] for k in ("name", "test_tasks", "test_sha")},
            "model": self.model,
            "scorer": self.scorer,
            "seed_harness": self.seed_harness,
        }

    def of_cell(self, cell: Cell) -> dict[str, Any]:
        arm: dict[str, Any] = {"kind": cell.arm.kind, "config": cell.arm.config()}
        if cell.arm.kind == "evolve":
            arm["resolved"] = self.resolved.get(cell.arm.name)
        return {**self.shared(), "arm": arm}


def recorded(result: CellResult) -> dict[str, Any]:
    arm: dict[str, Any] = {"kind": result.kind, "config": result.arm_config}
    if result.kind == "evolve":
        arm["resolved"] = result.resolved
    return {
        "benchmark": {k: result.benchmark.get(k) for k in ("name", "test_tasks", "test_sha")},
        "model": result.model,
        "scorer": result.scorer,
        "seed_harness": result.seed_harness,
        "arm": arm,
    }


def check_finished(plan: Plan, out: Path, expected: Expected, running: set[str] | None = None) -> None:
    """Every finished cell in ``out`` measured what this plan measures (benchmark slice, model,
    scorer, seed harness) and, when it is one of the plan's cells, was made by the same arm
    definition; else ``MergeRefused`` names its result file and the field, before any cell runs.
    The defaults an evolve cell ran under (``arm.resolved``) are held to today's only for the arms
    in ``running`` (the arms of the cells selected; all when None): another seed of an arm is the
    same experiment, while a fixed harness added to a table later does not depend on them (the
    table names each cell's commit)."""
    cells = {c.id: c for c in plan_cells(plan)}
    for path in result_files(out):
        result = read_result(path)
        cell = cells.get(result.cell_id)
        mine, theirs = recorded(result), expected.of_cell(cell) if cell is not None else expected.shared()
        if cell is None:
            mine.pop("arm")
        elif running is not None and result.arm not in running:
            mine["arm"].pop("resolved", None)
            theirs["arm"].pop("resolved", None)
        field = first_difference(mine, theirs)
        if field == "arm.resolved" and result.resolved is None:
            raise MergeRefused(
                "this evolve cell was made before cells recorded their resolved defaults (proposers, "
                "gates, run options), so whether today's defaults are the ones it ran under is unknown",
                file=str(path),
                field=field,
                hint=f"run the table's cells from the commit that made it "
                f"({result.harnessevolve.get('commit') or result.harnessevolve.get('version')}), "
                "or delete that cell's folder to run it again",
            )
        if field == "arm.resolved":
            inner = first_difference(result.resolved or {}, expected.resolved.get(result.arm) or {})
            field = f"arm.resolved.{inner.split('.')[0]}" if inner else field
        if field is not None:
            raise MergeRefused(
                f"this cell was made by another plan: {field} was {value_at(mine, field)!r}, "
                f"the plan gives {value_at(theirs, field)!r}",
                file=str(path),
                field=field,
                hint="name another --out for this plan, or delete that cell's folder to run it again",
            )


def check_dependencies(plan: Plan, out: Path, todo: Sequence[Cell]) -> None:
    """A matched best-of-k cell needs its evolve cell (same seed) finished or running before it."""
    running = {c.id for c in todo}
    for cell in todo:
        if cell.arm.matched_to is None:
            continue
        evolve = Cell(plan.arm(cell.arm.matched_to), cell.seed)
        if evolve.id not in running and not finished(evolve, out):
            raise CompareError(
                f"cell {cell.id} is matched to cell {evolve.id}, which has not finished",
                field="--cells",
                hint=f"add --cells arm={evolve.arm.name},seed={cell.seed}, or run that cell first",
            )


def run_comparison(
    plan: Plan,
    out: Path,
    *,
    resume: bool = False,
    selectors: Sequence[str] = (),
    max_hours: float | None = None,
    max_cost_usd: float | None = None,
    command: str = "",
    on_cell: Callable[[CellDone], None] = lambda _d: None,
    on_start: Callable[[int, int], None] = lambda _n, _total: None,
    log: Callable[[str], None] = lambda _m: None,
    progress: Progress | None = None,
) -> Comparison:
    """Run the selected cells of ``plan`` into ``out``; see the module docstring. ``on_start(n, m)``
    is called as the n-th of the m cells to run starts, ``on_cell`` as it finishes."""
    check_output_path(out, option="--out", kind="folder")
    if has_cells(out) and not resume:
        raise CompareError(
            "the folder holds cells of a comparison already",
            file=str(out),
            field="--out",
            hint="pass --resume to go on with them (finished cells are kept), or name another --out",
        )
    selected = select_cells(plan_cells(plan), selectors)
    expected = Expected.of(plan)
    check_finished(plan, out, expected, running={c.arm.name for c in selected})
    todo = [c for c in selected if not finished(c, out)]
    check_dependencies(plan, out, todo)
    out.mkdir(parents=True, exist_ok=True)
    if not (out / ".gitignore").is_file():
        atomic_write_text(out / ".gitignore", IGNORED)
    atomic_write_text(out / PLAN_COPY, plan.text)
    from harnessevolve.scoring.references import load_references

    ctx = CellContext(
        plan, out / CACHE_DIR / "rollouts", load_references(plan.suite), log=log, progress=progress
    )
    started = time.monotonic()
    ran: list[str] = []
    cost = 0.0
    for index, cell in enumerate(todo):
        elapsed = time.monotonic() - started
        stopped = None
        if max_hours is not None and elapsed >= max_hours * 3600:
            stopped = f"--max-hours {max_hours:g} reached after {elapsed / 60:.1f} min"
        elif max_cost_usd is not None and cost >= max_cost_usd:
            stopped = f"--max-cost-usd {max_cost_usd:g} reached: ${cost:.4f} spent"
        if stopped is not None:
            return Comparison(
                out,
                tuple(ran),
                tuple(c.id for c in selected if c not in todo),
                tuple(c.id for c in todo[index:]),
                stopped=stopped,
                elapsed_s=elapsed,
                cost_usd=cost,
            )
        on_start(index + 1, len(todo))
        try:
            result = run_cell(ctx, cell, out, expected, command)
        except HarnessEvolveError as exc:  # say which cell stopped the comparison
            exc.message = f"cell {cell.id}: {exc.message}"
            raise
        write_result(cell.result_file(out), result)
        ran.append(cell.id)
        cost += result.cost_usd
        elapsed = time.monotonic() - started
        left = len(todo) - index - 1
        on_cell(
            CellDone(result, index + 1, len(todo), elapsed, elapsed / (index + 1) * left if left else None)
        )
    return Comparison(
        out,
        tuple(ran),
        tuple(c.id for c in selected if c not in todo),
        elapsed_s=time.monotonic() - started,
        cost_usd=cost,
    )


def run_cell(ctx: CellContext, cell: Cell, out: Path, expected: Expected, command: str) -> CellResult:
    """One cell, from its (possibly half-done) work folder to its result (not yet written)."""
    work = cell.work(out)
    work.mkdir(parents=True, exist_ok=True)
    attempts = _count_attempt(work / ATTEMPTS_FILE)
    load_start = os.getloadavg()
    began = time.monotonic()
    matched = None
    if cell.arm.matched_to is not None:
        matched = read_result(Cell(ctx.plan.arm(cell.arm.matched_to), cell.seed).result_file(out)).rollouts
    from harnessevolve.models.usage import UsageMeter, usage_scope

    meter = UsageMeter()
    with usage_scope(meter, stage="compare"):
        outcome = run_arm(ctx, cell.arm, cell.seed, work, matched_rollouts=matched)
    return CellResult(
        arm=cell.arm.name,
        kind=cell.arm.kind,
        seed=cell.seed,
        arm_config=cell.arm.config(),
        resolved=expected.resolved.get(cell.arm.name) if cell.arm.kind == "evolve" else None,
        benchmark=expected.benchmark,
        model=expected.model,
        scorer=expected.scorer,
        seed_harness=expected.seed_harness,
        harness=outcome.harness,
        tasks=outcome.tasks,
        oracle=outcome.oracle,
        rollouts=outcome.rollouts,
        tokens=outcome.tokens,
        cost_usd=outcome.cost_usd + meter.totals().cost_usd,
        test=outcome.test,
        details=outcome.details,
        wall_s=time.monotonic() - began,
        attempts=attempts,
        load_average={
            "start": [round(x, 2) for x in load_start],
            "end": [round(x, 2) for x in os.getloadavg()],
        },
        command=command,
        harnessevolve=package_identity(),
        finished_at=datetime.now(UTC).isoformat(timespec="seconds"),
    )


def _count_attempt(path: Path) -> int:
    """This attempt's number (1 for a cell's first), noted before the cell's work starts."""
    before = 0
    if path.is_file():
        try:
            doc = read_json(path)
            before = int(doc.get("attempts", 0)) if isinstance(doc, dict) else 0
        except (HarnessEvolveError, TypeError, ValueError):
            before = 0
    atomic_write_json(path, {"attempts": before + 1})
    return before + 1

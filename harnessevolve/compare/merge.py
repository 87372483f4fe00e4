"""Joining cells' result files from several output folders (other machines, other days) into one
table, refusing cells that do not measure the same thing: another benchmark or test slice,
another agent model, another scorer, another seed harness, or an arm of the same name defined
otherwise (another evolve configuration, another fixed harness). The refusal is one line naming
the result file, the field, and the file it disagrees with."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from harnessevolve.compare.cells import CELLS_DIR
from harnessevolve.compare.results import RESULT_FILE, CellResult, read_result
from harnessevolve.core.errors import HarnessEvolveError

MERGE_HINT = "merge only cells of one benchmark slice, agent model, scorer and seed harness"


class MergeRefused(HarnessEvolveError):
    """Cells that cannot share a table (or no cells at all)."""

    default_hint = MERGE_HINT


def comparable(result: CellResult) -> dict[str, Any]:
    """What every cell of one table must share, by field."""
    bench = result.benchmark
    return {
        "benchmark": {k: bench.get(k) for k in ("name", "test_tasks", "test_sha")},
        "model": result.model,
        "scorer": result.scorer,
        "seed_harness": result.seed_harness,
    }


def first_difference(mine: dict[str, Any], theirs: dict[str, Any]) -> str | None:
    """The first field (dotted, one level down) whose values differ; None when all agree."""
    for key in sorted(set(mine) | set(theirs)):
        a, b = mine.get(key), theirs.get(key)
        if a == b:
            continue
        if isinstance(a, dict) and isinstance(b, dict):
            inner = next((k for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)), None)
            return f"{key}.{inner}" if inner is not None else key
        return key
    return None


def value_at(doc: dict[str, Any], dotted: str) -> Any:
    value: Any = doc
    for part in dotted.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def result_files(folder: Path) -> list[Path]:
    """The result files of an output folder (``cells/<arm>/seed-<n>/result.json``)."""
    return sorted((folder / CELLS_DIR).glob(f"*/seed-*/{RESULT_FILE}"))


def load_results(folders: Sequence[Path]) -> list[CellResult]:
    """Every cell of ``folders``; a cell found twice counts once when both files agree, and is
    refused when they do not. Raises ``MergeRefused`` when there is nothing to merge."""
    by_cell: dict[str, CellResult] = {}
    for folder in folders:
        if not folder.is_dir():
            raise MergeRefused(
                "not a folder", file=str(folder), hint="name output folders of `harnessevolve compare`"
            )
        files = result_files(folder)
        if not files:
            raise MergeRefused(
                f"no finished cell (no {CELLS_DIR}/<arm>/seed-<n>/{RESULT_FILE})",
                file=str(folder),
                hint="name output folders of `harnessevolve compare` that hold finished cells",
            )
        for path in files:
            result = read_result(path)
            seen = by_cell.get(result.cell_id)
            if seen is not None and _measured(seen) != _measured(result):
                raise MergeRefused(
                    f"cell {result.cell_id} is also in {seen.where} with other outcomes",
                    file=str(path),
                    field="tasks",
                    hint="keep one of the two folders' copies of that cell",
                )
            by_cell.setdefault(result.cell_id, result)
    results = list(by_cell.values())
    check_mergeable(results)
    return results


def _measured(result: CellResult) -> str:
    doc = {
        k: v
        for k, v in result.to_json().items()
        if k not in ("wall_s", "load_average", "command", "finished_at")
    }
    return json.dumps(doc, sort_keys=True)


def check_mergeable(results: Iterable[CellResult]) -> None:
    """Refuse (``MergeRefused``) the first cell that disagrees with the first one read."""
    results = list(results)
    if not results:
        return
    first = results[0]
    arms: dict[str, CellResult] = {}
    for result in results:
        field = first_difference(comparable(result), comparable(first))
        if field is not None:
            raise MergeRefused(
                f"{_shown(value_at(comparable(result), field))} differs from "
                f"{_shown(value_at(comparable(first), field))} in {first.where}",
                file=result.where,
                field=field,
            )
        same_arm = arms.setdefault(result.arm, result)
        mine: dict[str, Any] = {"kind": result.kind, "config": result.arm_config}
        theirs: dict[str, Any] = {"kind": same_arm.kind, "config": same_arm.arm_config}
        if result.kind == "harness":
            mine["harness"], theirs["harness"] = result.harness, same_arm.harness
        if result.kind == "evolve":  # the defaults it ran under (None: made before they were recorded)
            mine["resolved"], theirs["resolved"] = result.resolved, same_arm.resolved
        field = first_difference(mine, theirs)
        if field is not None:
            raise MergeRefused(
                f"arm {result.arm!r} is defined otherwise in {same_arm.where} ({field} differs)",
                file=result.where,
                field=f"arm.{field}",
                hint="cells of one arm must come from one arm definition; rename one of the arms",
            )


def _shown(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= 80 else text[:77] + "..."

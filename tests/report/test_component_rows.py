"""The report's runtime-component rows: counts and forecast accuracy per harness revision, read
from the run's kept trajectories; revisions without components have no row."""

from __future__ import annotations

import json
import os
from pathlib import Path

from harnessevolve.report.components import component_rows


def write(run_dir: Path, harness: str, task: str, extra: dict, mtime: float) -> None:
    path = run_dir / "trajectories" / harness / f"{task}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"extra": extra}))
    os.utime(path, (mtime, mtime))


def test_forecast_accuracy_per_revision_in_the_order_they_ran(tmp_path: Path) -> None:
    world = {"forecasts": 4, "matches": 1, "missing": 2, "records": []}
    write(tmp_path, "bbbb", "t1", {"world_model": world, "memory": {"retrieved": ["memory/a.yaml"]}}, 1000)
    write(tmp_path, "bbbb", "t2", {"world_model": {**world, "matches": 3}, "memory": {"retrieved": []}}, 1001)
    write(tmp_path, "aaaa", "t1", {"world_model": {**world, "matches": 4}, "recovery": [{}, {}]}, 2000)
    write(tmp_path, "cccc", "t1", {"stop_reason": "submitted"}, 500)
    rows = component_rows(tmp_path)
    assert [r.harness_hash for r in rows] == ["bbbb", "aaaa"]
    assert (rows[0].forecasts, rows[0].matches, rows[0].missing) == (8, 4, 4)
    assert rows[0].forecast_accuracy == 0.5 and rows[1].forecast_accuracy == 1.0
    assert (rows[0].memory_used, rows[1].recovery_fired) == (1, 2)
    assert rows[1].to_json()["forecast_accuracy"] == 1.0


def test_a_run_without_components_has_no_rows(tmp_path: Path) -> None:
    assert component_rows(tmp_path) == []

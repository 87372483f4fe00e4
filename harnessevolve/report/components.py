"""What the runtime components did in a run (docs/runtime.md), per harness revision: read from the
trajectories the run kept (``trajectories/<harness-hash>/<task>.json``, their ``extra``).

Per revision, in the order its first trajectory was written: rollouts, rollouts that retrieved
memory, recovery firings, component failures, and the world model's forecast accuracy
(``matches / forecasts``, with the counts; None when no forecast was made). A run whose harness
turns no component on has no row.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class ComponentRow:
    harness_hash: str
    rollouts: int
    memory_used: int
    """Rollouts that placed at least one memory entry in the prompt."""
    recovery_fired: int
    """Recovery rule firings, all rollouts together."""
    component_errors: int
    forecasts: int
    matches: int
    missing: int
    """Replies with tool calls but no ``Expect:`` line."""

    @property
    def forecast_accuracy(self) -> float | None:
        return self.matches / self.forecasts if self.forecasts else None

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "forecast_accuracy": self.forecast_accuracy}


def _extra(path: Path) -> dict[str, Any]:
    try:
        extra = json.loads(path.read_text(encoding="utf-8")).get("extra")
    except (OSError, ValueError, AttributeError):
        return {}
    return extra if isinstance(extra, dict) else {}


def component_rows(run_dir: Path) -> list[ComponentRow]:
    """One row per harness revision whose trajectories show a runtime component at work."""
    folders = [p for p in (Path(run_dir) / "trajectories").glob("*") if p.is_dir()]
    rows: list[tuple[float, ComponentRow]] = []
    for folder in folders:
        files = sorted(folder.glob("*.json"))
        extras = [_extra(p) for p in files]
        if not any(k in x for x in extras for k in ("memory", "recovery", "world_model", "progress")):
            continue
        world = [x["world_model"] for x in extras if isinstance(x.get("world_model"), dict)]
        row = ComponentRow(
            harness_hash=folder.name,
            rollouts=len(extras),
            memory_used=sum(1 for x in extras if (x.get("memory") or {}).get("retrieved")),
            recovery_fired=sum(len(x.get("recovery") or ()) for x in extras),
            component_errors=sum(len(x.get("component_errors") or ()) for x in extras),
            forecasts=sum(int(w.get("forecasts", 0)) for w in world),
            matches=sum(int(w.get("matches", 0)) for w in world),
            missing=sum(int(w.get("missing", 0)) for w in world),
        )
        rows.append((min(p.stat().st_mtime for p in files), row))
    return [row for _, row in sorted(rows, key=lambda r: (r[0], r[1].harness_hash))]

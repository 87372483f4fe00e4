"""The report's per-task view: what happened on each task in each revision of the harness.

A run folder keeps one evaluation and one trajectory per (harness revision, task) it scored, under
``evaluations/<harness-hash>/<task>.json`` and ``trajectories/<harness-hash>/<task>.json``. The
ledger names the revisions: ``baseline`` the seed, ``committing`` each committed candidate (with
its verdict), ``candidate_accepted`` whether it passed on a tie. Revisions the ledger does not name
(candidates judged in scratch copies and never committed) are shown last, by their hash.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harnessevolve.runs.events import Baseline, CandidateAccepted, Committing, Event

MAX_REVISIONS = 12
"""Columns shown: the seed and the latest revisions (a long run keeps its last ones)."""


@dataclass(frozen=True)
class Revision:
    harness_hash: str
    label: str
    generation: int | None = None
    tie: bool = False


@dataclass(frozen=True)
class TaskCell:
    score: float
    passed: bool
    trajectory: str | None
    """Path of the trajectory, relative to the run folder (None when it was not kept)."""
    cause: str | None = None
    step: int | None = None
    hint: str = ""
    checks: tuple[str, ...] = ()

    @property
    def divergence(self) -> str:
        """First divergence in one line: ``step 3: premature_finish`` (empty for a passed task)."""
        if self.cause is None:
            return ""
        return f"step {self.step}: {self.cause}" if self.step is not None else self.cause


@dataclass(frozen=True)
class TaskRow:
    task_id: str
    cells: tuple[TaskCell | None, ...]

    @property
    def changed(self) -> bool:
        """Whether the task passed in some revisions and failed in others."""
        seen = {c.passed for c in self.cells if c is not None}
        return len(seen) > 1


@dataclass(frozen=True)
class TaskMatrix:
    revisions: tuple[Revision, ...]
    rows: tuple[TaskRow, ...]
    hidden_revisions: int = 0
    """Revisions left out to keep the table readable (``MAX_REVISIONS``)."""


def _revisions(events: list[Event], on_disk: list[str]) -> list[Revision]:
    ties = {e.harness_hash for e in events if isinstance(e, CandidateAccepted) and e.tie}
    named: dict[str, Revision] = {}
    for e in events:
        if not isinstance(e, Baseline | Committing) or not isinstance(e.harness_hash, str):
            continue
        h = e.harness_hash
        if h in named:
            continue
        if isinstance(e, Baseline):
            named[h] = Revision(h, "seed", 0)
        else:
            verdict = str(e.verdict or "committed")
            tie = h in ties
            label = f"gen {e.generation}: {verdict}" + (" (tie)" if tie else "")
            named[h] = Revision(h, label, e.generation, tie)
    rest = [Revision(h, f"candidate {h[:8]}") for h in on_disk if h not in named]
    return [r for r in named.values() if r.harness_hash in on_disk] + rest


def _cell(run_dir: Path, harness_hash: str, task_id: str) -> TaskCell | None:
    path = run_dir / "evaluations" / harness_hash / f"{task_id}.json"
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict):
        return None
    found = doc.get("signal")
    signal: dict[str, Any] = found if isinstance(found, dict) else {}
    trajectory = Path("trajectories") / harness_hash / f"{task_id}.json"
    step = signal.get("step")
    return TaskCell(
        score=float(doc.get("score") or 0.0),
        passed=bool(doc.get("passed")),
        trajectory=trajectory.as_posix() if (run_dir / trajectory).is_file() else None,
        cause=str(signal["cause"]) if signal.get("cause") else None,
        step=step if isinstance(step, int) else None,
        hint=str(signal.get("hint") or ""),
        checks=tuple(str(c) for c in doc.get("checks") or [] if isinstance(c, str)),
    )


def task_matrix(run_dir: Path, events: list[Event], max_revisions: int = MAX_REVISIONS) -> TaskMatrix:
    folder = Path(run_dir) / "evaluations"
    on_disk = sorted(p.name for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else []
    revisions = _revisions(events, on_disk)
    hidden = max(0, len(revisions) - max_revisions)
    if hidden:
        revisions = revisions[:1] + revisions[len(revisions) - max_revisions + 1 :]
    tasks = sorted({p.stem for r in revisions for p in (folder / r.harness_hash).glob("*.json")})
    rows = [TaskRow(t, tuple(_cell(Path(run_dir), r.harness_hash, t) for r in revisions)) for t in tasks]
    return TaskMatrix(tuple(revisions), tuple(rows), hidden)

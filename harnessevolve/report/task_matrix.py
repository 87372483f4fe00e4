"""The report's per-task view: what happened on each task in each revision of the harness.

A run folder keeps one evaluation and one trajectory per (harness revision, task) it scored, under
``evaluations/<harness-hash>/<task>.json`` and ``trajectories/<harness-hash>/<task>.json``. The
ledger names the revisions: ``baseline`` the seed, ``committing`` each committed candidate (with
its verdict), ``candidate_accepted`` whether it passed on a tie. Each revision is shown by its git
commit (``baseline.rev``; the ``candidate_committed`` after a ``committing``; a generation's
``generation_started.rev`` for the harness its batch scored). Revisions the ledger does not name
(candidates judged in scratch copies and never committed) are shown last, with no commit.

A failed cell carries why (:mod:`harnessevolve.report.outcome`): its failed checks, what a judge
said, why the agent loop stopped and, for a multi-turn task, how the conversation ended.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harnessevolve.report.outcome import Ending, failed_checks, judge_reasons, read_ending
from harnessevolve.runs.events import (
    Baseline,
    BatchEvaluated,
    CandidateAccepted,
    CandidateCommitted,
    Committing,
    Event,
    GenerationStarted,
)

MAX_REVISIONS = 12
"""Columns shown: the seed and the latest revisions (a long run keeps its last ones)."""
TOOLTIP_CHARS = 400


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass(frozen=True)
class Revision:
    harness_hash: str
    label: str
    generation: int | None = None
    tie: bool = False
    commit: str | None = None
    """The git commit of this revision (None for a candidate never committed: judged in a scratch
    copy, its changes are in the run folder; the ledger does not say which hash is which)."""

    @property
    def short(self) -> str:
        """The commit's first 8 characters; for a candidate never committed, which has no commit,
        ``content 1a2b3c4d`` (its harness content hash, the name its files have in the run folder)."""
        return self.commit[:8] if self.commit else f"content {self.harness_hash[:8]}"


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
    judge: tuple[str, ...] = ()
    """What judges said (judge checks, the signal's LLM judge): ``outcome.judge_reasons``."""
    ending: Ending = Ending()

    @property
    def failed_checks(self) -> tuple[str, ...]:
        return failed_checks(self.checks)

    @property
    def reasons(self) -> tuple[tuple[str, str], ...]:
        """Why it failed, as (what, text) rows: checks, judge, stop reason, conversation, divergence."""
        if self.passed:
            return ()
        judged = "FAIL judge: "  # a judge check's message is shown as the judge's reason
        rows = [("check", c.removeprefix("FAIL ")) for c in self.failed_checks if not c.startswith(judged)]
        rows += [("judge", j) for j in self.judge]
        if self.ending.infra:
            rows.append(("machine", f"infrastructure failure ({self.ending.infra}), scored 0"))
        if self.ending.stop:
            rows.append(("stopped", self.ending.stop))
        if self.ending.conversation:
            rows.append(("conversation", self.ending.conversation))
        if self.divergence:
            rows.append(("divergence", f"{self.cause}: {self.hint}" if self.hint else self.divergence))
        return tuple(rows)

    @property
    def tooltip(self) -> str:
        """The cell's hover title: the failed checks and the stop reason (the rest is in the task's
        "why it failed" row), or every check line for a pass."""
        if self.passed:
            return "; ".join(self.checks)
        rows = [f"{what}: {text}" for what, text in self.reasons if what in ("check", "judge", "stopped")]
        return _cut("\n".join(rows), TOOLTIP_CHARS)

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

    @property
    def scored(self) -> int:
        return sum(c is not None for c in self.cells)

    @property
    def failed(self) -> int:
        return sum(c is not None and not c.passed for c in self.cells)


@dataclass(frozen=True)
class TaskMatrix:
    revisions: tuple[Revision, ...]
    rows: tuple[TaskRow, ...]
    hidden_revisions: int = 0
    """Revisions left out to keep the table readable (``MAX_REVISIONS``)."""


def failure_groups(
    matrix: TaskMatrix, row: TaskRow
) -> list[tuple[tuple[Revision, ...], tuple[tuple[str, str], ...]]]:
    """The row's failed cells as (revisions, reasons), revisions that failed for the same reasons
    together (a task often fails the same way in every revision)."""
    groups: dict[tuple[tuple[str, str], ...], list[Revision]] = {}
    for revision, cell in zip(matrix.revisions, row.cells, strict=True):
        if cell is not None and not cell.passed:
            groups.setdefault(cell.reasons, []).append(revision)
    return [(tuple(revisions), reasons) for reasons, revisions in groups.items()]


def _commits(events: list[Event]) -> dict[str, str]:
    """Harness hash -> the git commit holding that harness, from what the ledger recorded."""
    commits: dict[str, str] = {}
    started: dict[int, str] = {}
    pending: dict[int, str] = {}  # generation -> hash of the ``committing`` awaiting its commit
    for e in events:
        if isinstance(e, Baseline) and isinstance(e.harness_hash, str) and e.rev:
            commits.setdefault(e.harness_hash, e.rev)
        elif isinstance(e, GenerationStarted) and e.rev:
            started[e.generation] = e.rev
        elif isinstance(e, BatchEvaluated) and e.generation in started and isinstance(e.harness_hash, str):
            commits.setdefault(e.harness_hash, started[e.generation])
        elif isinstance(e, Committing) and isinstance(e.harness_hash, str):
            pending[e.generation] = e.harness_hash
        elif isinstance(e, CandidateCommitted) and e.generation in pending and e.sha:
            commits[pending.pop(e.generation)] = e.sha
        elif isinstance(e, CandidateAccepted) and isinstance(e.harness_hash, str) and e.sha:
            commits[e.harness_hash] = e.sha
    return commits


def _revisions(events: list[Event], on_disk: list[str]) -> list[Revision]:
    ties = {e.harness_hash for e in events if isinstance(e, CandidateAccepted) and e.tie}
    commits = _commits(events)
    named: dict[str, Revision] = {}
    for e in events:
        if not isinstance(e, Baseline | Committing) or not isinstance(e.harness_hash, str):
            continue
        h = e.harness_hash
        if h in named:
            continue
        if isinstance(e, Baseline):
            named[h] = Revision(h, "seed", 0, commit=commits.get(h))
        else:
            verdict = str(e.verdict or "committed")
            tie = h in ties
            label = f"gen {e.generation}: {verdict}" + (" (tie)" if tie else "")
            named[h] = Revision(h, label, e.generation, tie, commits.get(h))
    rest = [
        Revision(h, "revision" if h in commits else "uncommitted candidate", commit=commits.get(h))
        for h in on_disk
        if h not in named
    ]
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
    kept = (run_dir / trajectory).is_file()
    step = signal.get("step")
    checks = tuple(str(c) for c in doc.get("checks") or [] if isinstance(c, str))
    ending = read_ending(run_dir / trajectory if kept else None)
    if ending.infra is None and doc.get("infra"):
        ending = Ending(ending.stop_reason, ending.conversation, str(doc["infra"]))
    return TaskCell(
        score=float(doc.get("score") or 0.0),
        passed=bool(doc.get("passed")),
        trajectory=trajectory.as_posix() if kept else None,
        cause=str(signal["cause"]) if signal.get("cause") else None,
        step=step if isinstance(step, int) else None,
        hint=str(signal.get("hint") or ""),
        checks=checks,
        judge=judge_reasons(checks, signal.get("judge")),
        ending=ending,
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

"""The plain values a run is read into (see :mod:`harnessevolve.report.run_view`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from harnessevolve.core.enums import Verdict as CandidateVerdict
from harnessevolve.report.run_usage import UsageTable
from harnessevolve.runs.events import Event


@dataclass(frozen=True)
class Verdict:
    gate: str
    passed: bool
    reason: str
    numbers: dict[str, Any]


@dataclass(frozen=True)
class Cluster:
    cause: str
    size: int
    severity: float
    fix_direction: str
    tasks: tuple[str, ...]


@dataclass(frozen=True)
class CandidateView:
    generation: int
    index: int
    """1-based number of the candidate within its generation."""
    summary: str = ""
    proposer: str = "?"
    model: str | None = None
    targets: tuple[str, ...] = ()
    target_tasks: tuple[str, ...] = ()
    paths: tuple[str, ...] = ()
    outcome: str = CandidateVerdict.PENDING
    """``accepted``; ``reverted`` (committed, then reverted); ``rejected`` (never committed; its
    changes are in the run folder); ``pending`` (no verdict yet)."""
    verdicts: tuple[Verdict, ...] = ()
    revisions: int = 0
    tie: bool = False
    """Accepted on a tie: the performance gate saw no gain on its batch."""
    rejected_by: str | None = None
    reason: str = ""
    sha: str | None = None
    revert_sha: str | None = None
    changes_file: str | None = None
    diff: str = ""
    diff_source: str = ""
    """``git`` (the commit), ``recorded changes`` (the run folder against the generation's start), or
    empty when neither is available."""
    diff_truncated: bool = False
    message: str = ""
    trailers: dict[str, str] = field(default_factory=dict)

    @property
    def short(self) -> str:
        return self.sha[:8] if self.sha else f"g{self.generation}-c{self.index}"

    @property
    def anchor(self) -> str:
        return f"cand-g{self.generation}-c{self.index}"


@dataclass(frozen=True)
class GenerationView:
    generation: int
    train_current: float | None = None
    train_candidate: float | None = None
    validation: float | None = None
    candidate_validation: float | None = None
    failed: int | None = None
    tasks: int | None = None
    outcome: str = ""
    clusters: tuple[Cluster, ...] = ()
    candidate: str | None = None
    rev: str | None = None
    usage: UsageTable = field(default_factory=dict)


@dataclass(frozen=True)
class TestScores:
    tasks: int
    scores: dict[str, float]
    revisions: dict[str, str]
    model: str | None
    ts: str
    control: dict[str, Any] | None = None
    """The matched-budget control (``test_evaluated.control``): the seed's best-of-k."""
    intervals: dict[str, list[float]] = field(default_factory=dict)
    """The confidence interval of each score (``test_evaluated.intervals``, as ``report --final``
    computed and printed them); {} for an older event without them."""


@dataclass(frozen=True)
class LineageStep:
    sha: str
    kind: str
    """``seed``, ``accepted`` or ``restored``."""
    summary: str
    generation: int | None
    validation: float | None


@dataclass(frozen=True)
class RunView:
    run_id: str
    root: Path
    harness_dir: Path
    state: str
    """``running``, ``finished``, ``interrupted``, ``failed``, ``stale-lock`` (its process is gone and
    left the lock) or ``incomplete`` (no end event and no lock: killed without a trace)."""
    events: tuple[Event, ...]
    benchmark: str | None = None
    model: str | None = None
    options: dict[str, Any] = field(default_factory=dict)
    started_at: datetime | None = None
    ended_at: datetime | None = None
    seed_rev: str | None = None
    head_rev: str | None = None
    baseline_validation: float | None = None
    generations: tuple[GenerationView, ...] = ()
    candidates: tuple[CandidateView, ...] = ()
    failed_proposals: tuple[dict[str, Any], ...] = ()
    lineage: tuple[LineageStep, ...] = ()
    tests: tuple[TestScores, ...] = ()
    usage: UsageTable = field(default_factory=dict)
    """Stage -> {tokens, cost_usd, ...}: the run's totals, {} when the ledger has none."""
    usage_by_model: UsageTable = field(default_factory=dict)
    totals: dict[str, Any] = field(default_factory=dict)
    """Scalars ``run_finished`` recorded (rollouts, tokens, ...)."""
    unknown_events: tuple[str, ...] = ()
    stopped: dict[str, Any] | None = None
    """The ``budget_exhausted`` event when a budget stopped the run (limit, spent, cap, stage)."""
    training: tuple[dict[str, Any], ...] = ()
    """``--train-every``: the ``policy_trained``, ``policy_training_skipped`` and
    ``agent_model_changed`` events, in order."""
    environment: tuple[dict[str, Any], ...] = ()
    """``--evolve-environments``: the ``environment_status`` events, one per generation."""
    generated: tuple[dict[str, Any], ...] = ()
    """``--evolve-environments``: every ``task_generated`` decision, kept or not."""
    lock_owner: dict[str, Any] | None = None
    git_error: str | None = None
    net_change: dict[str, Any] | None = None
    """``run_finished.net_change``: seed vs final harness (``changed``, ``files``, validation)."""
    model_source: str = "option"
    """Where ``model`` came from: ``option`` (--model), ``trajectory`` (the agent model a rollout
    recorded, when the run used the harness's own), or ``unknown``."""

    @property
    def accepted(self) -> tuple[CandidateView, ...]:
        return tuple(c for c in self.candidates if c.outcome == CandidateVerdict.ACCEPTED)

    @property
    def not_kept(self) -> tuple[CandidateView, ...]:
        """Candidates the gates turned down (reverted commits and never-committed candidates)."""
        return tuple(
            c for c in self.candidates if c.outcome in (CandidateVerdict.REVERTED, CandidateVerdict.REJECTED)
        )

    @property
    def generation(self) -> int:
        return max((g.generation for g in self.generations), default=0)

    @property
    def planned_generations(self) -> int | None:
        value = str(self.options.get("generations", ""))
        return int(value) if value.isdigit() else None

    @property
    def best_validation(self) -> float | None:
        values = [self.baseline_validation] + [g.validation for g in self.generations]
        known = [v for v in values + [s.validation for s in self.lineage] if v is not None]
        return max(known) if known else None

    @property
    def last_event(self) -> Event | None:
        return self.events[-1] if self.events else None

    def elapsed_seconds(self, now: datetime | None = None) -> float | None:
        if self.started_at is None:
            return None
        end = self.ended_at or (now or datetime.now(UTC))
        return max(0.0, (end - self.started_at).total_seconds())

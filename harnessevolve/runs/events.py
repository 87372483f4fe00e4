"""The ledger's event catalog: every event a run writes, one typed record each, with its fields.

Writers build a record and hand it to :meth:`Ledger.append` (a free name is looked up here and its
fields checked, so a typo or an undeclared field fails at the write, not in a report weeks later);
readers compare names with the record's ``NAME`` and may :func:`parse_event` a line into its record.
Each line on disk is ``{"v": LEDGER_VERSION, "ts": ..., "event": NAME, **fields}``. A field left at
its default ``None`` is not written (the run-time shape of a record: fields that were not known at
the time of writing stay absent); required fields are always written, ``None`` or not.

Adding an event: a record here (a ``NAME`` and its fields), then render it in the report
(``report/run_view.py`` folds what it needs; every catalog event is counted in the HTML's event
table). ``tests/runs/test_events.py`` checks that every event written anywhere is in the catalog.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from harnessevolve.core.enums import RunEnd
from harnessevolve.runs.event_record import (
    ENVELOPE,
    CandidateDetails,
    ClusterSummary,
    Event,
    GateVerdictRecord,
    Record,
    UnknownEvent,
    UnknownEventError,
    check_event_types,
    payload_fields,
)
from harnessevolve.runs.run_events import (
    BudgetExhausted,
    RunFailed,
    RunFinished,
    RunInterrupted,
    RunResumed,
    RunStarted,
    StaleLockRemoved,
)
from harnessevolve.runs.stage_events import (
    AgentModelChanged,
    EnvironmentStatus,
    FloorChecked,
    InfraFailure,
    PolicyTrained,
    PolicyTrainingSkipped,
    TaskGenerated,
    TestEvaluated,
)

__all__ = [
    "RunStarted",
    "RunResumed",
    "StaleLockRemoved",
    "RunFinished",
    "BudgetExhausted",
    "RunInterrupted",
    "RunFailed",
    "PolicyTrained",
    "PolicyTrainingSkipped",
    "AgentModelChanged",
    "TestEvaluated",
    "InfraFailure",
    "FloorChecked",
    "TaskGenerated",
    "EnvironmentStatus",
    "ENVELOPE",
    "UnknownEventError",
    "Record",
    "ClusterSummary",
    "GateVerdictRecord",
    "Event",
    "payload_fields",
    "UnknownEvent",
    "CandidateDetails",
]


# -- generations ------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Baseline(Event):
    """The seed harness's validation score (the run's first measurement)."""

    NAME: ClassVar[str] = "baseline"
    split: str
    rev: str
    harness_hash: str
    score: float
    tasks: int


@dataclass(frozen=True, kw_only=True)
class GenerationStarted(Event):
    NAME: ClassVar[str] = "generation_started"
    generation: int
    rev: str


@dataclass(frozen=True, kw_only=True)
class BatchEvaluated(Event):
    NAME: ClassVar[str] = "batch_evaluated"
    generation: int
    harness_hash: str
    tasks: list[str]
    score: float
    failed: int
    clusters: list[ClusterSummary]


@dataclass(frozen=True, kw_only=True)
class NoProposal(Event):
    NAME: ClassVar[str] = "no_proposal"
    generation: int
    proposer: str


@dataclass(frozen=True, kw_only=True)
class ProposalFailed(Event):
    NAME: ClassVar[str] = "proposal_failed"
    generation: int
    proposer: str
    errors: list[str]


@dataclass(frozen=True, kw_only=True)
class GenerationFinished(Event):
    NAME: ClassVar[str] = "generation_finished"
    generation: int
    outcome: str
    rev: str
    summary: str | None = None
    validation: float | None = None
    candidate: str | None = None
    verdicts: dict[str, Any] | None = None
    train_current: float | None = None
    train_candidate: float | None = None
    usage: dict[str, Any] | None = None
    recovered: bool | None = None


@dataclass(frozen=True, kw_only=True)
class EpochRestoring(Event):
    """An epoch's end is about to make snapshot ``best`` current again (a restoring commit on top of
    ``rev``): a run killed before ``epoch_finished`` finishes or redoes the restore on resume."""

    NAME: ClassVar[str] = "epoch_restoring"
    epoch: int
    generation: int
    best: str
    rev: str


@dataclass(frozen=True, kw_only=True)
class EpochFinished(Event):
    """An epoch ended: the best snapshot on validation became current (``restored``: its sha, when
    that meant going back)."""

    NAME: ClassVar[str] = "epoch_finished"
    epoch: int
    generation: int
    best: str
    best_validation: float
    snapshots: int
    restored: str | None
    rev: str


# -- candidates -------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class CandidateProposed(CandidateDetails):
    NAME: ClassVar[str] = "candidate_proposed"
    generation: int
    candidate: int


@dataclass(frozen=True, kw_only=True)
class CandidateRevised(CandidateDetails):
    """A quality-gate rejection went back to the proposer; this is its answer."""

    NAME: ClassVar[str] = "candidate_revised"
    generation: int
    candidate: int
    reason: str
    rejected_summary: str


@dataclass(frozen=True, kw_only=True)
class RevisionFailed(Event):
    NAME: ClassVar[str] = "revision_failed"
    generation: int
    candidate: int
    proposer: str
    errors: list[str]


@dataclass(frozen=True, kw_only=True)
class RevisionLimit(Event):
    NAME: ClassVar[str] = "revision_limit"
    generation: int
    candidate: int
    revisions: int


@dataclass(frozen=True, kw_only=True)
class PerformanceIncrement(Event):
    """One step of a sequential performance test (``noise.SequentialGate`` numbers)."""

    NAME: ClassVar[str] = "performance_increment"
    generation: int
    mode: str | None = None
    pairs: int | None = None
    rollouts: int | None = None
    tasks: int | None = None
    current: float | None = None
    candidate: float | None = None
    gain: float | None = None
    gain_ci: list[float] | None = None
    confidence: float | None = None
    wins: int | None = None
    losses: int | None = None
    ties: int | None = None
    llr: float | None = None
    accept_at: float | None = None
    reject_at: float | None = None
    win_share_h1: float | None = None
    effect: float | None = None
    power: float | None = None
    max_pairs: int | None = None


@dataclass(frozen=True, kw_only=True)
class GateVerdicts(Event):
    NAME: ClassVar[str] = "gate_verdicts"
    generation: int
    candidate: int | None = None
    summary: str | None = None
    sha: str | None = None
    verdicts: list[GateVerdictRecord]


@dataclass(frozen=True, kw_only=True)
class CandidateRejected(CandidateDetails):
    """Judged and not kept, never committed; its changes are saved at ``file`` in the run folder."""

    NAME: ClassVar[str] = "candidate_rejected"
    generation: int
    candidate: int
    of: int
    file: str
    revisions: int | None = None
    passed: bool | None = None
    gate: str | None = None
    reason: str | None = None
    validation: float | None = None
    train_candidate: float | None = None
    verdicts: list[GateVerdictRecord] | None = None
    harness_state: str | None = None
    """The digest of the harness it would have made (``trials.harness_state``), when a gate refused
    it: the same harness is not judged again, after a resume too."""


@dataclass(frozen=True, kw_only=True)
class Committing(Event):
    """Written just before a candidate's commit, so resume knows a commit may follow."""

    NAME: ClassVar[str] = "committing"
    generation: int
    paths: list[str]
    verdict: str
    summary: str
    harness_hash: str | None
    validation: float | None


@dataclass(frozen=True, kw_only=True)
class CandidateCommitted(CandidateDetails):
    NAME: ClassVar[str] = "candidate_committed"
    generation: int
    sha: str
    verdict: str
    candidate: int | None = None
    of: int | None = None
    revisions: int | None = None
    recovered: bool | None = None


@dataclass(frozen=True, kw_only=True)
class CandidateAccepted(Event):
    NAME: ClassVar[str] = "candidate_accepted"
    generation: int
    sha: str
    harness_hash: str | None
    validation: float | None
    candidate: int | None = None
    of: int | None = None
    revisions: int | None = None
    verdicts: list[GateVerdictRecord] | None = None
    recovered: bool | None = None
    tie: bool | None = None
    """True when the performance gate passed it on a tie (no gain on the batch)."""


@dataclass(frozen=True, kw_only=True)
class EditFired(Event):
    """Whether an accepted edit showed in later trajectories (``judging/edit_firing.py``): its
    targeted step gone or changed, or the pattern it added reused. ``fired: false`` at the end of a
    run labels an edit that never fired (``runs`` 0: nothing ran after it)."""

    NAME: ClassVar[str] = "edit_fired"
    generation: int
    sha: str
    fired: bool
    observed_generation: int | None = None
    runs: int = 0
    marker_runs: int = 0
    gone: int = 0
    changed: int = 0
    unchanged: int = 0
    evidence: list[str] | None = None


@dataclass(frozen=True, kw_only=True)
class CandidateReverted(Event):
    NAME: ClassVar[str] = "candidate_reverted"
    generation: int
    sha: str
    revert_sha: str
    gate: str | None
    reason: str
    numbers: dict[str, Any] | None = None
    recovered: bool | None = None
    harness_state: str | None = None
    """The digest of the reverted harness (``trials.harness_state``): it is not judged again."""


CATALOG: dict[str, type[Event]] = {
    cls.NAME: cls
    for cls in (
        EditFired,
        RunStarted,
        RunResumed,
        StaleLockRemoved,
        RunFinished,
        BudgetExhausted,
        RunInterrupted,
        RunFailed,
        Baseline,
        GenerationStarted,
        BatchEvaluated,
        NoProposal,
        ProposalFailed,
        GenerationFinished,
        EpochRestoring,
        EpochFinished,
        CandidateProposed,
        CandidateRevised,
        RevisionFailed,
        RevisionLimit,
        PerformanceIncrement,
        GateVerdicts,
        CandidateRejected,
        Committing,
        CandidateCommitted,
        CandidateAccepted,
        CandidateReverted,
        PolicyTrained,
        PolicyTrainingSkipped,
        AgentModelChanged,
        TestEvaluated,
        TaskGenerated,
        EnvironmentStatus,
        InfraFailure,
        FloorChecked,
    )
}
"""Every event by name."""

PROCESS_EVENTS: tuple[type[Event], ...] = (RunResumed, StaleLockRemoved, RunInterrupted, RunFailed)
"""Events of one process of a run (a resume, a kill), not of the run's work: a resumed run has
them where an uninterrupted one does not, and a redone step never matches them."""

END_EVENTS = {
    RunFinished.NAME: RunEnd.FINISHED,
    RunInterrupted.NAME: RunEnd.INTERRUPTED,
    RunFailed.NAME: RunEnd.FAILED,
}
"""Events that end a run, and the state ``status`` shows for each."""


def build_event(name: str, data: dict[str, Any]) -> Event:
    """The record for event ``name`` with fields ``data``; UnknownEventError names what is wrong."""
    cls = CATALOG.get(name)
    if cls is None:
        raise UnknownEventError(f"ledger event {name!r} is not in harnessevolve/runs/events.py")
    declared = {f.name for f in payload_fields(cls)}
    extra = sorted(set(data) - declared)
    if extra:
        fields_ = ", ".join(extra)
        raise UnknownEventError(f"ledger event {name!r} has no field(s) {fields_} (see runs/events.py)")
    try:
        return cls(**data)
    except TypeError as exc:
        raise UnknownEventError(f"ledger event {name!r}: {exc}") from None


def parse_event(record: dict[str, Any]) -> Event:
    """A ledger line (a migrated dict) as its typed record, ``ts`` included; an :class:`UnknownEvent`
    for an event this version does not know or a line whose fields do not fit its record (readers
    stay total). Fields a record does not declare (added by a later version) are dropped."""
    name = record.get("event")
    ts = record.get("ts")
    stamp = ts if isinstance(ts, str) else None
    payload = {k: v for k, v in record.items() if k not in ENVELOPE}
    cls = CATALOG.get(name) if isinstance(name, str) else None
    if cls is None:
        return UnknownEvent(name=str(name), payload=payload, ts=stamp)
    declared = {f.name for f in payload_fields(cls)}
    try:
        event = cls(**{k: v for k, v in payload.items() if k in declared}, ts=stamp)
        check_event_types(event)  # a list where a mapping belongs, a string generation: not this record
        return event
    except (TypeError, ValueError) as exc:
        return UnknownEvent(name=cls.NAME, payload=payload, reason=f"fields do not fit: {exc}", ts=stamp)

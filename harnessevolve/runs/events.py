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

import dataclasses
import types
import typing
from dataclasses import dataclass, field
from typing import Any, ClassVar, Self

from harnessevolve.core.enums import RunEnd

ENVELOPE = ("v", "ts", "event")
"""Keys every ledger line has besides its event's fields."""


class UnknownEventError(TypeError):
    """A writer named an event, or a field, the catalog does not have (a programming error)."""


@dataclass(frozen=True, kw_only=True)
class Record:
    """A nested payload of an event (a cluster, a gate verdict): written as a JSON object, read
    back as its record. Keys it does not declare are dropped; missing optional ones get defaults."""

    @classmethod
    def from_json(cls, data: Any) -> Self:
        if isinstance(data, cls):
            return data
        if not isinstance(data, dict):
            raise TypeError(f"{cls.__name__} needs an object, not {type(data).__name__}")
        declared = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in declared})

    def to_json(self) -> dict[str, Any]:
        return {f.name: _encode(getattr(self, f.name)) for f in dataclasses.fields(self)}


@dataclass(frozen=True, kw_only=True)
class ClusterSummary(Record):
    """One cluster of a ``batch_evaluated`` event: failed runs sharing a cause."""

    cause: str
    size: int
    severity: float
    fix_direction: str = ""
    tasks: list[str] = field(default_factory=list)
    divergences: list[dict[str, Any]] = field(default_factory=list)
    """``{task, step, reference_step}`` per failed run: where it left its reference."""


@dataclass(frozen=True, kw_only=True)
class GateVerdictRecord(Record):
    """One gate's decision as the ledger keeps it (``gate.verdict.GateVerdict.to_dict``)."""

    gate: str
    passed: bool
    reason: str = ""
    numbers: dict[str, Any] = field(default_factory=dict)


def _encode(value: Any) -> Any:
    if isinstance(value, Record):
        return value.to_json()
    if isinstance(value, list | tuple):
        return [_encode(v) for v in value]
    return value


_RECORD_FIELDS: dict[type[Event], dict[str, tuple[type[Record], bool]]] = {}


def _record_fields(cls: type[Event]) -> dict[str, tuple[type[Record], bool]]:
    """Fields of ``cls`` that hold records: name -> (record class, whether a list of them)."""
    if cls in _RECORD_FIELDS:
        return _RECORD_FIELDS[cls]
    out: dict[str, tuple[type[Record], bool]] = _RECORD_FIELDS.setdefault(cls, {})
    for name, hint in typing.get_type_hints(cls).items():
        arms = (
            typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, types.UnionType) else (hint,)
        )
        for arm in arms:
            inner = typing.get_args(arm)
            if (
                typing.get_origin(arm) is list
                and inner
                and isinstance(inner[0], type)
                and issubclass(inner[0], Record)
            ):
                out[name] = (inner[0], True)
            elif isinstance(arm, type) and issubclass(arm, Record):
                out[name] = (arm, False)
    return out


@dataclass(frozen=True, kw_only=True)
class Event:
    """One ledger event. Subclasses set ``NAME`` and declare their fields.

    The envelope: ``ts`` is the time the line was written (set on records read from a ledger,
    ``None`` on records built to be written; not part of equality); ``v`` is not kept, since every
    line read is migrated to ``LEDGER_VERSION``; ``event`` is :attr:`event_name`."""

    NAME: ClassVar[str] = ""
    ts: str | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        """Nested payloads given as JSON objects (a line read back, a writer's ``to_dict()``)
        become their records; anything else that does not fit raises TypeError."""
        for name, (record, many) in _record_fields(type(self)).items():
            value = getattr(self, name)
            if value is None:
                continue
            if many:
                if not isinstance(value, list | tuple):
                    raise TypeError(f"{self.NAME}.{name} must be a list")
                object.__setattr__(self, name, [record.from_json(v) for v in value])
            else:
                object.__setattr__(self, name, record.from_json(value))

    @property
    def event_name(self) -> str:
        """The event's name on disk (``NAME``; an :class:`UnknownEvent`'s own name)."""
        return self.NAME

    def to_json(self) -> dict[str, Any]:
        """The event as a JSON object: ``ts`` (when read), ``event`` and its fields."""
        head: dict[str, Any] = {"ts": self.ts} if self.ts is not None else {}
        return {**head, "event": self.event_name, **self.fields()}

    def fields(self) -> dict[str, Any]:
        """The event's fields as written: required ones always, optional ones when set."""
        out: dict[str, Any] = {}
        for f in payload_fields(type(self)):
            value = getattr(self, f.name)
            if value is None and f.default is None:
                continue
            out[f.name] = _encode(value)
        return out


def payload_fields(cls: type[Event]) -> tuple[dataclasses.Field[Any], ...]:
    """The fields of event class ``cls`` that are written as its payload (the envelope is not)."""
    return tuple(f for f in dataclasses.fields(cls) if f.name not in ENVELOPE)


@dataclass(frozen=True, kw_only=True)
class UnknownEvent(Event):
    """A line this version cannot type: an event name the catalog does not know (written by a later
    version, or by hand), or a known name whose fields do not fit its record (``reason`` says
    which). ``payload`` is the line less its envelope. Readers skip or show it; never written."""

    name: str
    payload: dict[str, Any]
    reason: str = "unknown event"

    @property
    def event_name(self) -> str:
        return self.name

    def fields(self) -> dict[str, Any]:
        return dict(self.payload)


@dataclass(frozen=True, kw_only=True)
class CandidateDetails(Event):
    """What a proposer said about its candidate (``Candidate.to_record()``); no file contents."""

    summary: str | None = None
    rationale: str | None = None
    proposer: str | None = None
    model: str | None = None
    targets: list[str] | None = None
    target_tasks: list[str] | None = None
    paths: list[str] | None = None
    edits: dict[str, Any] | None = None
    evidence: list[Any] | None = None
    revision: int | None = None
    feedback: list[str] | None = None


# -- a run's start and end --------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class RunStarted(Event):
    """The first event of a run. ``options`` are the run's options, typed (``RunOptions.to_json``)."""

    NAME: ClassVar[str] = "run_started"
    run_id: str
    harness: str
    rev: str
    benchmark: str
    options: dict[str, Any]
    gates: str | None
    references: int | None = None
    sandbox: str | None = None
    resume: dict[str, Any] | None = None
    """Ledger v1 only: the typed options (v1 kept ``options`` stringified); read, never written."""


@dataclass(frozen=True, kw_only=True)
class RunResumed(Event):
    NAME: ClassVar[str] = "run_resumed"
    run_id: str
    rev: str
    next_generation: int
    recovered: list[str]
    stale_lock: dict[str, Any] | None


@dataclass(frozen=True, kw_only=True)
class StaleLockRemoved(Event):
    NAME: ClassVar[str] = "stale_lock_removed"
    owner: dict[str, Any] | None


@dataclass(frozen=True, kw_only=True)
class RunFinished(Event):
    """The run ended by itself: every generation done, or a budget ran out (``stopped``)."""

    NAME: ClassVar[str] = "run_finished"
    accepted: list[str]
    reverted: list[str]
    rev: str
    rollouts: int | None = None
    cached_rollouts: int | None = None
    tokens: int | None = None
    usage: dict[str, Any] | None = None
    stopped: dict[str, Any] | None = None
    net_change: dict[str, Any] | None = None
    """Seed vs final harness: ``seed_rev``, ``final_rev``, ``files`` changed, ``validation_seed``,
    ``validation_final`` and ``delta`` (see pipeline/net_change.py)."""
    infra: dict[str, Any] | None = None
    """Rollouts that failed on the machine, counted apart from agent failures: ``failures`` of
    ``rollouts``, ``share``, ``reasons`` (reason -> count), ``retried`` (pipeline/rollouts/infra.py)."""


@dataclass(frozen=True, kw_only=True)
class BudgetExhausted(Event):
    """A ``--max-*`` budget stopped the run (``run_finished`` follows, with ``stopped``)."""

    NAME: ClassVar[str] = "budget_exhausted"
    generation: int
    stage: str
    limit: str
    spent: float
    cap: float


@dataclass(frozen=True, kw_only=True)
class RunInterrupted(Event):
    """Ctrl-C or SIGTERM stopped the run (``signal``); ``--resume`` picks it up from here."""

    NAME: ClassVar[str] = "run_interrupted"
    generation: int
    stage: str
    error: str
    rev: str | None = None
    usage: dict[str, Any] | None = None
    signal: str | None = None


@dataclass(frozen=True, kw_only=True)
class RunFailed(Event):
    NAME: ClassVar[str] = "run_failed"
    generation: int
    stage: str
    error: str
    rev: str | None = None
    usage: dict[str, Any] | None = None


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
    """Whether an accepted edit showed in later trajectories (``pipeline/judging/edit_firing.py``): its
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


# -- training and the sealed test split --------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class PolicyTrained(Event):
    """``--train-every``: the agent model was fine-tuned on the run so far."""

    NAME: ClassVar[str] = "policy_trained"
    generation: int
    mode: str
    base_model: str
    model: str
    checkpoint: str
    samples: int
    trained_tokens: int
    tokens: int
    loss_before: float
    loss_after: float
    train_s: float
    seconds: float
    tokens_per_s: float


@dataclass(frozen=True, kw_only=True)
class PolicyTrainingSkipped(Event):
    """``--train-every``: nothing to learn from yet (no success, no groups); the model stays."""

    NAME: ClassVar[str] = "policy_training_skipped"
    generation: int
    model: str
    skipped: str


@dataclass(frozen=True, kw_only=True)
class AgentModelChanged(Event):
    """After training, the new checkpoint is the agent model; ``validation`` is its score."""

    NAME: ClassVar[str] = "agent_model_changed"
    generation: int
    model: str
    validation: float


@dataclass(frozen=True, kw_only=True)
class TestEvaluated(Event):
    """The sealed test split was scored: by ``report --final`` (``source`` unset) or ``gate``."""

    NAME: ClassVar[str] = "test_evaluated"
    tasks: int
    revisions: dict[str, str]
    scores: dict[str, float]
    split: str | None = None
    model: str | None = None
    source: str | None = None
    benchmark: str | None = None
    control: dict[str, Any] | None = None
    """The seed's best-of-k at the rollouts the run spent (``pipeline/rollouts/best_of_k.py``): ``k``,
    ``sc`` (self-consistency pick) and ``oracle`` (pass@k) with their intervals, ``matched_to``."""
    intervals: dict[str, list[float]] | None = None
    """Confidence interval of each score in ``scores`` (``gate.noise.mean_ci``)."""
    variants: dict[str, Any] | None = None
    """``report --final --variants N``: seed and evolved on synthesized variants of the test tasks."""
    infra: dict[str, Any] | None = None
    """Rollouts of this scoring that failed on the machine (``pipeline/rollouts/infra.py``), counted apart."""


@dataclass(frozen=True, kw_only=True)
class InfraFailure(Event):
    """A rollout failed on the machine, not in the agent (``core/infra.py``): ``retry`` true when
    it is run once more (this attempt does not count), false when it stands, scored 0."""

    NAME: ClassVar[str] = "infra_failure"
    task: str
    harness_hash: str
    reason: str
    detail: str
    retry: bool


@dataclass(frozen=True, kw_only=True)
class FloorChecked(Event):
    """The null-agent floor (``pipeline/judging/floor.py``) on a sample of the benchmark at the run's start:
    ``share`` of the ``tasks`` checked that a do-nothing or trivial agent passes, ``passed`` task ->
    the agents that pass it; ``refused`` when the share is above ``max_share`` (exit 2)."""

    NAME: ClassVar[str] = "floor_checked"
    tasks: int
    share: float
    max_share: float
    passed: dict[str, list[str]]
    refused: bool
    accepted: bool = False
    """``--accept-floor``: the benchmark means it; the run goes on whatever the share."""
    score: float | None = None
    """The floor as a score: mean over the sample of the best null agent's score (partial credit)."""


@dataclass(frozen=True, kw_only=True)
class TaskGenerated(Event):
    """Environment evolution made a harder train task from ``parent`` (``run --evolve-environments``).

    ``kept`` says whether it joined the train pool; ``reason`` why not (its gold fails its checker,
    the current harness already passes it, ...). Kept tasks' documents are ``generated/<task>.yaml``
    in the run folder, so a resumed run schedules the same tasks."""

    NAME: ClassVar[str] = "task_generated"
    generation: int
    task: str
    parent: str
    maker: str
    difficulty: dict[str, int]
    kept: bool
    reason: str | None = None


@dataclass(frozen=True, kw_only=True)
class EnvironmentStatus(Event):
    """Per generation with ``--evolve-environments``: the generated pool and how the current harness
    did on the generated tasks in this generation's minibatch."""

    NAME: ClassVar[str] = "environment_status"
    generation: int
    pool: int
    in_batch: int
    passed_in_batch: int
    mean_level: float
    triggered: list[str]


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
        return cls(**{k: v for k, v in payload.items() if k in declared}, ts=stamp)
    except (TypeError, ValueError) as exc:
        return UnknownEvent(name=cls.NAME, payload=payload, reason=f"fields do not fit: {exc}", ts=stamp)

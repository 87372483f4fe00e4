"""Ledger events of the optional stages and the checks around a run: policy training, the sealed
test split, machine failures, the null-agent floor and task synthesis (the catalog is
``runs/events.py``, which re-exports them)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from harnessevolve.runs.event_record import Event

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
    """The seed's best-of-k at the rollouts the run spent (``scoring/best_of_k.py``): ``k``,
    ``sc`` (self-consistency pick) and ``oracle`` (pass@k) with their intervals, ``matched_to``."""
    intervals: dict[str, list[float]] | None = None
    """Confidence interval of each score in ``scores`` (``gate.noise.mean_ci``)."""
    variants: dict[str, Any] | None = None
    """``report --final --variants N``: seed and evolved on synthesized variants of the test tasks."""
    infra: dict[str, Any] | None = None
    """Rollouts of this scoring that failed on the machine (``scoring/infra.py``), counted apart."""
    kept: str | None = None
    """``gate --split test``: the folder (relative to the harness folder) that keeps this look's
    per-task outcomes (``outcomes.json``), trajectories and evaluations."""


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
    """The null-agent floor (``judging/floor.py``) on a sample of the benchmark at the run's start:
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

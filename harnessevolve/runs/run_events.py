"""Ledger events of a run's start and end, and of the processes that work on it (a resume, a stale
lock, a kill, a failure); the catalog is ``runs/events.py``, which re-exports them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from harnessevolve.runs.event_record import Event

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
    ``rollouts``, ``share``, ``reasons`` (reason -> count), ``retried`` (scoring/infra.py)."""


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

"""What a run has done so far, as the loop keeps it (the ledger is the durable record)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class GenerationRow:
    generation: int
    candidate: str = "-"
    summary: str = ""
    verdicts: dict[str, bool | None] = field(default_factory=dict)
    train_current: float | None = None
    train_candidate: float | None = None
    validation: float | None = None
    outcome: str = ""


@dataclass
class RunState:
    run_id: str
    rows: list[GenerationRow] = field(default_factory=list)
    accepted: list[str] = field(default_factory=list)
    reverted: list[str] = field(default_factory=list)
    stage: str = "starting"
    generation: int = 0
    pending_sha: str | None = None


@dataclass(frozen=True)
class RunHooks:
    """How the caller watches a run: progress bars and log lines (the CLI passes rich ones)."""

    on_progress: Callable[[str, int], Callable[[], None]] | None = None
    """A stage of ``total`` rollouts starts (``label``); returns what to call as each one ends."""
    log: Callable[[str], None] = lambda _m: None
    on_outer: Callable[[int, int], None] = lambda _n, _total: None
    """The outer count of a long command: a run's generation ``n`` of ``total`` has begun."""

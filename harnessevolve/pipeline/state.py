"""What a run has done so far, as the loop keeps it (the ledger is the durable record)."""

from __future__ import annotations

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

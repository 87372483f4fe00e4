"""A run's machine failures from its ledger (``infra_failure`` events, ``run_finished.infra``), for
every table that shows results: ``run``'s summary, ``status``, ``report``."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from harnessevolve.runs.events import Event, InfraFailure, RunFinished
from harnessevolve.runs.ledger import read_events


@dataclass(frozen=True)
class InfraCounts:
    failures: int = 0
    """Rollouts that stand as machine failures (scored 0, counted apart)."""
    retried: int = 0
    """Machine failures that were run once more (the retry's outcome is what counts)."""
    reasons: dict[str, int] = field(default_factory=dict)
    rollouts: int | None = None
    """The run's finished rollouts (known once it finished)."""

    def line(self) -> str:
        """One line for a summary: ``infra failures: 3 of 40 rollouts (sandbox_start 3); ...``."""
        of = f" of {self.rollouts} rollouts" if self.rollouts else ""
        why = ", ".join(f"{r} {n}" for r, n in sorted(self.reasons.items(), key=lambda kv: -kv[1]))
        text = f"infra failures (the machine, not the agent): {self.failures}{of}"
        text += f" ({why})" if why else ""
        text += f"; {self.retried} retried once" if self.retried else ""
        return text + "; scored 0, not counted as agent failures"


def infra_counts(ledger: Path) -> InfraCounts:
    return fold_infra(read_events(ledger)) if ledger.is_file() else InfraCounts()


def fold_infra(events: Iterable[Event]) -> InfraCounts:
    """The machine failures of a run's events (every process's ``infra_failure``), and its rollouts
    once ``run_finished`` says them."""
    reasons: Counter[str] = Counter()
    retried = 0
    rollouts = None
    for record in events:
        if isinstance(record, InfraFailure):
            if record.retry:
                retried += 1
            else:
                reasons[record.reason] += 1
        elif isinstance(record, RunFinished) and record.infra:
            rollouts = int(record.infra.get("rollouts", 0)) or None
    return InfraCounts(sum(reasons.values()), retried, dict(reasons), rollouts)

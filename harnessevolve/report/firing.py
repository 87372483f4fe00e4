"""Whether each accepted edit fired, as ``status`` and the HTML report show it (from ``edit_fired``
ledger events, see ``judging/edit_firing.py``)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from harnessevolve.runs.events import EditFired, Event


@dataclass(frozen=True)
class Firing:
    sha: str
    generation: int
    label: str
    """``fired (gen N)``, ``never fired`` or ``not observed`` (nothing ran after it)."""
    evidence: tuple[str, ...]


def firings(events: Iterable[Event]) -> list[Firing]:
    """The latest verdict per accepted edit, in the order the edits were accepted."""
    latest: dict[str, EditFired] = {}
    for record in events:
        if isinstance(record, EditFired):
            latest[record.sha] = record
    out = []
    for record in sorted(latest.values(), key=lambda r: r.generation):
        if record.fired:
            label = f"fired (gen {record.observed_generation})"
        elif record.runs:
            label = "never fired"
        else:
            label = "not observed"
        out.append(Firing(record.sha, record.generation, label, tuple(record.evidence or ())))
    return out


def firing_summary(events: Iterable[Event], accepted: int) -> str:
    """One line: ``2 of 3 accepted edits fired; never fired: 1a2b3c4d; 0 not yet judged``."""
    rows = firings(events)
    fired = [f for f in rows if f.label.startswith("fired")]
    never = [f.sha[:8] for f in rows if f.label == "never fired"]
    unseen = [f.sha[:8] for f in rows if f.label == "not observed"]
    parts = [f"{len(fired)} of {accepted} accepted edit(s) fired"]
    if never:
        parts.append(f"never fired: {', '.join(never)}")
    if unseen:
        parts.append(f"not observed (nothing ran after them): {', '.join(unseen)}")
    if accepted > len(rows):
        parts.append(f"{accepted - len(rows)} not judged yet")
    return "; ".join(parts)

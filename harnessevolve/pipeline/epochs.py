"""Epochs and the snapshot pool (HarnessEvolve): every accepted revision is a snapshot with its
validation score; ``patience`` straight generations without an acceptance end an epoch, and at each
epoch's end (the run's end included) the best snapshot on validation becomes current again."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Snapshot:
    sha: str
    harness_hash: str
    validation: float
    generation: int


@dataclass
class SnapshotPool:
    snapshots: list[Snapshot] = field(default_factory=list)

    def add(self, snapshot: Snapshot) -> None:
        self.snapshots.append(snapshot)

    def best(self) -> Snapshot:
        """Highest validation score; among ties the latest (it carries the most accepted evidence)."""
        return max(reversed(self.snapshots), key=lambda s: s.validation)


@dataclass
class EpochClock:
    patience: int = 10
    """Straight generations without an accepted edit that end an epoch (HarnessEvolve: 10)."""
    epoch: int = 1
    streak: int = 0

    def tick(self, accepted: bool) -> bool:
        """Count one generation; True when it ends the epoch (and a new one starts)."""
        self.streak = 0 if accepted else self.streak + 1
        if self.streak >= self.patience:
            self.streak = 0
            self.epoch += 1
            return True
        return False

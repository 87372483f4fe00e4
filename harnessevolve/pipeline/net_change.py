"""What a run changed, seed to final: the harness files that differ and the validation score before
and after. A run whose final harness equals its seed found nothing, whatever it accepted on the way
(an edit and its exact undo, both accepted on ties)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from harnessevolve.harness.git import HarnessRepo
from harnessevolve.runs.events import Baseline, EpochFinished, Event, GenerationFinished, RunStarted


@dataclass(frozen=True)
class NetChange:
    seed_rev: str
    final_rev: str
    files: tuple[str, ...]
    """Harness files that differ between the seed and the final revision."""
    validation_seed: float | None
    validation_final: float | None

    @property
    def changed(self) -> bool:
        return bool(self.files)

    @property
    def delta(self) -> float | None:
        if self.validation_seed is None or self.validation_final is None:
            return None
        return round(self.validation_final - self.validation_seed, 4)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "files": list(self.files), "delta": self.delta, "changed": self.changed}

    def summary(self) -> str:
        if not self.changed:
            return f"no net change: the final harness equals the seed ({self.seed_rev[:8]})" + (
                f"; validation {self.validation_seed:.3f}" if self.validation_seed is not None else ""
            )
        shown = ", ".join(self.files[:4]) + (
            f" and {len(self.files) - 4} more" if len(self.files) > 4 else ""
        )
        score = ""
        if self.delta is not None:
            score = (
                f"; validation {self.validation_seed:.3f} -> {self.validation_final:.3f} ({self.delta:+.3f})"
            )
        files = f"{len(self.files)} file(s) changed ({shown})"
        return f"net change since the seed {self.seed_rev[:8]}: {files}{score}"


def net_change(events: list[Event], repo: HarnessRepo) -> NetChange | None:
    """From the run's ledger (its first ``run_started`` and ``baseline``, the last validation score)
    and git. None when the ledger has no start (nothing to compare)."""
    started = next((e for e in events if isinstance(e, RunStarted)), None)
    if started is None or not started.rev:
        return None
    seed: float | None = next((e.score for e in events if isinstance(e, Baseline)), None)
    final = seed
    for e in events:  # the current harness's validation score after each step
        if isinstance(e, GenerationFinished) and e.validation is not None:
            final = e.validation
        elif isinstance(e, EpochFinished):
            final = e.best_validation
    head = repo.head()
    return NetChange(
        seed_rev=started.rev,
        final_rev=head,
        files=tuple(repo.changed_files(started.rev, head)),
        validation_seed=float(seed) if seed is not None else None,
        validation_final=float(final) if final is not None else None,
    )

"""Counting infrastructure failures apart from agent failures, and stopping a run they dominate.

One ``InfraTally`` is shared by every scorer of a run (or of a ``gate`` / ``report --final``).
The scorer tells it about each finished rollout (``counted``) and each rollout that failed on the
machine (``failed``, ``core/infra.py`` says which do); ``check`` raises ``InfraFailureError``
(exit code 3) once more than ``max_share`` of the finished rollouts are machine failures, after
at least ``min_rollouts`` of them (or when every rollout so far failed that way).

A failure the scorer retries (once, before anything of the rollout was scored) is reported with
``retry=True`` and is not counted: only the attempt that stands counts. ``on_failure`` receives
every report (the run writes each as an ``infra_failure`` ledger event).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from harnessevolve.core.errors import InfraFailureError

DEFAULT_MAX_SHARE = 0.5
"""A run stops (exit 3) when more than half of its finished rollouts failed on the machine."""
MIN_ROLLOUTS = 4


@dataclass(frozen=True)
class InfraFailure:
    task_id: str
    harness_hash: str
    reason: str
    """``sandbox_start``, ``setup``, ``tool_server``, ``endpoint``, ``executor``, ``killed``."""
    detail: str
    retry: bool
    """True: this attempt is retried (it does not count); False: it stands, scored 0."""


class InfraTally:
    def __init__(
        self,
        max_share: float = DEFAULT_MAX_SHARE,
        *,
        min_rollouts: int = MIN_ROLLOUTS,
        on_failure: Callable[[InfraFailure], None] | None = None,
    ) -> None:
        if not 0.0 <= max_share <= 1.0:  # NaN too
            raise ValueError(f"max_share must be in [0, 1], not {max_share}")
        self.max_share = max_share
        self.min_rollouts = min_rollouts
        self.on_failure = on_failure
        self.rollouts = 0
        """Finished rollouts that stand (agent outcomes and machine failures alike)."""
        self.reasons: Counter[str] = Counter()
        """Standing machine failures by reason."""
        self.retried = 0
        self.first: InfraFailure | None = None
        """The first standing failure: its detail names the cause (a tool module that fails to import)."""

    @property
    def failures(self) -> int:
        return sum(self.reasons.values())

    @property
    def share(self) -> float:
        return self.failures / self.rollouts if self.rollouts else 0.0

    def counted(self) -> None:
        self.rollouts += 1

    def uncount(self) -> None:
        """A counted rollout turned out to be a machine failure that is retried (its checks could
        not start): the retry counts instead."""
        self.rollouts -= 1

    def failed(self, failure: InfraFailure) -> None:
        if failure.retry:
            self.retried += 1
        else:
            self.reasons[failure.reason] += 1
            self.first = self.first or failure
        if self.on_failure is not None:
            self.on_failure(failure)

    def exceeded(self) -> bool:
        if not self.failures:
            return False
        enough = self.rollouts >= self.min_rollouts or self.failures == self.rollouts
        return enough and self.share > self.max_share

    def check(self) -> None:
        """Raise ``InfraFailureError`` when machine failures dominate (see the module docstring)."""
        if self.exceeded():
            first = self.first
            cause = f"; first: {first.task_id}: {' '.join(first.detail.split())[:300]}" if first else ""
            raise InfraFailureError(
                f"{self.failures} of {self.rollouts} rollouts failed on the machine, not in the agent "
                f"({self.describe()}); more than {self.max_share:.0%}: stopping{cause}"
            )

    def describe(self) -> str:
        return ", ".join(f"{reason} {n}" for reason, n in self.reasons.most_common())

    def to_dict(self) -> dict[str, Any]:
        return {
            "rollouts": self.rollouts,
            "failures": self.failures,
            "share": round(self.share, 4),
            "reasons": dict(self.reasons),
            "retried": self.retried,
            "max_share": self.max_share,
        }


def ledger_infra_tally(ledger: Any, max_share: float = DEFAULT_MAX_SHARE) -> InfraTally:
    """A run's tally: every machine failure becomes an ``infra_failure`` event in ``ledger``."""
    from harnessevolve.runs.events import InfraFailure as InfraFailureEvent

    def record(failure: InfraFailure) -> None:
        ledger.append(
            InfraFailureEvent(
                task=failure.task_id,
                harness_hash=failure.harness_hash,
                reason=failure.reason,
                detail=failure.detail,
                retry=failure.retry,
            )
        )

    return InfraTally(max_share, on_failure=record)

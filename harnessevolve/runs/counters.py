"""A run's rollout counters, summed over every process that worked on it.

A run killed and resumed is several processes; each counts only its own rollouts. ``counters.json``
in the run folder keeps each process's latest counts (``RunCounters.record``, called after every
ledger event and after every rollout), so ``run_finished`` can report the run's totals: a killed
process's counts survive it up to its last rollout (a rollout killed between its cache entry and its
count is served from the rollout cache on resume and counted there as cached)."""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from harnessevolve.core.files import atomic_write_json

COUNTERS_FILE = "counters.json"
COUNTERS_VERSION = 1


@dataclass(frozen=True)
class Counts:
    rollouts: int = 0
    """Rollouts executed (cache hits excluded)."""
    cached_rollouts: int = 0
    """Results served by the persistent rollout cache."""
    tokens: int = 0
    infra_rollouts: int = 0
    """Finished rollouts the machine-failure tally counted (its share's denominator)."""

    def __add__(self, other: Counts) -> Counts:
        return Counts(
            self.rollouts + other.rollouts,
            self.cached_rollouts + other.cached_rollouts,
            self.tokens + other.tokens,
            self.infra_rollouts + other.infra_rollouts,
        )

    def within(self, other: Counts) -> bool:
        """Every count at most ``other``'s (a process's counts only grow)."""
        return all(getattr(self, k) <= getattr(other, k) for k in asdict(self))

    @classmethod
    def from_json(cls, data: Any) -> Counts:
        if not isinstance(data, dict):
            return cls()
        values = {k: data.get(k) for k in ("rollouts", "cached_rollouts", "tokens", "infra_rollouts")}
        return cls(**{k: v for k, v in values.items() if isinstance(v, int) and not isinstance(v, bool)})


class RunCounters:
    """This process's entry in ``counters.json``; :meth:`total` adds the other processes' entries."""

    def __init__(self, run_dir: Path) -> None:
        self.path = Path(run_dir) / COUNTERS_FILE
        self.process = f"{os.getpid()}-{time.time_ns()}"
        self._last: Counts | None = None
        self._lock = threading.Lock()  # rollouts end in several threads at once
        self._processes: dict[str, Any] | None = None
        """The file's entries as first read: the run's other processes do not write it while this
        one holds the harness lock, so a per-rollout record need not read it again."""

    def others(self) -> Counts:
        """The counts of the run's earlier (or killed) processes."""
        total = Counts()
        for key, counts in self._read().items():
            if key != self.process:
                total += Counts.from_json(counts)
        return total

    def record(self, counts: Counts, *, durable: bool = True) -> None:
        """Keep ``counts`` as this process's entry (rewritten only when they changed). ``durable``
        False: renamed into place without an fsync (survives a killed process, not a lost machine;
        the per-rollout record, cheap at many rollouts a second)."""
        with self._lock:
            if self._last is not None and counts.within(self._last):
                return  # nothing new, or a thread's older view arriving after a newer one
            if self._processes is None:
                self._processes = self._read()
            processes = self._processes
            processes[self.process] = asdict(counts)
            doc = {"version": COUNTERS_VERSION, "processes": processes}
            atomic_write_json(self.path, doc, durable=durable)
            self._last = counts

    def total(self, counts: Counts) -> Counts:
        """The run's totals: ``counts`` (this process, recorded first) plus every other process's."""
        self.record(counts)
        return counts + self.others()

    def _read(self) -> dict[str, Any]:
        try:
            doc = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        if not isinstance(doc, dict) or doc.get("version") != COUNTERS_VERSION:
            return {}
        processes = doc.get("processes")
        return dict(processes) if isinstance(processes, dict) else {}

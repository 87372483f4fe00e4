"""The run's spend, persisted as it happens: ``spend.json`` in the run folder holds the usage
meter's snapshot, rewritten atomically after model calls (at most every ``interval_s``, and once
more when the run stops). A ``kill -9`` loses at most that interval's calls, where the ledger alone
(usage at generation ends) lost everything since the last finished generation; resume and the
budgets count from whichever record is later."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

from harnessevolve.core.files import atomic_write_json
from harnessevolve.models.usage import UsageMeter

SPEND_FILE = "spend.json"
SPEND_VERSION = 1


class SpendJournal:
    def __init__(self, run_dir: Path, meter: UsageMeter, *, interval_s: float = 0.2) -> None:
        self.path = Path(run_dir) / SPEND_FILE
        self.meter = meter
        self.interval_s = interval_s
        self._last = 0.0
        self._lock = threading.Lock()
        meter.listeners.append(self.on_record)

    def on_record(self) -> None:
        if time.monotonic() - self._last >= self.interval_s:
            self.flush()

    def flush(self) -> None:
        if not self._lock.acquire(blocking=False):
            return  # another thread is writing it right now
        try:
            self._last = time.monotonic()
            atomic_write_json(self.path, {"version": SPEND_VERSION, "usage": self.meter.snapshot()})
        finally:
            self._lock.release()

    def close(self) -> None:
        if self.on_record in self.meter.listeners:
            self.meter.listeners.remove(self.on_record)
        with self._lock:
            atomic_write_json(self.path, {"version": SPEND_VERSION, "usage": self.meter.snapshot()})


def read_spend(run_dir: Path) -> dict[str, Any] | None:
    """The last persisted usage snapshot, or None (no file, unreadable, or a newer version)."""
    try:
        doc = json.loads((Path(run_dir) / SPEND_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if (
        not isinstance(doc, dict)
        or doc.get("version") != SPEND_VERSION
        or not isinstance(doc.get("usage"), dict)
    ):
        return None
    return doc["usage"]


def later_usage(*snapshots: dict[str, Any] | None) -> dict[str, Any] | None:
    """Of usage snapshots of one run, the one with the most calls (spend only grows)."""
    known = [s for s in snapshots if isinstance(s, dict)]
    return max(known, key=lambda s: (s.get("totals") or {}).get("calls", 0), default=None)

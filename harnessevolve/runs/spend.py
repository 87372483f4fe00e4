"""The run's spend, persisted as it happens: ``spend.json`` in the run folder holds the usage
meter's snapshot, replaced after every model call and synced when the run stops. A ``kill -9``
loses no call that was metered, where the ledger alone (usage at generation ends) lost everything
since the last finished generation; resume and the budgets count from whichever record is later."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

from harnessevolve.core.files import atomic_write_json
from harnessevolve.models.usage import UsageMeter

SPEND_FILE = "spend.json"
SPEND_VERSION = 1


class SpendJournal:
    """Keeps ``spend.json`` equal to the meter after every recorded call.

    Each call rewrites the file by rename (no fsync: a killed process's writes survive in the page
    cache; only a power cut could lose the last ones), ``close`` syncs it. Calls from several
    threads never skip a write: a call arriving while another thread writes marks the file stale
    and that thread writes again."""

    def __init__(self, run_dir: Path, meter: UsageMeter) -> None:
        self.path = Path(run_dir) / SPEND_FILE
        self.meter = meter
        self._lock = threading.Lock()
        self._stale = False
        meter.listeners.append(self.on_record)

    def on_record(self) -> None:
        self._stale = True
        while self._stale and self._lock.acquire(blocking=False):
            try:
                self._stale = False
                self._write(sync=False)
            finally:
                self._lock.release()

    def _write(self, *, sync: bool) -> None:
        document = {"version": SPEND_VERSION, "usage": self.meter.snapshot()}
        if sync:
            atomic_write_json(self.path, document)
            return
        temp = self.path.with_name(f".{self.path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        temp.write_text(json.dumps(document), encoding="utf-8")
        os.replace(temp, self.path)

    def close(self) -> None:
        if self.on_record in self.meter.listeners:
            self.meter.listeners.remove(self.on_record)
        with self._lock:
            self._write(sync=True)


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
    usage: dict[str, Any] = doc["usage"]
    return usage


def later_usage(*snapshots: dict[str, Any] | None) -> dict[str, Any] | None:
    """Of usage snapshots of one run, the one with the most calls (spend only grows)."""
    known = [s for s in snapshots if isinstance(s, dict)]
    return max(known, key=lambda s: (s.get("totals") or {}).get("calls", 0), default=None)

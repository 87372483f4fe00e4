"""The run ledger: append-only JSONL, one event a line, flushed and fsynced per event."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

LEDGER_VERSION = 1


class Ledger:
    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._handle = path.open("a", encoding="utf-8")

    def append(self, event: str, **data: Any) -> dict[str, Any]:
        record = {
            "v": LEDGER_VERSION,
            "ts": datetime.now(UTC).isoformat(timespec="milliseconds"),
            "event": event,
            **data,
        }
        self._handle.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")
        self._handle.flush()
        os.fsync(self._handle.fileno())
        return record

    def close(self) -> None:
        self._handle.close()


def read_ledger(path: Path) -> list[dict[str, Any]]:
    """Every complete event; a torn last line (a crash mid-write) is skipped."""
    events = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            events.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return events

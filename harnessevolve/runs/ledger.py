"""The run ledger: append-only JSONL, one event a line, flushed and fsynced per event."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from harnessevolve.core.redact import redact, redact_obj

LEDGER_VERSION = 1


class Ledger:
    def __init__(self, path: Path, listeners: Iterable[Callable[[dict[str, Any]], None]] = ()) -> None:
        """``listeners`` get each event as written (secrets redacted), e.g. an MLflow tracker."""
        self.path = path
        self.listeners = list(listeners)
        path.parent.mkdir(parents=True, exist_ok=True)
        self._handle = path.open("a", encoding="utf-8")
        if self._handle.tell() and not path.read_bytes().endswith(b"\n"):
            # A crash cut the last line short: end it, so the next event starts on a line of its own.
            self._handle.write("\n")
            self._handle.flush()

    def append(self, event: str, **data: Any) -> dict[str, Any]:
        record = {
            "v": LEDGER_VERSION,
            "ts": datetime.now(UTC).isoformat(timespec="milliseconds"),
            "event": event,
            **data,
        }
        line = json.dumps(redact_obj(record), ensure_ascii=False, default=lambda value: redact(str(value)))
        self._handle.write(line + "\n")
        self._handle.flush()
        os.fsync(self._handle.fileno())
        if self.listeners:
            written = json.loads(line)
            for listener in self.listeners:
                listener(written)
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

"""The run ledger: append-only JSONL, one event a line, flushed and fsynced per event.

Every line is ``{"v": LEDGER_VERSION, "ts": ..., "event": NAME, **fields}`` with the event's fields
from the catalog (:mod:`harnessevolve.runs.events`; the schema is
``harnessevolve/schemas/ledger.schema.json``). Reading checks each line's version: a newer one is
refused, an older one is migrated to this version's shape, so every reader sees one shape.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from harnessevolve.core.errors import HarnessEvolveError
from harnessevolve.core.redact import redact, redact_obj
from harnessevolve.runs.events import (
    CATALOG,
    ENVELOPE,
    PROCESS_EVENTS,
    Event,
    RunFinished,
    RunStarted,
    TestEvaluated,
    UnknownEvent,
    build_event,
    parse_event,
)

LEDGER_VERSION = 2
"""2: ``run_started.options`` holds the run's options typed, once (1 kept them twice: stringified in
``options``, typed in ``resume``)."""


class LedgerError(HarnessEvolveError):
    """A ledger line cannot be read: not JSON (and not the torn last line), or a newer version."""

    default_hint = "the ledger is append-only JSONL; restore the line named above or start a new run"


Listener = Callable[[Event], None]

AFTER_END: frozenset[str] = frozenset({TestEvaluated.NAME})
"""Events a finished run still takes: the sealed test split scored later (``report --final``,
``gate``). Anything else after ``run_finished`` is refused (a run cannot go on once finished)."""


class LedgerClosedError(HarnessEvolveError):
    """An event other than a post-run annotation was appended after ``run_finished``."""

    default_hint = "the run already finished; start a new run instead"


class Ledger:
    def __init__(self, path: Path, listeners: Iterable[Listener] = ()) -> None:
        """``listeners`` get each event as written (its typed record, secrets redacted), e.g. an
        MLflow tracker. Opening reads the ledger: a finished run takes only ``AFTER_END`` events."""
        self.path = path
        self.listeners = list(listeners)
        path.parent.mkdir(parents=True, exist_ok=True)
        _repair_torn_tail(path)
        self.finished = path.is_file() and any(
            record.get("event") == RunFinished.NAME for record in parse_ledger_bytes(path.read_bytes(), path)
        )
        """Whether ``run_finished`` is in the ledger (read when opened, kept up to date by append)."""
        self._replayed: list[dict[str, Any]] = []
        self._handle = path.open("a", encoding="utf-8")

    def replay(self, events: Iterable[Event]) -> None:
        """A resume redoes the step a crash cut short: ``events`` are what that step already wrote.
        An append equal to one of them (fields equal; ``ts`` aside) is not written again, so a redo
        that goes the same way leaves each event in the ledger once; the first one that differs
        ends the replay (the redo went another way: from there on everything is written). The
        events of a process (``PROCESS_EVENTS``: ``run_resumed``, ...) pass by the replay."""
        self._replayed = [_as_written(e.NAME, e.fields()) for e in events]

    def append(self, event: Event | str, **data: Any) -> dict[str, Any]:
        """Write ``event`` (a catalog record, or a catalog name and its fields); returns the line."""
        record_event = build_event(event, data) if isinstance(event, str) else event
        if data and not isinstance(event, str):
            raise TypeError("pass an event record or a name with fields, not both")
        if isinstance(record_event, UnknownEvent):
            raise TypeError(f"an UnknownEvent ({record_event.name!r}) is read, never written")
        if self._replayed and not isinstance(record_event, PROCESS_EVENTS):
            same = _as_written(record_event.NAME, record_event.fields())
            if same in self._replayed:  # the redo's event is in the ledger already
                del self._replayed[: self._replayed.index(same) + 1]
                return same
            self._replayed = []
        if self.finished and record_event.NAME not in AFTER_END:
            raise LedgerClosedError(
                f"refusing {record_event.NAME!r}: the run already finished (run_finished is written)",
                file=str(self.path),
            )
        record = {
            "v": LEDGER_VERSION,
            "ts": datetime.now(UTC).isoformat(timespec="milliseconds"),
            "event": record_event.NAME,
            **record_event.fields(),
        }
        line = _line(record)
        self._handle.write(line + "\n")
        self._handle.flush()
        os.fsync(self._handle.fileno())
        if isinstance(record_event, RunFinished):
            self.finished = True
        if self.listeners:
            written = parse_event(json.loads(line))
            for listener in self.listeners:
                listener(written)
        return record

    def close(self) -> None:
        self._handle.close()


def _line(record: dict[str, Any]) -> str:
    return json.dumps(redact_obj(record), ensure_ascii=False, default=lambda value: redact(str(value)))


def _as_written(name: str, fields: dict[str, Any]) -> dict[str, Any]:
    """An event's name and fields as its line holds them (redacted, through JSON; no envelope)."""
    written: dict[str, Any] = json.loads(_line({"event": name, **fields}))
    return written


def _repair_torn_tail(path: Path) -> None:
    """A crash mid-write leaves a last line without its newline: a complete event gets its newline,
    a torn one is cut off (it never finished; appending after it would bury it mid-file)."""
    if not path.is_file():
        return
    data = path.read_bytes()
    if not data or data.endswith(b"\n"):
        return
    start = data.rfind(b"\n") + 1
    try:
        json.loads(data[start:])
    except ValueError:
        with path.open("r+b") as handle:
            handle.truncate(start)
            handle.flush()
            os.fsync(handle.fileno())
        return
    with path.open("ab") as handle:
        handle.write(b"\n")
        handle.flush()
        os.fsync(handle.fileno())


def migrate_event(record: dict[str, Any]) -> dict[str, Any]:
    """``record`` in this version's shape (a line of an older ledger is upgraded; others unchanged)."""
    version = record.get("v", 1)
    if version == 1 and record.get("event") == RunStarted.NAME and isinstance(record.get("resume"), dict):
        record = {**record, "options": record["resume"]}
        record.pop("resume")
    return {**record, "v": LEDGER_VERSION} if version != LEDGER_VERSION else record


def parse_ledger_line(line: str, path: Path | str, number: int) -> dict[str, Any]:
    """One line (1-based ``number``) as a current-version event; LedgerError says what is wrong."""
    where = f"{path}:{number}"
    try:
        record = json.loads(line)
    except json.JSONDecodeError as exc:
        raise LedgerError(f"line {number} is not JSON ({exc.msg})", file=where) from None
    if not isinstance(record, dict) or not isinstance(record.get("event"), str):
        raise LedgerError(f"line {number} is not a ledger event (an object with an 'event')", file=where)
    version = record.get("v", 1)
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise LedgerError(f"line {number} has an invalid version {version!r}", file=where, field="v")
    if version > LEDGER_VERSION:
        raise LedgerError(
            f"line {number} was written by a newer harnessevolve (ledger v{version}; this one reads up "
            f"to v{LEDGER_VERSION})",
            file=where,
            field="v",
            hint="upgrade harnessevolve to read this run",
        )
    return migrate_event(record)


def parse_ledger_bytes(data: bytes, path: Path | str) -> list[dict[str, Any]]:
    """Every event of a ledger's bytes; only a torn last line (a crash mid-write) is skipped."""
    return [record for _line, record in numbered_records(data, path)]


def numbered_records(data: bytes, path: Path | str) -> list[tuple[int, dict[str, Any]]]:
    """``parse_ledger_bytes`` with each event's line number in the file."""
    lines = data.split(b"\n")
    torn_last = not data.endswith(b"\n")
    events = []
    for index, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            events.append((index, parse_ledger_line(_decode(raw, path, index), path, index)))
        except LedgerError:
            if torn_last and index == len(lines):
                continue
            raise
    return events


def _decode(raw: bytes, path: Path | str, number: int) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        where = f"{path}:{number}"
        raise LedgerError(f"line {number} is not UTF-8 text ({exc.reason})", file=where) from None


def read_ledger(path: Path) -> list[Event]:
    """Every event of the ledger at ``path`` as its typed record (runs/events.py), ``ts`` set; a
    line this version cannot type is an :class:`UnknownEvent`. Only a torn last line (a crash
    mid-write) is skipped; anything else undecodable raises LedgerError naming the line."""
    events = []
    for line, record in numbered_records(path.read_bytes(), path):
        event = parse_event(record)
        events.append(dataclasses.replace(event, line=line) if isinstance(event, UnknownEvent) else event)
    return events


def malformed(events: list[Event]) -> list[UnknownEvent]:
    """Lines of events this version knows whose fields do not fit their record (a wrong type, a
    missing field): readers go on without them; ``--resume`` refuses the run."""
    return [e for e in events if isinstance(e, UnknownEvent) and e.name in CATALOG]


def malformed_note(path: Path, events: list[Event]) -> str:
    """One line saying which lines a read-only command left out (empty when none)."""
    bad = malformed(events)
    if not bad:
        return ""
    first = bad[0]
    more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
    return f"{path}: line {first.line}: {first.reason}{more}; shown without it"


read_events = read_ledger
"""The same reader by the name the typed read was introduced under."""


def read_lines(path: Path) -> list[dict[str, Any]]:
    """The ledger's lines as written (JSON objects, migrated to this version): for checking the
    file itself (tests, schema checks); readers of events use :func:`read_ledger`."""
    return parse_ledger_bytes(path.read_bytes(), path)


__all__ = [
    "ENVELOPE",
    "LEDGER_VERSION",
    "Ledger",
    "LedgerClosedError",
    "LedgerError",
    "migrate_event",
    "parse_ledger_line",
    "parse_ledger_bytes",
    "read_events",
    "read_ledger",
    "read_lines",
    "malformed",
    "malformed_note",
    "numbered_records",
]

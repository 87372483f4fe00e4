"""Finding a harness's runs and telling whether one is still alive (from its lock and ledger)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from harnessevolve.runs import events as ev
from harnessevolve.runs.rundir import STATE_DIR, RunDir, pid_alive, runs_folder

START_EVENTS = (ev.RunStarted.NAME, ev.RunResumed.NAME)
END_STATES = ev.END_EVENTS


def runs_dir(harness_dir: Path) -> Path:
    return runs_folder(harness_dir)


def resolve_run(ref: str | None, harness_dir: Path) -> Path:
    """The run folder named by ``ref`` (``RunDir.find``): a run folder or its ledger, a run id, a
    unique id prefix, or (``None``) the harness's latest run."""
    return RunDir.find(ref, harness_dir).root


def harness_of(run_dir: Path, events: list[ev.Event]) -> Path:
    """``<harness>/.harnessevolve/runs/<id>`` -> ``<harness>``; else what ``run_started`` says."""
    return RunDir(Path(run_dir)).harness_dir(events)


def read_lock(harness_dir: Path) -> dict[str, Any] | None:
    try:
        owner = json.loads((Path(harness_dir) / STATE_DIR / "lock").read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    return owner if isinstance(owner, dict) else None


def run_state(events: list[ev.Event], run_id: str, lock: dict[str, Any] | None) -> str:
    """``finished``, ``interrupted`` or ``failed`` from the last end event after the last (re)start;
    an open run is ``running`` while the process holding the harness lock for it lives,
    ``stale-lock`` when that process is gone, ``incomplete`` when no lock names it."""
    for record in reversed(events):
        name = record.event_name
        if name in END_STATES:
            return END_STATES[name]
        if name in START_EVENTS:
            break
    if lock is None or lock.get("run_id") != run_id:
        return "incomplete"
    try:
        alive = pid_alive(int(lock.get("pid", -1)))
    except (TypeError, ValueError):
        alive = False
    return "running" if alive else "stale-lock"


def parse_ts(value: Any) -> datetime | None:
    try:
        parsed = datetime.fromisoformat(str(value))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def format_duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    whole = int(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h {minutes:02d}m {secs:02d}s"
    return f"{minutes}m {secs:02d}s" if minutes else f"{seconds:.1f}s"

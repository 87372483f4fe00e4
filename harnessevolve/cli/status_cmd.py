"""``status`` and ``log``: where a running or finished run stands, and its ledger one line an event."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from harnessevolve.cli._errors import handle_errors
from harnessevolve.cli.options import HarnessDir, JsonOut
from harnessevolve.cli.report_cmd import RunRef
from harnessevolve.cli.ui import console, note_malformed
from harnessevolve.models.budget import spend_line
from harnessevolve.report.event_text import describe
from harnessevolve.report.firing import firing_summary, firings
from harnessevolve.report.infra_view import infra_counts
from harnessevolve.report.run_model import RunView
from harnessevolve.report.run_view import load_run_view
from harnessevolve.report.runs import END_STATES, format_duration, parse_ts, read_lock, run_state
from harnessevolve.runs import events as ev
from harnessevolve.runs.events import parse_event
from harnessevolve.runs.ledger import LEDGER_VERSION, malformed, parse_ledger_bytes, parse_ledger_line
from harnessevolve.runs.rundir import RunDir

STATE_STYLE = {
    "running": "bold blue",
    "finished": "bold green",
    "interrupted": "bold yellow",
    "failed": "bold red",
    "stale-lock": "bold yellow",
    "incomplete": "bold yellow",
}
EVENT_STYLE = {
    ev.CandidateAccepted.NAME: "green",
    ev.CandidateReverted.NAME: "red",
    ev.RunFinished.NAME: "bold green",
    ev.RunFailed.NAME: "bold red",
    ev.RunInterrupted.NAME: "bold yellow",
    ev.ProposalFailed.NAME: "yellow",
    ev.TestEvaluated.NAME: "magenta",
    ev.RunStarted.NAME: "bold",
}


def _s(value: Any) -> str:
    if value is None:
        return "-"
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def describe_event(e: ev.Event) -> str:
    """One line of plain text for a ledger event (``report.event_text.describe``)."""
    return describe(e)


def event_json(e: ev.Event) -> dict[str, Any]:
    """The event as its ledger line: ``v``, ``ts``, ``event``, then its fields."""
    return {"v": LEDGER_VERSION, **e.to_json()}


def event_line(e: ev.Event) -> Text:
    ts = parse_ts(e.ts)
    clock = ts.astimezone().strftime("%H:%M:%S") if ts else "--:--:--"
    name = e.event_name
    text = describe_event(e)
    return Text.assemble(
        (clock, "dim"), " ", (f"{name:<20}", EVENT_STYLE.get(name, "cyan")), " ", text[:2000]
    )


def _ago(ts: datetime | None) -> str:
    return f"{format_duration((datetime.now(UTC) - ts).total_seconds())} ago" if ts else "?"


@handle_errors
def status(run_ref: RunRef = None, harness: HarnessDir = Path("."), as_json: JsonOut = False) -> None:
    """Where a run stands (running, finished, interrupted, failed, stale-lock), with its scores.

    stale-lock: the run's process died and left the harness lock. Also shows the generation, the
    accepted edits, the elapsed time and the last event."""
    found = RunDir.find(run_ref, harness)
    view = load_run_view(found.root, with_git=False)
    note_malformed(found.ledger)
    if as_json:
        console.print_json(json.dumps(status_document(view), default=str))
        return
    last = view.last_event
    table = StatusRows()
    table.add_row("run", Text(f"{view.run_id}  ({view.root})"))
    table.add_row("state", Text(view.state, STATE_STYLE.get(view.state, "")))
    table.add_row("benchmark", Text(f"{view.benchmark or '?'}, model {view.model or 'from the harness'}"))
    planned = f" of {view.planned_generations}" if view.planned_generations else ""
    table.add_row("generation", Text(f"{view.generation}{planned}"))
    latest = next((g for g in reversed(view.generations) if g.train_current is not None), None)
    table.add_row(
        "scores",
        Text(
            f"validation: seed {_s(view.baseline_validation)}, best {_s(view.best_validation)}"
            + (f"; latest train batch {_s(latest.train_current)}" if latest else "")
        ),
    )
    for t in view.tests[-1:]:
        table.add_row(
            "test", Text(", ".join(f"{k} {_s(v)}" for k, v in t.scores.items()) + f" ({t.tasks} tasks)")
        )
    table.add_row(
        "edits",
        Text(
            f"{len(view.accepted)} accepted"
            + (f" ({ties} on ties)" if (ties := sum(c.tie for c in view.accepted)) else "")
            + f", {len(view.not_kept)} not kept of {len(view.candidates)}"
            + (
                "; no net change since the seed"
                if (net := view.net_change) and not net.get("changed")
                else ""
            )
        ),
    )
    if view.accepted:
        table.add_row("fired", Text(firing_summary(view.events, len(view.accepted))))
    table.add_row("elapsed", Text(format_duration(view.elapsed_seconds())))
    if view.usage:
        table.add_row("spend", Text(spend_line(view.usage)))
    infra = infra_counts(view.root / "ledger.jsonl")
    if infra.failures or infra.retried:
        table.add_row("infra", Text(infra.line(), "yellow"))
    if last is not None:
        table.add_row(
            "last event",
            Text(f"{last.event_name} {_ago(parse_ts(last.ts))}: {describe_event(last)}"),
        )
    if view.state == "stale-lock" and view.lock_owner:
        table.add_row(
            "lock",
            Text(
                f"held by pid {view.lock_owner.get('pid')}, which is gone; the next `harnessevolve run` "
                "removes it (or delete .harnessevolve/lock)",
                "yellow",
            ),
        )
    table.show()


class StatusRows:
    """``status``'s label/value rows: a grid on a terminal; in a pipe one plain line each, the
    value after the aligned label, never wrapped or padded (a log keeps each row whole)."""

    def __init__(self) -> None:
        self.rows: list[tuple[str, Text]] = []

    def add_row(self, label: str, value: Text) -> None:
        self.rows.append((label, value))

    def show(self) -> None:
        if console.is_terminal:
            grid = Table.grid(padding=(0, 2))
            grid.add_column(style="bold")
            grid.add_column()
            for label, value in self.rows:
                grid.add_row(label, value)
            console.print(grid)
            return
        width = max((len(label) for label, _ in self.rows), default=0)
        for label, value in self.rows:
            console.print(Text.assemble((label.ljust(width), "bold"), "  ", value), soft_wrap=True)


def status_document(view: RunView) -> dict[str, Any]:
    last = view.last_event
    return {
        "run_id": view.run_id,
        "run_dir": str(view.root),
        "state": view.state,
        "benchmark": view.benchmark,
        "model": view.model,
        "generation": view.generation,
        "planned_generations": view.planned_generations,
        "baseline_validation": view.baseline_validation,
        "best_validation": view.best_validation,
        "accepted": [c.sha for c in view.accepted],
        "accepted_on_ties": [c.sha for c in view.accepted if c.tie],
        "edits_fired": {f.sha: f.label for f in firings(view.events)},
        "net_change": view.net_change,
        "not_kept": [c.sha or c.short for c in view.not_kept],
        "tests": [t.scores for t in view.tests],
        "elapsed_s": view.elapsed_seconds(),
        "usage": view.usage,
        "last_event": {"event": last.event_name, "ts": last.ts} if last is not None else None,
        "lock_owner": view.lock_owner,
        "infra": infra_counts(view.root / "ledger.jsonl").__dict__,
    }


@handle_errors
def log(
    run_ref: RunRef = None,
    harness: HarnessDir = Path("."),
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Keep printing new events until the run ends.")
    ] = False,
    last: Annotated[
        int | None, typer.Option("--last", "-n", min=1, max=10**9, help="Only the last N events.")
    ] = None,
    interval: Annotated[
        float, typer.Option(min=0.05, max=3600, hidden=True, help="Polling interval of --follow.")
    ] = 1.0,
    as_json: Annotated[bool, typer.Option("--json", help="Print each event as one JSON line.")] = False,
) -> None:
    """Print a run's ledger, one line an event (time, event, what happened); --follow tails a running run."""
    run = RunDir.find(run_ref, harness)

    def emit(record: ev.Event) -> None:
        if as_json:
            typer.echo(json.dumps(event_json(record), ensure_ascii=False, default=str))
        else:
            console.print(event_line(record), soft_wrap=True)

    view = load_run_view(run.root, with_git=False)
    data = run.ledger.read_bytes()
    offset = data.rfind(b"\n") + 1  # a torn last line is read again once its writer completes it
    events = [parse_event(line) for line in parse_ledger_bytes(data[:offset], run.ledger)]
    events = [e for e in events if not malformed([e])]  # a known event whose fields do not fit
    note_malformed(run.ledger)
    for record in events[-last:] if last else events:
        emit(record)
    if not follow:
        return
    try:
        state = follow_ledger(run.ledger, offset, events, view, emit, interval)
    except KeyboardInterrupt:
        return
    if not as_json:
        console.print(Text(f"run {view.run_id}: {state}", STATE_STYLE.get(state, "")))


def follow_ledger(
    ledger: Path,
    offset: int,
    events: list[ev.Event],
    view: RunView,
    emit: Callable[[ev.Event], None],
    interval: float,
) -> str:
    """Print events appended after byte ``offset``; return the run's state once it is no longer
    running (an end event was written, or its process is gone and nothing more came)."""
    pending, numbered = b"", len(events)
    while True:
        state = run_state(events, view.run_id, read_lock(view.harness_dir))
        with ledger.open("rb") as handle:
            handle.seek(offset)
            chunk = handle.read()
        offset += len(chunk)
        *lines, pending = (pending + chunk).split(b"\n")
        new = [
            parse_event(parse_ledger_line(raw.decode("utf-8", "replace"), ledger, numbered + i + 1))
            for i, raw in enumerate(lines)
            if raw.strip()
        ]
        numbered += len(lines)
        for record in new:
            events.append(record)
            emit(record)
        if any(e.event_name in END_STATES for e in new) or (state != "running" and not chunk):
            return run_state(events, view.run_id, read_lock(view.harness_dir))
        time.sleep(interval)

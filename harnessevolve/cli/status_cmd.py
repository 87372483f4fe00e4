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
from harnessevolve.cli.ui import console
from harnessevolve.report.firing import firing_summary, firings
from harnessevolve.report.infra_view import infra_counts
from harnessevolve.report.run_model import RunView
from harnessevolve.report.run_view import load_run_view
from harnessevolve.report.runs import END_STATES, format_duration, parse_ts, read_lock, resolve_run, run_state
from harnessevolve.runs import events as ev
from harnessevolve.runs.ledger import parse_ledger_bytes, parse_ledger_line

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


def _sha(value: Any) -> str:
    return str(value or "?")[:8]


def describe_event(e: dict[str, Any]) -> str:
    """One line of plain text for a ledger event; unknown events list their scalar fields."""
    name, g = e.get("event"), e.get("generation", "?")
    if name == ev.RunStarted.NAME:
        options = e.get("options") or {}
        model = options.get("model") or "of the harness"  # no --model: harness.yaml's
        return (
            f"run {e.get('run_id')} on {e.get('benchmark')}, model {model}, "
            f"{options.get('generations', '?')} generations, from {_sha(e.get('rev'))}"
        )
    if name == ev.Baseline.NAME:
        return f"seed harness: {e.get('split', 'validation')} {_s(e.get('score'))} on {e.get('tasks')} tasks"
    if name == ev.GenerationStarted.NAME:
        return f"gen {g} starts at {_sha(e.get('rev'))}"
    if name == ev.BatchEvaluated.NAME:
        clusters = ", ".join(f"{c.get('cause')} x{c.get('size')}" for c in e.get("clusters") or [])
        return (
            f"gen {g}: train {_s(e.get('score'))}, {e.get('failed')}/{len(e.get('tasks') or [])} failed"
            + (f"; clusters {clusters}" if clusters else "")
        )
    if name == ev.CandidateCommitted.NAME:
        targets = ", ".join(e.get("targets") or [])
        return f"gen {g}: {_sha(e.get('sha'))} by {e.get('proposer')}: {e.get('summary')} [{targets}]"
    if name == ev.GateVerdicts.NAME:
        marks = ", ".join(
            f"{v.get('gate')} {'pass' if v.get('passed') else 'FAIL'}" for v in e.get("verdicts") or []
        )
        which = _sha(e["sha"]) if e.get("sha") else f"candidate {e.get('candidate', 1)}"
        return f"gen {g}: {which}: {marks}"
    if name in (ev.CandidateProposed.NAME, ev.CandidateRevised.NAME):
        which = f"candidate {e.get('candidate', 1)}" + (f" rev {e['revision']}" if e.get("revision") else "")
        return f"gen {g}: {which} by {e.get('proposer', 'proposer')}: {e.get('summary')}"
    if name == ev.CandidateRejected.NAME:
        why = f"{e.get('gate')} gate: {e.get('reason')}" if e.get("gate") else "passed, another was picked"
        return f"gen {g}: candidate {e.get('candidate', 1)} not kept ({why})"
    if name == ev.Committing.NAME:
        return f"gen {g}: committing {e.get('verdict')} candidate: {e.get('summary')}"
    if name == ev.CandidateAccepted.NAME:
        return f"gen {g}: accepted {_sha(e.get('sha'))}" + (
            " on a tie (no gain on its batch)" if e.get("tie") else ""
        )
    if name == ev.CandidateReverted.NAME:
        return f"gen {g}: reverted {_sha(e.get('sha'))} by the {e.get('gate')} gate: {e.get('reason')}"
    if name == ev.GenerationFinished.NAME:
        validation = e.get("validation")
        return f"gen {g}: {e.get('outcome')}" + (
            f", validation {_s(validation)}" if validation is not None else ""
        )
    if name == ev.EpochFinished.NAME:
        restored = f", restored as {_sha(e.get('restored'))}" if e.get("restored") else ""
        best = f"best {_sha(e.get('best'))} validation {_s(e.get('best_validation'))}"
        return f"epoch {e.get('epoch')}: {best}{restored}"
    if name in (ev.ProposalFailed.NAME, ev.RevisionFailed.NAME):
        errors = e.get("errors") or []
        return f"gen {g}: proposer {e.get('proposer')} failed: {errors[0] if errors else '?'}"
    if name == ev.RunFinished.NAME:
        net = e.get("net_change") or {}
        change = ""
        if net:
            change = (
                f"; {len(net.get('files') or [])} file(s) changed since the seed, validation "
                f"{_s(net.get('validation_seed'))} -> {_s(net.get('validation_final'))}"
                if net.get("changed")
                else "; no net change (the final harness equals the seed)"
            )
        return (
            f"{len(e.get('accepted') or [])} accepted, {len(e.get('reverted') or [])} reverted; "
            f"head {_sha(e.get('rev'))}{change}"
        )
    if name in (ev.RunInterrupted.NAME, ev.RunFailed.NAME):
        by = f" by {e['signal']}" if e.get("signal") else ""
        return f"stopped{by} in gen {g} at stage {e.get('stage')}: {e.get('error')}"
    if name == ev.TestEvaluated.NAME:
        scores = e.get("scores") or {}
        pair = f"seed {_s(scores.get('seed'))} -> evolved {_s(scores.get('evolved'))}"
        return f"test split ({e.get('tasks')} tasks): {pair}"
    fields = [
        f"{k}={_s(v)}"
        for k, v in e.items()
        if k not in ("v", "ts", "event") and not isinstance(v, dict | list)
    ]
    return " ".join(fields)


def event_line(e: dict[str, Any]) -> Text:
    ts = parse_ts(e.get("ts"))
    clock = ts.astimezone().strftime("%H:%M:%S") if ts else "--:--:--"
    name = str(e.get("event", "?"))
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
    view = load_run_view(resolve_run(run_ref, harness), with_git=False)
    if as_json:
        console.print_json(json.dumps(status_document(view), default=str))
        return
    last = view.last_event or {}
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold")
    table.add_column()
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
                if view.net_change and not view.net_change.get("changed")
                else ""
            )
        ),
    )
    if view.accepted:
        table.add_row("fired", Text(firing_summary(view.events, len(view.accepted))))
    table.add_row("elapsed", Text(format_duration(view.elapsed_seconds())))
    infra = infra_counts(view.root / "ledger.jsonl")
    if infra.failures or infra.retried:
        table.add_row("infra", Text(infra.line(), "yellow"))
    if last:
        table.add_row(
            "last event",
            Text(f"{last.get('event')} {_ago(parse_ts(last.get('ts')))}: {describe_event(last)}"),
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
    console.print(table)


def status_document(view: RunView) -> dict[str, Any]:
    last = view.last_event or {}
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
        "last_event": {"event": last.get("event"), "ts": last.get("ts")} if last else None,
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
    last: Annotated[int | None, typer.Option("--last", "-n", min=1, help="Only the last N events.")] = None,
    interval: Annotated[
        float, typer.Option(min=0.05, hidden=True, help="Polling interval of --follow.")
    ] = 1.0,
    as_json: Annotated[bool, typer.Option("--json", help="Print each event as one JSON line.")] = False,
) -> None:
    """Print a run's ledger, one line an event (time, event, what happened); --follow tails a running run."""
    run_dir = resolve_run(run_ref, harness)

    def emit(event: dict[str, Any]) -> None:
        if as_json:
            typer.echo(json.dumps(event, ensure_ascii=False, default=str))
        else:
            console.print(event_line(event), soft_wrap=True)

    view = load_run_view(run_dir, with_git=False)
    data = (run_dir / "ledger.jsonl").read_bytes()
    offset = data.rfind(b"\n") + 1  # a torn last line is read again once its writer completes it
    events = parse_ledger_bytes(data[:offset], run_dir / "ledger.jsonl")
    for event in events[-last:] if last else events:
        emit(event)
    if not follow:
        return
    try:
        state = follow_ledger(run_dir / "ledger.jsonl", offset, events, view, emit, interval)
    except KeyboardInterrupt:
        return
    if not as_json:
        console.print(Text(f"run {view.run_id}: {state}", STATE_STYLE.get(state, "")))


def follow_ledger(
    ledger: Path,
    offset: int,
    events: list[dict[str, Any]],
    view: RunView,
    emit: Callable[[dict[str, Any]], None],
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
            parse_ledger_line(raw.decode("utf-8", "replace"), ledger, numbered + i + 1)
            for i, raw in enumerate(lines)
            if raw.strip()
        ]
        numbered += len(lines)
        for event in new:
            events.append(event)
            emit(event)
        if any(e.get("event") in END_STATES for e in new) or (state != "running" and not chunk):
            return run_state(events, view.run_id, read_lock(view.harness_dir))
        time.sleep(interval)

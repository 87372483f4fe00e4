"""The full record of a generation a kill cut short after its commit, rebuilt on resume.

A generation's numbers are on disk before its commit: the gate report (``gates/gen-NNN.json``)
and its ``gate_verdicts`` event, the ``batch_evaluated`` event, the ``committing`` event; the commit
carries its verdict in trailers. So a generation whose ``generation_finished`` never got written
is recorded with the same row it would have had -- commit, verdicts per gate, train scores,
validation, the tie flag -- and a revert redone on resume keeps the gate's reason and numbers.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TypeVar

from harnessevolve.gate.performance import accepted_on_tie
from harnessevolve.gate.verdict import GateVerdict
from harnessevolve.runs import events as ev

TABLE_GATES = ("quality", "performance", "heldout")
E = TypeVar("E", bound=ev.Event)


def of_generation(events: list[ev.Event], generation: int, kind: type[E]) -> list[E]:
    """The events of type ``kind`` that generation ``generation`` wrote, in order."""
    return [e for e in events if isinstance(e, kind) and getattr(e, "generation", None) == generation]


def gate_report(run_dir: Path, generation: int) -> dict[str, Any] | None:
    """``gates/gen-NNN.json`` (written just before the commit, for the committed candidate only)."""
    try:
        doc = json.loads((run_dir / "gates" / f"gen-{generation:03d}.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def gate_verdicts(events: list[ev.Event], generation: int, run_dir: Path) -> list[ev.GateVerdictRecord]:
    """The verdicts of the generation's committed candidate: its gate report, else the
    ``gate_verdicts`` event of the summary the ``committing`` event names; [] when neither was written."""
    doc = gate_report(run_dir, generation)
    verdicts = doc.get("verdicts") if doc is not None else None
    if isinstance(verdicts, list):
        out = []
        for raw in verdicts:
            try:
                out.append(ev.GateVerdictRecord.from_json(raw))
            except TypeError:
                continue
        return out
    staged = of_generation(events, generation, ev.Committing)
    summary = staged[-1].summary if staged else None
    logged = [
        e
        for e in of_generation(events, generation, ev.GateVerdicts)
        if summary is None or e.summary == summary
    ]
    return list(logged[-1].verdicts) if logged else []


def verdict_table(verdicts: list[ev.GateVerdictRecord]) -> dict[str, bool | None]:
    """quality / performance / heldout -> passed, as the run table shows them (leakage and the
    smoke run fold into quality)."""
    table: dict[str, bool | None] = dict.fromkeys(TABLE_GATES)
    for verdict in verdicts:
        key = verdict.gate if verdict.gate in ("performance", "heldout") else "quality"
        table[key] = table[key] is not False and bool(verdict.passed)
    return table


def failed_verdict(
    verdicts: list[ev.GateVerdictRecord], gate: str | None = None
) -> ev.GateVerdictRecord | None:
    """The verdict that rejected the candidate (of ``gate`` when given)."""
    return next((v for v in verdicts if not v.passed and (gate is None or v.gate == gate)), None)


def on_tie(verdicts: list[ev.GateVerdictRecord]) -> bool:
    """Whether the verdicts passed the candidate on a tie (``gate.performance.accepted_on_tie``)."""
    return accepted_on_tie([GateVerdict(v.gate, v.passed, v.reason, dict(v.numbers)) for v in verdicts])


def _numbers(verdicts: list[ev.GateVerdictRecord], gate: str) -> dict[str, Any]:
    found = next((v for v in verdicts if v.gate == gate), None)
    return dict(found.numbers) if found is not None else {}


def recovered_row(
    events: list[ev.Event], generation: int, run_dir: Path, *, sha: str, accepted: bool
) -> dict[str, Any]:
    """The ``generation_finished`` fields of the row: candidate, verdicts, train scores, validation."""
    verdicts = gate_verdicts(events, generation, run_dir)
    batch = of_generation(events, generation, ev.BatchEvaluated)
    staged = of_generation(events, generation, ev.Committing)
    heldout = _numbers(verdicts, "heldout")
    validation = heldout.get("candidate" if accepted else "current")
    if validation is None and accepted and staged:
        validation = staged[-1].validation
    if validation is None and not accepted:
        validation = _current_validation(events, generation)
    return {
        "candidate": sha[:8],
        "verdicts": verdict_table(verdicts) if verdicts else None,
        "train_current": batch[-1].score if batch else None,
        "train_candidate": _numbers(verdicts, "performance").get("candidate"),
        "validation": validation if isinstance(validation, int | float) else None,
    }


def _current_validation(events: list[ev.Event], generation: int) -> float | None:
    """The current harness's validation score before ``generation``: the last finished
    generation's, else the baseline's (a rejected candidate leaves it unchanged)."""
    known = [
        e.validation
        for e in events
        if isinstance(e, ev.GenerationFinished) and e.generation < generation and e.validation is not None
    ]
    if known:
        return known[-1]
    baseline = next((e for e in events if isinstance(e, ev.Baseline)), None)
    return baseline.score if baseline else None


def revert_message(
    sha: str, gate: str, verdict: ev.GateVerdictRecord | None, run_id: str, generation: int
) -> str:
    """The message ``RunHistory.revert`` writes, from the gate report's verdict."""
    reason = str(verdict.reason if verdict is not None and verdict.reason else "rejected before the crash")
    numbers = verdict.numbers if verdict is not None else {}
    shown = ", ".join(f"{k}={v}" for k, v in numbers.items() if not isinstance(v, list | dict))
    return (
        f"harnessevolve: revert {sha[:8]}: rejected by the {gate} gate\n\n{reason}\n"
        + (f"({shown})\n" if shown else "")
        + "(reverted on resume)\n\n"
        f"Reverts: {sha}\nGate: {gate}\nRun: {run_id}\nGeneration: {generation}\n"
    )

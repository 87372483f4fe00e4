"""The full record of a generation a kill cut short after its commit, rebuilt on resume.

A generation's numbers are on disk before its commit: the gate report (``gates/gen-NNN.json``)
and its ``gate_verdicts`` event, the ``batch_evaluated`` event, the ``committing`` event; the commit
carries its verdict in trailers. So a generation whose ``generation_finished`` never got written
is recorded with the same row it would have had -- commit, verdicts per gate, train scores,
validation -- and a revert redone on resume keeps the gate's reason and numbers.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harnessevolve.runs import events as ev

TABLE_GATES = ("quality", "performance", "heldout")


def _of(events: list[dict[str, Any]], generation: int, name: str) -> list[dict[str, Any]]:
    return [e for e in events if e.get("event") == name and e.get("generation") == generation]


def gate_verdicts(events: list[dict[str, Any]], generation: int, run_dir: Path) -> list[dict[str, Any]]:
    """The verdicts of the generation's committed candidate: its gate report (written just before
    the commit, for the committed candidate only), else the ``gate_verdicts`` event of the summary
    the ``committing`` event names; [] when neither was written."""
    report = run_dir / "gates" / f"gen-{generation:03d}.json"
    try:
        doc = json.loads(report.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        doc = None
    verdicts = doc.get("verdicts") if isinstance(doc, dict) else None
    if isinstance(verdicts, list):
        return [v for v in verdicts if isinstance(v, dict)]
    staged = _of(events, generation, ev.Committing.NAME)
    summary = staged[-1].get("summary") if staged else None
    logged = [
        e
        for e in _of(events, generation, ev.GateVerdicts.NAME)
        if summary is None or e.get("summary") == summary
    ]
    if logged and isinstance(logged[-1].get("verdicts"), list):
        return [v for v in logged[-1]["verdicts"] if isinstance(v, dict)]
    return []


def verdict_table(verdicts: list[dict[str, Any]]) -> dict[str, bool | None]:
    """quality / performance / heldout -> passed, as the run table shows them (leakage and the
    smoke run fold into quality)."""
    table: dict[str, bool | None] = dict.fromkeys(TABLE_GATES)
    for verdict in verdicts:
        gate = verdict.get("gate")
        key = gate if gate in ("performance", "heldout") else "quality"
        table[key] = table[key] is not False and bool(verdict.get("passed"))
    return table


def failed_verdict(verdicts: list[dict[str, Any]], gate: str | None = None) -> dict[str, Any] | None:
    """The verdict that rejected the candidate (of ``gate`` when given)."""
    return next(
        (v for v in verdicts if not v.get("passed") and (gate is None or v.get("gate") == gate)),
        None,
    )


def _numbers(verdicts: list[dict[str, Any]], gate: str) -> dict[str, Any]:
    found = next((v for v in verdicts if v.get("gate") == gate), None)
    numbers = found.get("numbers") if found else None
    return numbers if isinstance(numbers, dict) else {}


def recovered_row(
    events: list[dict[str, Any]], generation: int, run_dir: Path, *, sha: str, accepted: bool
) -> dict[str, Any]:
    """The ``generation_finished`` fields of the row: candidate, verdicts, train scores, validation."""
    verdicts = gate_verdicts(events, generation, run_dir)
    batch = _of(events, generation, ev.BatchEvaluated.NAME)
    staged = _of(events, generation, ev.Committing.NAME)
    heldout = _numbers(verdicts, "heldout")
    validation = heldout.get("candidate" if accepted else "current")
    if validation is None and accepted and staged:
        validation = staged[-1].get("validation")
    if validation is None and not accepted:
        validation = _current_validation(events, generation)
    return {
        "candidate": sha[:8],
        "verdicts": verdict_table(verdicts) if verdicts else None,
        "train_current": batch[-1].get("score") if batch else None,
        "train_candidate": _numbers(verdicts, "performance").get("candidate"),
        "validation": validation if isinstance(validation, int | float) else None,
    }


def _current_validation(events: list[dict[str, Any]], generation: int) -> float | None:
    """The current harness's validation score before ``generation``: the last finished
    generation's, else the baseline's (a rejected candidate leaves it unchanged)."""
    earlier = [
        e.get("validation")
        for e in events
        if e.get("event") == ev.GenerationFinished.NAME and e.get("generation", generation) < generation
    ]
    known = [v for v in earlier if isinstance(v, int | float)]
    if known:
        return known[-1]
    baseline = next((e for e in events if e.get("event") == ev.Baseline.NAME), None)
    return baseline.get("score") if baseline else None


def revert_message(sha: str, gate: str, verdict: dict[str, Any] | None, run_id: str, generation: int) -> str:
    """The message ``RunHistory.revert`` writes, from the gate report's verdict."""
    reason = str((verdict or {}).get("reason") or "rejected before the crash")
    numbers = (verdict or {}).get("numbers") or {}
    shown = ", ".join(f"{k}={v}" for k, v in numbers.items() if not isinstance(v, list | dict))
    return (
        f"harnessevolve: revert {sha[:8]}: rejected by the {gate} gate\n\n{reason}\n"
        + (f"({shown})\n" if shown else "")
        + "(reverted on resume)\n\n"
        f"Reverts: {sha}\nGate: {gate}\nRun: {run_id}\nGeneration: {generation}\n"
    )

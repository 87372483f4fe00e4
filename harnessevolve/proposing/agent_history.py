"""The optimizer agent's "experience": the run's earlier candidates, read from the ledger and git.

Each candidate's summary, proposer, paths, verdict (``accepted``, ``rejected by <gate>``), gate
numbers (scalars only: per-task lists and mappings stay out of the workspace), whether the edit
fired (the ``edit_fired`` verdict, else a gate number whose name says ``fire``), and its diff (from
git for a committed candidate; from its saved changes, against the current files, for one never
committed).
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harnessevolve.harness.git import HarnessRepo
from harnessevolve.proposing.agent_workspace import PastCandidate
from harnessevolve.runs import events as ev
from harnessevolve.runs.ledger import read_events
from harnessevolve.runs.outcome import Outcome

MAX_NUMBER_CHARS = 80


def scalar_numbers(raw: Any) -> dict[str, Any]:
    """A gate's numbers without lists and mappings (per-task details) or long strings."""
    if not isinstance(raw, Mapping):
        return {}
    return {
        str(k): v
        for k, v in raw.items()
        if isinstance(v, int | float | bool) or (isinstance(v, str) and len(v) <= MAX_NUMBER_CHARS)
    }


def _fired(numbers: Mapping[str, Mapping[str, Any]]) -> str:
    found = [f"{gate}.{k}={v}" for gate, row in numbers.items() for k, v in row.items() if "fire" in k]
    return ", ".join(found) or "not recorded"


def _verdict_numbers(verdicts: Any) -> tuple[dict[str, dict[str, Any]], str]:
    """Gate -> scalar numbers, and the first failing gate's reason."""
    numbers: dict[str, dict[str, Any]] = {}
    reason = ""
    for verdict in verdicts or []:
        gate = str(_field(verdict, "gate"))
        numbers[gate] = scalar_numbers(_field(verdict, "numbers"))
        if not _field(verdict, "passed") and not reason:
            reason = f"{gate}: {_field(verdict, 'reason') or ''}"
    return numbers, reason


def _field(verdict: Any, name: str) -> Any:
    """A gate verdict's field, whether the ledger record holds it as a mapping or a typed record."""
    return verdict.get(name) if isinstance(verdict, Mapping) else getattr(verdict, name, None)


def git_diff(repo: HarnessRepo | None, sha: str) -> str:
    if repo is None:
        return ""
    try:
        args = ["--format=", "--no-color", sha]
        if repo.rel != ".":
            args = ["--format=", "--no-color", f"--relative={repo.rel}", sha, "--", repo.rel]
        return str(repo.repo.git.show(*args))
    except Exception:  # noqa: BLE001 - a missing commit leaves the diff out, nothing more
        return ""


def saved_diff(run_dir: Path, file: str, current: Mapping[str, str]) -> str:
    """The diff of a never-committed candidate's saved changes against the current files."""
    try:
        doc = json.loads((run_dir / file).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return ""
    changes = doc.get("changes") if isinstance(doc, dict) else None
    if not isinstance(changes, dict):
        return ""
    out: list[str] = []
    for path, text in sorted(changes.items()):
        old = current.get(path, "")
        new = text if isinstance(text, str) else ""
        out += difflib.unified_diff(
            old.splitlines(keepends=True), new.splitlines(keepends=True), f"a/{path}", f"b/{path}"
        )
    return "".join(out)


def past_candidates(
    ledger_path: Path, repo: HarnessRepo | None, current: Mapping[str, str]
) -> tuple[PastCandidate, ...]:
    """Every candidate the run's ledger records so far, oldest first."""
    if not ledger_path.is_file():
        return ()
    slots: dict[tuple[int, int], dict[str, Any]] = {}
    by_sha: dict[str, tuple[int, int]] = {}
    fired_record = getattr(ev, "EditFired", None)  # judging/edit_firing.py
    for record in read_events(ledger_path):
        if fired_record is not None and isinstance(record, fired_record) and record.sha in by_sha:
            when = f" (generation {record.observed_generation})" if record.observed_generation else ""
            slots[by_sha[record.sha]]["fired"] = (
                f"yes{when}" if record.fired else f"never ({record.runs} later run(s) read)"
            )
        elif isinstance(record, ev.CandidateProposed | ev.CandidateRevised):
            slot = slots.setdefault((record.generation, record.candidate), {"verdict": "proposed"})
            slot.update(summary=record.summary, proposer=record.proposer, paths=record.paths or [])
        elif isinstance(record, ev.GateVerdicts) and record.candidate is not None:
            slot = slots.setdefault((record.generation, record.candidate), {"verdict": "proposed"})
            slot["numbers"], slot["reason"] = _verdict_numbers(record.verdicts)
        elif isinstance(record, ev.CandidateCommitted):
            key = (record.generation, record.candidate or 1)
            slot = slots.setdefault(key, {})
            slot.update(sha=record.sha, verdict=record.verdict, summary=record.summary or slot.get("summary"))
            slot.setdefault("proposer", record.proposer)
            slot.setdefault("paths", record.paths or [])
            by_sha[record.sha] = key
        elif isinstance(record, ev.CandidateReverted) and record.sha in by_sha:
            slot = slots[by_sha[record.sha]]
            slot["verdict"] = Outcome.refused(record.gate).verdict()
            slot["reason"] = record.reason
        elif isinstance(record, ev.CandidateRejected):
            slot = slots.setdefault((record.generation, record.candidate), {})
            numbers, _ = _verdict_numbers(record.verdicts)
            slot.update(
                summary=record.summary,
                proposer=record.proposer,
                paths=record.paths or [],
                verdict=Outcome.refused(record.gate).verdict() if record.gate else "not kept",
                reason=record.reason or "",
                numbers=numbers or slot.get("numbers", {}),
                file=record.file,
            )
        elif isinstance(record, ev.CandidateAccepted):
            slot = slots.setdefault((record.generation, record.candidate or 1), {})
            slot["verdict"] = Outcome.kept(tie=bool(record.tie)).text()
            if record.verdicts:
                slot["numbers"], _ = _verdict_numbers(record.verdicts)
            if record.validation is not None:
                slot.setdefault("numbers", {}).setdefault("validation", {})["score"] = record.validation
    out = []
    run_dir = ledger_path.parent
    for (generation, index), slot in sorted(slots.items()):
        numbers = slot.get("numbers") or {}
        diff = git_diff(repo, slot["sha"]) if slot.get("sha") else ""
        if not diff and slot.get("file"):
            diff = saved_diff(run_dir, str(slot["file"]), current)
        out.append(
            PastCandidate(
                generation=generation,
                candidate=index,
                summary=str(slot.get("summary") or ""),
                proposer=str(slot.get("proposer") or "?"),
                paths=tuple(slot.get("paths") or ()),
                verdict=str(slot.get("verdict") or "proposed"),
                reason=str(slot.get("reason") or ""),
                numbers=numbers,
                diff=diff,
                fired=str(slot.get("fired") or _fired(numbers)),
            )
        )
    return tuple(out)


def last_batch(ledger_path: Path) -> ev.BatchEvaluated | None:
    """The latest ``batch_evaluated``: the generation being proposed for, its harness hash."""
    if not ledger_path.is_file():
        return None
    batches = [r for r in read_events(ledger_path) if isinstance(r, ev.BatchEvaluated)]
    return batches[-1] if batches else None

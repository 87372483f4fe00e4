"""The ``memory`` proposer: adds, merges and deletes experience-memory entries (``memory/*.yaml``)
from the batch's passed and failed *train* runs (docs/runtime.md). No model is needed.

It acts only on a harness that turns memory on (``harness.yaml: memory``) and lets it edit
``memory/*.yaml``; runs of tasks whose split is not ``train`` are never read (validation and test
tasks never feed memory; ``ProposalContext.splits``).

- **add**: a passed run whose calls (tool names and the argument names, never their values) no
  entry holds yet becomes a ``success`` entry: ``task`` is the task's instruction with numbers and
  quoted text masked, ``lesson`` the calls in order; a failed run with a cluster signal becomes a
  ``failure`` entry whose lesson is the signal's cause and fix hint;
- **merge**: a passed run whose calls an entry already holds adds the task to that entry's
  ``sources`` instead of a second entry;
- **delete**: a ``success`` entry learnt from a task that failed in this batch, with no passed run
  of this batch following its calls, is removed (its lesson no longer held).

At most ``MAX_NEW`` entries are added per candidate, and never past ``memory.max_entries``. The
entries are gated like any edit: the leakage gate reads the text they add.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from harnessevolve.harness.runtime import memory_entry
from harnessevolve.optimize.proposal import (
    Candidate,
    ProposalContext,
    ProposalFailed,
    ReferenceAction,
    component_settings,
)

MAX_NEW = 5
_NUMBER = re.compile(r"\b\d+(?:[.,]\d+)*\b")
_QUOTED = re.compile(r"(['\"`])[^'\"`\n]{1,80}\1")


def masked(instruction: str) -> str:
    """The instruction as a kind of task: numbers become N, quoted text becomes '...', cut at 300."""
    text = _QUOTED.sub("'...'", _NUMBER.sub("N", " ".join(instruction.split())))
    return text[:300]


def calls_lesson(actions: tuple[ReferenceAction, ...]) -> str:
    """The calls of a run as a lesson: tool names with their argument names, submit last."""
    calls = [f"{a.tool}({', '.join(sorted(a.arguments))})" for a in actions if a.tool != "submit"]
    ending = "then submit the answer" if any(a.tool == "submit" for a in actions) else "no submit"
    return f"Calls that solved it, in order: {', '.join(calls) or 'none'}; {ending}."


def _dump(task: str, lesson: str, outcome: str, sources: list[str]) -> str:
    import yaml

    doc = {"version": 1, "task": task, "lesson": lesson, "outcome": outcome, "sources": sources}
    return yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=100)


def _path(text: str) -> str:
    return f"memory/{hashlib.sha256(text.encode()).hexdigest()[:10]}.yaml"


class MemoryProposer:
    name = "memory"
    parts = "experience memory (turned on)"
    """What it edits (named when ``run`` refuses a harness none of its proposers reaches)."""

    def reaches(self, context: ProposalContext) -> bool:
        """Memory is on and its entries are editable."""
        return self._settings(context) is not None

    def _settings(self, context: ProposalContext) -> dict[str, Any] | None:
        section = component_settings(context, "memory")
        if section is None:
            return None
        return section if context.may_edit("memory/entry.yaml") else None

    async def propose(self, context: ProposalContext) -> Candidate | None:
        settings = self._settings(context)
        if settings is None:
            return None
        train = {tid for tid, split in context.splits.items() if split == "train"}
        entries = {
            p: memory_entry(p, t)
            for p, t in context.files.items()
            if p.startswith("memory/") and p.endswith(".yaml")
        }
        by_lesson = {e.lesson: e for e in entries.values()}
        changes: dict[str, str | None] = {}
        added = merged = 0
        room = int(settings.get("max_entries", 200)) - len(entries)
        passed_lessons: set[str] = set()
        for tid, actions in sorted(context.passed_runs.items()):
            if tid not in train or not actions:
                continue
            lesson = calls_lesson(actions)
            passed_lessons.add(lesson)
            if lesson in by_lesson:
                entry = by_lesson[lesson]
                if tid not in entry.sources:
                    sources = [*entry.sources, tid]
                    by_lesson[lesson] = type(entry)(
                        entry.path, entry.task, lesson, entry.outcome, tuple(sources)
                    )
                    changes[entry.path] = _dump(entry.task, lesson, entry.outcome, sources)
                    merged += 1
                continue
            if added >= min(MAX_NEW, room):
                continue
            task = masked(context.instructions.get(tid, tid))
            path = _path(lesson)
            changes[path] = _dump(task, lesson, "success", [tid])
            by_lesson[lesson] = memory_entry(path, changes[path] or "")
            added += 1
        failed_train = {tid for tid in context.failed_runs if tid in train}
        for cluster in context.clusters:
            for signal in cluster.signals:
                if signal.task_id not in failed_train or added >= min(MAX_NEW, room):
                    continue
                hint = " ".join(signal.hint.split())[:300]
                lesson = f"A run of this kind failed ({cluster.cause.value}): {hint}"
                if lesson in by_lesson:
                    continue
                task = masked(context.instructions.get(signal.task_id, signal.task_id))
                path = _path(lesson)
                changes[path] = _dump(task, lesson, "failure", [signal.task_id])
                by_lesson[lesson] = memory_entry(path, changes[path] or "")
                added += 1
        deleted = 0
        for entry in entries.values():
            stale = entry.outcome == "success" and set(entry.sources) & failed_train
            if stale and entry.lesson not in passed_lessons:
                changes[entry.path] = None
                deleted += 1
        if not changes:
            return None
        summary = f"memory: add {added}, merge {merged}, delete {deleted} entries"
        if summary in context.rejected:
            return None
        tasks = sorted({*context.passed_runs, *failed_train} & train)
        return Candidate(
            changes=changes,
            summary=summary,
            rationale=(
                f"{len([t for t in context.passed_runs if t in train])} passed and {len(failed_train)} "
                "failed train run(s) of this batch: what worked is kept as memory, what failed as a warning"
            ),
            targets=tuple(sorted({c.cause.value for c in context.clusters})) or ("memory",),
            target_tasks=tuple(tasks),
            proposer=self.name,
            evidence=tuple(sorted(p for p, c in changes.items() if c is not None))[:3],
        )

    async def revise(self, context: ProposalContext, candidate: Candidate, reason: str) -> Candidate:
        raise ProposalFailed(self.name, [f"memory entries are not revised ({reason})"])

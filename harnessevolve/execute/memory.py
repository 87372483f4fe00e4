"""Experience memory at run time: the entries most similar to the task, placed in the prompt.

Retrieval is BM25 (the ``bm25s`` library, English stop words removed) over each entry's ``task``
and ``lesson`` text, queried with the task's opening user message. The ``top_k`` entries with a
positive score are appended to the system message as a ``# Memory`` section before the first
model call; which entries, and their scores, are kept in the trajectory's ``extra.memory``.
An entry with no word in common with the task scores 0 and is never shown.
"""

from __future__ import annotations

import functools
from dataclasses import asdict, replace
from typing import TYPE_CHECKING, Any

from harnessevolve.execute.loop_state import Component
from harnessevolve.harness.model import Harness
from harnessevolve.harness.runtime import MemoryEntry

if TYPE_CHECKING:
    from harnessevolve.execute.loop_state import Rollout


@functools.lru_cache(maxsize=8)
def _index(entries: tuple[MemoryEntry, ...]) -> Any:
    """The BM25 index of ``entries`` (built once per harness revision, not once per rollout);
    None when the entries have no word left after stop words."""
    import bm25s

    tokens = bm25s.tokenize([f"{e.task}\n{e.lesson}" for e in entries], stopwords="en", show_progress=False)
    if not tokens.vocab:
        return None
    index = bm25s.BM25()
    index.index(tokens, show_progress=False)
    return index


def retrieve(entries: tuple[MemoryEntry, ...], query: str, k: int) -> list[tuple[MemoryEntry, float]]:
    """The at most ``k`` entries most similar to ``query`` (BM25), best first, score > 0 only."""
    if not entries or not query.strip() or k < 1:
        return []
    import bm25s

    index = _index(entries)
    asked = bm25s.tokenize([query], stopwords="en", show_progress=False)
    if index is None or not asked.vocab:
        return []
    found, scores = index.retrieve(asked, k=min(k, len(entries)), show_progress=False)
    return [(entries[int(i)], float(s)) for i, s in zip(found[0], scores[0], strict=True) if s > 0]


def memory_section(found: list[tuple[MemoryEntry, float]]) -> str:
    """The prompt text of the retrieved entries."""
    lines = ["# Memory", "", "Lessons from earlier tasks like this one:"]
    for entry, _ in found:
        kind = "worked" if entry.outcome == "success" else "failed"
        lines.append(f"- ({kind}) {entry.task.strip()}: {entry.lesson.strip()}")
    return "\n".join(lines)


def runtime_document(harness: Harness, query: str) -> dict[str, Any]:
    """What an external agent's task file carries of the runtime components the harness turns on:
    ``memory`` (the retrieved entries with their scores, and the prompt section, also appended
    to the file's ``system_prompt``), ``recovery`` (the rules, for the agent to apply) and
    ``progress`` (its settings). Empty when none is on."""
    runtime = harness.runtime
    out: dict[str, Any] = {}
    if runtime.memory is not None:
        found = retrieve(runtime.entries, query, runtime.memory.top_k)
        out["memory"] = {
            "entries": [
                {
                    "path": e.path,
                    "task": e.task,
                    "lesson": e.lesson,
                    "outcome": e.outcome,
                    "score": round(s, 4),
                }
                for e, s in found
            ],
            "section": memory_section(found) if found else "",
        }
    if runtime.recovery:
        out["recovery"] = [asdict(rule) for rule in runtime.recovery]
    if runtime.progress is not None:
        from harnessevolve.execute.progress import NOTES_TOOL

        # the notes tool for the agent to offer its model, kept in $HARNESSEVOLVE_NOTES (a file the
        # runner reads back into the trajectory's extra.progress)
        out["progress"] = {**asdict(runtime.progress), "tool": NOTES_TOOL.openai_schema()["function"]}
    return out


class MemoryHooks(Component):
    """Retrieves once, before the first model call, and extends the system message."""

    name = "memory"

    def __init__(self, entries: tuple[MemoryEntry, ...], top_k: int) -> None:
        self.entries = entries
        self.top_k = top_k
        self.done = False

    async def before_query(self, rollout: Rollout) -> None:
        if self.done:
            return
        self.done = True
        found = retrieve(self.entries, rollout.last_user_text(), self.top_k)
        record: dict[str, Any] = {
            "entries": len(self.entries),
            "retrieved": [e.path for e, _ in found],
            "scores": [round(s, 4) for _, s in found],
        }
        rollout.extra["memory"] = record
        if not found:
            return
        entries = rollout.transcript.entries
        first = entries[0]
        content = f"{first.message['content'].rstrip()}\n\n{memory_section(found)}\n"
        entries[0] = replace(first, message={**first.message, "content": content})

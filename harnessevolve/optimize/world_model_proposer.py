"""The ``world_model`` proposer: rewrites the world-model text (``world_model.md``) from the batch's
largest forecast mismatches (docs/runtime.md). No model is needed.

It acts only on a harness that turns the world model on and lets it edit the file. From the
forecasts of this batch's *train* runs that did not match (``ProposalContext.forecast_misses``,
smallest word overlap first), it takes at most ``MAX_LINES`` tools not yet described and adds one
line each under ``## Observed results`` saying what that tool actually returned (the start of the
observation, one line) beside what was expected. When the file would grow past
``world_model.max_chars``, the oldest lines of that section go first. Its edits meet the same
gates as any other (the leakage gate reads the added lines).
"""

from __future__ import annotations

from typing import Any

from harnessevolve.optimize.proposal import (
    Candidate,
    ProposalContext,
    ProposalFailed,
    component_settings,
)

MAX_LINES = 3
SECTION = "## Observed results"


def _one_line(text: str, limit: int) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


class WorldModelProposer:
    name = "world_model"
    parts = "the world model (turned on)"
    """What it edits (named when ``run`` refuses a harness none of its proposers reaches)."""

    def reaches(self, context: ProposalContext) -> bool:
        """The world model is on and its file is editable."""
        return self._settings(context) is not None

    def _settings(self, context: ProposalContext) -> tuple[str, int] | None:
        section = component_settings(context, "world_model")
        if section is None:
            return None
        path = str(section.get("file", "world_model.md"))
        if path not in context.files or not context.may_edit(path):
            return None
        return path, int(section.get("max_chars", 4000))

    async def propose(self, context: ProposalContext) -> Candidate | None:
        settings = self._settings(context)
        if settings is None:
            return None
        path, cap = settings
        misses: list[tuple[float, str, dict[str, Any]]] = [
            (float(r.get("share", 0.0)), tid, r)
            for tid, records in context.forecast_misses.items()
            if context.splits.get(tid) == "train"
            for r in records
            if r.get("tools") and r.get("observed")
        ]
        text = context.files[path]
        lines: list[str] = []
        tasks: list[str] = []
        for _, tid, record in sorted(misses, key=lambda m: (m[0], m[1])):
            tool = str(record["tools"][0])
            if f"`{tool}`" in text or any(f"`{tool}`" in line for line in lines):
                continue
            observed, expected = _one_line(record["observed"], 160), _one_line(record.get("expected", ""), 80)
            lines.append(f"- `{tool}` returned: {observed} (a forecast said: {expected})")
            tasks.append(tid)
            if len(lines) >= MAX_LINES:
                break
        if not lines:
            return None
        new = _with_lines(text, lines, cap)
        summary = f"world model: describe what {', '.join(line.split('`')[1] for line in lines)} return"
        if new == text or summary in context.rejected:
            return None
        return Candidate(
            changes={path: new},
            summary=summary,
            rationale=f"{len(misses)} forecast(s) of train runs did not match what the tools returned",
            targets=("world_model",),
            target_tasks=tuple(sorted(set(tasks))),
            proposer=self.name,
            evidence=tuple(lines),
        )

    async def revise(self, context: ProposalContext, candidate: Candidate, reason: str) -> Candidate:
        raise ProposalFailed(self.name, [f"world-model edits are not revised ({reason})"])


def _with_lines(text: str, lines: list[str], cap: int) -> str:
    """``text`` with ``lines`` added under ``SECTION`` (made when missing), oldest dropped past ``cap``."""
    head, found, tail = text.partition(SECTION)
    old = [line for line in tail.splitlines() if line.strip()] if found else []
    kept = old + lines
    base = head.rstrip() if found else text.rstrip()
    while kept:
        new = f"{base}\n\n{SECTION}\n\n" + "\n".join(kept) + "\n"
        if len(new) <= cap:
            return new
        kept.pop(0)
    return text

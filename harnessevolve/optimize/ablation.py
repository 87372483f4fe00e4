"""The ablation proposer: removes a component when the batch's evidence says it hurts.

In order of the strength of the evidence:

1. **copied demonstrations**: a failed run made a tool call whose arguments equal a call of a
   demonstration (``## Example`` section of the examples file) written for a *different* task, and
   its own reference run does not make that call: the demonstration is being copied, so it goes;
2. **prompt bloat**: the assembled prompt is within ``BLOAT_FRACTION`` of the quality gate's caps:
   the oldest demonstration goes (or, with none, the largest skill no passed run shows a use of);
3. **unused skills**: with at least ``MIN_PASSED_RUNS`` passed runs in the batch, a skill whose name
   and commands (its inline code and code-block lines) appear in none of their tool calls goes.

Edits are ``delete_text`` / ``remove_skill`` operations; the evidence goes into the commit trailers.
"""

from __future__ import annotations

import json
import re
from typing import Any

from harnessevolve.core.signals import Cluster
from harnessevolve.harness.components import split_location
from harnessevolve.optimize.edits import split_front_matter
from harnessevolve.optimize.proposal import Candidate, ProposalContext, ProposalFailed
from harnessevolve.optimize.reference_diff import split_demonstrations

BLOAT_FRACTION = 0.9
MIN_PASSED_RUNS = 3
MIN_SNIPPET_CHARS = 4
CODE = re.compile(r"`([^`\n]+)`|^(?:    |\t)(.+)$", re.MULTILINE)
FENCE = re.compile(r"```[^\n]*\n(.*?)```", re.DOTALL)


def demonstration_calls(section: str) -> tuple[str, list[tuple[str, Any]]]:
    """(the task line, the ``{"tool", "arguments"}`` calls) of one ``## Example`` section."""
    task = next((line[5:].strip() for line in section.splitlines() if line.startswith("Task:")), "")
    calls = []
    for line in section.splitlines():
        if line.startswith("{"):
            try:
                call = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(call, dict) and "tool" in call and isinstance(call.get("arguments"), dict):
                calls.append((call["tool"], call["arguments"]))
    return task, calls


def _failed_actions(context: ProposalContext) -> dict[str, list[tuple[str, Any]]]:
    out: dict[str, list[tuple[str, Any]]] = {
        t: [(a.tool, a.arguments) for a in run] for t, run in context.failed_runs.items()
    }
    for cluster in context.clusters:
        for signal in cluster.signals:
            actual = signal.actual or {}
            if signal.task_id not in context.failed_runs and isinstance(actual.get("arguments"), dict):
                out.setdefault(signal.task_id, []).append((str(actual.get("tool")), actual["arguments"]))
    return out


def _cluster_of(context: ProposalContext, task_id: str) -> Cluster | None:
    return next((c for c in context.clusters if task_id in c.task_ids), None)


def _section_text(text: str, section: str) -> str:
    """The section with the blank lines that separate it from the next, so the file stays tidy."""
    start = text.index(section)
    end = start + len(section)
    while end < len(text) and text[end] == "\n":
        end += 1
    return text[start:end] if text.count(text[start:end]) == 1 else section


def _removal(
    context: ProposalContext, location: str, section: str
) -> tuple[list[dict[str, Any]], dict[str, str | None] | None]:
    """(the ``delete_text`` edit that removes ``section`` from its file, None); for a location inside
    a config file (a mini-swe-agent template), no edit but the change itself (None: it cannot be made)."""
    text = context.text_at(location)
    old = _section_text(text, section)
    if split_location(location)[1]:
        kept = text.replace(old, "", 1)
        return [], context.changes_at(location, kept.rstrip("\n") + "\n" if text.endswith("\n") else kept)
    return [{"op": "delete_text", "path": location, "old": old}], None


def _snippets(body: str) -> list[str]:
    found = [a or b for a, b in CODE.findall(body)]
    found += [line for block in FENCE.findall(body) for line in block.splitlines()]
    return [s.strip() for s in found if len(s.strip()) >= MIN_SNIPPET_CHARS]


class AblationProposer:
    """Removes demonstrations that are copied into wrong tasks, bloat, and skills nobody uses."""

    name = "ablate"
    parts = "demonstrations or skills"
    """What it edits (named when ``run`` refuses a harness none of its proposers reaches)."""

    def reaches(self, context: ProposalContext) -> bool:
        """It removes demonstrations and skills: either must be editable."""
        return context.may_edit_at(context.examples_path) or bool(context.editable_files("skills/*/SKILL.md"))

    async def propose(self, context: ProposalContext) -> Candidate | None:
        for make in (self._copied_demonstration, self._bloat, self._unused_skill):
            candidate = make(context)
            if candidate is not None and candidate.summary not in context.rejected:
                return candidate
        return None

    async def revise(self, context: ProposalContext, candidate: Candidate, reason: str) -> Candidate:
        raise ProposalFailed(self.name, [f"cannot revise: a removal has nothing left to remove ({reason})"])

    def _candidate(
        self,
        context: ProposalContext,
        edits: list[dict[str, Any]],
        summary: str,
        rationale: str,
        evidence: list[str],
        tasks: list[str],
        written: dict[str, str | None] | None = None,
    ) -> Candidate | None:
        """``written``: the change itself, where no edit operation can say it (a key of a config file)."""
        if written is not None:
            changes = None if summary in context.rejected else written
        else:
            changes = context.fresh_changes(edits, summary) if edits else None
        if changes is None:
            return None  # not editable, or the harness would not validate: not this proposer's call
        clusters = [c for c in (_cluster_of(context, t) for t in tasks) if c is not None]
        targets = tuple(dict.fromkeys(c.cause.value for c in clusters))
        return Candidate(
            changes=changes,
            summary=summary,
            rationale=rationale,
            targets=targets or ("ablation",),
            target_tasks=tuple(dict.fromkeys(tasks)),
            proposer=self.name,
            edits=tuple(edits),
            evidence=tuple(evidence),
        )

    def _copied_demonstration(self, context: ProposalContext) -> Candidate | None:
        path = context.examples_path
        text = context.text_at(path)
        if not path or not text:
            return None
        failed = _failed_actions(context)
        for section in split_demonstrations(text)[1]:
            task, calls = demonstration_calls(section)
            copies: list[str] = []
            tasks: list[str] = []
            for task_id, actions in failed.items():
                if (context.instructions.get(task_id, "").strip().splitlines() or [""])[0] == task:
                    continue  # the demonstration of this very task
                own = {
                    (a.tool, json.dumps(a.arguments, sort_keys=True))
                    for a in context.references.get(task_id, ())
                }
                for tool, arguments in actions:
                    key = (tool, json.dumps(arguments, sort_keys=True))
                    if key in own or (tool, arguments) not in calls:
                        continue
                    tasks.append(task_id)
                    copies.append(
                        f"{task_id} copied {tool} {json.dumps(arguments)} from the demonstration of {task!r}"
                    )
                    break
            if not copies:
                continue
            edits, written = _removal(context, path, section)
            summary = f"remove the demonstration of {task[:60]!r}: copied into failed runs of other tasks"
            rationale = (
                f"Failed runs of other tasks repeat this demonstration's tool calls verbatim "
                f"({', '.join(tasks)}): the agent copies it instead of solving its own task."
            )
            return self._candidate(context, edits, summary, rationale, copies, tasks, written)
        return None

    def _bloat(self, context: ProposalContext) -> Candidate | None:
        limits = context.limits
        chars = context.prompt_chars
        if chars is None:
            parts = dict.fromkeys([context.system_prompt_path, context.examples_path or ""])
            chars = sum(len(context.text_at(p)) for p in parts) + sum(
                len(t)
                for p, t in context.files.items()
                if p.startswith("skills/") and p.endswith("/SKILL.md")
            )
        ratios = [chars / limits.max_prompt_chars]
        if context.prompt_tokens is not None:
            ratios.append(context.prompt_tokens / limits.max_prompt_tokens)
        if max(ratios) < BLOAT_FRACTION:
            return None
        measure = f"prompt at {max(ratios):.0%} of the quality gate's cap ({chars} chars"
        measure += f", {context.prompt_tokens} tokens)" if context.prompt_tokens is not None else ")"
        tasks = [t for c in context.clusters for t in c.task_ids]
        path = context.examples_path
        sections = split_demonstrations(context.text_at(path))[1] if path else []
        if path and sections:
            task, _ = demonstration_calls(sections[0])
            edits, written = _removal(context, path, sections[0])
            summary = f"remove the oldest demonstration ({task[:60]!r}): prompt near its size cap"
            return self._candidate(
                context,
                edits,
                summary,
                f"The {measure}; the oldest demonstration goes first.",
                [measure],
                tasks,
                written,
            )
        unused = self._unused_skills(context, require_evidence=False)
        if unused:
            name = max(unused, key=lambda n: len(context.files[f"skills/{n}/SKILL.md"]))
            edits = [{"op": "remove_skill", "name": name}]
            summary = f"remove skill {name}: prompt near its size cap"
            why = f"The {measure}; no passed run shows a use of skill {name}, the largest such skill."
            return self._candidate(context, edits, summary, why, [measure], tasks)
        return None

    def _unused_skills(self, context: ProposalContext, *, require_evidence: bool = True) -> list[str]:
        passed = [a for run in context.passed_runs.values() for a in run]
        if require_evidence and len(context.passed_runs) < MIN_PASSED_RUNS:
            return []
        used_text = "\n".join(json.dumps(a.arguments, ensure_ascii=False) for a in passed)
        used_text += "\n" + "\n".join(str(v) for a in passed for v in a.arguments.values())
        out = []
        for path, text in sorted(context.files.items()):
            if not (path.startswith("skills/") and path.endswith("/SKILL.md")):
                continue
            parsed = split_front_matter(text)
            name = path.split("/")[1]
            if parsed is None:
                continue
            snippets = _snippets(parsed[1])
            if require_evidence and not snippets:
                continue  # nothing observable to look for: no evidence either way
            if name in used_text or any(s in used_text for s in snippets):
                continue
            out.append(name)
        return out

    def _unused_skill(self, context: ProposalContext) -> Candidate | None:
        for name in self._unused_skills(context):
            runs = len(context.passed_runs)
            evidence = f"none of {runs} passed runs uses skill {name} (its name or commands)"
            summary = f"remove skill {name}: no passed run uses it"
            why = f"No passed run of this batch shows a use of skill {name}; it only lengthens the prompt."
            candidate = self._candidate(
                context, [{"op": "remove_skill", "name": name}], summary, why, [evidence], []
            )
            if candidate is not None:
                return candidate
        return None

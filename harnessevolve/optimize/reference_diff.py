"""Deterministic proposers that derive edits from reference-trajectory diffs (no model needed).

* ``demo``: add the reference steps of a failed task from the largest cluster as an in-context
  demonstration;
* ``rules``: add the rule that answers the largest cluster's cause to the system prompt.
"""

from __future__ import annotations

import json
import re

from harnessevolve.core.signals import Cause, Cluster
from harnessevolve.harness.components import literal, read_location
from harnessevolve.optimize.proposal import Candidate, ProposalContext, ProposalFailed, ReferenceAction

OBSERVATION_CHARS = 160
EXAMPLE_HEADING = re.compile(r"^## Example\b", re.MULTILINE)
BLOAT_REASON = re.compile(r"prompt bloat: (\d+) (chars|tokens) > cap (\d+)")
CHARS_PER_TOKEN = 4.0
RULES_HEADING = "## Rules"

RULES: dict[Cause, str] = {
    Cause.FORMAT_ERROR: "Every reply must be exactly one tool call; never answer in plain text.",
    Cause.UNKNOWN_TOOL: "Only call the tools listed for you, spelled exactly as listed.",
    Cause.MISSING_ARGUMENT: "Always pass every required argument of a tool.",
    Cause.WRONG_ARGUMENT: "Copy file names and values exactly from the task and from tool results.",
    Cause.WRONG_TOOL: "Use bash to run commands, read_file to read a file, write_file to create one.",
    Cause.SKIPPED_STEP: "Do every step the task needs, in order; do not skip inspecting the files.",
    Cause.EXTRA_STEP: "Go straight to the action the task needs; avoid unneeded commands.",
    Cause.PREMATURE_FINISH: "Before you submit, look at the files with a tool; never guess the answer.",
    Cause.STEP_LIMIT: "Never repeat the same call; once you know the answer, call submit.",
    Cause.TOOL_ERROR_IGNORED: "When a command fails, read the error and fix the command before going on.",
}


def render_demonstration(instruction: str, steps: tuple[ReferenceAction, ...]) -> str:
    """A reference run as a demonstration: each call written as the JSON tool-call object
    ``{"tool": ..., "arguments": ...}`` followed by a short excerpt of its result."""
    lines = ["## Example", f"Task: {instruction.strip()}"]
    for step in steps:
        lines.append(json.dumps({"tool": step.tool, "arguments": step.arguments}, ensure_ascii=False))
        if step.tool != "submit":
            observation = " ".join(step.observation.split())
            if len(observation) > OBSERVATION_CHARS:
                observation = observation[:OBSERVATION_CHARS] + " ..."
            lines.append(f"Result: {observation}")
    return "\n".join(lines) + "\n"


def split_demonstrations(text: str) -> tuple[str, list[str]]:
    """(the text before the first '## Example', each '## Example' section with its trailing text)."""
    starts = [m.start() for m in EXAMPLE_HEADING.finditer(text)]
    if not starts:
        return text, []
    bounds = [*starts, len(text)]
    return text[: starts[0]], [text[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]


def join_demonstrations(preamble: str, sections: list[str]) -> str:
    body = "\n\n".join(s.strip("\n") for s in sections)
    if not preamble.strip():
        return body + "\n" if body else ""
    return preamble.rstrip("\n") + ("\n\n" + body + "\n" if body else "\n")


def cluster_candidate(
    proposer: str, cluster: Cluster, changes: dict[str, str | None], summary: str, detail: str = ""
) -> Candidate:
    """A one-file edit aimed at ``cluster``, with the cluster's evidence as its rationale."""
    rationale = (
        f"{cluster.size} failed run(s) share cause {cluster.cause.value} "
        f"(severity {cluster.severity:.2f}); {cluster.fix_direction}."
    )
    return Candidate(
        changes=changes,
        summary=summary,
        rationale=f"{rationale} {detail}".strip(),
        targets=(cluster.cause.value,),
        target_tasks=cluster.task_ids,
        proposer=proposer,
    )


def _ranked_tasks(cluster: Cluster, context: ProposalContext) -> list[str]:
    return [s.task_id for s in cluster.signals if s.task_id in context.references]


class DemoProposer:
    """Adds one failed task's reference steps as a demonstration, from the largest cluster first."""

    name = "demo"
    parts = "the demonstrations"
    """What it edits (named when ``run`` refuses a harness none of its proposers reaches)."""

    def reaches(self, context: ProposalContext) -> bool:
        """It writes demonstrations: the harness must have an editable place for them."""
        return context.may_edit_at(context.examples_path)

    async def propose(self, context: ProposalContext) -> Candidate | None:
        path = context.examples_path
        if path is None or not context.may_edit_at(path):
            return None
        current = context.text_at(path)
        for cluster in context.clusters:
            for task_id in _ranked_tasks(cluster, context):
                demo = literal(
                    render_demonstration(context.instructions.get(task_id, ""), context.references[task_id]),
                    context.templates,
                )
                summary = f"add a demonstration of {task_id} for {cluster.cause.value}"
                if demo in current or summary in context.rejected:
                    continue
                new = (current.rstrip() + "\n\n" if current.strip() else "") + demo
                changes = context.changes_at(path, new)
                if changes is None:
                    continue
                why = f"First divergence of {task_id}: {cluster.signals[0].hint}"
                return cluster_candidate(self.name, cluster, changes, summary, why)
        return None

    async def revise(self, context: ProposalContext, candidate: Candidate, reason: str) -> Candidate:
        """Answers prompt bloat by dropping the oldest demonstrations (never the one it adds)."""
        path = context.examples_path
        bloat = BLOAT_REASON.search(reason)
        if path is None or bloat is None or read_location(candidate.changes, path) is None:
            raise ProposalFailed(
                self.name, [f"cannot revise: the demo proposer only answers prompt bloat ({reason})"]
            )
        size, unit, cap = int(bloat.group(1)), bloat.group(2), int(bloat.group(3))
        ratio = CHARS_PER_TOKEN
        if context.prompt_chars and context.prompt_tokens:
            ratio = context.prompt_chars / context.prompt_tokens
        excess = (size - cap) * (1 if unit == "chars" else ratio) * 1.1 + 1
        preamble, sections = split_demonstrations(str(read_location(candidate.changes, path)))
        dropped = 0
        while len(sections) > 1 and excess > 0:
            excess -= len(sections.pop(0))
            dropped += 1
        if excess > 0:
            raise ProposalFailed(
                self.name, [f"cannot revise: no older demonstration left to drop for {reason}"]
            )
        changes = context.changes_at(path, join_demonstrations(preamble, sections))
        if changes is None:
            raise ProposalFailed(self.name, [f"cannot revise: dropping demonstrations breaks {path}"])
        summary = f"{candidate.summary} (dropping the {dropped} oldest demonstration(s))"
        rationale = f"{candidate.rationale} Revised after: {reason}"
        revised = Candidate(
            changes=changes,
            summary=summary,
            rationale=rationale,
            targets=candidate.targets,
            target_tasks=candidate.target_tasks,
            proposer=self.name,
            evidence=(*candidate.evidence, f"{size} {unit} > cap {cap}: dropped {dropped} demonstration(s)"),
        )
        return candidate.revised(revised, reason)


class RuleProposer:
    """Adds the rule for the largest cluster's cause under '## Rules' in the system prompt."""

    name = "rules"
    parts = "the system prompt"
    """What it edits (named when ``run`` refuses a harness none of its proposers reaches)."""

    def reaches(self, context: ProposalContext) -> bool:
        """It writes rules into the system prompt: that must be editable."""
        return context.may_edit_at(context.system_prompt_path)

    async def propose(self, context: ProposalContext) -> Candidate | None:
        path = context.system_prompt_path
        if not context.may_edit_at(path):
            return None
        current = context.text_at(path)
        for cluster in context.clusters:
            rule = RULES.get(cluster.cause)
            summary = f"add a rule for {cluster.cause.value}"
            if rule is None or rule in current or summary in context.rejected:
                continue
            if RULES_HEADING in current:
                new = current.replace(RULES_HEADING, f"{RULES_HEADING}\n- {rule}", 1)
            else:
                new = current.rstrip() + f"\n\n{RULES_HEADING}\n- {rule}\n"
            changes = context.changes_at(path, new)
            if changes is not None:
                return cluster_candidate(self.name, cluster, changes, summary)
        return None

    async def revise(self, context: ProposalContext, candidate: Candidate, reason: str) -> Candidate:
        raise ProposalFailed(self.name, [f"cannot revise: a one-line rule has nothing to drop ({reason})"])

"""The reflective LLM proposer: shows a capable model the error clusters, failed-vs-reference steps
and the editable files, and asks for whole-file edits as JSON. A malformed reply is sent back with
the error, up to ``attempts`` times; then the proposal fails with the reasons on record."""

from __future__ import annotations

import json
import re
from typing import Any

from harnessevolve.models import acomplete
from harnessevolve.optimize.proposal import Candidate, ProposalContext, ProposalFailed

FILE_CHARS = 6000
REPRESENTATIVES = 3

SYSTEM = """You improve the harness of an LLM agent: its prompts, demonstrations, skills and tool \
descriptions. You get the error clusters of its failed runs (each with the first step where a run left \
the path of a successful reference run) and the harness files you may edit.
Propose ONE focused edit that fixes the largest, most severe cluster without hurting other tasks. \
Never copy a task's answer into the harness; teach the method instead.
Reply with only a JSON object:
{"summary": "<one line, imperative>", "rationale": "<why this fixes the cluster>",
 "changes": [{"path": "<an editable file>", "content": "<the complete new text of that file>"}]}"""


def render_context(context: ProposalContext) -> str:
    parts = ["# Error clusters (largest first)"]
    for cluster in context.clusters:
        parts.append(
            f"\n## {cluster.cause.value}: {cluster.size} run(s), severity {cluster.severity:.2f}\n"
            f"Fix direction: {cluster.fix_direction}"
        )
        for signal in cluster.signals[:REPRESENTATIVES]:
            parts.append(f"- task: {context.instructions.get(signal.task_id, signal.task_id)}")
            parts.append(f"  divergence: {signal.hint}")
            steps = context.references.get(signal.task_id, ())
            if steps:
                calls = "; ".join(f"{s.tool} {json.dumps(s.arguments)}" for s in steps)
                parts.append(f"  reference steps: {calls}")
    parts.append("\n# Editable files")
    for path, text in sorted(context.files.items()):
        if context.may_edit(path):
            shown = text if len(text) <= FILE_CHARS else text[:FILE_CHARS] + "\n[... cut]"
            parts.append(f"\n--- {path} ---\n{shown}")
    if context.rejected:
        parts.append(
            "\n# Already tried and rejected by the gates\n" + "\n".join(f"- {r}" for r in context.rejected)
        )
    return "\n".join(parts)


def parse_reply(text: str, context: ProposalContext) -> tuple[str, str, dict[str, str]]:
    """(summary, rationale, changes) or ``ValueError`` saying exactly what is wrong."""
    fenced = re.search(r"```(?:json)?\s*(\{.*\})\s*```", text, re.DOTALL)
    raw = fenced.group(1) if fenced else text[text.find("{") : text.rfind("}") + 1]
    try:
        doc: Any = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ValueError(f"the reply is not a JSON object ({exc.msg})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("changes"), list) or not doc["changes"]:
        raise ValueError('the reply needs "summary", "rationale" and a non-empty "changes" list')
    changes: dict[str, str] = {}
    for i, change in enumerate(doc["changes"]):
        if not isinstance(change, dict) or not isinstance(change.get("path"), str):
            raise ValueError(f"changes[{i}] needs a string path")
        if not isinstance(change.get("content"), str):
            raise ValueError(f"changes[{i}] ({change['path']}) needs the new file text as a string content")
        if not context.may_edit(change["path"]):
            raise ValueError(
                f"changes[{i}]: {change['path']} is not editable ({', '.join(context.editable)})"
            )
        if context.files.get(change["path"]) == change["content"]:
            raise ValueError(f"changes[{i}]: {change['path']} is unchanged")
        changes[change["path"]] = change["content"]
    summary = str(doc.get("summary") or "edit proposed by the LLM proposer").splitlines()[0][:120]
    return summary, str(doc.get("rationale", "")), changes


class LLMProposer:
    """Asks ``model`` (any litellm model) for an edit; retries malformed replies with the error shown."""

    name = "llm"

    def __init__(self, model: str, *, attempts: int = 3, temperature: float = 0.7) -> None:
        self.model = model
        self.attempts = attempts
        self.temperature = temperature

    async def propose(self, context: ProposalContext) -> Candidate | None:
        if not context.clusters:
            return None
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": render_context(context)},
        ]
        errors: list[str] = []
        for _ in range(self.attempts):
            try:
                reply = await acomplete(self.model, messages, temperature=self.temperature, max_tokens=4096)
            except Exception as exc:  # noqa: BLE001 - provider faults end this proposal, not the run
                errors.append(f"model call failed: {type(exc).__name__}: {exc}"[:300])
                break
            try:
                summary, rationale, changes = parse_reply(reply.content, context)
            except ValueError as exc:
                errors.append(str(exc))
                messages += [
                    {"role": "assistant", "content": reply.content},
                    {
                        "role": "user",
                        "content": f"That reply was rejected: {exc}. Reply again with the JSON object only.",
                    },
                ]
                continue
            if summary in context.rejected:
                errors.append(f"proposed an edit already rejected: {summary}")
                continue
            top = context.clusters[0]
            return Candidate(
                changes=dict(changes),
                summary=summary,
                rationale=rationale,
                targets=(top.cause.value,),
                target_tasks=top.task_ids,
                proposer=self.name,
                model=self.model,
            )
        raise ProposalFailed(self.name, errors)

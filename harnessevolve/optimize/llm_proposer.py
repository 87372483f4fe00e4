"""The reflective LLM proposer: shows a capable model the error clusters, failed-vs-reference steps
and the editable files, and asks for edit operations (``schemas/edits.schema.json``) as a JSON reply,
schema-constrained where the provider supports it. A malformed reply (not JSON, wrong schema, a
forbidden path, text that does not match) is sent back with the error, up to ``attempts`` times;
then the proposal fails with the reasons on record. ``revise`` shows the rejected edits and the
gate's reason and asks again the same way."""

from __future__ import annotations

import json
import re
from typing import Any

from harnessevolve.core.errors import EditError
from harnessevolve.models import acomplete
from harnessevolve.optimize.proposal import Candidate, ProposalContext, ProposalFailed, retry_turns
from harnessevolve.optimize.reply_format import normalize_reply, response_format

FILE_CHARS = 6000
FORMAT_REFUSALS = ("BadRequestError", "UnsupportedParamsError", "UnprocessableEntityError")
REPRESENTATIVES = 3

SYSTEM = """You improve the harness of an LLM agent: its prompts, demonstrations, skills, tool \
descriptions, loop settings and hooks. You get the error clusters of its failed runs (each with the \
first step where a run left the path of a successful reference run) and the harness files you may edit.
Propose ONE focused change that fixes the largest, most severe cluster without hurting other tasks. \
Never copy a task's answer into the harness; teach the method instead.
Reply with only a JSON object:
{"summary": "<one line, imperative>", "rationale": "<why this fixes the clusters>",
 "targets": ["<cluster id>", ...], "edits": [<edit operation>, ...]}
Edit operations (applied in order, all or nothing; only on editable files):
- {"op": "replace_text", "path": P, "old": "<exact text, occurring once>", "new": "<text>"} \
(add "count": n if old occurs n times)
- {"op": "insert_text", "path": P, "anchor": "<exact text, occurring once>", "where": "before"|"after", \
"text": T} or {"op": "insert_text", "path": P, "position": "start"|"end", "text": T}
- {"op": "delete_text", "path": P, "old": "<exact text>"}
- {"op": "add_skill", "name": "<kebab-case>", "description": "<one line>", "body": "<markdown>"}
- {"op": "update_skill", "name": N, "description": D, "body": B} (either or both)
- {"op": "remove_skill", "name": N}
- {"op": "edit_tool", "name": "<tool>", "description": D, "parameters": <JSON-schema object>} (either or both)
- {"op": "set_loop", "setting": "max_steps"|"max_tokens"|"temperature"|"tool_output_limit"|\
"command_timeout_s"|"json_grammar"|"stop_on_repeat"|"observation_note"|"final_submit"|"answer_from"|\
"answer_check", "value": V} (final_submit: at the step limit ask once more offering only submit; \
answer_from: "TOOL.ARGUMENT", a run still without an answer submits its last such argument; \
answer_check: "TOOL.ARGUMENT", a submit that is none of the run's such arguments is turned back once, \
then replaced by the last)
- {"op": "set_recovery", "rules": [{"event": "tool_error"|"repeated_call"|"step_limit_near"|\
"malformed_call", "action": "note"|"retry"|"stop", "note": "<text>"}]} (replaces the recovery rules)
- {"op": "patch_hook", "path": "hooks/<name>.py", "old": O, "new": N} or \
{"op": "write_hook", "path": "hooks/<name>.py", "code": C} (must compile)
- {"op": "patch_file", "path": P, "diff": "<unified diff of P: @@ hunks of ' ', '-', '+' lines>"} \
(a code edit on any editable file; hunks are found by their unchanged and removed lines)
When the agent is a program of the harness (agent.py, or a mini-swe-agent YAML config such as \
mini.yaml) and that file is editable, its code and templates are yours to change with patch_file / \
replace_text / insert_text: Python must still compile, YAML must still load and its Jinja templates render."""


def render_context(context: ProposalContext) -> str:
    parts = ["# Error clusters (largest first)"]
    for cluster in context.clusters:
        parts.append(
            f"\n## [id: {cluster.cause.value}] {cluster.cause.value}: {cluster.size} run(s), "
            f"severity {cluster.severity:.2f}\nFix direction: {cluster.fix_direction}"
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
    parts.append(f"\n(editable paths: {', '.join(context.editable) or 'none'})")
    if context.rejected:
        parts.append(
            "\n# Already tried and rejected by the gates\n" + "\n".join(f"- {r}" for r in context.rejected)
        )
    return "\n".join(parts)


def _json_object(text: str) -> Any:
    fenced = re.search(r"```(?:json)?\s*(\{.*\})\s*```", text, re.DOTALL)
    raw = fenced.group(1) if fenced else text[text.find("{") : text.rfind("}") + 1]
    try:
        return json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ValueError(f"the reply is not a JSON object ({exc.msg})") from None


def parse_reply(text: str, context: ProposalContext) -> tuple[dict[str, Any], dict[str, str | None]]:
    """(the reply document, the whole-file changes its edits make) or ``ValueError`` saying exactly
    what is wrong, in words the model can act on."""
    from harnessevolve.optimize.edits import schema_problem

    doc = normalize_reply(_json_object(text))
    problem = schema_problem(doc)
    if problem is not None:
        raise ValueError(f"the reply does not match the schema: {problem}")
    known = [c.cause.value for c in context.clusters]
    unknown = [t for t in doc["targets"] if t not in known]
    if unknown:
        raise ValueError(f"targets: {unknown[0]!r} is not a cluster id (ids: {', '.join(known)})")
    summary = (doc["summary"].strip().splitlines() or [""])[0].strip()
    if not summary:
        raise ValueError("summary: give a one-line summary of the edit")
    doc["summary"] = summary
    if summary in context.rejected:
        raise ValueError("that edit was already tried and rejected by the gates; propose another")
    try:
        changes = context.apply(doc["edits"])
    except EditError as exc:
        where = f"edits[{exc.index}]: " if exc.index is not None else ""
        raise ValueError(f"{where}{exc.reason}") from None
    return doc, changes


class LLMProposer:
    """Asks ``model`` (any litellm model) for edit operations; retries malformed replies with the error."""

    name = "llm"

    def __init__(self, model: str, *, attempts: int = 3, temperature: float = 0.7) -> None:
        self.model = model
        self.attempts = attempts
        self.temperature = temperature

    async def propose(self, context: ProposalContext) -> Candidate | None:
        if not context.clusters:
            return None
        return await self._ask(context, [{"role": "user", "content": render_context(context)}])

    async def revise(self, context: ProposalContext, candidate: Candidate, reason: str) -> Candidate:
        rejected = {
            "summary": candidate.summary,
            "rationale": candidate.rationale,
            "targets": list(candidate.targets),
            "edits": list(candidate.edits),
        }
        request = (
            f"The quality gate rejected this proposal:\n{json.dumps(rejected, indent=1)}\n\n"
            f"Its reason: {reason}\n\nPropose a revised edit (relative to the files above, not on top "
            "of the rejected one) that answers this reason. Reply with the JSON object only."
        )
        messages = [
            {"role": "user", "content": render_context(context)},
            {"role": "user", "content": request},
        ]
        return candidate.revised(await self._ask(context, messages), reason)

    async def _ask(self, context: ProposalContext, messages: list[dict[str, Any]]) -> Candidate:
        messages = [{"role": "system", "content": SYSTEM}, *messages]
        fmt = response_format(self.model)
        errors: list[str] = []
        attempt = 0
        while attempt < self.attempts:
            extra = {"response_format": fmt} if fmt else None
            try:
                reply = await acomplete(
                    self.model, messages, temperature=self.temperature, max_tokens=4096, extra_params=extra
                )
            except Exception as exc:  # noqa: BLE001 - provider faults end this proposal, not the run
                if fmt is not None and type(exc).__name__ in FORMAT_REFUSALS:
                    # the provider refused the reply format: ask again with the instructions only
                    fmt = None
                    continue
                errors.append(f"model call failed: {type(exc).__name__}: {exc}"[:300])
                break
            attempt += 1
            try:
                doc, changes = parse_reply(reply.content, context)
            except ValueError as exc:
                errors.append(str(exc))
                messages += retry_turns(
                    reply.content, f"That reply was rejected: {exc}. Reply again with the JSON object only."
                )
                continue
            tasks = [t for c in context.clusters if c.cause.value in doc["targets"] for t in c.task_ids]
            return Candidate(
                changes=changes,
                summary=doc["summary"][:120],
                rationale=doc["rationale"],
                targets=tuple(doc["targets"]),
                target_tasks=tuple(dict.fromkeys(tasks)),
                proposer=self.name,
                model=self.model,
                edits=tuple(doc["edits"]),
            )
        raise ProposalFailed(self.name, errors)

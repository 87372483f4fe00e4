"""``llm-patch``: a small optimizer model (e.g. local/qwen2.5-coder-1.5b) writes one small unified diff per
error cluster, on one editable file.

For each cluster (largest and most severe first, up to ``clusters``) the model sees one failed run:
the task, the cluster's cause and fix direction, the failed run's calls (an excerpt, results cut),
the reference run's calls, and one file with its path -- the agent's script for a ``command`` agent
whose script is editable (``agent.py``), else the tool the reference used at the divergence
(``tools/<name>.yaml``), else the system prompt. It answers with a diff in a fenced block; the
proposer applies it as a ``patch_file`` edit (all-or-nothing, Python must compile). A reply
without a diff, or one that does not apply, goes back to the model with the exact error, up to
``attempts`` times; the first that applies is the candidate (which the quality gate then compiles
and smoke-runs in the sandbox, and the performance gates judge). ``revise`` answers a gate
rejection the same way, showing the refused diff and the reason.
"""

from __future__ import annotations

import json
import re
from typing import Any

from harnessevolve.core.errors import EditError
from harnessevolve.core.signals import Cluster, ErrorSignal
from harnessevolve.models import acomplete
from harnessevolve.optimize.code_levers import agent_script
from harnessevolve.optimize.proposal import (
    Candidate,
    ProposalContext,
    ProposalFailed,
    ReferenceAction,
    retry_turns,
)

FILE_CHARS = 7000
RESULT_CHARS = 160
ACTIONS_SHOWN = 8
CLUSTERS_PER_PROPOSAL = 2
DIFF_BLOCK = re.compile(r"```(?:diff|patch|udiff)?[ \t]*\n(.*?)```", re.DOTALL)

SYSTEM = """You improve the harness of an LLM agent by editing one of its files. You are shown a run \
that failed, a correct reference run of the same task, and the file. Write ONE small change to the \
file that makes the agent behave like the reference run on every similar task. Never copy this \
task's values, file names or answer into the file.
Reply with a unified diff of that one file in a ```diff block:
```diff
--- a/PATH
+++ b/PATH
@@ -LINE,COUNT +LINE,COUNT @@
 unchanged line
-removed line
+added line
 unchanged line
```
Copy the unchanged and removed lines exactly from the file. One hunk, at most 20 changed lines."""


def _calls(actions: tuple[ReferenceAction, ...]) -> str:
    lines = []
    for index, action in enumerate(actions[:ACTIONS_SHOWN], 1):
        result = " ".join(action.observation.split())
        if len(result) > RESULT_CHARS:
            result = result[:RESULT_CHARS] + "..."
        lines.append(f"{index}. {action.tool} {json.dumps(action.arguments, ensure_ascii=False)[:300]}")
        if result:
            lines.append(f"   -> {result}")
    if len(actions) > ACTIONS_SHOWN:
        lines.append(f"... {len(actions) - ACTIONS_SHOWN} more call(s)")
    return "\n".join(lines) or "(no tool calls)"


def target_file(context: ProposalContext, signal: ErrorSignal, settings: dict[str, Any]) -> str | None:
    """The one file the model may patch for this failed run (see the module docstring)."""
    script = agent_script(context, settings)
    if script is not None:
        return script
    tool = (signal.expected or {}).get("tool")
    if tool and f"tools/{tool}.yaml" in context.files and context.may_edit(f"tools/{tool}.yaml"):
        return f"tools/{tool}.yaml"
    if context.system_prompt_path in context.files and context.may_edit(context.system_prompt_path):
        return context.system_prompt_path
    return None


def render_case(context: ProposalContext, cluster: Cluster, signal: ErrorSignal, path: str) -> str:
    text = context.files[path]
    shown = text if len(text) <= FILE_CHARS else text[:FILE_CHARS] + "\n[... cut]"
    instruction = " ".join(context.instructions.get(signal.task_id, signal.task_id).split())[:500]
    parts = [
        f"Task: {instruction}",
        f"Failure: {cluster.cause.value} in {cluster.size} run(s). {signal.hint}",
        f"Fix direction: {cluster.fix_direction}",
        f"The failed run's calls:\n{_calls(context.failed_runs.get(signal.task_id, ()))}",
        f"The reference run's calls:\n{_calls(context.references.get(signal.task_id, ()))}",
        f"The file {path}:\n```\n{shown}\n```",
    ]
    if context.rejected:
        parts.append("Already tried and rejected:\n" + "\n".join(f"- {r}" for r in context.rejected[-5:]))
    parts.append(f"Reply with the unified diff of {path} only.")
    return "\n\n".join(parts)


def extract_diff(reply: str) -> str:
    """The diff of a reply: its fenced block, else the text from the first '---' or '@@' line."""
    fenced = DIFF_BLOCK.search(reply or "")
    if fenced:
        return fenced.group(1)
    text = reply or ""
    start = min((i for i in (text.find("\n--- "), text.find("\n@@")) if i >= 0), default=-1)
    if text.startswith(("--- ", "@@")):
        return text
    if start < 0:
        raise ValueError("the reply has no unified diff (a ```diff block with @@ hunks)")
    return text[start + 1 :]


class PatchProposer:
    """One unified diff per cluster from ``model``; malformed or inapplicable diffs are sent back."""

    name = "llm-patch"

    def __init__(
        self,
        model: str,
        *,
        attempts: int = 3,
        clusters: int = CLUSTERS_PER_PROPOSAL,
        temperature: float = 0.2,
        max_tokens: int = 700,
    ) -> None:
        self.model = model
        self.attempts = attempts
        self.clusters = clusters
        self.temperature = temperature
        self.max_tokens = max_tokens

    def _cases(self, context: ProposalContext) -> list[tuple[Cluster, ErrorSignal, str]]:
        from harnessevolve.optimize.code_levers import harness_settings

        settings = harness_settings(context)
        cases = []
        for cluster in context.clusters[: self.clusters]:
            signal = next(
                (s for s in cluster.signals if s.task_id in context.failed_runs), cluster.signals[0]
            )
            path = target_file(context, signal, settings)
            if path is not None:
                cases.append((cluster, signal, path))
        return cases

    async def propose(self, context: ProposalContext) -> Candidate | None:
        cases = self._cases(context)
        if not cases:
            return None
        errors: list[str] = []
        for cluster, signal, path in cases:
            messages = [
                {"role": "system", "content": SYSTEM.replace("PATH", path)},
                {"role": "user", "content": render_case(context, cluster, signal, path)},
            ]
            candidate = await self._ask(context, cluster, path, messages, errors)
            if candidate is not None:
                return candidate
        raise ProposalFailed(self.name, errors)

    async def revise(self, context: ProposalContext, candidate: Candidate, reason: str) -> Candidate:
        cluster = context.targeted_cluster(candidate)
        edit = candidate.edits[0] if candidate.edits else {}
        path = str(edit.get("path", ""))
        if cluster is None or path not in context.files:
            raise ProposalFailed(
                self.name, [f"cannot revise: the targeted cluster or file is gone ({reason})"]
            )
        signal = next((s for s in cluster.signals if s.task_id in context.failed_runs), cluster.signals[0])
        messages = [
            {"role": "system", "content": SYSTEM.replace("PATH", path)},
            {"role": "user", "content": render_case(context, cluster, signal, path)},
            *retry_turns(
                f"```diff\n{edit.get('diff', '')}```",
                f"The gates rejected that change: {reason}\nWrite a different diff of {path}.",
            ),
        ]
        errors: list[str] = []
        new = await self._ask(context, cluster, path, messages, errors)
        if new is None:
            raise ProposalFailed(self.name, errors)
        return candidate.revised(new, reason)

    async def _ask(
        self,
        context: ProposalContext,
        cluster: Cluster,
        path: str,
        messages: list[dict[str, str]],
        errors: list[str],
    ) -> Candidate | None:
        for _ in range(self.attempts):
            try:
                reply = await acomplete(
                    self.model, messages, temperature=self.temperature, max_tokens=self.max_tokens
                )
            except Exception as exc:  # noqa: BLE001 - a provider fault fails this proposal, not the run
                errors.append(f"{path}: model call failed: {type(exc).__name__}: {exc}"[:300])
                return None
            content = reply.content or ""
            try:
                edit = {"op": "patch_file", "path": path, "diff": extract_diff(content)}
                changes = context.apply([edit])
            except (ValueError, EditError) as exc:
                why = exc.reason if isinstance(exc, EditError) else str(exc)
                errors.append(f"{path}: {why}")
                messages = [
                    *messages,
                    *retry_turns(
                        content,
                        f"That diff was rejected: {why}\nReply again with one ```diff block of {path}, "
                        "copying the unchanged and removed lines exactly.",
                    ),
                ]
                continue
            summary = f"patch {path} for {cluster.cause.value}"
            if summary in context.rejected:
                summary = f"{summary} ({len(context.rejected) + 1})"
            return Candidate(
                changes=changes,
                summary=summary,
                rationale=(
                    f"{cluster.size} failed run(s) share cause {cluster.cause.value}; "
                    f"a {edit['op']} of {path} written by {self.model}."
                ),
                targets=(cluster.cause.value,),
                target_tasks=cluster.task_ids,
                proposer=self.name,
                model=self.model,
                edits=(edit,),
                evidence=(cluster.signals[0].hint,),
            )
        return None

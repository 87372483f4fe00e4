"""What the optimizer agent (``--proposer agent``) is given: the files of its workspace.

The workspace holds, and nothing else:

- ``TASK.md``: a short task statement (the clusters to fix, the gates it will face, the size caps,
  which paths it may change);
- ``harness/``: a writable copy of the harness (only its ``editable`` paths may change; the
  agent's output is the diff of this folder);
- ``evidence/``: this generation's failed train runs, one folder per task, each with the run's
  trajectory, its reference trajectory, the first-divergence signal and its cluster
  (``evidence/clusters.md`` lists the clusters);
- ``history/``: the run's earlier candidates (``history/candidates.md``: summary, proposer,
  verdict, gate numbers, batch and validation scores, whether the edit fired where the gates
  recorded it; ``history/diffs/``: their diffs).

Never the validation or test tasks: only the failed *train* runs of the batch are written, gate
numbers that are lists or mappings (per-task details) are dropped, and every file is scrubbed of
the held-out tasks' instructions and answers before it is written (``HeldOut.scrub``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from harnessevolve.core.atif import Trajectory
from harnessevolve.core.redact import redact_obj
from harnessevolve.core.signals import Cluster, ErrorSignal
from harnessevolve.core.tasks import Task
from harnessevolve.optimize.proposal import ProposalContext

HARNESS_DIR = "harness"
EVIDENCE_DIR = "evidence"
HISTORY_DIR = "history"
TASK_FILE = "TASK.md"
FEEDBACK_FILE = "FEEDBACK.md"
PROTECTED = (f"{EVIDENCE_DIR}/", f"{HISTORY_DIR}/", TASK_FILE)
"""Workspace paths the agent may read but not change (the references live in ``evidence/``)."""
MAX_EVIDENCE_CHARS = 60_000
"""A trajectory file longer than this is cut (the agent greps; it needs the start and the divergence)."""
MIN_SCRUB_CHARS = 12
"""Held-out texts shorter than this are not scrubbed (a word like ``42`` would erase too much)."""
SCRUBBED = "[held-out text removed]"


@dataclass(frozen=True)
class HeldOut:
    """What must never reach the workspace: the validation and test tasks' ids, instructions,
    user turns, setup files and answers."""

    ids: frozenset[str] = frozenset()
    texts: tuple[str, ...] = ()

    @classmethod
    def of(cls, tasks: Iterable[Task]) -> HeldOut:
        held = [t for t in tasks if str(t.split) != "train"]
        texts: list[str] = []
        for task in held:
            texts += [task.instruction, *task.turns, *(task.setup_files.values())]
            if task.answer:
                texts.append(task.answer)
        keep = {t.strip() for t in texts if len(t.strip()) >= MIN_SCRUB_CHARS}
        return cls(frozenset(t.id for t in held), tuple(sorted(keep, key=len, reverse=True)))

    def scrub(self, text: str) -> str:
        """``text`` with every held-out text in it replaced (longest first where they overlap)."""
        index = self._index()
        if not index:
            return text
        out: list[str] = []
        i = done = 0
        while i <= len(text) - MIN_SCRUB_CHARS:
            found = next(
                (s for s in index.get(text[i : i + MIN_SCRUB_CHARS], ()) if text.startswith(s, i)), None
            )
            if found is None:
                i += 1
                continue
            out += [text[done:i], SCRUBBED]
            i = done = i + len(found)
        return "".join(out) + text[done:] if out else text

    def _index(self) -> dict[str, tuple[str, ...]]:
        """Held-out texts by their first ``MIN_SCRUB_CHARS`` characters (one dict look-up per
        position of a scrubbed text, however many held-out tasks a benchmark has)."""
        cached = self.__dict__.get("_by_prefix")
        if cached is None:
            grouped: dict[str, list[str]] = {}
            for secret in self.texts:  # longest first
                grouped.setdefault(secret[:MIN_SCRUB_CHARS], []).append(secret)
            cached = {k: tuple(v) for k, v in grouped.items()}
            object.__setattr__(self, "_by_prefix", cached)
        return cached


@dataclass(frozen=True)
class PastCandidate:
    """One earlier candidate of the run, as the ledger and git record it."""

    generation: int
    candidate: int
    summary: str
    proposer: str
    paths: tuple[str, ...]
    verdict: str
    """``accepted``, ``rejected by <gate>`` or ``proposed`` (not judged yet)."""
    reason: str = ""
    numbers: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Gate -> its scalar numbers (lists and mappings, e.g. per-task details, are dropped)."""
    diff: str = ""
    fired: str = "not recorded"
    """Whether the edit fired in the runs that judged it, where a gate recorded it."""


@dataclass(frozen=True)
class Evidence:
    """What the pipeline knows beyond ``ProposalContext``, for one proposal."""

    failed: Mapping[str, Trajectory] = field(default_factory=dict)
    """Train task id -> this batch's failed run of it (full trajectory)."""
    references: Mapping[str, Trajectory] = field(default_factory=dict)
    """Train task id -> its reference trajectory."""
    history: tuple[PastCandidate, ...] = ()
    gates: tuple[str, ...] = ()
    """One line per gate the candidate will face."""
    held_out: HeldOut = field(default_factory=HeldOut)


def safe_name(task_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", task_id)[:120] or "task"


def failed_folder(task_id: str) -> str:
    """The workspace folder of one failed train run's evidence."""
    return f"{EVIDENCE_DIR}/failed/{safe_name(task_id)}"


def _json(doc: Any, limit: int = MAX_EVIDENCE_CHARS) -> str:
    text = json.dumps(redact_obj(doc), indent=1, ensure_ascii=False, default=str)
    if len(text) > limit:
        text = text[:limit] + f"\n[... {len(text) - limit} more characters cut]\n"
    return text


def _signal_md(signal: ErrorSignal, cluster: Cluster, instruction: str) -> str:
    lines = [
        f"# {signal.task_id}: {signal.cause}",
        "",
        f"Instruction: {instruction}",
        "",
        f"Cluster: {cluster.cause} ({cluster.size} failed run(s), severity {cluster.severity:.2f})",
        f"Fix direction: {cluster.fix_direction}",
        f"Severity of this run: {signal.severity:.2f}",
        f"Hint: {signal.hint}",
        f"First divergence: run step {signal.step}, reference step {signal.reference_step}",
        f"The run did: {json.dumps(signal.actual, default=str)}",
        f"The reference did: {json.dumps(signal.expected, default=str)}",
    ]
    if signal.gaps:
        lines.append(f"Gaps in the evidence: {', '.join(signal.gaps)}")
    return "\n".join(lines) + "\n"


def _actions_doc(actions: Sequence[Any]) -> list[dict[str, Any]]:
    return [{"tool": a.tool, "arguments": a.arguments, "observation": a.observation} for a in actions]


def evidence_files(context: ProposalContext, evidence: Evidence) -> dict[str, str]:
    """``evidence/``: one folder per failed train run of the batch (held-out tasks never)."""
    files: dict[str, str] = {}
    overview = ["# Error clusters of this generation (largest and most severe first)", ""]
    for cluster in context.clusters:
        overview.append(
            f"- {cluster.cause}: {cluster.size} run(s), severity {cluster.severity:.2f}; "
            f"fix direction: {cluster.fix_direction}"
        )
        for signal in cluster.signals:
            if signal.task_id in evidence.held_out.ids:
                continue
            folder = failed_folder(signal.task_id)
            overview.append(f"  - {folder}/: {signal.hint}")
            instruction = context.instructions.get(signal.task_id, "")
            files[f"{folder}/signal.md"] = _signal_md(signal, cluster, instruction)
            run = evidence.failed.get(signal.task_id)
            if run is not None:
                files[f"{folder}/run.json"] = _json(run.to_dict())
            elif signal.task_id in context.failed_runs:
                files[f"{folder}/run.json"] = _json(_actions_doc(context.failed_runs[signal.task_id]))
            reference = evidence.references.get(signal.task_id)
            if reference is not None:
                files[f"{folder}/reference.json"] = _json(reference.to_dict())
            elif signal.task_id in context.references:
                files[f"{folder}/reference.json"] = _json(_actions_doc(context.references[signal.task_id]))
    files[f"{EVIDENCE_DIR}/clusters.md"] = "\n".join(overview) + "\n"
    return files


def history_files(history: Sequence[PastCandidate]) -> dict[str, str]:
    """``history/``: every earlier candidate, its verdict and numbers, and its diff."""
    lines = ["# Earlier candidates of this run (oldest first)", ""]
    if not history:
        lines.append("None yet: this is the run's first proposal.")
    files: dict[str, str] = {}
    for past in history:
        name = f"gen-{past.generation:03d}-{past.candidate}.diff"
        lines.append(f"## gen {past.generation}, candidate {past.candidate}: {past.summary}")
        lines.append(f"- proposer: {past.proposer}; files: {', '.join(past.paths) or '-'}")
        lines.append(f"- verdict: {past.verdict}{f' ({past.reason})' if past.reason else ''}")
        for gate, numbers in past.numbers.items():
            shown = ", ".join(f"{k}={v}" for k, v in numbers.items())
            lines.append(f"- {gate}: {shown or '-'}")
        lines.append(f"- fired: {past.fired}")
        if past.diff:
            files[f"{HISTORY_DIR}/diffs/{name}"] = past.diff[:MAX_EVIDENCE_CHARS]
            lines.append(f"- diff: {HISTORY_DIR}/diffs/{name}")
        lines.append("")
    files[f"{HISTORY_DIR}/candidates.md"] = "\n".join(lines) + "\n"
    return files


def task_statement(context: ProposalContext, evidence: Evidence) -> str:
    """``TASK.md``: what to do, what it will be judged by, what it may touch."""
    top = context.clusters[:3]
    limits = context.limits
    lines = [
        "# Improve the agent harness in ./harness",
        "",
        "An LLM agent runs with the harness in ./harness (prompts, skills, tool specs, settings, code).",
        "It failed the train tasks under ./evidence/failed/: each folder holds the failed run "
        "(run.json), a successful reference run of the same task (reference.json) and where and "
        "why the run first diverged from it (signal.md).",
        "",
        "Fix these clusters of failures, largest first:",
        *[f"- {c.cause} ({c.size} run(s)): {c.fix_direction}" for c in top],
        "",
        "Edit the files under ./harness so the agent avoids these failures on tasks like them. "
        "Make a general improvement: never copy a task's answer into the harness.",
        f"You may change only these paths of ./harness: {', '.join(context.editable) or 'none'}.",
        "Do not change ./evidence, ./history or this file; do not write binary or huge files.",
        "",
        "Your edit will face these gates:",
        *[f"- {g}" for g in evidence.gates],
        f"- size caps: the assembled prompt at most {limits.max_prompt_chars} characters "
        f"(now {context.prompt_chars if context.prompt_chars is not None else '?'}), "
        f"{limits.max_prompt_tokens} tokens; at most {limits.max_new_examples} new examples",
        "",
        "./history/candidates.md lists this run's earlier candidates with their verdicts and numbers "
        "(./history/diffs/ their diffs): do not repeat one that was rejected.",
    ]
    if context.rejected:
        lines += ["", "Rejected before (do not propose again):", *[f"- {s}" for s in context.rejected[-10:]]]
    lines += [
        "",
        "When you are done, write a one-line summary of your edit to ./SUMMARY.txt and finish.",
    ]
    return "\n".join(lines) + "\n"


def workspace_files(context: ProposalContext, evidence: Evidence) -> dict[str, str]:
    """Every file of the workspace (relative path -> text), held-out texts scrubbed."""
    files = {f"{HARNESS_DIR}/{path}": text for path, text in context.files.items()}
    files.update(evidence_files(context, evidence))
    files.update(history_files(evidence.history))
    files[TASK_FILE] = task_statement(context, evidence)
    return {path: evidence.held_out.scrub(text) for path, text in files.items()}


FIRST_EVIDENCE_CHARS = 1500
"""The first failed run's ``signal.md`` is quoted in the agent's first message up to this length."""


def short_instruction(context: ProposalContext, files: Mapping[str, str]) -> str:
    """The task as the agent's first message: read TASK.md (it holds the rest). It also names the
    system prompt's path and quotes the largest cluster's first failed run from the workspace's
    ``files`` (held-out texts already scrubbed), so that an agent can start editing without a
    search (small models lose the thread over several reads)."""
    causes = ", ".join(f"{c.cause} ({c.size})" for c in context.clusters[:3]) or "none"
    text = (
        "You are improving an agent harness. Read ./TASK.md first: it says what to fix (clusters: "
        f"{causes}), what you may change (files under ./harness) and how the edit is judged. "
        "The evidence is in ./evidence, earlier attempts in ./history. Edit files under ./harness "
        "with shell commands, then write a one-line summary to ./SUMMARY.txt and finish."
        f"\n\nThe agent's system prompt is ./{HARNESS_DIR}/{context.system_prompt_path}; the paths "
        f"of ./{HARNESS_DIR} you may change: {', '.join(context.editable) or 'none'}."
    )
    top = context.clusters[0].signals if context.clusters else ()
    # held-out runs have no evidence folder, so the first that has one is a train run
    first = next((p for s in top if (p := f"{failed_folder(s.task_id)}/signal.md") in files), None)
    if first is None:
        return text
    signal = files[first]
    if len(signal) > FIRST_EVIDENCE_CHARS:
        signal = signal[:FIRST_EVIDENCE_CHARS] + "\n[... cut: cat the file for the rest]"
    return text + (
        f"\n\nThe largest cluster's first failed run (./{first}), quoted between the lines: its "
        "instruction is what the agent being improved was asked, not your task.\n"
        f"-----\n{signal.strip()}\n-----"
    )


def feedback_statement(reason: str, revision: int) -> str:
    """``FEEDBACK.md`` for a revision: the gate's reason."""
    return (
        f"# Your edit was rejected (revision {revision})\n\n"
        f"The gate said: {reason}\n\n"
        "Change the files under ./harness again so that the edit passes this gate; the harness copy "
        "still holds your previous edit. Then update ./SUMMARY.txt and finish.\n"
    )

"""``llm-rule``: a proposer a small model can drive. It never asks for edit operations: from one
failed run's first divergence (what the agent did, what the reference run did there, the cause)
it asks, in a one-shot prompt, for a single line ``RULE: <general rule>``; the proposer itself turns
the rule into an ``insert_text`` edit under ``## Rules`` in the system prompt.

A rule is refused before it becomes a candidate when it is not one short line, is already in the
prompt, or is task-specific: it names a path, file name, number or quoted value from the task's
instruction or from the run's/reference's arguments (:func:`task_specific_terms`). What passes
still faces the quality gate (its leakage check on validation/test tasks included) and the
performance gates, like any candidate. ``stats`` counts asks, parsed replies and refusals by reason.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

from harnessevolve.core.signals import Cluster, ErrorSignal
from harnessevolve.models import acomplete
from harnessevolve.optimize.proposal import Candidate, ProposalContext, ProposalFailed, retry_turns
from harnessevolve.optimize.reference_diff import RULES_HEADING

RULE_LINE = re.compile(r"^\s*\**\s*RULE\s*\**\s*:\s*\**\s*(.+?)\s*$", re.IGNORECASE | re.MULTILINE)
MAX_RULE_WORDS = 30
MIN_RULE_WORDS = 4
INSTRUCTION_CHARS = 400
ARGUMENT_CHARS = 300
SIGNALS_PER_PROPOSAL = 3
_SPECIFIC = re.compile(
    r"""(?:'[^'\n]{2,}'|"[^"\n]{2,}")"""  # quoted values
    r"|(?<![\w-])(?:[\w~*-]*[./][\w*./~-]*\w)"  # paths and file names (a dot or slash inside)
    r"|\b\d{2,}\b"  # numbers of two digits or more
)
_IDENTIFIER = re.compile(r"(?<![\w-])\w*(?:_|\d)\w*(?![\w-])")
"""Names with a digit or an underscore (``notes_2024``, ``dir1``): a task's own, not the language's."""
COMMON_WORDS = frozenset(
    """
    a an the this that these those it its is are was were be been being to of in on at by for from
    with without into onto over under about as and or not no nor but if then than so do does did
    done all any each every some one two other same only also just more most less least very can
    could should would will must may might shall use used using run runs call calls answer answers
    submit command commands output outputs result results file files folder folders directory
    directories path paths line lines word words text name names value values number numbers string
    strings first last next new old current correct exact exactly right wrong always never when
    where what which who how why you your agent task tasks tool tools step steps print show list
    find count make copy move delete remove write read check give get set
    """.split()  # noqa: SIM905 - a word list reads best as words
)
"""Words of any rule: a quoted one (``grep 'the'``) is still not a task literal."""

SYSTEM = (
    "You improve the system prompt of a command-line AI agent. Given one failed run, you write ONE "
    "short general rule that would have made the agent act like the correct run. The rule must work "
    "for every similar task: never name this task's files, paths, numbers or values. "
    "Reply with exactly one line: RULE: <the rule, at most 25 words>"
)
EXAMPLE_CASE = (
    "Task: Count the lines of every .log file under data/ and print the total.\n"
    'The agent did: bash {"command": "cat data/*.log"}\n'
    'A correct run did: bash {"command": "cat data/*.log | wc -l"}\n'
    "Cause: wrong_argument. The command printed the files instead of counting their lines."
)
EXAMPLE_REPLY = "RULE: When a task asks how many lines or items there are, pipe the output into wc -l."


def action_text(action: dict[str, Any] | None) -> str:
    if not action:
        return "(nothing)"
    args = json.dumps(action.get("arguments", {}), ensure_ascii=False)
    if len(args) > ARGUMENT_CHARS:
        args = args[:ARGUMENT_CHARS] + "..."
    return f"{action.get('tool', '?')} {args}"


def render_case(signal: ErrorSignal, instruction: str) -> str:
    text = " ".join(instruction.split())
    if len(text) > INSTRUCTION_CHARS:
        text = text[:INSTRUCTION_CHARS] + "..."
    return (
        f"Task: {text}\nThe agent did: {action_text(signal.actual)}\n"
        f"A correct run did: {action_text(signal.expected)}\n"
        f"Cause: {signal.cause.value}. {signal.hint}"
    )


def rule_messages(signal: ErrorSignal, instruction: str) -> list[dict[str, str]]:
    """The one-shot prompt: the instructions, one worked case and its reply, then this case."""
    return [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": EXAMPLE_CASE},
        {"role": "assistant", "content": EXAMPLE_REPLY},
        {"role": "user", "content": render_case(signal, instruction)},
    ]


def parse_rule(reply: str) -> str:
    """The rule of a ``RULE: ...`` reply (first such line), or ValueError saying what is wrong."""
    found = RULE_LINE.search(reply or "")
    if found is None:
        raise ValueError("no line starting with 'RULE:'")
    rule = found.group(1).strip().strip("`").strip()
    rule = re.sub(r"\s+", " ", rule)
    n_words = len(rule.split())
    if n_words < MIN_RULE_WORDS:
        raise ValueError(f"the rule has {n_words} word(s); write a whole sentence")
    if n_words > MAX_RULE_WORDS:
        raise ValueError(f"the rule has {n_words} words; at most {MAX_RULE_WORDS}")
    return rule


def task_specific_terms(signal: ErrorSignal, instruction: str, *others: str) -> set[str]:
    """Paths, file names, numbers, quoted values and names with digits or underscores of the task
    (and of ``others``: the batch's other instructions) and of the two actions."""
    sources = [instruction, *others]
    for action in (signal.actual, signal.expected):
        if action:
            sources += [str(v) for v in (action.get("arguments") or {}).values()]
    terms = set()
    for source in sources:
        for found in _SPECIFIC.findall(source):
            term = found.strip("'\"").strip()
            literal = len(term) >= 2 and not term.startswith("-") and term not in (".", "./", "..")
            if literal and not _common_words_only(term):
                terms.add(term.lower())
        terms.update(w.lower() for w in _IDENTIFIER.findall(source) if re.search(r"[A-Za-z]", w))
    return terms


def _common_words_only(term: str) -> bool:
    """A quoted value made only of ordinary words (``'the'``, ``"the file"``): no literal of a task."""
    words = re.findall(r"[^\W\d_]+|\S", term.lower())
    return bool(words) and all(w in COMMON_WORDS for w in words)


def specific_term_in(rule: str, terms: set[str]) -> str | None:
    lowered = rule.lower()
    for term in sorted(terms, key=len, reverse=True):
        if re.search(rf"(?<![\w./-]){re.escape(term)}(?![\w/-])", lowered):
            return term
    return None


def rule_edit(path: str, current: str, rule: str) -> dict[str, Any]:
    """The edit operation that adds ``rule`` as the first item under '## Rules' (made if missing)."""
    if current.count(RULES_HEADING) == 1:
        return {
            "op": "insert_text",
            "path": path,
            "anchor": RULES_HEADING,
            "where": "after",
            "text": f"\n- {rule}",
        }
    lead = "" if not current or current.endswith("\n\n") else ("\n" if current.endswith("\n") else "\n\n")
    return {
        "op": "insert_text",
        "path": path,
        "position": "end",
        "text": f"{lead}{RULES_HEADING}\n- {rule}\n",
    }


class SmallModelRuleProposer:
    """Asks ``model`` for one general rule per failed run's first divergence (largest cluster first,
    up to ``signals`` runs per proposal); the first rule that passes the checks becomes the edit."""

    name = "llm-rule"
    parts = "the system prompt file"
    """What it edits (named when ``run`` refuses a harness none of its proposers reaches)."""

    def __init__(
        self,
        model: str,
        *,
        signals: int = SIGNALS_PER_PROPOSAL,
        temperature: float = 0.2,
        max_tokens: int = 80,
    ) -> None:
        self.model = model
        self.signals = signals
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.stats: Counter[str] = Counter()
        """asked, parsed, proposed, and refused:<reason> counts over this proposer's life."""

    def reaches(self, context: ProposalContext) -> bool:
        """It writes rules into the system prompt file: that must be editable."""
        return context.system_prompt_path in context.files and context.may_edit(context.system_prompt_path)

    def _cases(self, context: ProposalContext) -> list[tuple[Cluster, ErrorSignal]]:
        cases = [(c, s) for c in context.clusters for s in c.signals if s.expected or s.actual]
        return cases[: self.signals]

    async def propose(self, context: ProposalContext) -> Candidate | None:
        path = context.system_prompt_path
        if not context.may_edit(path) or not context.clusters:
            return None
        cases = self._cases(context)
        if not cases:
            return None
        errors: list[str] = []
        for cluster, signal in cases:
            candidate = await self._rule_candidate(
                context,
                cluster,
                signal,
                rule_messages(signal, context.instructions.get(signal.task_id, "")),
                errors,
            )
            if candidate is not None:
                return candidate
        raise ProposalFailed(self.name, errors)

    async def revise(self, context: ProposalContext, candidate: Candidate, reason: str) -> Candidate:
        """Asks again for the same run with the gate's reason and the refused rule shown."""
        cluster = context.targeted_cluster(candidate)
        signal = (
            next((s for s in cluster.signals if s.task_id in candidate.target_tasks), None)
            if cluster
            else None
        )
        if cluster is None or signal is None:
            raise ProposalFailed(self.name, [f"cannot revise: the targeted cluster is gone ({reason})"])
        messages = rule_messages(signal, context.instructions.get(signal.task_id, ""))
        messages += retry_turns(
            f"RULE: {candidate.evidence[0] if candidate.evidence else ''}",
            f"That rule was rejected: {reason}. Write a more general rule, one line.",
        )
        errors: list[str] = []
        new = await self._rule_candidate(context, cluster, signal, messages, errors)
        if new is None:
            raise ProposalFailed(self.name, errors)
        return candidate.revised(new, reason)

    async def _rule_candidate(
        self,
        context: ProposalContext,
        cluster: Cluster,
        signal: ErrorSignal,
        messages: list[dict[str, str]],
        errors: list[str],
    ) -> Candidate | None:
        path = context.system_prompt_path
        current = context.files.get(path, "")
        self.stats["asked"] += 1
        try:
            reply = await acomplete(
                self.model, messages, temperature=self.temperature, max_tokens=self.max_tokens
            )
        except Exception as exc:  # noqa: BLE001 - a provider fault fails this proposal, not the run
            self.stats["refused:model_error"] += 1
            errors.append(f"{signal.task_id}: model call failed: {type(exc).__name__}: {exc}"[:300])
            return None
        try:
            rule = parse_rule(reply.content)
        except ValueError as exc:
            self.stats["refused:format"] += 1
            errors.append(
                f"{signal.task_id}: {exc} (reply: {' '.join((reply.content or '').split())[:120]!r})"
            )
            return None
        self.stats["parsed"] += 1
        terms = task_specific_terms(
            signal, context.instructions.get(signal.task_id, ""), *context.instructions.values()
        )
        term = specific_term_in(rule, terms)
        summary = f"add a rule for {cluster.cause.value}: {rule}"[:120]
        if term is not None:
            self.stats["refused:task_specific"] += 1
            errors.append(f"{signal.task_id}: task-specific rule (names {term!r}): {rule}")
            return None
        if rule.lower() in current.lower() or summary in context.rejected:
            self.stats["refused:duplicate"] += 1
            errors.append(f"{signal.task_id}: rule already present or rejected: {rule}")
            return None
        edit = rule_edit(path, current, rule)
        changes = context.apply([edit])
        self.stats["proposed"] += 1
        return Candidate(
            changes=changes,
            summary=summary,
            rationale=(
                f"{cluster.size} failed run(s) share cause {cluster.cause.value}; at the first divergence of "
                f"{signal.task_id} the agent did {action_text(signal.actual)} where the reference did "
                f"{action_text(signal.expected)}. Rule written by {self.model}."
            ),
            targets=(cluster.cause.value,),
            target_tasks=cluster.task_ids,
            proposer=self.name,
            model=self.model,
            edits=(edit,),
            evidence=(rule,),
        )

"""The small-model rule proposer (``llm-rule``) with the scripted provider: one-shot prompt built from
the first divergence, 'RULE:' replies parsed into an insert_text edit, task-specific rules refused,
leaking rules rejected by the quality gate, and the proposer chosen by name."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
from pathlib import Path

import pytest

from harnessevolve.core.errors import HarnessEvolveError
from harnessevolve.core.signals import Cause, Cluster, ErrorSignal
from harnessevolve.harness.load import read_files
from harnessevolve.optimize.proposal import ProposalContext, ProposalFailed
from harnessevolve.optimize.registry import make_proposer
from harnessevolve.optimize.rule_proposer import (
    SmallModelRuleProposer,
    parse_rule,
    rule_edit,
    task_specific_terms,
)

SEED = Path(__file__).parents[2] / "harnesses" / "shell-agent"
SYSTEM = "prompts/system.md"
GENERAL = "When a task asks for files by extension, use find with -name and a glob pattern."


def signal(task: str = "t1") -> ErrorSignal:
    return ErrorSignal(
        task,
        Cause.WRONG_ARGUMENT,
        0.8,
        "step 1: bash(command='ls docs') where the reference ran find",
        1,
        actual={"tool": "bash", "arguments": {"command": "ls docs"}},
        expected={"tool": "bash", "arguments": {"command": "find docs -name '*.md'"}},
    )


def context(**overrides: object) -> ProposalContext:
    base = ProposalContext(
        files=read_files(SEED),
        editable=("prompts/*.md",),
        system_prompt_path=SYSTEM,
        examples_path="prompts/examples.md",
        clusters=(Cluster(Cause.WRONG_ARGUMENT, (signal("t1"), signal("t2"))),),
        instructions={
            "t1": "List every markdown file under docs/ (recursively).",
            "t2": "List the .md files in docs/notes_2024.",
        },
    )
    return dataclasses.replace(base, **overrides)


@pytest.fixture
def script(scripts):
    """``script(replies)``: a scripted rule-writer model (``scripted/rule-writer-N``) for the test."""
    made = itertools.count()
    return lambda replies: scripts(f"rule-writer-{next(made)}", replies)


def test_rule_becomes_an_insert_edit_under_rules(script) -> None:
    seen: list = []

    def policy(messages, _tools):
        seen.append(messages)
        return f"Sure.\nRULE: {GENERAL}\nThat should help."

    proposer = SmallModelRuleProposer(script(policy))
    candidate = asyncio.run(proposer.propose(context()))
    assert candidate is not None and candidate.proposer == "llm-rule"
    new = candidate.changes[SYSTEM]
    assert f"## Rules\n- {GENERAL}" in new and new.startswith(context().files[SYSTEM].rstrip())
    assert candidate.edits[0]["op"] == "insert_text" and candidate.targets == ("wrong_argument",)
    assert candidate.evidence == (GENERAL,) and candidate.model.startswith("scripted/")
    prompt = seen[0]
    assert [m["role"] for m in prompt] == ["system", "user", "assistant", "user"]  # one-shot
    assert "ls docs" in prompt[-1]["content"] and "find docs -name" in prompt[-1]["content"]
    assert dict(proposer.stats) == {"asked": 1, "parsed": 1, "proposed": 1}
    # a second rule goes under the same heading, first in the list
    again = rule_edit(SYSTEM, new, "Always quote glob patterns so the shell does not expand them.")
    assert again["anchor"] == "## Rules" and again["where"] == "after"


def test_task_specific_and_malformed_rules_are_refused(script) -> None:
    replies = [
        "I think the agent should use find.",  # no RULE: line
        "RULE: Run find docs -name '*.md' to list the files.",  # names the task's path and glob
        f"RULE: {GENERAL}",
    ]
    proposer = SmallModelRuleProposer(script(replies))
    ctx = context(clusters=(Cluster(Cause.WRONG_ARGUMENT, (signal("t1"), signal("t2"), signal("t1"))),))
    candidate = asyncio.run(proposer.propose(ctx))
    assert candidate is not None and candidate.evidence == (GENERAL,)
    assert proposer.stats["refused:format"] == 1 and proposer.stats["refused:task_specific"] == 1

    proposer = SmallModelRuleProposer(
        script(["RULE: Look inside notes_2024 first.", "RULE: short"]), signals=2
    )
    with pytest.raises(ProposalFailed) as failed:
        asyncio.run(proposer.propose(context()))
    assert "task-specific rule (names 'notes_2024')" in failed.value.errors[0]
    assert "word(s)" in failed.value.errors[1]


def test_terms_and_parsing() -> None:
    terms = task_specific_terms(signal(), "Count the lines of logs/app.log that contain 404 or 'timeout'.")
    assert {"logs/app.log", "404", "timeout", "*.md"} <= terms
    assert not any(t.startswith("-") for t in terms)
    assert (
        parse_rule("**RULE:** Always pipe into `wc -l` to count lines.")
        == "Always pipe into `wc -l` to count lines."
    )
    assert (
        parse_rule("rule: Use find to search directories recursively.")
        == "Use find to search directories recursively."
    )
    with pytest.raises(ValueError, match="at most"):
        parse_rule("RULE: " + "word " * 40)


def test_nothing_to_do_without_an_editable_prompt_or_signals(script) -> None:
    proposer = SmallModelRuleProposer(script([]))
    assert asyncio.run(proposer.propose(context(editable=("skills/*",)))) is None
    bare = ErrorSignal("t1", Cause.FORMAT_ERROR, 0.5, "no tool call")
    assert asyncio.run(proposer.propose(context(clusters=(Cluster(Cause.FORMAT_ERROR, (bare,)),)))) is None
    assert proposer.stats["asked"] == 0


def test_revise_shows_the_reason_and_asks_again(script) -> None:
    seen: list = []
    replies = iter([f"RULE: {GENERAL}", "RULE: Prefer find over ls when the task says recursively."])

    def policy(messages, _tools):
        seen.append(messages)
        return next(replies)

    proposer = SmallModelRuleProposer(script(policy))
    first = asyncio.run(proposer.propose(context()))
    assert first is not None
    revised = asyncio.run(proposer.revise(context(), first, "leakage: validation task v3 scores 0.90"))
    assert revised.revision == 1 and revised.feedback == ("leakage: validation task v3 scores 0.90",)
    assert "recursively" in revised.changes[SYSTEM]
    assert "leakage: validation task v3" in seen[-1][-1]["content"]


def test_leaking_rule_is_rejected_by_the_quality_gate(script, shell_basics) -> None:
    from harnessevolve.gate.config import LeakageConfig
    from harnessevolve.gate.leakage import leakage_gate

    protected = next(t for t in shell_basics.tasks if t.split == "validation")
    leak = " ".join(protected.instruction.split()[:20])
    proposer = SmallModelRuleProposer(script([f"RULE: {leak}"]))
    ctx = context(instructions={"t1": "List every markdown file under docs/ (recursively)."})
    candidate = asyncio.run(proposer.propose(ctx))
    assert candidate is not None  # not specific to t1, so the proposer lets it through ...
    after = {**ctx.files, **candidate.changes}
    verdict = leakage_gate(ctx.files, after, shell_basics.tasks, LeakageConfig())  # ... the gate stops it
    assert not verdict.passed and protected.id in verdict.reason
    general = asyncio.run(SmallModelRuleProposer(script([f"RULE: {GENERAL}"])).propose(ctx))
    assert leakage_gate(
        ctx.files, {**ctx.files, **general.changes}, shell_basics.tasks, LeakageConfig()
    ).passed


def test_chosen_by_name_and_needs_a_model() -> None:
    chain = make_proposer(["llm-rule", "rules"], "scripted/x")
    assert [p.name for p in chain.proposers] == ["llm-rule", "rules"]
    with pytest.raises(HarnessEvolveError, match="the llm-rule proposer needs a model"):
        make_proposer(["llm-rule"], None)


def test_common_words_are_not_task_literals(script) -> None:
    """A quoted common word in a task ('the') does not make every rule task-specific; a quoted task
    literal ('timeout') still does."""
    instruction = "Count the lines that contain the word 'the' in notes.txt, and those with 'timeout'."
    terms = task_specific_terms(signal(), instruction)
    assert "the" not in terms and "timeout" in terms and "notes.txt" in terms
    rule = "Always use the correct command in the submit answer."
    proposer = SmallModelRuleProposer(script([f"RULE: {rule}"]), signals=1)
    ctx = context(instructions={"t1": instruction, "t2": instruction})
    candidate = asyncio.run(proposer.propose(ctx))
    assert candidate is not None and candidate.evidence == (rule,)
    proposer = SmallModelRuleProposer(
        script(["RULE: Search for timeout before you count the lines."]), signals=1
    )
    with pytest.raises(ProposalFailed, match="names 'timeout'"):
        asyncio.run(proposer.propose(ctx))

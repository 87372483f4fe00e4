"""Reference-diff proposers (demo, rules), chaining and lookup by name, and candidate commit messages."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest
from reference_actions import COUNT_LINES as REF_COUNT
from reference_actions import READ_COLOUR as REF_READ

from harnessevolve.core.errors import HarnessEvolveError
from harnessevolve.core.signals import Cause, ErrorSignal
from harnessevolve.evaluate.clustering import cluster_signals
from harnessevolve.optimize.proposal import Candidate, ProposalContext, ProposalFailed, ReferenceAction
from harnessevolve.optimize.reference_diff import (
    OBSERVATION_CHARS,
    RULES,
    RULES_HEADING,
    DemoProposer,
    RuleProposer,
    render_demonstration,
)
from harnessevolve.optimize.registry import DEFAULT_PROPOSERS, ChainProposer, make_proposer

SYSTEM = "prompts/system.md"
EXAMPLES = "prompts/examples.md"
SYSTEM_TEXT = "You are an agent. Use the tools.\n"


def propose(proposer, ctx):
    return asyncio.run(proposer.propose(ctx))


def signal(task_id: str, cause: Cause, severity: float) -> ErrorSignal:
    return ErrorSignal(task_id=task_id, cause=cause, severity=severity, hint=f"hint for {task_id}", step=3)


def context(**overrides: object) -> ProposalContext:
    """Largest cluster: wrong_tool (t-count, t-read, t-noref); then format_error (t-fmt)."""
    clusters = cluster_signals(
        [
            signal("t-noref", Cause.WRONG_TOOL, 0.9),  # most severe, but has no reference
            signal("t-count", Cause.WRONG_TOOL, 0.7),
            signal("t-read", Cause.WRONG_TOOL, 0.5),
            signal("t-fmt", Cause.FORMAT_ERROR, 0.9),
        ]
    )
    base = ProposalContext(
        files={SYSTEM: SYSTEM_TEXT, EXAMPLES: "", "harness.yaml": "version: 1\n"},
        editable=("prompts/*.md", "skills/*/SKILL.md", "tools/*.yaml"),
        system_prompt_path=SYSTEM,
        examples_path=EXAMPLES,
        clusters=tuple(clusters),
        instructions={
            "t-count": "How many lines are in a.txt?",
            "t-read": "What colour is in colour.txt?",
            "t-noref": "Something else",
            "t-fmt": "What colour?",
        },
        references={"t-count": REF_COUNT, "t-read": REF_READ, "t-fmt": REF_READ},
    )
    return dataclasses.replace(base, **overrides)


# --- demo -------------------------------------------------------------------------------------------


def test_demo_adds_the_reference_of_the_largest_clusters_first_task_with_a_reference() -> None:
    candidate = propose(DemoProposer(), context())
    assert candidate is not None
    assert set(candidate.changes) == {EXAMPLES}
    demo = candidate.changes[EXAMPLES]
    assert demo == (
        "## Example\n"
        "Task: How many lines are in a.txt?\n"
        '{"tool": "bash", "arguments": {"command": "wc -l < a.txt"}}\n'
        "Result: 3\n"
        '{"tool": "submit", "arguments": {"answer": "3"}}\n'
    )
    assert candidate.summary == "add a demonstration of t-count for wrong_tool"
    assert candidate.targets == ("wrong_tool",)
    assert candidate.target_tasks == ("t-noref", "t-count", "t-read")
    assert candidate.proposer == "demo"
    assert "3 failed run(s)" in candidate.rationale and "hint for t-noref" in candidate.rationale


def test_demo_appends_after_existing_examples() -> None:
    existing = "## Example\nTask: old\nStep 1: call submit {}\n"
    candidate = propose(DemoProposer(), context(files={SYSTEM: SYSTEM_TEXT, EXAMPLES: existing}))
    assert candidate is not None
    new = candidate.changes[EXAMPLES]
    assert new.startswith(existing.rstrip() + "\n\n## Example\nTask: How many lines")
    assert new.count("## Example") == 2


def test_demo_skips_a_demonstration_already_present() -> None:
    present = render_demonstration("How many lines are in a.txt?", REF_COUNT)
    candidate = propose(DemoProposer(), context(files={SYSTEM: SYSTEM_TEXT, EXAMPLES: present}))
    assert candidate is not None
    assert candidate.summary == "add a demonstration of t-read for wrong_tool"
    assert candidate.changes[EXAMPLES].count("## Example") == 2


def test_demo_skips_rejected_summaries_and_moves_to_the_next_cluster() -> None:
    rejected = (
        "add a demonstration of t-count for wrong_tool",
        "add a demonstration of t-read for wrong_tool",
    )
    candidate = propose(DemoProposer(), context(rejected=rejected))
    assert candidate is not None
    assert candidate.summary == "add a demonstration of t-fmt for format_error"
    assert candidate.targets == ("format_error",)


def test_demo_returns_none_when_everything_was_tried() -> None:
    rejected = tuple(
        f"add a demonstration of {t} for {c}"
        for t, c in [("t-count", "wrong_tool"), ("t-read", "wrong_tool"), ("t-fmt", "format_error")]
    )
    assert propose(DemoProposer(), context(rejected=rejected)) is None


def test_demo_respects_may_edit() -> None:
    assert propose(DemoProposer(), context(editable=(SYSTEM, "tools/*.yaml"))) is None
    assert propose(DemoProposer(), context(examples_path=None)) is None


def test_demo_needs_a_reference() -> None:
    assert propose(DemoProposer(), context(references={})) is None


def test_demonstration_cuts_long_observations_and_collapses_whitespace() -> None:
    long = "word  \n" * 100
    text = render_demonstration("  Read it.  ", (ReferenceAction("read_file", {"path": "é.txt"}, long),))
    lines = text.splitlines()
    assert lines[1] == "Task: Read it."
    assert lines[2] == '{"tool": "read_file", "arguments": {"path": "é.txt"}}'
    result = lines[3].removeprefix("Result: ")
    assert result.endswith(" ...")
    assert len(result) == OBSERVATION_CHARS + len(" ...")
    assert result[:OBSERVATION_CHARS] == ("word " * 100)[:OBSERVATION_CHARS]


# --- rules ------------------------------------------------------------------------------------------


def test_rules_adds_the_rule_for_the_largest_cluster_under_a_new_heading() -> None:
    candidate = propose(RuleProposer(), context())
    assert candidate is not None
    assert candidate.changes == {
        SYSTEM: SYSTEM_TEXT.rstrip() + f"\n\n{RULES_HEADING}\n- {RULES[Cause.WRONG_TOOL]}\n"
    }
    assert candidate.summary == "add a rule for wrong_tool"
    assert candidate.targets == ("wrong_tool",)
    assert candidate.proposer == "rules"


def test_rules_inserts_under_an_existing_heading() -> None:
    current = f"Intro.\n\n{RULES_HEADING}\n- Be brief.\n\nOutro.\n"
    candidate = propose(RuleProposer(), context(files={SYSTEM: current}))
    assert candidate is not None
    new = candidate.changes[SYSTEM]
    assert new == f"Intro.\n\n{RULES_HEADING}\n- {RULES[Cause.WRONG_TOOL]}\n- Be brief.\n\nOutro.\n"
    assert new.count(RULES_HEADING) == 1


def test_rules_does_not_re_add_a_present_rule() -> None:
    current = SYSTEM_TEXT + f"\n{RULES_HEADING}\n- {RULES[Cause.WRONG_TOOL]}\n"
    candidate = propose(RuleProposer(), context(files={SYSTEM: current}))
    assert candidate is not None
    assert candidate.summary == "add a rule for format_error"
    assert candidate.changes[SYSTEM].count(RULES[Cause.WRONG_TOOL]) == 1


def test_rules_skips_rejected_and_causes_without_a_rule() -> None:
    clusters = tuple(
        cluster_signals(
            [
                signal("a", Cause.MODEL_ERROR, 0.2),
                signal("b", Cause.MODEL_ERROR, 0.2),
                signal("c", Cause.STEP_LIMIT, 0.5),
                signal("d", Cause.EXTRA_STEP, 0.4),
            ]
        )
    )
    assert clusters[0].cause == Cause.MODEL_ERROR
    candidate = propose(RuleProposer(), context(clusters=clusters, rejected=("add a rule for step_limit",)))
    assert candidate is not None
    assert candidate.summary == "add a rule for extra_step"


def test_rules_respects_may_edit() -> None:
    assert propose(RuleProposer(), context(editable=(EXAMPLES,))) is None


def test_proposers_with_no_clusters_propose_nothing() -> None:
    assert propose(DemoProposer(), context(clusters=())) is None
    assert propose(RuleProposer(), context(clusters=())) is None


# --- chain and registry -------------------------------------------------------------------------------


def test_chain_first_proposal_wins() -> None:
    chain = make_proposer(["demo", "rules"])
    assert isinstance(chain, ChainProposer)
    assert chain.name == "demo+rules"
    candidate = propose(chain, context())
    assert candidate is not None and candidate.proposer == "demo"


def test_chain_falls_through_to_the_next_proposer() -> None:
    candidate = propose(make_proposer(["demo", "rules"]), context(references={}))
    assert candidate is not None and candidate.proposer == "rules"
    assert propose(make_proposer(["rules", "demo"]), context()).proposer == "rules"


def test_chain_asks_a_proposer_with_refused_candidates_after_the_others() -> None:
    chain = make_proposer(["demo", "rules"])
    assert propose(chain, context(strikes={"demo": 1})).proposer == "rules"
    assert propose(chain, context(strikes={"demo": 2, "rules": 1})).proposer == "rules"
    # equal strikes keep the chain's order
    assert propose(chain, context(strikes={"demo": 1, "rules": 1})).proposer == "demo"
    # a proposer with nothing to say still falls through to the next, whatever the order
    assert propose(chain, context(strikes={"rules": 3}, references={})).proposer == "rules"


def test_strikes_count_refusals_since_the_last_acceptance() -> None:
    from harnessevolve.pipeline.history import proposer_strikes

    outcomes = [("demo", False), ("behaviour", False), ("demo", True), ("behaviour", False), ("rules", False)]
    assert proposer_strikes(outcomes) == {"behaviour": 2, "rules": 1}
    assert proposer_strikes([]) == {}


def test_chain_returns_none_when_no_proposer_has_anything() -> None:
    assert propose(make_proposer(list(DEFAULT_PROPOSERS)), context(editable=())) is None
    assert propose(ChainProposer([]), context()) is None


def test_make_proposer_rejects_unknown_names() -> None:
    with pytest.raises(HarnessEvolveError) as info:
        make_proposer(["demo", "gpt-magic"])
    assert "gpt-magic" in info.value.message
    assert info.value.field == "--proposer"
    assert "demo" in info.value.hint and "rules" in info.value.hint


# --- candidate ----------------------------------------------------------------------------------------


def test_commit_message_has_subject_rationale_and_trailers() -> None:
    candidate = Candidate(
        changes={EXAMPLES: "x"},
        summary="add a rule for wrong_tool",
        rationale="because",
        targets=("wrong_tool", "format_error"),
        target_tasks=("t-1", "t-2"),
        proposer="rules",
    )
    message = candidate.commit_message(run_id="20240101-abc", generation=7)
    lines = message.splitlines()
    assert lines[0] == "harnessevolve: add a rule for wrong_tool"
    assert lines[2] == "because"
    trailers = lines[4:]
    assert "Targets: wrong_tool, format_error" in trailers
    assert "Target-Tasks: t-1, t-2" in trailers
    assert "Proposer: rules" in trailers
    assert "Proposer-Model: none" in trailers
    assert "Run: 20240101-abc" in trailers
    assert "Generation: 7" in trailers
    with_model = dataclasses.replace(candidate, model="scripted/p").commit_message(run_id="r", generation=0)
    assert "Proposer-Model: scripted/p" in with_model.splitlines()


# --- revision -----------------------------------------------------------------------------------------


def revise(proposer, ctx, candidate, reason):
    return asyncio.run(proposer.revise(ctx, candidate, reason))


def test_demo_revises_prompt_bloat_by_dropping_the_oldest_demonstrations() -> None:
    old = [render_demonstration(f"Old task {i}?", REF_READ) for i in range(3)]
    ctx = context(files={SYSTEM: SYSTEM_TEXT, EXAMPLES: "\n".join(old)})
    first = propose(DemoProposer(), ctx)
    assert first.changes[EXAMPLES].count("## Example") == 4
    excess = len(old[0]) // 2  # just over half a demonstration too long: one must go
    reason = f"prompt bloat: {16000 + excess} chars > cap 16000"
    revised = revise(DemoProposer(), ctx, first, reason)
    text = revised.changes[EXAMPLES]
    assert text.count("## Example") == 3 and "Old task 0?" not in text
    assert "Old task 1?" in text and text.rstrip().endswith(
        '{"tool": "submit", "arguments": {"answer": "3"}}'
    )
    assert revised.revision == 1 and revised.feedback == (reason,) and revised.proposer == "demo"
    assert "dropping the 1 oldest" in revised.summary
    again = revise(DemoProposer(), ctx, revised, "prompt bloat: 4010 tokens > cap 4000")
    assert again.revision == 2 and again.feedback == (reason, "prompt bloat: 4010 tokens > cap 4000")
    assert again.changes[EXAMPLES].count("## Example") == 2


def test_demo_cannot_revise_other_reasons_or_drop_its_own_demonstration() -> None:
    first = propose(DemoProposer(), context())
    with pytest.raises(ProposalFailed, match="cannot revise"):
        revise(DemoProposer(), context(), first, "leakage: task t-1 scored 0.93")
    with pytest.raises(ProposalFailed, match="no older demonstration"):
        revise(DemoProposer(), context(), first, "prompt bloat: 20000 chars > cap 16000")


def test_rules_cannot_revise() -> None:
    first = propose(RuleProposer(), context())
    with pytest.raises(ProposalFailed, match="cannot revise"):
        revise(RuleProposer(), context(), first, "prompt bloat: 20000 chars > cap 16000")


def test_chain_revise_goes_to_the_proposer_that_made_the_candidate() -> None:
    old = [render_demonstration(f"Old task {i}?", REF_READ) for i in range(2)]
    ctx = context(files={SYSTEM: SYSTEM_TEXT, EXAMPLES: "\n".join(old)})
    chain = make_proposer(["rules", "demo"])
    demo_candidate = propose(DemoProposer(), ctx)
    revised = revise(chain, ctx, demo_candidate, "prompt bloat: 16010 chars > cap 16000")
    assert revised.proposer == "demo" and revised.revision == 1
    rules_candidate = propose(chain, ctx)
    with pytest.raises(ProposalFailed):
        revise(chain, ctx, rules_candidate, "prompt bloat: 16010 chars > cap 16000")
    assert [f.proposer for f in chain.failures] == ["rules"]

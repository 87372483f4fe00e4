"""The ablation proposer fires on evidence (copied demonstrations, prompt bloat, unused skills) and
only then; its edits are delete_text / remove_skill with the evidence in the trailers."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

import pytest
from reference_actions import COUNT_LINES as COUNT
from reference_actions import READ_COLOUR as READ
from reference_actions import then_submit

from harnessevolve.core.signals import Cause, Cluster, ErrorSignal
from harnessevolve.harness.load import read_files
from harnessevolve.optimize.ablation import AblationProposer
from harnessevolve.optimize.proposal import PromptLimits, ProposalContext, ProposalFailed, ReferenceAction
from harnessevolve.optimize.reference_diff import render_demonstration, split_demonstrations
from harnessevolve.optimize.registry import make_proposer

SEED = Path(__file__).parents[2] / "harnesses" / "shell-agent"
EXAMPLES = "prompts/examples.md"
DEMOS = (
    render_demonstration("How many lines are in a.txt?", COUNT)
    + "\n"
    + render_demonstration("What colour is in colour.txt?", READ)
)
SKILL = "---\nname: count-lines\ndescription: Counting lines.\n---\n\nRun `wc -l < FILE`.\n"


def context(**overrides: object) -> ProposalContext:
    """t-words failed (wrong_argument) by submitting the count demonstration's answer."""
    files = {**read_files(SEED), EXAMPLES: DEMOS}
    signal = ErrorSignal(
        "t-words", Cause.WRONG_ARGUMENT, 0.6, "step 2: submit(answer='3') instead of '5'", 2,
        actual={"tool": "submit", "arguments": {"answer": "3"}},
    )  # fmt: skip
    base = ProposalContext(
        files=files,
        editable=("prompts/*.md", "skills/*/SKILL.md"),
        system_prompt_path="prompts/system.md",
        examples_path=EXAMPLES,
        clusters=(Cluster(Cause.WRONG_ARGUMENT, (signal,)),),
        instructions={"t-words": "How many words are in b.txt?"},
        references={"t-words": then_submit("bash", {"command": "wc -w < b.txt"}, "5\n", "5", submitted="")},
    )
    return dataclasses.replace(base, **overrides)


def propose(ctx: ProposalContext):
    return asyncio.run(AblationProposer().propose(ctx))


def test_removes_a_demonstration_copied_into_another_tasks_failed_run() -> None:
    candidate = propose(context())
    assert candidate is not None and candidate.proposer == "ablate"
    assert candidate.edits[0]["op"] == "delete_text"
    new = candidate.changes[EXAMPLES]
    assert split_demonstrations(new)[1] == [render_demonstration("What colour is in colour.txt?", READ)]
    assert candidate.targets == ("wrong_argument",) and candidate.target_tasks == ("t-words",)
    assert "How many lines are in a.txt?" in candidate.summary
    message = candidate.commit_message(run_id="r", generation=3)
    assert 'Evidence: t-words copied submit {"answer": "3"}' in message
    assert "Edit-Ops: delete_text" in message


def test_uses_the_whole_failed_run_when_given() -> None:
    failed = {"t-words": (ReferenceAction("bash", {"command": "wc -l < a.txt"}, "3"),)}
    signal = ErrorSignal("t-words", Cause.WRONG_ARGUMENT, 0.6, "h", 1)
    ctx = context(failed_runs=failed, clusters=(Cluster(Cause.WRONG_ARGUMENT, (signal,)),))
    candidate = propose(ctx)
    assert candidate is not None and "wc -l < a.txt" in candidate.evidence[0]


def test_a_call_the_tasks_own_reference_makes_is_not_copying() -> None:
    refs = {"t-words": (ReferenceAction("submit", {"answer": "3"}, ""),)}
    assert propose(context(references=refs)) is None


def test_the_demonstration_of_the_same_task_is_not_copying() -> None:
    assert propose(context(instructions={"t-words": "How many lines are in a.txt?"})) is None


def test_nothing_to_say_without_evidence() -> None:
    signal = ErrorSignal(
        "t-words", Cause.WRONG_ARGUMENT, 0.6, "h", 2, actual={"tool": "submit", "arguments": {"answer": "4"}}
    )
    assert propose(context(clusters=(Cluster(Cause.WRONG_ARGUMENT, (signal,)),))) is None
    assert propose(context(files=read_files(SEED))) is None  # no demonstrations at all


def test_respects_editable_and_rejected() -> None:
    assert propose(context(editable=("skills/*/SKILL.md",))) is None
    first = propose(context())
    assert propose(context(rejected=(first.summary,))) is None


def test_prompt_near_the_size_cap_drops_the_oldest_demonstration() -> None:
    no_copy = ErrorSignal("t-words", Cause.WRONG_ARGUMENT, 0.6, "h", 2)
    ctx = context(clusters=(Cluster(Cause.WRONG_ARGUMENT, (no_copy,)),))
    assert propose(ctx) is None
    bloated = dataclasses.replace(ctx, prompt_chars=15000, prompt_tokens=1000)
    candidate = propose(bloated)
    assert candidate is not None and "oldest demonstration" in candidate.summary
    assert candidate.changes[EXAMPLES].startswith("## Example\nTask: What colour")
    assert "94%" in candidate.evidence[0]
    by_tokens = dataclasses.replace(ctx, prompt_tokens=950, limits=PromptLimits(max_prompt_tokens=1000))
    assert propose(by_tokens) is not None


def test_unused_skills_go_only_with_enough_passed_runs() -> None:
    files = {**read_files(SEED), "skills/count-lines/SKILL.md": SKILL}
    passed = {f"p{i}": (ReferenceAction("read_file", {"path": f"{i}.txt"}, "x"),) for i in range(3)}
    ctx = context(files=files, clusters=(), passed_runs=passed)
    candidate = propose(ctx)
    assert candidate is not None and candidate.edits == ({"op": "remove_skill", "name": "count-lines"},)
    assert candidate.changes == {"skills/count-lines/SKILL.md": None}
    assert "none of 3 passed runs" in candidate.evidence[0]
    assert propose(dataclasses.replace(ctx, passed_runs=dict(list(passed.items())[:2]))) is None
    used = {**passed, "p9": (ReferenceAction("bash", {"command": "wc -l < FILE"}, "1"),)}
    assert propose(dataclasses.replace(ctx, passed_runs=used)) is None


def test_cannot_revise_a_removal() -> None:
    candidate = propose(context())
    with pytest.raises(ProposalFailed, match="cannot revise"):
        asyncio.run(AblationProposer().revise(context(), candidate, "invalid harness"))


def test_auto_includes_ablate_before_the_additive_proposers() -> None:
    # the default chain: ablation first, then the behaviour-changing edits, prompt text last
    assert make_proposer(["auto"]).name == "ablate+behaviour+tools+loop+memory+world_model+demo+rules"
    chain = "llm+ablate+behaviour+tools+loop+memory+world_model+demo+rules"
    assert make_proposer(["auto"], "scripted/x").name == chain
    candidate = asyncio.run(make_proposer(["auto"]).propose(context()))
    assert candidate is not None and candidate.proposer == "ablate"

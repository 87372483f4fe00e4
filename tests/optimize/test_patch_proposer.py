"""``llm-patch`` with the scripted provider: one small unified diff per cluster on one file (the agent's
code for a command agent), the failing and reference runs and the file in the prompt, and a patch
that does not apply or breaks the syntax sent back to the model with the error, a bounded number
of times."""

from __future__ import annotations

import asyncio
import difflib
from pathlib import Path

import pytest
from reference_actions import then_submit

from harnessevolve.core.signals import Cause, Cluster, ErrorSignal
from harnessevolve.harness.load import load_harness, read_files
from harnessevolve.optimize.patch_proposer import PatchProposer, extract_diff
from harnessevolve.optimize.proposal import ProposalContext, ProposalFailed, ReferenceAction
from harnessevolve.optimize.registry import make_proposer

ROOT = Path(__file__).parents[2]
PY_AGENT = ROOT / "harnesses" / "python-agent"
SHELL_AGENT = ROOT / "harnesses" / "shell-agent"
OLD = (
    'NO_TOOL_NUDGE = "You did not call a tool. Call one of the tools; call submit with your final answer."\n'
)
NEW = 'NO_TOOL_NUDGE = "Reply with one tool call. When you are done, call submit with the answer."\n'


def context(harness: Path = PY_AGENT) -> ProposalContext:
    signal = ErrorSignal(
        "t1",
        Cause.FORMAT_ERROR,
        0.9,
        "step 2: a reply without a tool call where the reference called submit",
        2,
        actual=None,
        expected={"tool": "submit", "arguments": {"answer": "3"}},
    )
    return ProposalContext(
        files=read_files(harness),
        editable=load_harness(harness).editable,
        system_prompt_path="prompts/system.md",
        examples_path="prompts/examples.md",
        clusters=(Cluster(Cause.FORMAT_ERROR, (signal,)),),
        instructions={"t1": "How many lines does notes.txt have?"},
        references={"t1": then_submit("bash", {"command": "wc -l < notes.txt"}, "3", "3", submitted="")},
        failed_runs={"t1": (ReferenceAction("bash", {"command": "wc -l < notes.txt"}, "3"),)},
    )


def unified(old: str, new: str, path: str = "agent.py") -> str:
    text = read_files(PY_AGENT)[path]
    return "".join(
        difflib.unified_diff(
            text.splitlines(True), text.replace(old, new).splitlines(True), f"a/{path}", f"b/{path}", n=1
        )
    )


def recording(seen: list, *replies: str):
    """A scripted policy that keeps each call's messages in ``seen`` and answers with ``replies`` in
    turn (the last one from then on)."""

    def policy(messages, _tools):
        seen.append(messages)
        return replies[min(len(seen), len(replies)) - 1]

    return policy


def test_a_unified_diff_reply_becomes_a_code_edit_candidate(scripts) -> None:
    seen: list = []
    policy = recording(seen, f"Here you go:\n```diff\n{unified(OLD, NEW)}```\n")
    proposer = PatchProposer(scripts("patch-ok", policy))
    candidate = asyncio.run(proposer.propose(context()))
    assert candidate.changes == {"agent.py": read_files(PY_AGENT)["agent.py"].replace(OLD, NEW)}
    assert candidate.edits[0]["op"] == "patch_file" and candidate.targets == ("format_error",)
    assert candidate.proposer == "llm-patch" and candidate.model == "scripted/patch-ok"
    prompt = seen[0][1]["content"]
    assert "The failed run's calls:\n1. bash" in prompt and "The reference run's calls:" in prompt
    assert "2. submit" in prompt and "The file agent.py:" in prompt and "def run_tool" in prompt
    assert "--- a/agent.py" in seen[0][0]["content"]  # the system prompt shows the diff format on this file


def test_a_patch_that_breaks_the_syntax_goes_back_with_the_error(scripts) -> None:
    replies = [
        f"```diff\n{unified('def main() -> int:', 'def main( -> int:')}```",  # syntax error
        "```diff\n@@ -1 +1 @@\n-this line is not in the file\n+x\n```",  # does not apply
        f"```diff\n{unified(OLD, NEW)}```",
    ]
    seen: list = []
    candidate = asyncio.run(
        PatchProposer(scripts("patch-retry", recording(seen, *replies))).propose(context())
    )
    assert candidate.changes["agent.py"].count(NEW) == 1
    assert "would not compile: invalid syntax" in seen[1][-1]["content"]
    assert "its old lines (context and '-' lines) are not in the file" in seen[2][-1]["content"]


def test_retries_are_bounded_and_the_errors_kept(scripts) -> None:
    proposer = PatchProposer(scripts("patch-never", lambda m, t: "I would change the nudge."), attempts=2)
    with pytest.raises(ProposalFailed) as info:
        asyncio.run(proposer.propose(context()))
    assert (
        info.value.errors == ["agent.py: the reply has no unified diff (a ```diff block with @@ hunks)"] * 2
    )


def test_without_agent_code_the_tool_of_the_divergence_is_the_file(scripts) -> None:
    seen: list = []
    old = "description: Finish the task and give your final answer.\n"
    new = "description: Finish the task and give your final answer; call it as soon as you know it.\n"
    policy = recording(
        seen, f"```diff\n--- a/tools/submit.yaml\n+++ b/tools/submit.yaml\n@@ -3 +3 @@\n-{old}+{new}```"
    )
    candidate = asyncio.run(PatchProposer(scripts("patch-tool", policy)).propose(context(SHELL_AGENT)))
    assert list(candidate.changes) == ["tools/submit.yaml"] and new in candidate.changes["tools/submit.yaml"]
    assert "The file tools/submit.yaml:" in seen[0][1]["content"]


def test_revise_shows_the_rejected_patch_and_the_reason(scripts) -> None:
    seen: list = []
    proposer = PatchProposer(scripts("patch-revise", recording(seen, f"```diff\n{unified(OLD, NEW)}```")))
    first = asyncio.run(proposer.propose(context()))
    revised = asyncio.run(proposer.revise(context(), first, "the smoke run of agent.py failed"))
    assert revised.revision == 1 and revised.feedback == ("the smoke run of agent.py failed",)
    assert "The gates rejected that change: the smoke run of agent.py failed" in seen[-1][-1]["content"]


def test_extract_diff_and_registry() -> None:
    assert extract_diff("--- a/x\n+++ b/x\n@@\n-a\n+b\n").startswith("--- a/x")
    assert extract_diff("Change:\n@@ -1 +1 @@\n-a\n+b\n") == "@@ -1 +1 @@\n-a\n+b\n"
    assert make_proposer(["llm-patch"], "scripted/x").name == "llm-patch"

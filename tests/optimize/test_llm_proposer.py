"""The reflective LLM proposer, driven by the scripted provider."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from run_args import run_args

from harnessevolve.cli.app import app
from harnessevolve.core.signals import Cause, Cluster, ErrorSignal
from harnessevolve.models.scripted import register_script, unregister_script
from harnessevolve.optimize.llm_proposer import LLMProposer, render_context
from harnessevolve.optimize.proposal import ProposalContext, ProposalFailed, ReferenceAction
from harnessevolve.pipeline.ledger import read_ledger

SYSTEM = "prompts/system.md"


def context() -> ProposalContext:
    signal = ErrorSignal(
        "t1", Cause.PREMATURE_FINISH, 0.8, "step 3: submitted before read_file(path='a.txt')", 3
    )
    return ProposalContext(
        files={SYSTEM: "Be an agent.\n", "harness.yaml": "version: 1\n"},
        editable=("prompts/*.md",),
        system_prompt_path=SYSTEM,
        examples_path=None,
        clusters=(Cluster(Cause.PREMATURE_FINISH, (signal,)),),
        instructions={"t1": "Read a.txt and submit the word in it."},
        references={"t1": (ReferenceAction("read_file", {"path": "a.txt"}, "maple"),)},
    )


def good(content: str = "Be an agent. Read files before you submit.\n") -> str:
    return json.dumps(
        {
            "summary": "require reading before submitting",
            "rationale": "premature finishes",
            "changes": [{"path": SYSTEM, "content": content}],
        }
    )


@pytest.fixture
def script():
    names = []

    def make(replies):
        name = f"optimizer-{len(names)}"
        register_script(name, replies)
        names.append(name)
        return f"scripted/{name}"

    yield make
    for name in names:
        unregister_script(name)


def test_prompt_shows_clusters_references_and_only_editable_files() -> None:
    text = render_context(context())
    assert "premature_finish: 1 run(s)" in text and "read_file" in text and "Read a.txt" in text
    assert "--- prompts/system.md ---" in text and "harness.yaml" not in text


def test_malformed_replies_are_retried_with_the_error_shown(script) -> None:
    seen = []

    replies = iter(
        [
            "not json at all",
            json.dumps({"summary": "x", "changes": [{"path": "harness.yaml", "content": "v"}]}),
            good(),
        ]
    )

    def policy(messages, tools):
        seen.append(messages)
        return next(replies)

    model = script(policy)
    candidate = asyncio.run(LLMProposer(model).propose(context()))
    assert candidate is not None
    assert candidate.changes == {SYSTEM: "Be an agent. Read files before you submit.\n"}
    assert candidate.proposer == "llm" and candidate.model == model
    assert candidate.targets == ("premature_finish",) and candidate.target_tasks == ("t1",)
    assert "not a JSON object" in seen[1][-1]["content"]
    assert "harness.yaml is not editable" in seen[2][-1]["content"]


def test_gives_up_after_the_attempts_and_says_why(script) -> None:
    model = script(["nope", "{}", good("Be an agent.\n")])
    with pytest.raises(ProposalFailed) as failed:
        asyncio.run(LLMProposer(model, attempts=3).propose(context()))
    assert len(failed.value.errors) == 3
    assert "unchanged" in failed.value.errors[2]


def test_run_records_a_failed_llm_proposal_and_falls_back(harness_dir: Path, cli, learner, script) -> None:
    model = script(lambda m, t: "I would rather not answer in JSON.")
    result = cli.invoke(app, run_args(harness_dir, learner, "--optimizer-model", model, generations=1))
    assert result.exit_code == 0, result.output
    ledger = next((harness_dir / ".harnessevolve" / "runs").iterdir()) / "ledger.jsonl"
    events = read_ledger(ledger)
    failed = [e for e in events if e["event"] == "proposal_failed"]
    assert len(failed) == 1 and failed[0]["proposer"] == "llm" and len(failed[0]["errors"]) == 3
    committed = next(e for e in events if e["event"] == "candidate_committed")
    assert committed["proposer"] == "demo"

"""The reflective LLM proposer, driven by the scripted provider: edit-operation replies, retries with
the error shown, failed proposals on record, revisions that see the gate's reason."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import json
from pathlib import Path

import pytest
from run_args import run_args

from harnessevolve.cli.app import app
from harnessevolve.core.errors import ModelError
from harnessevolve.core.signals import Cause, Cluster, ErrorSignal
from harnessevolve.harness.load import read_files
from harnessevolve.optimize import llm_proposer
from harnessevolve.optimize.llm_proposer import LLMProposer, render_context
from harnessevolve.optimize.proposal import ProposalContext, ProposalFailed, ReferenceAction
from harnessevolve.optimize.reply_format import REPLY_NAME, response_format
from harnessevolve.runs.ledger import read_lines

SEED = Path(__file__).parents[2] / "harnesses" / "shell-agent"
SYSTEM = "prompts/system.md"
OLD = "When you know the answer, call submit with it."
NEW = "Read the file with read_file before you call submit."


def context(**overrides: object) -> ProposalContext:
    signal = ErrorSignal(
        "t1", Cause.PREMATURE_FINISH, 0.8, "step 3: submitted before read_file(path='a.txt')", 3
    )
    base = ProposalContext(
        files=read_files(SEED),
        editable=("prompts/*.md",),
        system_prompt_path=SYSTEM,
        examples_path="prompts/examples.md",
        clusters=(Cluster(Cause.PREMATURE_FINISH, (signal,)),),
        instructions={"t1": "Read a.txt and submit the word in it."},
        references={"t1": (ReferenceAction("read_file", {"path": "a.txt"}, "maple"),)},
    )
    return dataclasses.replace(base, **overrides)


def reply(edits: list | None = None, **fields: object) -> str:
    doc = {
        "summary": "require reading before submitting",
        "rationale": "premature finishes",
        "targets": ["premature_finish"],
        "edits": edits
        if edits is not None
        else [{"op": "replace_text", "path": SYSTEM, "old": OLD, "new": NEW}],
    }
    return json.dumps({**doc, **fields})


@pytest.fixture
def script(scripts):
    """``script(replies)``: a scripted optimizer model (``scripted/optimizer-N``) for the test."""
    made = itertools.count()
    return lambda replies: scripts(f"optimizer-{next(made)}", replies)


def recording(replies: list[str], seen: list) -> object:
    queue = iter(replies)

    def policy(messages, tools):
        seen.append([dict(m) for m in messages])
        return next(queue)

    return policy


def test_prompt_shows_clusters_with_ids_references_and_only_editable_files() -> None:
    text = render_context(context())
    assert "[id: premature_finish] premature_finish: 1 run(s)" in text
    assert "read_file" in text and "Read a.txt" in text
    assert "--- prompts/system.md ---" in text and "--- harness.yaml ---" not in text


def test_a_schema_valid_reply_becomes_a_candidate(script) -> None:
    model = script([reply()])
    candidate = asyncio.run(LLMProposer(model).propose(context()))
    assert candidate is not None
    assert candidate.changes == {SYSTEM: read_files(SEED)[SYSTEM].replace(OLD, NEW)}
    assert candidate.edits == ({"op": "replace_text", "path": SYSTEM, "old": OLD, "new": NEW},)
    assert candidate.proposer == "llm" and candidate.model == model
    assert candidate.targets == ("premature_finish",) and candidate.target_tasks == ("t1",)
    assert candidate.revision == 0 and candidate.feedback == ()
    message = candidate.commit_message(run_id="r", generation=1)
    assert "Targets: premature_finish" in message and "Edit-Ops: replace_text" in message


def test_malformed_replies_are_retried_with_the_error_shown(script) -> None:
    seen: list = []
    model = script(
        recording(
            [
                "not json at all",
                reply([{"op": "set_loop", "setting": "max_steps", "value": 9}]),
                reply([{"op": "replace_text", "path": SYSTEM, "old": "call submt", "new": "x"}]),
                reply(),
            ],
            seen,
        )
    )
    candidate = asyncio.run(LLMProposer(model, attempts=4).propose(context()))
    assert candidate is not None and candidate.changes[SYSTEM].endswith(NEW + "\n")
    assert "not a JSON object" in seen[1][-1]["content"]
    assert "edits[0]: harness.yaml is not editable" in seen[2][-1]["content"]
    assert "text not found in prompts/system.md" in seen[3][-1]["content"]
    assert seen[3][-2] == {"role": "assistant", "content": seen[3][-2]["content"]}


@pytest.mark.parametrize(
    ("bad", "error"),
    [
        ("{}", "does not match the schema"),
        (reply(targets=["wrong_tool"]), "'wrong_tool' is not a cluster id"),
        (reply([{"op": "replace_text", "path": SYSTEM, "old": OLD}]), "'new' is a required property"),
        (
            reply([{"op": "write_hook", "path": "hooks/h.py", "code": "x = 1\n"}]),
            "hooks/h.py is not editable",
        ),
        (reply(summary="tried before"), "already tried and rejected"),
    ],
)
def test_gives_up_after_three_attempts_and_says_why(script, bad: str, error: str) -> None:
    model = script([bad, bad, bad])
    with pytest.raises(ProposalFailed) as failed:
        asyncio.run(LLMProposer(model).propose(context(rejected=("tried before",))))
    assert failed.value.proposer == "llm" and len(failed.value.errors) == 3
    assert all(error in e for e in failed.value.errors), failed.value.errors


def test_a_provider_fault_is_a_failed_proposal_not_a_crash(script) -> None:
    def broken(messages, tools):
        raise ModelError("rate limited")

    with pytest.raises(ProposalFailed) as failed:
        asyncio.run(LLMProposer(script(broken)).propose(context()))
    assert "rate limited" in failed.value.errors[0]


def test_revise_shows_the_rejected_edits_and_the_reason(script) -> None:
    seen: list = []
    shorter = [{"op": "replace_text", "path": SYSTEM, "old": OLD, "new": "Read, then submit."}]
    model = script(recording([reply(), reply(shorter, summary="require reading, briefly")], seen))
    proposer = LLMProposer(model)
    first = asyncio.run(proposer.propose(context()))
    reason = "prompt bloat: 17000 chars > cap 16000"
    revised = asyncio.run(proposer.revise(context(), first, reason))
    request = seen[1][-1]["content"]
    assert reason in request and json.dumps(OLD)[1:-1] in request and '"op": "replace_text"' in request
    assert revised.changes[SYSTEM].endswith("Read, then submit.\n")
    assert revised.revision == 1 and revised.feedback == (reason,)
    message = revised.commit_message(run_id="r", generation=2)
    assert "Revision: 1" in message and f"Revision-Reason: {reason}" in message
    record = revised.to_record()
    assert record["revision"] == 1 and record["feedback"] == [reason]
    assert record["edits"] == {"version": 1, "ops": shorter}


def test_revise_fails_on_record_when_the_model_cannot_fix_it(script) -> None:
    model = script([reply(), "no", "no", "no"])
    proposer = LLMProposer(model)
    first = asyncio.run(proposer.propose(context()))
    with pytest.raises(ProposalFailed) as failed:
        asyncio.run(proposer.revise(context(), first, "adds 7 examples > 5"))
    assert len(failed.value.errors) == 3


def test_asks_for_schema_constrained_output_where_the_model_supports_it(monkeypatch, script) -> None:
    from harnessevolve.models.registry import litellm_module

    litellm = litellm_module()
    assert response_format("scripted/x") == {"type": "json_object"}  # JSON mode, no schema support
    monkeypatch.setattr(litellm, "supports_response_schema", lambda model, **kw: model == "openai/gpt-4o")
    fmt = response_format("openai/gpt-4o")
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["strict"] is True
    assert fmt["json_schema"]["name"] == REPLY_NAME and "edits" in fmt["json_schema"]["schema"]["properties"]

    sent: list = []
    real = llm_proposer.acomplete

    async def spy(model, messages, **kwargs):
        sent.append(kwargs.get("extra_params"))
        return await real(model, messages, **kwargs)

    monkeypatch.setattr(llm_proposer, "acomplete", spy)
    monkeypatch.setattr(litellm, "supports_response_schema", lambda model, **kw: True)
    candidate = asyncio.run(LLMProposer(script([reply()])).propose(context()))
    assert candidate is not None
    assert sent[0]["response_format"]["json_schema"]["strict"] is True


def test_run_records_a_failed_llm_proposal_and_falls_back(harness_dir: Path, cli, learner, script) -> None:
    model = script(lambda m, t: "I would rather not answer in JSON.")
    result = cli.invoke(app, run_args(harness_dir, learner, "--optimizer-model", model, generations=1))
    assert result.exit_code == 0, result.output
    ledger = next((harness_dir / ".harnessevolve" / "runs").iterdir()) / "ledger.jsonl"
    events = read_lines(ledger)
    failed = [e for e in events if e["event"] == "proposal_failed"]
    assert len(failed) == 1 and failed[0]["proposer"] == "llm" and len(failed[0]["errors"]) == 3
    committed = next(e for e in events if e["event"] == "candidate_committed")
    assert committed["proposer"] == "demo"


def test_a_refused_reply_format_is_dropped_not_counted_as_an_attempt(monkeypatch, script) -> None:
    class BadRequestError(Exception):
        pass

    calls: list = []
    real = llm_proposer.acomplete

    async def picky(model, messages, **kwargs):
        calls.append(kwargs.get("extra_params"))
        if kwargs.get("extra_params"):
            raise BadRequestError("response_format is not supported")
        return await real(model, messages, **kwargs)

    monkeypatch.setattr(llm_proposer, "acomplete", picky)
    candidate = asyncio.run(LLMProposer(script([reply()])).propose(context()))
    assert candidate is not None and calls == [{"response_format": {"type": "json_object"}}, None]

"""The opt-in ``tools`` and ``loop`` proposers: tool-spec and loop-setting edits from cluster evidence."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

import pytest
import yaml

from harnessevolve.core.signals import Cause, Cluster, ErrorSignal
from harnessevolve.harness.load import read_files
from harnessevolve.optimize.proposal import ProposalContext, ProposalFailed
from harnessevolve.optimize.registry import make_proposer
from harnessevolve.optimize.settings_proposers import LoopSettingsProposer, ToolSpecProposer

SEED = Path(__file__).parents[2] / "harnesses" / "shell-agent"
ALL = ("prompts/*.md", "tools/*.yaml", "harness.yaml")


def context(cluster: Cluster, editable: tuple[str, ...] = ALL) -> ProposalContext:
    return ProposalContext(
        files=read_files(SEED),
        editable=editable,
        system_prompt_path="prompts/system.md",
        examples_path="prompts/examples.md",
        clusters=(cluster,),
    )


def signal(cause: Cause, actual: dict | None, expected: dict | None, hint: str = "h") -> Cluster:
    return Cluster(cause, (ErrorSignal("t1", cause, 0.6, hint, 2, actual=actual, expected=expected),))


def propose(proposer, ctx):
    return asyncio.run(proposer.propose(ctx))


def test_wrong_tool_sharpens_the_expected_tools_description() -> None:
    cluster = signal(
        Cause.WRONG_TOOL,
        {"tool": "bash", "arguments": {"command": "cat a.txt"}},
        {"tool": "read_file", "arguments": {"path": "a.txt"}},
    )
    candidate = propose(ToolSpecProposer(), context(cluster))
    assert candidate is not None and candidate.edits[0]["op"] == "edit_tool"
    doc = yaml.safe_load(candidate.changes["tools/read_file.yaml"])
    assert doc["description"].endswith("Use read_file, not bash, for this kind of step.")
    assert candidate.targets == ("wrong_tool",) and candidate.proposer == "tools"
    assert propose(ToolSpecProposer(), context(cluster, editable=("prompts/*.md",))) is None


def test_missing_argument_becomes_required() -> None:
    ctx = context(
        signal(
            Cause.MISSING_ARGUMENT,
            {"tool": "bash", "arguments": {}},
            {"tool": "bash", "arguments": {"command": "ls"}},
        )
    )
    files = dict(ctx.files)
    doc = yaml.safe_load(files["tools/bash.yaml"])
    doc["parameters"]["required"] = []
    files["tools/bash.yaml"] = yaml.safe_dump(doc)
    candidate = propose(ToolSpecProposer(), dataclasses.replace(ctx, files=files))
    assert candidate is not None
    new = yaml.safe_load(candidate.changes["tools/bash.yaml"])
    assert new["parameters"]["required"] == ["command"] and new["description"].endswith(
        "Always pass command."
    )


def test_repeated_calls_turn_on_stop_on_repeat_else_more_steps() -> None:
    cluster = signal(Cause.STEP_LIMIT, None, None, hint="the run hit the step limit repeating bash(ls)")
    ctx = context(cluster)
    files = {
        **ctx.files,
        "harness.yaml": ctx.files["harness.yaml"].replace("stop_on_repeat: 2", "stop_on_repeat: 0"),
    }
    candidate = propose(LoopSettingsProposer(), dataclasses.replace(ctx, files=files))
    assert candidate is not None and candidate.edits == (
        {"op": "set_loop", "setting": "stop_on_repeat", "value": 2},
    )
    assert "stop_on_repeat: 2" in candidate.changes["harness.yaml"]
    more = propose(LoopSettingsProposer(), ctx)  # stop_on_repeat already on
    assert more is not None and more.edits[0] == {"op": "set_loop", "setting": "max_steps", "value": 7}
    assert propose(LoopSettingsProposer(), context(cluster, editable=("tools/*.yaml",))) is None
    other = signal(Cause.WRONG_TOOL, None, None)
    assert propose(LoopSettingsProposer(), context(other)) is None


def test_opt_in_by_name_and_never_revise() -> None:
    assert make_proposer(["tools", "loop"]).name == "tools+loop"
    cluster = signal(Cause.STEP_LIMIT, None, None, hint="repeating")
    candidate = propose(LoopSettingsProposer(), context(cluster))
    with pytest.raises(ProposalFailed, match="cannot revise"):
        asyncio.run(LoopSettingsProposer().revise(context(cluster), candidate, "invalid harness"))

"""The offline proposers edit a mini-swe-agent harness where it keeps its parts: the system template
(rules), the instance template (demonstrations) and ``agent.step_limit`` of its own config."""

from __future__ import annotations

import asyncio
import dataclasses
import importlib.util
import shutil
from pathlib import Path

import pytest
import yaml
from jinja2 import StrictUndefined
from jinja2.sandbox import SandboxedEnvironment

from harnessevolve.core.signals import Cause, Cluster, ErrorSignal
from harnessevolve.harness.components import (
    literal,
    may_edit_location,
    read_location,
    write_location,
)
from harnessevolve.harness.load import load_harness
from harnessevolve.optimize.ablation import AblationProposer
from harnessevolve.optimize.proposal import ProposalContext, ReferenceAction, reaches
from harnessevolve.optimize.reference_diff import DemoProposer, RuleProposer
from harnessevolve.optimize.registry import make_proposer
from harnessevolve.optimize.settings_proposers import LoopSettingsProposer
from harnessevolve.proposing.context import reach_context

MINI = Path(__file__).parents[2] / "harnesses" / "mini-swe-agent"
CONFIG = (MINI / "mini.yaml").read_text()
needs_mini = pytest.mark.skipif(
    importlib.util.find_spec("minisweagent") is None, reason="needs the agents extra (mini-swe-agent)"
)


def test_a_key_is_written_in_place_and_the_rest_of_the_file_stays() -> None:
    files = {"mini.yaml": "# my config\n" + CONFIG}
    text = read_location(files, "mini.yaml#agent.system_template")
    assert text.startswith("You are a helpful assistant")
    new = write_location(files, "mini.yaml#agent.system_template", text + "\n## Rules\n- Be careful.\n")
    assert (
        new.startswith("# my config\n") and "    ## Rules\n    - Be careful.\n  instance_template: |" in new
    )
    assert yaml.safe_load(new)["agent"]["system_template"].endswith("## Rules\n- Be careful.\n")
    stepped = write_location(files, "mini.yaml#agent.step_limit", 8)
    changed = [
        (a, b) for a, b in zip(files["mini.yaml"].splitlines(), stepped.splitlines(), strict=True) if a != b
    ]
    assert changed == [("  step_limit: 6", "  step_limit: 8")]
    # a layout that cannot be edited in place (flow style) is rewritten, and still says the same
    flow = {"c.yaml": "agent: {step_limit: 3, system_template: hi}\n"}
    assert yaml.safe_load(write_location(flow, "c.yaml#agent.step_limit", 5)) == {
        "agent": {"step_limit": 5, "system_template": "hi"}
    }
    assert read_location(files, "mini.yaml#agent.missing") is None
    assert read_location(files, "other.yaml#agent") is None
    assert may_edit_location("mini.yaml#agent.step_limit", ["mini.yaml"])
    assert may_edit_location("mini.yaml#agent.step_limit", ["mini.yaml#agent"])
    assert not may_edit_location("mini.yaml#agent.step_limit", ["mini.yaml#model", "prompts/*.md"])
    assert may_edit_location("harness.yaml#loop.max_steps", ["harness.yaml#loop"])


def test_text_put_into_a_template_renders_as_itself() -> None:
    jinja = SandboxedEnvironment(undefined=StrictUndefined)
    for text in ("echo ${#items[@]} {{x}}", "a {% endraw %} b {%", "plain {json: {}}"):
        assert jinja.from_string(literal(text, True)).render() == text
        assert literal(text, False) == text


def mini_context(tmp_path: Path, **overrides: object) -> ProposalContext:
    root = tmp_path / "mini"
    shutil.copytree(MINI, root)
    return dataclasses.replace(reach_context(load_harness(root)), **overrides)


def cluster(cause: Cause, hint: str = "h") -> Cluster:
    return Cluster(cause, (ErrorSignal("t1", cause, 0.8, hint, 2),))


def propose(proposer, context):
    return asyncio.run(proposer.propose(context))


@needs_mini
def test_the_default_proposers_reach_a_mini_swe_agent_harness(tmp_path: Path) -> None:
    context = mini_context(tmp_path)
    assert context.system_prompt_path == "mini.yaml#agent.system_template" and context.templates
    chain = make_proposer(["auto"])
    assert {p.name for p in chain.proposers if reaches(p, context)} == {"ablate", "loop", "demo", "rules"}
    closed = dataclasses.replace(context, editable=("notes.md",))
    assert not any(reaches(p, closed) for p in chain.proposers)


@needs_mini
def test_rules_and_demonstrations_go_into_the_templates(tmp_path: Path) -> None:
    rule = propose(RuleProposer(), mini_context(tmp_path, clusters=(cluster(Cause.PREMATURE_FINISH),)))
    assert rule is not None and set(rule.changes) == {"mini.yaml"}
    config = yaml.safe_load(rule.changes["mini.yaml"])
    assert "## Rules\n- Before you submit" in config["agent"]["system_template"]
    assert config["agent"]["instance_template"] == yaml.safe_load(CONFIG)["agent"]["instance_template"]

    reference = (
        ReferenceAction("bash", {"command": "echo ${#lines[@]}"}, "3"),
        ReferenceAction("bash", {"command": "printf 'COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\\n3\\n'"}, ""),
    )
    context = mini_context(
        tmp_path / "demo",
        clusters=(cluster(Cause.PREMATURE_FINISH),),
        references={"t1": reference},
        instructions={"t1": "How many lines?"},
    )
    demo = propose(DemoProposer(), context)
    assert demo is not None and set(demo.changes) == {"mini.yaml"}
    instance = yaml.safe_load(demo.changes["mini.yaml"])["agent"]["instance_template"]
    assert "## Example\nTask: How many lines?" in instance and "{% raw %}" in instance
    rendered = (
        SandboxedEnvironment().from_string(instance).render(task="T", system="", release="", machine="")
    )
    assert '"echo ${#lines[@]}"' in rendered  # the bash command is shown as written, not read as Jinja

    # the demonstration is what the ablation proposer removes when the prompt nears its cap
    with_demo = dataclasses.replace(
        context, files={**context.files, **demo.changes}, prompt_chars=15500, prompt_tokens=None
    )
    removal = propose(AblationProposer(), with_demo)
    assert removal is not None and removal.edits == ()
    assert yaml.safe_load(removal.changes["mini.yaml"]) == yaml.safe_load(CONFIG)


@needs_mini
def test_step_limited_runs_get_more_steps_in_the_agents_own_config(tmp_path: Path) -> None:
    context = mini_context(tmp_path, clusters=(cluster(Cause.STEP_LIMIT, "repeated the same call"),))
    candidate = propose(LoopSettingsProposer(), context)
    assert candidate is not None and candidate.summary == "allow 8 agent steps"
    assert yaml.safe_load(candidate.changes["mini.yaml"])["agent"]["step_limit"] == 8
    assert "harness.yaml" not in candidate.changes  # no stop_on_repeat: mini-swe-agent has none
    refused = dataclasses.replace(context, rejected=("allow 8 agent steps",))
    assert propose(LoopSettingsProposer(), refused) is None
    closed = dataclasses.replace(context, editable=("harness.yaml#loop",))
    assert propose(LoopSettingsProposer(), closed) is None

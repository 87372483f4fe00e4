"""Every template is evolvable by the default (offline) proposers, or ``run`` says at once why not.

The mini-swe-agent template keeps its prompt, demonstrations and step limit in mini-swe-agent's own
config (``harness/components.py``): the default proposers edit them there. A harness that the chosen
proposers can edit nothing of is refused before any rollout, with one line and a hint.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from bench_subset import shell_basics_subset
from run_args import run_args

from harnessevolve.cli.app import app
from harnessevolve.harness.load import load_harness
from harnessevolve.optimize.registry import make_proposer
from harnessevolve.pipeline.preflight import check_proposers_reach
from harnessevolve.runs.ledger import read_lines

GIVE_UP = "printf 'COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\\n%s\\n' 'I do not know'"


def gives_up(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
    """mini-swe-agent's model: submits a wrong answer at once (every run fails, so there is evidence)."""
    return {"tool_calls": [{"name": "bash", "arguments": {"command": GIVE_UP}}]}


@pytest.mark.skipif(not os.access("/usr/bin/bwrap", os.X_OK), reason="needs bubblewrap")
def test_default_proposers_evolve_the_mini_swe_agent_template(tmp_path: Path, cli, scripts) -> None:
    if importlib.util.find_spec("minisweagent") is None:  # not imported here: it prints at import
        pytest.skip("needs the agents extra (mini-swe-agent)")
    harness = tmp_path / "mini"
    assert cli.invoke(app, ["init", str(harness), "--template", "mini-swe-agent"]).exit_code == 0
    benchmark = shell_basics_subset(tmp_path / "bench", ("count-lines",))
    model = scripts("reach-mini", gives_up)
    result = cli.invoke(app, run_args(harness, model, benchmark=benchmark, generations=1, batch_size=2))
    assert result.exit_code in (0, 1), result.output
    run_dir = next((harness / ".harnessevolve" / "runs").iterdir())
    events = read_lines(run_dir / "ledger.jsonl")
    proposed = [e for e in events if e["event"] == "candidate_proposed"]
    assert proposed, [e["event"] for e in events]
    assert "nothing new" not in str([e for e in events if e["event"] == "generation_finished"])
    first = proposed[0]
    assert first["proposer"] in {"rules", "demo", "loop", "ablate"} and first["paths"] == ["mini.yaml"]


def test_chosen_proposers_that_can_edit_nothing_are_refused_before_any_rollout(
    tmp_path: Path, cli, scripts
) -> None:
    harness = tmp_path / "h"
    assert cli.invoke(app, ["init", str(harness)]).exit_code == 0
    model = scripts("reach-never", lambda messages, tools: {"content": "no"})
    # demo needs an editable examples file and loop an editable harness.yaml#loop: neither is open
    doc = yaml.safe_load((harness / "harness.yaml").read_text())
    doc["editable"] = ["prompts/system.md"]
    (harness / "harness.yaml").write_text(yaml.safe_dump(doc))
    result = cli.invoke(app, run_args(harness, model, "--proposer", "demo,loop", "--allow-dirty"))
    assert result.exit_code == 2, result.output
    assert "none of the proposers (demo, loop) can edit this harness" in result.output
    assert "(demo: the demonstrations; loop: the step limit) is not in its editable list" in result.output
    assert "--optimizer-model MODEL" in result.output and "--proposer agent" in result.output
    assert not (harness / ".harnessevolve" / "runs").exists()  # no run folder, no rollout
    # the same harness with the default proposers: rules can edit the system prompt, so it passes
    check_proposers_reach(load_harness(harness), make_proposer(["auto"]))


def test_a_harness_with_nothing_editable_is_refused(tmp_path: Path, cli, scripts) -> None:
    harness = tmp_path / "h"
    assert cli.invoke(app, ["init", str(harness), "--template", "mini-swe-agent"]).exit_code == 0
    doc = yaml.safe_load((harness / "harness.yaml").read_text())
    doc["editable"] = ["notes/*.md"]
    (harness / "harness.yaml").write_text(yaml.safe_dump(doc))
    model = scripts("reach-none", lambda messages, tools: {"content": "no"})
    result = cli.invoke(app, run_args(harness, model, "--allow-dirty"))
    assert result.exit_code == 2, result.output
    assert "nothing in this harness is editable (editable: notes/*.md)" in result.output
    assert not (harness / ".harnessevolve" / "runs").exists()

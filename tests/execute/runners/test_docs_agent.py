"""The 20-line agent of docs/agents.md, taken from the page as it is, runs through the command runner."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
import yaml
from one_rollout import run_rollout

from harnessevolve.core.tasks import Benchmark
from harnessevolve.harness.load import load_harness
from harnessevolve.models.scripted import register_script, unregister_script

PAGE = Path(__file__).parents[3] / "docs" / "agents.md"


def block(language: str, after: str) -> str:
    text = PAGE.read_text(encoding="utf-8")
    section = text[text.index(after) :]
    return re.search(rf"```{language}\n(.*?)```", section, re.DOTALL).group(1)


@pytest.mark.skipif(not os.access("/usr/bin/bwrap", os.X_OK), reason="needs bubblewrap")
def test_the_documented_agent_runs(tmp_path: Path, shell_basics: Benchmark) -> None:
    root = tmp_path / "my-agent"
    (root / "prompts").mkdir(parents=True)
    (root / "prompts" / "system.md").write_text("Use bash, then answer in plain text.\n")
    (root / "my_agent.py").write_text(block("python", "## Wrap your own agent"))
    (root / "harness.yaml").write_text(block("yaml", "Save it as `my_agent.py`"))
    assert yaml.safe_load((root / "harness.yaml").read_text())["agent"]["kind"] == "command"
    harness = load_harness(root)
    assert len(block("python", "## Wrap your own agent").strip().splitlines()) <= 22
    task = next(t for t in shell_basics.tasks if t.id == "count-lines-01")
    register_script(
        "docs-agent", [{"tool_calls": [{"name": "bash", "arguments": {"command": "wc -l < list.txt"}}]}, "11"]
    )
    try:
        trajectory = run_rollout(harness, task, model="scripted/docs-agent")
    finally:
        unregister_script("docs-agent")
    assert trajectory.extra["stop_reason"] == "submitted" and trajectory.extra["answer"] == "11"
    assert trajectory.steps[2].observations[0].content.strip() == "11"

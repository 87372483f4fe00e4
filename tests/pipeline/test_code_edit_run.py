"""Code edits through `harnessevolve run` on a command agent (the python-agent template, agent.kind:
command): the default proposer chain reads "never submits" from the trajectories and patches
agent.py (a unified-diff code edit), which the gates accept because the agent now passes; a
code edit that breaks agent.py's syntax is rejected by the quality gate with the reason, and the
harness is left as it was."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import git
import pytest
from bench_subset import shell_basics_subset
from run_args import run_args

from harnessevolve.cli.app import app
from harnessevolve.core.tasks import load_benchmark
from harnessevolve.runs.ledger import read_lines

FAMILIES = ("count-lines", "lookup-key")
pytestmark = pytest.mark.skipif(not os.access("/usr/bin/bwrap", os.X_OK), reason="needs bubblewrap")


@pytest.fixture(scope="module")
def small_benchmark(tmp_path_factory) -> Path:
    return shell_basics_subset(tmp_path_factory.mktemp("bench") / "shell-basics", FAMILIES)


def keeps_calling(benchmark: Path):
    """An agent that does the work but never calls submit while other tools are offered; offered
    only submit, it submits the task's answer (what a model does when the loop leaves no choice)."""
    tasks = {t.instruction: t for t in load_benchmark(str(benchmark)).tasks}

    def policy(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
        task = next(t for i, t in tasks.items() if i in str(messages[1]["content"]))
        names = [t["function"]["name"] for t in tools]
        submit = next(g for g in task.gold if g.tool == "submit")
        if names == ["submit"]:
            return {"tool_calls": [{"name": "submit", "arguments": dict(submit.arguments)}]}
        work = next(g for g in task.gold if g.tool != "submit")
        return {"tool_calls": [{"name": work.tool, "arguments": dict(work.arguments)}]}

    return policy


def ledger(harness: Path) -> list[dict[str, Any]]:
    run_dir = next((harness / ".harnessevolve" / "runs").iterdir())
    return read_lines(run_dir / "ledger.jsonl")


def test_default_chain_patches_agent_code_and_the_gates_accept_it(
    tmp_path: Path, cli, scripts, small_benchmark: Path
) -> None:
    harness = tmp_path / "pyagent"
    assert cli.invoke(app, ["init", str(harness), "--template", "python-agent"]).exit_code == 0
    model = scripts("code-edit-agent", keeps_calling(small_benchmark))
    result = cli.invoke(app, run_args(harness, model, benchmark=small_benchmark, generations=1, batch_size=4))
    assert result.exit_code == 0, result.output
    events = ledger(harness)
    accepted = [e for e in events if e["event"] == "candidate_accepted"]
    assert len(accepted) == 1, [e["event"] for e in events]
    proposed = next(e for e in events if e["event"] == "candidate_proposed")
    assert proposed["proposer"] == "behaviour" and proposed["paths"] == ["agent.py"]
    assert [op["op"] for op in proposed["edits"]["ops"]] == ["patch_file"]  # a unified-diff code edit
    assert proposed["edits"]["ops"][0]["diff"].startswith("--- a/agent.py\n+++ b/agent.py\n@@ ")
    repo = git.Repo(harness)
    message = repo.commit(accepted[0]["sha"]).message
    assert "Proposer: behaviour" in message and "Edit-Ops: patch_file" in message
    assert repo.git.show("--name-only", "--format=", accepted[0]["sha"]).split() == ["agent.py"]
    assert "def final_submit(messages: list)" in (harness / "agent.py").read_text()


SYNTAX_ERROR = [
    {"op": "replace_text", "path": "agent.py", "old": "def main() -> int:", "new": "def main( -> int:"}
]


def test_a_code_edit_that_breaks_the_syntax_never_reaches_the_harness(
    tmp_path: Path, cli, scripts, small_benchmark: Path
) -> None:
    """In a run, the edit is refused with the reason before it is a candidate (the edited harness
    does not validate: agent.py does not compile), sent back to the model, and nothing is applied."""
    harness = tmp_path / "pyagent"
    assert cli.invoke(app, ["init", str(harness), "--template", "python-agent"]).exit_code == 0
    before = (harness / "agent.py").read_text()
    model = scripts("code-edit-broken-agent", keeps_calling(small_benchmark))

    def optimizer(messages, _tools) -> str:
        doc = {"summary": "rename main", "rationale": "r", "targets": ["step_limit"], "edits": SYNTAX_ERROR}
        return json.dumps(doc)

    opt = scripts("code-edit-broken-opt", optimizer)
    args = run_args(
        harness, model, "--proposer", "llm", "--optimizer-model", opt,
        benchmark=small_benchmark, generations=1, batch_size=4,
    )  # fmt: skip
    result = cli.invoke(app, args)
    assert result.exit_code in (0, 1), result.output
    events = ledger(harness)
    (failed,) = [e for e in events if e["event"] == "proposal_failed"]
    assert failed["proposer"] == "llm" and len(failed["errors"]) == 3  # sent back twice, then given up
    assert all("agent.py" in error and "syntax error" in error.lower() for error in failed["errors"])
    assert not any(e["event"] in ("candidate_accepted", "candidate_committed") for e in events)
    assert (harness / "agent.py").read_text() == before
    assert not git.Repo(harness).is_dirty(untracked_files=True)


def test_a_code_candidate_with_a_syntax_error_is_rejected_by_the_quality_gate(
    tmp_path: Path, cli, learner
) -> None:
    """A candidate that arrives as a commit (`harnessevolve gate`, as in CI): the quality gate rejects
    agent.py's syntax error with the file and line, exit 1."""
    from cli.test_gate import gate_agent_edit

    broken = ("def main() -> int:", "def main( -> int:")
    result = gate_agent_edit(
        cli, tmp_path / "pyagent", learner, *broken, "agent: a code edit with a syntax error"
    )
    assert result.exit_code == 1, result.output
    assert "quality" in result.output and "agent.py" in result.output
    assert "syntax error" in result.output.lower()

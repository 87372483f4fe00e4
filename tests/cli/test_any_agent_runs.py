"""A scripted 2-generation ``run`` on each of the three runners (builtin, command, mini-swe-agent),
through the CLI: each leaves an accepted and a reverted commit, and a ledger that tells the same story.

The agents are scripted policies that solve a task (by replaying its gold calls) only when the
harness carries the lesson the first edit adds, and fail once the second edit lands; the command
runner's edits change ``agent.py`` itself, the mini-swe-agent runner's the templates in ``mini.yaml``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
from pathlib import Path
from typing import Any

import git
import pytest
import yaml
from bench_subset import shell_basics_subset
from policies import FamilyLearner
from run_args import run_args

from harnessevolve.cli.app import app
from harnessevolve.core.tasks import load_benchmark
from harnessevolve.runs.ledger import read_lines

FAMILIES = ("count-lines", "lookup-key")
pytestmark = pytest.mark.skipif(not os.access("/usr/bin/bwrap", os.X_OK), reason="needs bubblewrap")


@pytest.fixture(scope="module")
def small_benchmark(tmp_path_factory) -> Path:
    """shell-basics cut to two families (8 train, 4 validation, 4 test tasks) with their references."""
    return shell_basics_subset(tmp_path_factory.mktemp("bench") / "shell-basics", FAMILIES)


def gold_policy(benchmark_dir: Path, solves, as_bash: bool = False):
    """(messages, tools) -> reply: the next gold call of a count-lines task when ``solves(system)``,
    else give up (so failed runs, and proposals, remain in every generation)."""
    by_instruction = {t.instruction: t for t in load_benchmark(str(benchmark_dir)).tasks}

    def find(text: str):
        return next(t for i, t in by_instruction.items() if i in text)

    def policy(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
        system = messages[0]["content"]
        task = find(messages[1]["content"])
        turn = sum(1 for m in messages if m["role"] == "assistant")
        if not solves(system) or task.tags[0] != "count-lines":  # lookup-key always fails: edits go on
            call = ("submit", {"answer": "I do not know"})
        else:
            gold = task.gold[min(turn, len(task.gold) - 1)]
            call = (gold.tool, dict(gold.arguments))
        return (
            {"tool_calls": [{"name": "bash", "arguments": {"command": to_bash(*call)}}]}
            if as_bash
            else {"tool_calls": [{"name": call[0], "arguments": call[1]}]}
        )

    return policy


def to_bash(tool: str, arguments: dict[str, Any]) -> str:
    """A gold call as the one bash command mini-swe-agent would run."""
    if tool == "submit":
        return (
            f"printf 'COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\\n%s\\n' {shlex.quote(str(arguments['answer']))}"
        )
    if tool == "read_file":
        return f"cat {shlex.quote(arguments['path'])}"
    return str(arguments["command"])


def optimizer(edits_by_round):
    """A scripted optimizer model: the first proposal whose marker is not in the prompt yet."""

    def reply(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        prompt = "\n".join(str(m.get("content")) for m in messages)
        targets = re.findall(r"\[id: ([a-z_]+)\]", prompt)[:1]
        for marker, edits in edits_by_round:
            if marker not in prompt:
                doc = {
                    "summary": f"add {marker}",
                    "rationale": "failed runs",
                    "targets": targets,
                    "edits": edits,
                }
                return json.dumps(doc)
        return json.dumps({"summary": "nothing", "rationale": "", "targets": [], "edits": []})

    return reply


def check_story(harness: Path, result) -> list[dict[str, Any]]:
    """Generation 1 accepted, generation 2 committed then reverted: in git and in the ledger alike."""
    assert result.exit_code in (0, 1), result.output
    repo = git.Repo(harness)
    run_dir = next((harness / ".harnessevolve" / "runs").iterdir())
    events = read_lines(run_dir / "ledger.jsonl")
    kinds = [e["event"] for e in events]
    accepted = [e for e in events if e["event"] == "candidate_accepted"]
    reverted = [e for e in events if e["event"] == "candidate_reverted"]
    assert [e["generation"] for e in accepted] == [1] and [e["generation"] for e in reverted] == [2], kinds
    finished = events[-1]
    assert finished["event"] == "run_finished"
    assert finished["accepted"] == [accepted[0]["sha"]] and finished["reverted"] == [reverted[0]["sha"]]
    assert finished["rev"] == repo.head.commit.hexsha == reverted[0]["revert_sha"]
    history = [c.hexsha for c in repo.iter_commits()]
    assert history[:3] == [reverted[0]["revert_sha"], reverted[0]["sha"], accepted[0]["sha"]]
    assert repo.commit(reverted[0]["revert_sha"]).summary.startswith("harnessevolve: revert ")
    assert "Verdict: rejected by performance" in repo.commit(reverted[0]["sha"]).message
    assert not repo.is_dirty(untracked_files=True)
    return events


def test_builtin_runner_run(tmp_path: Path, cli, scripts, small_benchmark: Path) -> None:
    harness = tmp_path / "builtin"
    assert cli.invoke(app, ["init", str(harness)]).exit_code == 0
    model = scripts("any-builtin", FamilyLearner(load_benchmark(str(small_benchmark))))
    result = cli.invoke(
        app, run_args(harness, model, "--proposer", "demo", benchmark=small_benchmark, batch_size=4)
    )
    events = check_story(harness, result)
    trajectory = json.loads(
        next((harness / ".harnessevolve" / "runs").rglob("trajectories/**/*.json")).read_text()
    )
    assert trajectory["extra"]["runner"] == "builtin"
    assert any(e["event"] == "run_started" for e in events)


HINT = "Read the files before you answer."
PY_FIRST = [
    {
        "op": "replace_text",
        "path": "agent.py",
        "old": 'messages = [{"role": "system", "content": task["system_prompt"]}]',
        "new": f'messages = [{{"role": "system", "content": task["system_prompt"] + "\\n{HINT}"}}]',
    }
]
PY_SECOND = [{"op": "replace_text", "path": "agent.py", "old": 'range(loop["max_steps"])', "new": "range(1)"}]


def test_command_runner_run_evolves_agent_code(tmp_path: Path, cli, scripts, small_benchmark: Path) -> None:
    harness = tmp_path / "pyagent"
    assert cli.invoke(app, ["init", str(harness), "--template", "python-agent"]).exit_code == 0
    model = scripts("any-command", gold_policy(small_benchmark, lambda system: HINT in system))
    opt = scripts("any-command-opt", optimizer([(HINT, PY_FIRST), ("range(1)", PY_SECOND)]))
    args = run_args(
        harness, model, "--proposer", "llm", "--optimizer-model", opt, benchmark=small_benchmark, batch_size=4
    )
    events = check_story(harness, cli.invoke(app, args))
    accepted = next(e for e in events if e["event"] == "candidate_accepted")
    repo = git.Repo(harness)
    changed = repo.git.show("--name-only", "--format=", accepted["sha"]).split()
    assert changed == ["agent.py"]  # the accepted edit is to the agent's code
    assert HINT in (harness / "agent.py").read_text() and "range(1)" not in (harness / "agent.py").read_text()
    trajectory = json.loads(
        next((harness / ".harnessevolve" / "runs").rglob("trajectories/**/*.json")).read_text()
    )
    assert trajectory["extra"]["runner"] == "command" and trajectory["extra"]["model_calls"]


TERSE = "Be terse."
MINI_FIRST = [
    {
        "op": "replace_text",
        "path": "mini.yaml",
        "old": "    Every reply calls the bash tool exactly once.\n",
        "new": f"    Every reply calls the bash tool exactly once.\n    {HINT}\n",
    }
]
MINI_SECOND = [
    {
        "op": "replace_text",
        "path": "mini.yaml",
        "old": f"    {HINT}\n",
        "new": f"    {HINT}\n    {TERSE}\n",
    }
]


def test_mini_swe_agent_runner_run(tmp_path: Path, cli, scripts, small_benchmark: Path) -> None:
    if importlib.util.find_spec("minisweagent") is None:  # not imported here: it prints at import
        pytest.skip("needs the agents extra (mini-swe-agent)")
    harness = tmp_path / "mini"
    assert cli.invoke(app, ["init", str(harness), "--template", "mini-swe-agent"]).exit_code == 0
    model = scripts(
        "any-mini", gold_policy(small_benchmark, lambda s: HINT in s and TERSE not in s, as_bash=True)
    )
    opt = scripts("any-mini-opt", optimizer([(HINT, MINI_FIRST), (TERSE, MINI_SECOND)]))
    args = run_args(
        harness, model, "--proposer", "llm", "--optimizer-model", opt, benchmark=small_benchmark, batch_size=4
    )
    events = check_story(harness, cli.invoke(app, args))
    config = yaml.safe_load((harness / "mini.yaml").read_text())
    assert HINT in config["agent"]["system_template"] and TERSE not in config["agent"]["system_template"]
    trajectory = json.loads(
        next((harness / ".harnessevolve" / "runs").rglob("trajectories/**/*.json")).read_text()
    )
    assert (
        trajectory["extra"]["runner"] == "mini-swe-agent" and trajectory["agent"]["name"] == "mini-swe-agent"
    )
    assert any(e["event"] == "candidate_accepted" for e in events)


def test_budget_stops_an_external_agent_mid_rollout(
    tmp_path: Path, cli, scripts, small_benchmark: Path
) -> None:
    harness = tmp_path / "pyagent"
    assert cli.invoke(app, ["init", str(harness), "--template", "python-agent"]).exit_code == 0

    # Deterministic, whatever the machine's load: the agent never submits (every rollout makes
    # max_steps calls), and the first call of the first rollout already spends the whole budget, so
    # that rollout's second call is refused with 402 however the rollouts interleave.
    def keeps_reading(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
        return {"tool_calls": [{"name": "read_file", "arguments": {"path": "missing.txt"}}]}

    model = scripts("any-budget", keeps_reading)
    args = run_args(harness, model, "--max-tokens", "1", benchmark=small_benchmark, batch_size=4)
    result = cli.invoke(app, args)
    assert result.exit_code in (0, 1), result.output
    run_dir = next((harness / ".harnessevolve" / "runs").iterdir())
    events = read_lines(run_dir / "ledger.jsonl")
    assert any(e["event"] == "budget_exhausted" and e["limit"] == "tokens" for e in events)
    stops = [json.loads(p.read_text())["extra"] for p in run_dir.rglob("trajectories/**/*.json")]
    stopped = [s for s in stops if s["stop_reason"] == "budget_exhausted"]
    assert stopped, [s["stop_reason"] for s in stops]
    assert all(s["model_calls"][-1]["status"] == 402 for s in stopped)
    assert "tokens budget reached" in stopped[0]["error"]
    assert not git.Repo(harness).is_dirty(untracked_files=True)


def test_ci_gate_smoke_runs_agent_code(tmp_path: Path, cli, learner) -> None:
    """`gate` on a command agent: a candidate whose agent.py crashes fails its smoke run, exit 1."""
    from cli.test_gate import gate_agent_edit

    crash = ("def main() -> int:\n", "def main() -> int:\n    1 / 0\n")
    result = gate_agent_edit(cli, tmp_path / "pyagent", learner, *crash, "agent: divide by zero")
    assert result.exit_code == 1, result.output
    assert (
        "smoke" in result.output and "agent_crashed" in result.output and "ZeroDivisionError" in result.output
    )


def test_refs_generate_with_a_command_agent(tmp_path: Path, cli, scripts) -> None:
    """`refs generate --harness` runs the hinted attempts through the harness's own runner."""
    from pipeline.test_refgen import TASK, honest

    harness = tmp_path / "pyagent"
    assert cli.invoke(app, ["init", str(harness), "--template", "python-agent"]).exit_code == 0
    model = scripts("refs-honest", honest)
    args = ["refs", "generate", "--benchmark", "shell-basics", "--task", TASK, "--model", model]
    args += ["--harness", str(harness), "--attempts", "1", "--probes", "1", "--out", str(tmp_path / "refs")]
    result = cli.invoke(app, args)
    assert result.exit_code == 0, result.output
    reference = json.loads((tmp_path / "refs" / f"{TASK}.json").read_text())
    assert reference["extra"]["runner"] == "command"
    calls = [c["function_name"] for s in reference["steps"] for c in s.get("tool_calls", [])]
    assert calls == ["read_file", "submit"] and "Hint" not in reference["steps"][1]["message"]

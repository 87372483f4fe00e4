"""``--proposer agent``: a scripted coding agent (the python-agent template as the optimizer folder,
its model a scripted policy that runs bash commands) edits the harness copy in its workspace.

Through the CLI, on shell-basics cut to two families: an accepted edit whose commit names the
proposer's saved trajectory; edits to protected or non-editable paths refused with the path named
(the run goes on with the next proposer); a quality rejection answered by the same agent in the same
workspace; the proposer budget; and held-out tasks that never reach the workspace.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any

import git
import pytest
from bench_subset import shell_basics_subset
from policies import FamilyLearner
from run_args import run_args

from harnessevolve.cli.app import app
from harnessevolve.core.tasks import load_benchmark
from harnessevolve.runs import events as ev
from harnessevolve.runs.ledger import read_ledger

FAMILIES = ("count-lines", "lookup-key")
SECRET = "HELDOUT-SECRET-7731"
SECRET_GREP = '"HELDOUT""-SECRET"'  # the command line itself must not spell the secret
pytestmark = pytest.mark.skipif(not os.access("/usr/bin/bwrap", os.X_OK), reason="needs bubblewrap")

Command = Callable[[str], str]


@pytest.fixture(scope="module")
def planted(tmp_path_factory) -> Path:
    """shell-basics cut to two families, with a secret planted in a validation task's instruction
    and a test task's files (and references for every task that has one)."""
    root = shell_basics_subset(tmp_path_factory.mktemp("bench") / "shell-basics", FAMILIES)
    plants = {  # a validation task's instruction, a test task's files
        "count-lines-05": ("How many entries are there?", f"How many entries are there ({SECRET})?"),
        "count-lines-07": ("entries.txt: |\n", f"entries.txt: |\n      {SECRET}\n"),
    }
    for stem, (old, new) in plants.items():
        path = root / "tasks" / f"{stem}.yaml"
        text = path.read_text()
        assert text.count(old) == 1, f"{path.name} no longer holds {old!r}: the secret would not be planted"
        path.write_text(text.replace(old, new, 1))
    return root


def coding_agent(
    commands: list[Command], seen: list[str] | None = None, revision: list[Command] | None = None
):
    """A scripted coding model for the python-agent loop: bash commands in turn (each made from the
    last tool output), then submit. ``revision``: the commands when the task says it was rejected
    (or sent back)."""

    def policy(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
        task = str(messages[1]["content"])
        again = "was rejected" in task or "only added the example" in task
        plan = revision if revision is not None and again else commands
        turn = sum(1 for m in messages if m["role"] == "assistant")
        last = next((str(m["content"]) for m in reversed(messages) if m["role"] == "tool"), "")
        if seen is not None:
            seen.extend(str(m.get("content")) for m in messages)
        if turn < len(plan):
            return {"tool_calls": [{"name": "bash", "arguments": {"command": plan[turn](last)}}]}
        return {"tool_calls": [{"name": "submit", "arguments": {"answer": "done"}}]}

    return policy


def read_signal(_last: str) -> str:
    return "cat $(ls -d evidence/failed/count-lines-*/ | head -1)signal.md"


def add_demo(last: str) -> str:
    """Demonstrate the failed task whose signal was just read: the learner then solves its family."""
    found = re.search(r"^Instruction: (.*)$", last, re.MULTILINE)
    assert found, last
    line = shlex.quote(found.group(1))
    return (
        f"printf '\\nTask: %s\\n' {line} >> harness/prompts/examples.md && "
        "echo 'demonstrate a failed count-lines task' > SUMMARY.txt"
    )


@pytest.fixture
def optimizer_dir(tmp_path: Path, cli) -> Path:
    folder = tmp_path / "optimizer"
    assert cli.invoke(app, ["init", str(folder), "--template", "python-agent"]).exit_code == 0
    return folder


@pytest.fixture
def propose(tmp_path: Path, cli, scripts, planted: Path, optimizer_dir: Path):
    """``propose(name, policy, *extra)``: ``harnessevolve run`` of a new harness ``tmp_path/name`` on
    the planted benchmark, the optimizer folder's agent driven by the scripted ``policy``, for one
    generation of batch 4; the harness, the CLI result, the run folder and its ledger's events."""

    def run(name: str, policy, *extra: str):
        harness = tmp_path / name
        assert cli.invoke(app, ["init", str(harness)]).exit_code == 0
        model = scripts(f"learner-{name}", FamilyLearner(load_benchmark(str(planted))))
        opt = scripts(f"opt-{name}", policy)
        args = run_args(
            harness,
            model,
            "--optimizer-agent",
            str(optimizer_dir),
            "--optimizer-model",
            opt,
            *extra,
            benchmark=planted,
            generations=1,
            batch_size=4,
        )
        result = cli.invoke(app, args)
        run_dir = next((harness / ".harnessevolve" / "runs").iterdir())
        return harness, result, run_dir, read_ledger(run_dir / "ledger.jsonl")

    return run


def agent_failures(events) -> list[ev.ProposalFailed]:
    return [r for r in events if isinstance(r, ev.ProposalFailed) and r.proposer == "agent"]


def test_agent_proposer_commits_an_accepted_edit_naming_its_trajectory(cli, planted: Path, propose) -> None:
    harness, result, run_dir, events = propose(
        "accepted", coding_agent([read_signal, add_demo]), "--proposer", "agent"
    )
    assert result.exit_code == 0, result.output
    accepted = [r for r in events if isinstance(r, ev.CandidateAccepted)]
    assert len(accepted) == 1, [r.event_name for r in events]
    commit = git.Repo(harness).commit(accepted[0].sha)
    assert "Proposer: agent" in commit.message
    found = re.search(r"^Proposer-Trajectory: (\S+)$", commit.message, re.MULTILINE)
    assert found, commit.message
    saved = json.loads((run_dir / found.group(1)).read_text())
    assert saved["extra"]["runner"] == "command" and saved["extra"]["model_calls"]
    assert commit.summary == "harnessevolve: demonstrate a failed count-lines task"
    demo = re.findall(r"^Task: (.*)$", (harness / "prompts" / "examples.md").read_text(), re.MULTILINE)
    train = {t.instruction for t in load_benchmark(str(planted)).split("train") if t.tags[0] == "count-lines"}
    assert len(demo) == 1 and demo[0] in train
    finished = events[-1]
    assert isinstance(finished, ev.RunFinished) and finished.usage is not None
    assert finished.usage["by_stage"]["optimizer_agent"]["calls"] == 3  # apart from the agent's
    assert finished.usage["by_proposer"]["agent"]["calls"] == 3
    status = cli.invoke(app, ["status", "--harness", str(harness), "--json"])
    assert status.exit_code == 0, status.output
    assert json.loads(status.output)["usage"]["optimizer_agent"]["calls"] == 3  # spend shown apart
    shown = cli.invoke(app, ["status", "--harness", str(harness)], env={"COLUMNS": "200"})
    assert "optimizer agent" in shown.output and "3 call(s)" in shown.output, shown.output
    # the report's candidate view links the optimizer's trajectory
    from harnessevolve.report.html import render_html
    from harnessevolve.report.run_view import load_run_view

    page = render_html(load_run_view(run_dir), link_base=".")
    assert f'href="./{found.group(1)}"' in page and "optimizer trajectory" in page


@pytest.mark.parametrize(
    ("command", "reason"),
    [
        (
            "echo '{}' > $(ls -d evidence/failed/*/ | head -1)reference.json",
            r"protected path evidence/failed/[a-z0-9-]+/reference\.json changed",
        ),
        ("echo 'model: gpt-x' >> harness/harness.yaml", r"outside editable paths: harness/harness\.yaml"),
    ],
    ids=["reference", "not-editable"],
)
def test_agent_proposer_refuses_a_protected_edit_and_the_run_goes_on(
    propose, command: str, reason: str
) -> None:
    policy = coding_agent([lambda _last: command])
    harness, result, _run_dir, events = propose("protected", policy, "--proposer", "agent,demo")
    assert result.exit_code in (0, 1), result.output
    failed = agent_failures(events)
    assert failed and re.search(reason, failed[0].errors[0]), failed
    proposed = [r for r in events if isinstance(r, ev.CandidateProposed)]
    assert [r.proposer for r in proposed] == ["demo"]  # the run went on with the next proposer
    assert isinstance(events[-1], ev.RunFinished)
    assert "gpt-x" not in (harness / "harness.yaml").read_text()
    assert not git.Repo(harness).is_dirty(untracked_files=True)


def test_agent_proposer_revises_in_the_same_workspace_after_a_quality_rejection(propose) -> None:
    breaks = [
        read_signal,
        lambda last: (
            "cp harness/tools/bash.yaml kept-bash.yaml && echo ': : [' >> harness/tools/bash.yaml && "
            "echo 'break the bash tool' > SUMMARY.txt"
        ),
    ]
    fixes = [
        lambda _last: "cp kept-bash.yaml harness/tools/bash.yaml",  # the first turn's file is still here
        read_signal,
        add_demo,
    ]
    harness, result, _run_dir, events = propose(
        "revised", coding_agent(breaks, revision=fixes), "--proposer", "agent"
    )
    assert result.exit_code == 0, result.output
    revised = [r for r in events if isinstance(r, ev.CandidateRevised)]
    assert len(revised) == 1 and revised[0].reason.startswith("quality: ")
    assert revised[0].proposer == "agent"
    accepted = next(r for r in events if isinstance(r, ev.CandidateAccepted))
    message = git.Repo(harness).commit(accepted.sha).message
    assert "Revision: 1" in message and "Proposer-Trajectory: proposer/gen-001-1-turn-2.json" in message


def test_agent_proposer_budget_refuses_and_the_run_goes_on(propose) -> None:
    policy = coding_agent([read_signal, add_demo])
    _harness, result, _run_dir, events = propose(
        "budget", policy, "--proposer", "agent,demo", "--max-proposer-tokens", "1"
    )
    assert result.exit_code in (0, 1), result.output
    failed = agent_failures(events)
    assert failed and "proposer tokens budget reached" in failed[0].errors[0], failed
    assert [r.proposer for r in events if isinstance(r, ev.CandidateProposed)] == ["demo"]
    assert not any(isinstance(r, ev.BudgetExhausted) for r in events)  # the run's own budget is not spent


def test_agent_proposer_never_sees_held_out_tasks(planted: Path, propose) -> None:
    """The agent greps its whole workspace and reads a held-out task file by its host path: the
    planted secret is nowhere in what it saw nor in its saved trajectory."""
    seen: list[str] = []
    held_file = planted / "tasks" / "count-lines-05.yaml"
    assert SECRET in held_file.read_text()
    look = [
        lambda _last: f"grep -rl {SECRET_GREP} . ; grep -rlc count-lines evidence | head -3; echo END",
        lambda _last: f"cat {held_file} 2>&1 | head -3; ls {planted} 2>&1 | head -3; echo END",
    ]
    _harness, result, run_dir, events = propose("heldout", coding_agent(look, seen), "--proposer", "agent")
    assert result.exit_code in (0, 1), result.output
    observations = [s for s in seen if s.rstrip().endswith("END")]
    assert observations and "evidence/failed/count-lines" in observations[0]  # the grep did run
    assert all(SECRET not in s for s in seen)
    saved = list((run_dir / "proposer").glob("*.json"))
    assert saved and all(SECRET not in p.read_text() for p in saved)
    failed = [r for r in events if isinstance(r, ev.ProposalFailed)]
    assert failed and "no edit" in failed[0].errors[0]


def test_agent_proposer_loop_ends_at_the_third_same_action_and_is_refused(propose) -> None:
    policy = coding_agent([lambda _last: "ls evidence"] * 12)
    _harness, result, run_dir, events = propose("loops", policy, "--proposer", "agent,demo")
    assert result.exit_code in (0, 1), result.output
    failed = agent_failures(events)
    assert failed, events
    assert failed[0].errors[0].startswith("loop: repeated: the same action 3 times in a row (bash("), failed
    turn = json.loads((run_dir / "proposer" / "gen-001-1-turn-1.json").read_text())
    calls = turn["extra"]["model_calls"]
    assert [c["status"] for c in calls] == [200, 200, 200, 403]  # not 12 answered calls, then more
    assert [r.proposer for r in events if isinstance(r, ev.CandidateProposed)] == ["demo"]


EXAMPLE = "- Check every answer twice before you submit it to the user."


def teach_example(optimizer_dir: Path) -> None:
    """The optimizer's prompt shows the form of an edit with an example rule (as the shipped
    optimizer-agent's does), which a small model copies instead of writing its own."""
    prompt = optimizer_dir / "prompts" / "system.md"
    prompt.write_text(
        prompt.read_text()
        + f"\nAn edit looks like this: printf '%s\\n' '{EXAMPLE}' >> harness/prompts/system.md\n"
    )


def copy_example(_last: str) -> str:
    return f"printf '%s\\n' '{EXAMPLE}' >> harness/prompts/system.md && echo 'check answers' > SUMMARY.txt"


def test_agent_proposer_sends_back_an_edit_that_only_copies_its_example(propose, optimizer_dir: Path) -> None:
    """The copied example is undone and the agent asked once more; its own edit is the candidate."""
    teach_example(optimizer_dir)
    policy = coding_agent([copy_example], revision=[read_signal, add_demo])
    harness, result, run_dir, events = propose("copied-once", policy, "--proposer", "agent")
    assert result.exit_code == 0, result.output
    proposed = [r for r in events if isinstance(r, ev.CandidateProposed)]
    assert [r.proposer for r in proposed] == ["agent"]
    assert "only copied its instructions' example" in (proposed[0].rationale or "")
    assert any(isinstance(r, ev.CandidateAccepted) for r in events)
    assert "Check every answer twice" not in (harness / "prompts" / "system.md").read_text()
    assert "Task: " in (harness / "prompts" / "examples.md").read_text()
    saved = sorted(p.name for p in (run_dir / "proposer").glob("*.json"))
    assert saved == ["gen-001-1-turn-1.json", "gen-001-1-turn-2.json"]


def test_agent_proposer_refuses_an_edit_that_copies_its_example_again(propose, optimizer_dir: Path) -> None:
    teach_example(optimizer_dir)
    policy = coding_agent([copy_example], revision=[copy_example])
    harness, result, _run_dir, events = propose("copied-twice", policy, "--proposer", "agent,demo")
    assert result.exit_code in (0, 1), result.output
    failed = agent_failures(events)
    assert failed and failed[0].errors[0].startswith("copied: every line the edit adds"), failed
    assert "check every answer twice" in failed[0].errors[0] and "1 send-back(s)" in failed[0].errors[0]
    assert [r.proposer for r in events if isinstance(r, ev.CandidateProposed)] == ["demo"]
    assert "Check every answer twice" not in (harness / "prompts" / "system.md").read_text()

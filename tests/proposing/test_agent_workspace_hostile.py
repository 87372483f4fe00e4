"""The optimizer agent's workspace is hostile input (``core/planted.py``): under a real ``run
--proposer agent`` with a scripted optimizer, a link it plants where harnessevolve writes is
replaced, never written through; a named pipe, a link or a huge file where harnessevolve reads
refuses the proposal with its reason, and the run goes on (no hang, nothing on the host changed)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import test_agent_proposer as base
from test_agent_proposer import add_demo, agent_failures, coding_agent, read_signal

from harnessevolve.runs import events as ev

planted, optimizer_dir, propose = base.planted, base.optimizer_dir, base.propose  # the fixtures, shared
pytestmark = pytest.mark.skipif(not os.access("/usr/bin/bwrap", os.X_OK), reason="needs bubblewrap")


def test_agent_proposer_planted_link_at_feedback_is_replaced_not_followed(propose, tmp_path: Path) -> None:
    """The revision path (a quality refusal, the default) writes FEEDBACK.md into the workspace; the
    optimizer made it a link to a host file first. The host file must stay as it was."""
    target = tmp_path / "host-file.txt"
    target.write_text("host content\n")
    breaks = [
        read_signal,
        lambda _last: (
            f"ln -s {target} FEEDBACK.md && cp harness/tools/bash.yaml kept-bash.yaml && "
            "echo ': : [' >> harness/tools/bash.yaml && "
            "echo 'break the bash tool' > SUMMARY.txt"
        ),
    ]
    seen: list[str] = []
    fixes = [
        lambda _last: "cat FEEDBACK.md && cp kept-bash.yaml harness/tools/bash.yaml",
        read_signal,
        add_demo,
    ]
    _harness, result, _run_dir, events = propose(
        "planted-link", coding_agent(breaks, seen=seen, revision=fixes), "--proposer", "agent"
    )
    assert result.exit_code in (0, 1), result.output
    assert target.read_text() == "host content\n"  # not overwritten through the link
    assert any(isinstance(r, ev.CandidateRevised) for r in events), [r.event_name for r in events]
    assert any("Your edit of ./harness was rejected" in s for s in seen)
    assert any("invalid YAML" in s and "tools/bash.yaml" in s for s in seen)  # FEEDBACK.md, read back
    assert isinstance(events[-1], ev.RunFinished)


@pytest.mark.parametrize(
    ("command", "reason"),
    [
        ("mkfifo harness/prompts/pipe.md", "not a plain file: prompts/pipe.md (refused: a named pipe)"),
        ("ln -s /etc/hostname harness/prompts/link.md", "symlink prompts/link.md"),
        ("head -c 3000000 /dev/zero | tr '\\0' a > harness/prompts/huge.md", "huge file prompts/huge.md"),
        ("mkfifo evidence/pipe", "protected path evidence/pipe changed"),
    ],
    ids=["fifo", "symlink", "huge", "fifo-in-evidence"],
)
def test_agent_proposer_refuses_a_planted_fifo_link_or_huge_file(propose, command: str, reason: str) -> None:
    policy = coding_agent([lambda _last: command + " && echo 'edit' > SUMMARY.txt"])
    harness, result, _run_dir, events = propose("planted", policy, "--proposer", "agent,demo")
    assert result.exit_code in (0, 1), result.output
    failed = agent_failures(events)
    assert failed and reason in failed[0].errors[0], failed
    assert [r.proposer for r in events if isinstance(r, ev.CandidateProposed)] == ["demo"]  # the run went on
    assert isinstance(events[-1], ev.RunFinished)
    assert not any(p.name in ("pipe.md", "link.md", "huge.md") for p in (harness / "prompts").iterdir())


def test_agent_proposer_summary_fifo_is_ignored(propose) -> None:
    """SUMMARY.txt a named pipe: the edit's summary falls back to its paths (no hang)."""
    add = "printf '\\nTask: count the lines\\n' >> harness/prompts/examples.md && mkfifo SUMMARY.txt"
    policy = coding_agent([lambda _last: add])
    _harness, result, _run_dir, events = propose("summary-fifo", policy, "--proposer", "agent")
    assert result.exit_code in (0, 1), result.output
    proposed = [r for r in events if isinstance(r, ev.CandidateProposed) and r.proposer == "agent"]
    assert proposed and proposed[0].summary == "optimizer agent edit of prompts/examples.md"
    assert isinstance(events[-1], ev.RunFinished)


WORKSPACE_MODULES = ("agent_proposer.py", "agent_diff.py", "agent_workspace.py")
PLAIN_FILE_CALLS = {"open", "read_text", "write_text", "read_bytes", "write_bytes"}


def plain_file_calls(source: str) -> list[str]:
    """Calls that open a file without ``core/planted.py``: ``open(...)``, ``os.open``, ``p.open()``,
    ``p.read_text()`` and their kin."""
    import ast

    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
        owner = func.value.id if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) else ""
        if name in PLAIN_FILE_CALLS and owner != "planted":
            found.append(f"line {node.lineno}: {owner + '.' if owner else ''}{name}()")
    return found


def test_the_optimizer_workspace_is_touched_only_through_planted_file_access() -> None:
    import harnessevolve.proposing as proposing

    folder = Path(proposing.__file__).parent
    found = {m: calls for m in WORKSPACE_MODULES if (calls := plain_file_calls((folder / m).read_text()))}
    assert found == {}, f"open the optimizer's workspace through core/planted.py: {found}"


def test_the_plain_file_call_finder_can_fail() -> None:
    source = "open(p)\np.read_text()\nplanted.read_text(r, 'x')\nos.open(p, 0)\n"
    assert plain_file_calls(source) == ["line 1: open()", "line 2: p.read_text()", "line 4: os.open()"]


def test_harness_changes_refuses_a_link_or_pipe_planted_in_the_copy(tmp_path: Path) -> None:
    """The same refusals without a run: ``harness_changes`` on a workspace holding a link to a host
    file, and one holding a named pipe (read at once, never waited on)."""
    from harnessevolve.proposing.agent_diff import EditRefused, harness_changes

    host = tmp_path / "host.txt"
    host.write_text("host secret\n")
    for name, plant in (("link", lambda p: os.symlink(host, p)), ("pipe", os.mkfifo)):
        workspace = tmp_path / name
        (workspace / "harness" / "prompts").mkdir(parents=True)
        (workspace / "harness" / "harness.yaml").write_text("version: 1\n")
        plant(workspace / "harness" / "prompts" / "x.md")
        with pytest.raises(EditRefused) as refused:
            harness_changes(workspace, {"harness.yaml": "version: 1\n"}, ("prompts/",))
        assert "prompts/x.md" in refused.value.reason
    assert host.read_text() == "host secret\n"

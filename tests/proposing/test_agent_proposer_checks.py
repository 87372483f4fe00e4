"""The agent proposer's workspace and diff checks, without a sandbox: what the workspace holds (and
never holds), and each bad edit refused with a named reason."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harnessevolve.core.signals import Cause, Cluster, ErrorSignal
from harnessevolve.core.tasks import load_benchmark
from harnessevolve.optimize.proposal import ProposalContext
from harnessevolve.proposing.agent_diff import (
    EditRefused,
    check_protected,
    copied_example,
    harness_changes,
    snapshot,
)
from harnessevolve.proposing.agent_workspace import (
    Evidence,
    HeldOut,
    PastCandidate,
    short_instruction,
    workspace_files,
)
from harnessevolve.scoring.references import load_references

FILES = {"harness.yaml": "version: 1\n", "prompts/system.md": "Be careful.\n", "prompts/examples.md": ""}
EDITABLE = ("prompts/*.md",)


def write(workspace: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = workspace / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    write(tmp_path, {f"harness/{k}": v for k, v in FILES.items()})
    write(tmp_path, {"evidence/failed/t1/reference.json": "{}", "TASK.md": "fix it\n"})
    return tmp_path


def test_agent_proposer_diff_is_whole_file_changes(workspace: Path) -> None:
    (workspace / "harness/prompts/system.md").write_text("Be careful. Read files first.\n")
    (workspace / "harness/prompts/examples.md").unlink()
    (workspace / "notes.txt").write_text("scratch outside the harness is ignored")
    changes = harness_changes(workspace, FILES, EDITABLE)
    assert changes == {"prompts/system.md": "Be careful. Read files first.\n", "prompts/examples.md": None}


@pytest.mark.parametrize(
    ("mutate", "reason"),
    [
        (
            lambda w: (w / "harness/harness.yaml").write_text("version: 2\n"),
            "outside editable paths: harness/harness.yaml",
        ),
        (
            lambda w: (w / "harness/prompts/blob.md").write_bytes(b"\x00\x01\x02"),
            "binary file prompts/blob.md",
        ),
        (lambda w: (w / "harness/prompts/latin.md").write_bytes(b"caf\xe9"), "binary file prompts/latin.md"),
        (lambda w: (w / "harness/prompts/big.md").write_text("a" * 300_000), "huge file prompts/big.md"),
        (lambda w: os.symlink("/etc/passwd", w / "harness/prompts/link.md"), "symlink prompts/link.md"),
        (lambda w: (w / "harness/harness.yaml").unlink(), "deleted the harness"),
        (lambda w: __import__("shutil").rmtree(w / "harness"), "deleted the harness"),
        (lambda w: write(w, {"harness/tasks/x.yaml": "id: x\n"}), "protected path harness/tasks/x.yaml"),
    ],
    ids=["not-editable", "nul", "not-utf8", "huge", "symlink", "no-yaml", "no-harness", "tasks"],
)
def test_agent_proposer_refuses_bad_edits_by_name(workspace: Path, mutate, reason: str) -> None:
    mutate(workspace)
    with pytest.raises(EditRefused, match="^" + reason.replace(".", r"\.")):
        harness_changes(workspace, FILES, EDITABLE + ("tasks/*.yaml",))


TAUGHT = {
    "mini.yaml": "instance_template: |\n  Write a rule (this one only shows the form):\n"
    "  printf '%s\\n' '- Before submitting, run the command and check it did what\n"
    "    was asked.' >> harness/prompts/system.md\n"
}


@pytest.mark.parametrize(
    ("added", "copied"),
    [
        # the example, wrapped over two lines in the instructions, once or several times
        ("- Before submitting, run the command and check it did what was asked.\n", True),
        ("* before submitting, run the command and check  it did what was asked.\n" * 3, True),
        # the example and a rule of the agent's own: something new is said
        (
            "- Before submitting, run the command and check it did what was asked.\n"
            "- When a file is named, pass its path to the command instead of its contents.\n",
            False,
        ),
        ("- When a file is named, pass its path to the command instead of its contents.\n", False),
        ("ok\n", False),  # too short to call a copy of anything
    ],
    ids=["example", "example-thrice", "example-and-own", "own", "short"],
)
def test_an_edit_that_only_adds_the_optimizers_example_is_a_copy(added: str, copied: bool) -> None:
    changes = {"prompts/system.md": FILES["prompts/system.md"] + added}
    found = copied_example(changes, FILES, TAUGHT)
    assert (found is not None) is copied, found
    if copied:
        assert found == "before submitting, run the command and check it did what was asked."


def test_a_line_moved_within_the_harness_is_no_copy() -> None:
    """A line already in the harness (moved, or repeated from another file) is not new text even
    when the optimizer's instructions hold it too (an optimizer built on the same template)."""
    line = "Read the task's files before you answer any question."
    original = {**FILES, "prompts/system.md": f"{line}\n", "prompts/examples.md": ""}
    changes = {"prompts/system.md": "", "prompts/examples.md": f"{line}\n"}
    assert copied_example(changes, original, {"prompts/system.md": f"{line}\n"}) is None
    assert copied_example({"prompts/system.md": None}, original, {"x": line}) is None


def test_agent_proposer_protected_workspace_paths(workspace: Path) -> None:
    before = snapshot(workspace)
    (workspace / "scratch.txt").write_text("fine")
    check_protected(workspace, before)
    (workspace / "evidence/failed/t1/reference.json").write_text('{"steps": []}')
    with pytest.raises(EditRefused, match="protected path evidence/failed/t1/reference.json changed"):
        check_protected(workspace, before)
    (workspace / "evidence/failed/t1/reference.json").write_text("{}")
    (workspace / "TASK.md").unlink()
    with pytest.raises(EditRefused, match="protected path TASK.md changed"):
        check_protected(workspace, before)


def test_agent_proposer_workspace_holds_no_held_out_task() -> None:
    """Every validation and test task's instruction, answer and files are kept out, even where a
    cluster names a held-out task or a history reason quotes one; the train evidence is there."""
    benchmark = load_benchmark("shell-basics")
    references = load_references(benchmark)
    held_out = HeldOut.of(benchmark.tasks)
    train = [
        t
        for t in benchmark.split("train")
        if t.id in references and held_out.scrub(t.instruction) == t.instruction
    ][:2]
    held = list(benchmark.split("validation")[:2]) + list(benchmark.split("test")[:1])
    signals = tuple(
        ErrorSignal(t.id, Cause.PREMATURE_FINISH, 0.8, "submitted early", 2, 2) for t in train + held
    )
    context = ProposalContext(
        files=dict(FILES),
        editable=EDITABLE,
        system_prompt_path="prompts/system.md",
        examples_path="prompts/examples.md",
        clusters=(Cluster(Cause.PREMATURE_FINISH, signals),),
        instructions={t.id: t.instruction for t in train + held},
    )
    leak = f"rejected: it embeds {held[0].instruction}"
    evidence = Evidence(
        references=dict(references),
        history=(
            PastCandidate(1, 1, "a demo", "demo", ("prompts/examples.md",), "rejected by leakage", leak),
        ),
        held_out=held_out,
    )
    files = workspace_files(context, evidence)
    text = "\n".join(files.values())
    for task in held:
        assert task.id not in "".join(files), task.id
        assert task.instruction not in text, task.id
        for content in task.setup_files.values():
            assert content.strip() not in text or len(content.strip()) < 12
    for task in train:
        assert f"evidence/failed/{task.id}/reference.json" in files
        assert task.instruction in files[f"evidence/failed/{task.id}/signal.md"]
    assert "[held-out text removed]" in files["history/candidates.md"]
    assert "premature_finish" in files["TASK.md"] and "prompts/*.md" in files["TASK.md"]
    # the first message names the system prompt and quotes a train run of the largest cluster only
    first = short_instruction(context, files)
    assert "./harness/prompts/system.md" in first and "prompts/*.md" in first
    assert any(f"./evidence/failed/{t.id}/signal.md" in first and t.instruction in first for t in train)
    for task in held:
        assert task.id not in first and task.instruction not in first


def test_agent_proposer_history_from_the_ledger(tmp_path: Path) -> None:
    """Earlier candidates as the agent reads them: verdict, scalar gate numbers (per-task lists
    left out), validation score, reason of the gate that reverted it."""
    from harnessevolve.proposing.agent_history import past_candidates
    from harnessevolve.proposing.agent_workspace import history_files
    from harnessevolve.runs import events as ev
    from harnessevolve.runs.ledger import Ledger

    ledger = Ledger(tmp_path / "ledger.jsonl")
    perf = {
        "gate": "performance",
        "passed": True,
        "reason": "gain 0.25",
        "numbers": {"gain": 0.25, "tasks": ["a"]},
    }
    ledger.append(
        ev.CandidateProposed(generation=1, candidate=1, summary="add a demo", proposer="demo", paths=["p.md"])
    )
    ledger.append(ev.GateVerdicts(generation=1, candidate=1, summary="add a demo", verdicts=[perf]))
    ledger.append(ev.CandidateCommitted(generation=1, sha="a" * 40, verdict="accepted", candidate=1, of=1))
    ledger.append(
        ev.CandidateAccepted(
            generation=1, sha="a" * 40, harness_hash=None, validation=0.75, candidate=1, verdicts=[perf]
        )
    )
    ledger.append(
        ev.CandidateProposed(generation=2, candidate=1, summary="a rule", proposer="agent", paths=["s.md"])
    )
    ledger.append(
        ev.CandidateCommitted(generation=2, sha="b" * 40, verdict="rejected by heldout", candidate=1)
    )
    ledger.append(
        ev.CandidateReverted(
            generation=2, sha="b" * 40, revert_sha="c" * 40, gate="heldout", reason="drop 0.1 > 0.025"
        )
    )
    ledger.close()
    history = past_candidates(tmp_path / "ledger.jsonl", None, {})
    assert [(p.generation, p.verdict) for p in history] == [(1, "accepted"), (2, "rejected by heldout")]
    assert (
        history[0].numbers["performance"] == {"gain": 0.25}
        and history[0].numbers["validation"]["score"] == 0.75
    )
    text = history_files(history)["history/candidates.md"]
    assert "gen 2, candidate 1: a rule" in text and "rejected by heldout (drop 0.1 > 0.025)" in text
    assert "performance: gain=0.25" in text and "fired: not recorded" in text

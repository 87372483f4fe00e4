"""`run --resume`: a run cut short at the worst moments (simulated here by truncating its ledger and
git history to what a `kill -9` would leave; benchmarks/perf/kill_resume.py kills real processes)."""

from __future__ import annotations

import json
from pathlib import Path

import git
from run_args import run_args

from harnessevolve.cli.app import app
from harnessevolve.runs.ledger import read_lines

DEAD_PID = 2**22 + 12345  # above pid_max's default: no such process


def run_dir(harness_dir: Path) -> Path:
    (run,) = list((harness_dir / ".harnessevolve" / "runs").iterdir())
    return run


def crash_after(harness_dir: Path, predicate) -> list[dict]:
    """Keep the ledger up to the first event matching ``predicate`` and leave a dead owner's lock,
    as a SIGKILL right after that event would."""
    ledger = run_dir(harness_dir) / "ledger.jsonl"
    lines = ledger.read_text().splitlines(keepends=True)
    cut = next(i for i, line in enumerate(lines) if predicate(json.loads(line))) + 1
    ledger.write_text("".join(lines[:cut]) + '{"v": 1, "event": "torn')  # a half-written last line
    lock = harness_dir / ".harnessevolve" / "lock"
    lock.write_text(json.dumps({"pid": DEAD_PID, "run_id": run_dir(harness_dir).name}))
    return [json.loads(line) for line in lines[:cut]]


def finished_run(cli, harness_dir: Path, model: str, generations: str) -> git.Repo:
    """A run of ``generations`` generations that ends well: the harness's repository."""
    assert cli.invoke(app, run_args(harness_dir, model, "-n", generations)).exit_code == 0
    return git.Repo(harness_dir)


def resume(cli, harness_dir: Path, model: str):
    return cli.invoke(
        app, ["run", "--harness", str(harness_dir), "--model", model, "--resume", run_dir(harness_dir).name]
    )


def candidate_commits(repo: git.Repo) -> list[str]:
    return [c.message for c in repo.iter_commits() if "Verdict: " in c.message]


def test_an_accepted_commit_missing_from_the_ledger_is_recorded_not_redone(
    harness_dir: Path, cli, learner
) -> None:
    repo = finished_run(cli, harness_dir, learner, "1")
    head = repo.head.commit.hexsha
    crash_after(harness_dir, lambda e: e["event"] == "candidate_committed")
    result = resume(cli, harness_dir, learner)
    assert result.exit_code == 0, result.output
    assert repo.head.commit.hexsha == head  # no new commit
    events = read_lines(run_dir(harness_dir) / "ledger.jsonl")
    resumed = next(e for e in events if e["event"] == "run_resumed")
    assert any("recorded the accepted commit" in r for r in resumed["recovered"])
    assert resumed["stale_lock"]["pid"] == DEAD_PID
    accepted = [e for e in events if e["event"] == "candidate_accepted"]
    assert len(accepted) == 1 and accepted[0]["recovered"] and accepted[0]["sha"] == head
    assert events[-1]["event"] == "run_finished" and events[-1]["accepted"] == [head]
    assert len(candidate_commits(repo)) == 1
    assert repo.git.fsck("--full") == ""


def test_a_rejected_commit_whose_revert_never_happened_is_reverted_once(
    harness_dir: Path, cli, learner
) -> None:
    repo = finished_run(cli, harness_dir, learner, "2")
    assert repo.head.commit.summary.startswith("harnessevolve: revert")
    repo.git.reset("--hard", "HEAD~1")  # the kill landed between the commit and its revert
    crash_after(harness_dir, lambda e: e["event"] == "candidate_committed" and e["generation"] == 2)
    result = resume(cli, harness_dir, learner)
    assert result.exit_code == 0, result.output
    assert repo.head.commit.summary.startswith("harnessevolve: revert")
    assert len(candidate_commits(repo)) == 2  # gen 1's accepted and gen 2's rejected: no duplicate
    assert len([c for c in repo.iter_commits() if "Reverts: " in c.message]) == 1
    events = read_lines(run_dir(harness_dir) / "ledger.jsonl")
    assert events[-1]["event"] == "run_finished" and len(events[-1]["reverted"]) == 1
    assert not repo.is_dirty(untracked_files=True)


def test_a_half_written_candidate_is_discarded_and_the_generation_redone(
    harness_dir: Path, cli, learner
) -> None:
    repo = finished_run(cli, harness_dir, learner, "1")
    accepted = repo.head.commit.hexsha
    repo.git.reset("--hard", "HEAD~1")
    events = crash_after(harness_dir, lambda e: e["event"] == "committing")
    path = events[-1]["paths"][0]
    (harness_dir / path).write_text("half of a candidate")  # killed mid-write
    result = resume(cli, harness_dir, learner)
    assert result.exit_code == 0, result.output
    # The generation ran again and made the same commit content (deterministic agent and proposer).
    assert repo.head.commit.tree.hexsha == repo.commit(accepted).tree.hexsha
    assert len(candidate_commits(repo)) == 1
    events = read_lines(run_dir(harness_dir) / "ledger.jsonl")
    resumed = next(e for e in events if e["event"] == "run_resumed")
    assert any("discarded the half-written candidate" in r for r in resumed["recovered"])


def test_changes_the_run_did_not_make_stop_the_resume(harness_dir: Path, cli, learner) -> None:
    finished_run(cli, harness_dir, learner, "1")
    crash_after(harness_dir, lambda e: e["event"] == "batch_evaluated")
    (harness_dir / "prompts" / "notes.md").write_text("the user's own work\n")
    result = resume(cli, harness_dir, learner)
    assert result.exit_code == 2
    assert "did not make" in result.output and "prompts/notes.md" in result.output
    assert (harness_dir / "prompts" / "notes.md").read_text() == "the user's own work\n"


def test_a_finished_run_cannot_be_resumed(harness_dir: Path, cli, learner) -> None:
    finished_run(cli, harness_dir, learner, "1")
    result = resume(cli, harness_dir, learner)
    assert result.exit_code == 2 and "already finished" in result.output


def test_an_unknown_run_is_bad_input(harness_dir: Path, cli, learner) -> None:
    result = cli.invoke(app, ["run", "--harness", str(harness_dir), "--resume", "nope"])
    assert result.exit_code == 2 and "no run 'nope'" in result.output

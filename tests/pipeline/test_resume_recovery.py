"""Crash safety without hand repair: the run's own temp files are removed on resume, and a
generation recovered after its commit keeps its full record (candidate, verdicts, scores), a
revert redone on resume keeps the gate's reason and numbers."""

from __future__ import annotations

from pathlib import Path

import git
from run_args import run_args
from test_resume import candidate_commits, crash_after, resume, run_dir

from harnessevolve.cli.app import app
from harnessevolve.runs.ledger import read_lines

ROW = ("candidate", "verdicts", "train_current", "train_candidate", "validation", "summary")


def finished_rows(harness_dir: Path) -> dict[int, dict]:
    events = read_lines(run_dir(harness_dir) / "ledger.jsonl")
    return {e["generation"]: e for e in events if e["event"] == "generation_finished"}


def test_a_temp_file_left_by_a_kill_mid_write_is_removed(harness_dir: Path, cli, learner) -> None:
    assert cli.invoke(app, run_args(harness_dir, learner, "-n", "1")).exit_code == 0
    repo = git.Repo(harness_dir)
    accepted = repo.head.commit
    repo.git.reset("--hard", "HEAD~1")
    events = crash_after(harness_dir, lambda e: e["event"] == "committing")
    folder, _, name = events[-1]["paths"][0].rpartition("/")
    temp = harness_dir / folder / f".{name}.k1ll3d_x.tmp"
    temp.write_text("half of a candidate")  # atomic_write_text's temp file, never renamed
    result = resume(cli, harness_dir, learner)
    assert result.exit_code == 0, result.output
    assert not temp.exists()
    assert repo.head.commit.tree.hexsha == accepted.tree.hexsha
    assert len(candidate_commits(repo)) == 1
    assert not repo.is_dirty(untracked_files=True)
    resumed = next(
        e for e in read_lines(run_dir(harness_dir) / "ledger.jsonl") if e["event"] == "run_resumed"
    )
    assert any("temp file" in line for line in resumed["recovered"])


def test_a_temp_file_of_a_path_the_run_was_not_writing_stops_the_resume(
    harness_dir: Path, cli, learner
) -> None:
    assert cli.invoke(app, run_args(harness_dir, learner, "-n", "1")).exit_code == 0
    git.Repo(harness_dir).git.reset("--hard", "HEAD~1")
    crash_after(harness_dir, lambda e: e["event"] == "committing")
    stranger = harness_dir / "prompts" / ".notes.md.abcd1234.tmp"
    stranger.write_text("not the run's")
    result = resume(cli, harness_dir, learner)
    assert result.exit_code == 2 and "did not make" in result.output
    assert stranger.exists()


def test_an_accepted_generation_recovered_after_its_commit_keeps_its_row(
    harness_dir: Path, cli, learner
) -> None:
    assert cli.invoke(app, run_args(harness_dir, learner, "-n", "1")).exit_code == 0
    original = finished_rows(harness_dir)[1]
    crash_after(harness_dir, lambda e: e["event"] == "candidate_committed")
    assert resume(cli, harness_dir, learner).exit_code == 0
    recovered = finished_rows(harness_dir)[1]
    assert recovered["recovered"] is True
    assert {k: recovered.get(k) for k in ROW} == {k: original.get(k) for k in ROW}


def test_a_revert_redone_on_resume_keeps_the_gate_reason_and_numbers(harness_dir: Path, cli, learner) -> None:
    assert cli.invoke(app, run_args(harness_dir, learner, "-n", "2")).exit_code == 0
    repo = git.Repo(harness_dir)
    revert = repo.head.commit
    original_row = finished_rows(harness_dir)[2]
    original = next(
        e for e in read_lines(run_dir(harness_dir) / "ledger.jsonl") if e["event"] == "candidate_reverted"
    )
    repo.git.reset("--hard", "HEAD~1")  # killed between the commit and its revert
    crash_after(harness_dir, lambda e: e["event"] == "candidate_committed" and e["generation"] == 2)
    assert resume(cli, harness_dir, learner).exit_code == 0
    events = read_lines(run_dir(harness_dir) / "ledger.jsonl")
    redone = [e for e in events if e["event"] == "candidate_reverted"][-1]
    assert redone["recovered"] and redone["reason"] == original["reason"]
    assert redone["numbers"] == original["numbers"]
    message = repo.head.commit.message
    assert original["reason"] in message and "(reverted on resume)" in message
    assert revert.message.split("\n\n")[1] in message  # the same reason and numbers
    row = finished_rows(harness_dir)[2]
    assert {k: row.get(k) for k in ROW} == {k: original_row.get(k) for k in ROW}

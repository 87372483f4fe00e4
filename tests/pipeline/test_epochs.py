"""Epoch clock, snapshot pool, and restoring the best snapshot in git."""

from __future__ import annotations

from pathlib import Path

import git

from harnessevolve.harness.git import HarnessRepo
from harnessevolve.pipeline.epochs import EpochClock, Snapshot, SnapshotPool


def test_patience_straight_rejections_end_an_epoch() -> None:
    clock = EpochClock(patience=3)
    assert [clock.tick(a) for a in (False, False, True, False, False)] == [False] * 5
    assert clock.tick(False) is True and clock.epoch == 2 and clock.streak == 0


def test_best_snapshot_is_the_highest_validation_latest_on_ties() -> None:
    pool = SnapshotPool(
        [Snapshot("a", "ha", 0.2, 0), Snapshot("b", "hb", 0.5, 1), Snapshot("c", "hc", 0.5, 2)]
    )
    pool.add(Snapshot("d", "hd", 0.4, 3))
    assert pool.best().sha == "c"


def test_restore_commits_the_old_files_including_deletions(harness_dir: Path) -> None:
    repo = HarnessRepo(harness_dir)
    old = repo.head()
    (harness_dir / "prompts" / "system.md").write_text("changed\n")
    (harness_dir / "prompts" / "extra.md").write_text("new file\n")
    repo.commit_all("harnessevolve: an edit")
    sha = repo.restore(old, "harnessevolve: restore")
    assert sha is not None and git.Repo(harness_dir).head.commit.summary == "harnessevolve: restore"
    assert not (harness_dir / "prompts" / "extra.md").exists()
    assert (harness_dir / "prompts" / "system.md").read_text() != "changed\n"
    assert repo.restore(old, "nothing to do") is None
    assert not repo.dirty_paths()

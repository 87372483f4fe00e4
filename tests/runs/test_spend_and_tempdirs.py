"""Spend persisted as it happens (spend.json), and the per-run temp folder swept after a kill."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from harnessevolve.models.usage import UsageMeter
from harnessevolve.runs.spend import SpendJournal, later_usage, read_spend
from harnessevolve.runs.tempdirs import PREFIX, run_tempdir, sweep_dead

DEAD_PID = 2**22 + 12345


def test_every_call_reaches_the_journal_at_once(tmp_path: Path) -> None:
    meter = UsageMeter()
    journal = SpendJournal(tmp_path, meter)
    for _ in range(3):
        meter.record(stage="execute", proposer=None, model="m", prompt_tokens=10, completion_tokens=5)
    assert read_spend(tmp_path)["totals"]["calls"] == 3  # as it happened, before any close
    meter.record(stage="gate", proposer=None, model="m", prompt_tokens=1)
    journal.close()
    restored = UsageMeter.from_snapshot(read_spend(tmp_path))
    assert restored.totals().tokens == 46 and restored.totals().calls == 4
    meter.record(stage="gate", proposer=None, model="m", prompt_tokens=1)  # closed: not listening
    assert read_spend(tmp_path)["totals"]["calls"] == 4


def test_the_later_record_wins_and_junk_is_ignored(tmp_path: Path) -> None:
    small, big = {"totals": {"calls": 2}}, {"totals": {"calls": 9}}
    assert later_usage(small, None, big) is big
    assert later_usage(None) is None
    (tmp_path / "spend.json").write_text("{not json")
    assert read_spend(tmp_path) is None
    (tmp_path / "spend.json").write_text('{"version": 99, "usage": {}}')
    assert read_spend(tmp_path) is None


def test_a_dead_run_folder_is_swept_and_a_live_one_kept(tmp_path: Path) -> None:
    dead = tmp_path / f"{PREFIX}{DEAD_PID}-20261201-000000-000-abcd"
    (dead / "he-task-1").mkdir(parents=True)
    live = tmp_path / f"{PREFIX}{os.getppid()}-20261201-000000-000-beef"
    live.mkdir()
    stranger = tmp_path / "he-someone-else"
    stranger.mkdir()
    assert sweep_dead(tmp_path).removed == [dead.name]
    assert not dead.exists() and live.exists() and stranger.exists()


def test_the_run_tempdir_holds_every_temp_folder_and_goes_away(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    (tmp_path / f"{PREFIX}{DEAD_PID}-old").mkdir()
    with run_tempdir("rid") as (folder, swept):
        assert swept.removed == [f"{PREFIX}{DEAD_PID}-old"]
        made = Path(tempfile.mkdtemp(prefix="he-x-"))
        assert made.parent == folder
        child = subprocess.run(
            [sys.executable, "-c", "import tempfile; print(tempfile.gettempdir())"],
            capture_output=True,
            text=True,
        )
        assert child.stdout.strip() == str(folder)  # subprocesses (checks, agents) inherit it
    assert not folder.exists()
    assert os.environ["TMPDIR"] == str(tmp_path) and tempfile.tempdir == str(tmp_path)


def test_calls_from_many_threads_are_never_skipped(tmp_path: Path) -> None:
    import threading

    meter = UsageMeter()
    SpendJournal(tmp_path, meter)

    def calls() -> None:
        for _ in range(200):
            meter.record(stage="execute", proposer=None, model="m", prompt_tokens=1)

    workers = [threading.Thread(target=calls) for _ in range(8)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert read_spend(tmp_path)["totals"]["calls"] == 1600
